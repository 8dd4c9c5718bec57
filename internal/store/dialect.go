package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is what differs between database engines. Everything else, the SQL
// of the data methods included, is shared.
type dialect struct {
	name       string
	driver     string // database/sql driver name
	migrations fs.FS  // *.sql files, applied in name order
	// migrationsTable creates schema_migrations if it does not exist.
	migrationsTable string
	// isConflict reports whether err is a uniqueness violation.
	isConflict func(err error) bool
	// lockMigrations, when set, takes a lock on conn that keeps every other
	// process sharing the database from migrating until unlock is called.
	// Without it, migrate relies on the engine serializing its writers.
	lockMigrations func(ctx context.Context, conn *sql.Conn) (unlock func(), err error)
}

// createMigrationsTable is SQLite's schema_migrations. BIGINT, as in the
// PostgreSQL one: SQLite gives it the same affinity as INTEGER.
const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    TEXT   PRIMARY KEY,
    applied_at BIGINT NOT NULL
)`

//go:embed migrations/sqlite/*.sql
var sqliteMigrations embed.FS

func sqliteDialect() *dialect {
	sub, err := fs.Sub(sqliteMigrations, "migrations/sqlite")
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return &dialect{
		name:            "sqlite",
		driver:          "sqlite",
		migrations:      sub,
		migrationsTable: createMigrationsTable,
		isConflict: func(err error) bool {
			var e *sqlite.Error
			if !errors.As(err, &e) {
				return false
			}
			switch e.Code() {
			case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
				return true
			}
			return false
		},
	}
}

// isBusy reports whether err is SQLite's "database is locked".
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

//go:embed migrations/postgres/*.sql
var postgresMigrations embed.FS

// pgUniqueViolation is the SQLSTATE of a violated unique or primary key
// constraint.
const pgUniqueViolation = "23505"

// pgMigrationLock is the key of the session-level advisory lock held while
// migrating ("swbdmigr" in ASCII). Advisory locks are database-wide, so
// gateways sharing one database queue on it instead of racing to create the
// same tables, which PostgreSQL reports as errors rather than waits.
const pgMigrationLock int64 = 0x7377_6264_6d69_6772

func postgresDialect() *dialect {
	sub, err := fs.Sub(postgresMigrations, "migrations/postgres")
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return &dialect{
		name:       "postgres",
		driver:     "pgx",
		migrations: sub,
		// COLLATE "C" orders versions by bytes, as SQLite does.
		migrationsTable: `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    TEXT COLLATE "C" PRIMARY KEY,
    applied_at BIGINT NOT NULL
)`,
		isConflict: func(err error) bool {
			var e *pgconn.PgError
			return errors.As(err, &e) && e.Code == pgUniqueViolation
		},
		lockMigrations: lockPostgresMigrations,
	}
}

// lockPostgresMigrations takes the migration advisory lock on conn, waiting
// for another process's migration to finish (or ctx to end).
func lockPostgresMigrations(ctx context.Context, conn *sql.Conn) (unlock func(), err error) {
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, pgMigrationLock); err != nil {
		// Should the server have granted the lock as ctx ended, it must not
		// outlive this call: drop the session.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		return nil, fmt.Errorf("taking the migration lock: %w", err)
	}
	return func() {
		// The lock belongs to the session: when it cannot be released, the
		// connection is discarded rather than returned to the pool, which
		// ends the session and so the lock.
		_, err := conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, pgMigrationLock)
		if err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}, nil
}
