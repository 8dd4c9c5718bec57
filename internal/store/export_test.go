package store

import (
	"context"
	"database/sql"
	"io/fs"
	"log/slog"
)

// Hooks for package store_test, whose tests can use storetest's PostgreSQL
// server; package store's own tests cannot import storetest, which imports
// store.

// PostgresMigrationLock is the key of the advisory lock held while migrating.
const PostgresMigrationLock = pgMigrationLock

// MigratePostgres runs the PostgreSQL migration machinery on pool, with
// migrations in place of the embedded ones when not nil.
func MigratePostgres(ctx context.Context, pool *sql.DB, migrations fs.FS, logger *slog.Logger) error {
	d := postgresDialect()
	if migrations != nil {
		d.migrations = migrations
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return migrate(ctx, pool, d, logger)
}

// WritePragma reads a PRAGMA on the SQLite write connection.
func WritePragma(ctx context.Context, db *DB, name string) (string, error) {
	var v string
	err := db.write.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v)
	return v, err
}
