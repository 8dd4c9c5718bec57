package store

import (
	"bytes"
	"database/sql"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// logBuffer collects log lines for assertions.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

func openRaw(t *testing.T) *sql.DB {
	t.Helper()
	target, err := parseDSN(filepath.Join(t.TempDir(), "raw.db"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", target.dsn(writeParams))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

func tableNames(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

func TestMigrateFailureIsAtomic(t *testing.T) {
	db := openRaw(t)
	d := sqliteDialect()
	d.migrations = fstest.MapFS{
		"0001_a.sql": {Data: []byte(`CREATE TABLE a (x TEXT);`)},
		// The CREATE succeeds, the next statement fails: neither may stay.
		"0002_b.sql": {Data: []byte(`CREATE TABLE b (x TEXT); INSERT INTO no_such_table VALUES (1);`)},
		"notes.txt":  {Data: []byte(`not a migration`)},
	}
	logger, logs := logBuffer()
	err := migrate(t.Context(), db, d, logger)
	if err == nil || !strings.Contains(err.Error(), "0002_b") {
		t.Fatalf("migrate = %v, want an error naming 0002_b", err)
	}
	if diff := cmp.Diff([]string{"a", "schema_migrations"}, tableNames(t, db)); diff != "" {
		t.Errorf("tables after failed migration (-want +got):\n%s", diff)
	}
	applied, err := appliedMigrations(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 1 || applied[0].Version != "0001_a" {
		t.Errorf("applied = %+v, want only 0001_a", applied)
	}
	if !strings.Contains(logs.String(), "version=0001_a") {
		t.Errorf("applying 0001_a was not logged; logs:\n%s", logs)
	}

	// Fixed, it applies on the next run, and 0001 is not re-run (it would
	// fail: table a exists).
	d.migrations.(fstest.MapFS)["0002_b.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE b (x TEXT);`)}
	if err := migrate(t.Context(), db, d, logger); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "schema_migrations"}, tableNames(t, db)); diff != "" {
		t.Errorf("tables after fixed migration (-want +got):\n%s", diff)
	}
}

func TestMigrateLogs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	logger, logs := logBuffer()
	db, err := Open(t.Context(), path, &Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(sqliteDialect().migrations, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(logs.String(), "store migration applied"); got != len(files) {
		t.Errorf("first open logged %d applied migrations, want %d; logs:\n%s", got, len(files), logs)
	}
	// A newer binary's migration, as found by an older binary.
	if _, err := db.write.ExecContext(t.Context(),
		`INSERT INTO schema_migrations (version, applied_at) VALUES ('9999_future', 0)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	logs.Reset()
	db, err = Open(t.Context(), path, &Options{Logger: logger})
	if err != nil {
		t.Fatalf("reopening a store migrated by a newer version: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	out := logs.String()
	if strings.Contains(out, "store migration applied") {
		t.Errorf("reopen applied a migration again; logs:\n%s", out)
	}
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "9999_future") {
		t.Errorf("reopen did not warn about the unknown migration; logs:\n%s", out)
	}
}

// TestDialectsHaveSameMigrations keeps the dialects' migrations in step, so
// that AppliedMigrations means the same schema on both.
func TestDialectsHaveSameMigrations(t *testing.T) {
	names := func(d *dialect) []string {
		names, err := fs.Glob(d.migrations, "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	sqlite, postgres := names(sqliteDialect()), names(postgresDialect())
	if len(sqlite) == 0 {
		t.Fatal("no SQLite migrations embedded")
	}
	if diff := cmp.Diff(sqlite, postgres); diff != "" {
		t.Errorf("migrations (-sqlite +postgres):\n%s", diff)
	}
}
