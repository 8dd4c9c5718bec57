package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// AppliedMigration records one schema migration applied to the database.
// Reported so operators (and tests) can tell which schema a file carries and
// that reopening did not re-apply anything.
type AppliedMigration struct {
	Version   string // the migration file name without ".sql", e.g. "0001_servers_tools_history"
	AppliedAt time.Time
}

// migrationConn is where migrations run: a pool, or the one connection that
// holds the dialect's migration lock.
type migrationConn interface {
	querier
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// migrate applies d's pending migrations in name order, each in its own
// transaction together with its schema_migrations row, so a crash leaves
// either all of a migration or none of it. Concurrent openers of one
// database serialize (on SQLite's write lock, or on the dialect's migration
// lock) and the later ones find the work done.
func migrate(ctx context.Context, pool *sql.DB, d *dialect, logger *slog.Logger) error {
	if d.lockMigrations == nil {
		return migrateOn(ctx, pool, d, logger)
	}
	conn, err := pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	defer conn.Close()
	unlock, err := d.lockMigrations(ctx, conn)
	if err != nil {
		return err
	}
	defer unlock()
	return migrateOn(ctx, conn, d, logger)
}

// migrateOn does the work of migrate on w.
func migrateOn(ctx context.Context, w migrationConn, d *dialect, logger *slog.Logger) error {
	if _, err := w.ExecContext(ctx, d.migrationsTable); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	names, err := fs.Glob(d.migrations, "*.sql")
	if err != nil {
		return fmt.Errorf("listing migrations: %w", err)
	}
	slices.Sort(names)
	known := make([]string, 0, len(names))
	for _, name := range names {
		version := strings.TrimSuffix(name, ".sql")
		known = append(known, version)
		body, err := fs.ReadFile(d.migrations, name)
		if err != nil {
			return fmt.Errorf("reading migration %s: %w", version, err)
		}
		applied, err := applyMigration(ctx, w, version, string(body))
		if err != nil {
			return fmt.Errorf("applying migration %s: %w", version, err)
		}
		if applied {
			logger.Info("store migration applied", "dialect", d.name, "version", version)
		}
	}

	// A version this binary does not know means the file was migrated by a
	// newer switchboard. Keep going (migrations only add), but say so.
	all, err := appliedMigrations(ctx, w)
	if err != nil {
		return err
	}
	for _, m := range all {
		if !slices.Contains(known, m.Version) {
			logger.Warn("store has a migration this binary does not know; it was written by a newer version",
				"dialect", d.name, "version", m.Version)
		}
	}
	return nil
}

// applyMigration applies one migration unless already recorded, and reports
// whether it did.
func applyMigration(ctx context.Context, w migrationConn, version, body string) (applied bool, err error) {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			// The migration's own error is the one to report.
			_ = tx.Rollback()
		}
	}()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, version).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
		version, toNanos(now())); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// AppliedMigrations lists the migrations recorded in the database, oldest
// version first.
func (db *DB) AppliedMigrations(ctx context.Context) ([]AppliedMigration, error) {
	return appliedMigrations(ctx, db.reader())
}

func appliedMigrations(ctx context.Context, q querier) ([]AppliedMigration, error) {
	rows, err := q.QueryContext(ctx, `SELECT version, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("listing applied migrations: %w", err)
	}
	defer rows.Close()
	var out []AppliedMigration
	for rows.Next() {
		var m AppliedMigration
		var at int64
		if err := rows.Scan(&m.Version, &at); err != nil {
			return nil, fmt.Errorf("listing applied migrations: %w", err)
		}
		m.AppliedAt = fromNanos(at)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing applied migrations: %w", err)
	}
	return out, nil
}
