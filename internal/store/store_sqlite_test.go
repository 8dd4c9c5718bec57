package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

func openSQLite(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "switchboard.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

func TestSQLite(t *testing.T) {
	storetest.Run(t, openSQLite)
}

func TestSQLiteMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) *store.DB {
		db, err := store.Open(t.Context(), ":memory:", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := db.Close(); err != nil {
				t.Error(err)
			}
		})
		return db
	})
}

func TestSQLiteReopen(t *testing.T) {
	dsnForms := map[string]func(path string) string{
		"path":     func(p string) string { return p },
		"sqlite:":  func(p string) string { return "sqlite:" + p },
		"file:":    func(p string) string { return "file:" + p + "?cache=private" },
		"odd name": func(p string) string { return filepath.Join(filepath.Dir(p), "a b#c%d.db") },
	}
	for name, form := range dsnForms {
		t.Run(name, func(t *testing.T) {
			storetest.RunReopen(t, func(t *testing.T) string {
				return form(filepath.Join(t.TempDir(), "switchboard.db"))
			})
		})
	}
}

// TestSQLiteFiles checks what lands on disk: the named file, in WAL mode.
func TestSQLiteFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a b#c.db")
	db, err := store.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database file not created at %q: %v", path, err)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Errorf("no WAL file next to the database: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "a b#c.db") {
			t.Errorf("unexpected file %q in the store's directory", e.Name())
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "no", "such", "dir")
	tests := []struct {
		name        string
		dsn         string
		wantIn      []string // substrings of the error
		notIn       string   // a substring the error must not contain
		unsupported bool     // errors.Is(err, errors.ErrUnsupported)
	}{
		{name: "missing dir", dsn: filepath.Join(missing, "x.db"), wantIn: []string{missing, "does not exist"}},
		{name: "missing dir sqlite:", dsn: "sqlite:" + filepath.Join(missing, "x.db"), wantIn: []string{missing}},
		{name: "missing dir file:", dsn: "file:" + filepath.Join(missing, "x.db") + "?mode=rwc", wantIn: []string{missing}},
		{name: "parent is a file", dsn: filepath.Join(file, "x.db"), wantIn: []string{file, "not a directory"}},
		{name: "postgres", dsn: "postgres://user:secret@127.0.0.1:1/sb?connect_timeout=5",
			wantIn: []string{"postgres://user@127.0.0.1:1/sb"}, notIn: "secret"},
		{name: "postgresql", dsn: "postgresql://user:secret@127.0.0.1:1/sb?sslmode=disable&connect_timeout=5",
			wantIn: []string{"postgres://user@127.0.0.1:1/sb"}, notIn: "secret"},
		{name: "other scheme", dsn: "mysql://user:secret@db/x", wantIn: []string{`"mysql"`, "not supported"}, notIn: "secret"},
		{name: "empty", dsn: "", wantIn: []string{"empty"}},
		{name: "file URI with host", dsn: "file://elsewhere/tmp/x.db", wantIn: []string{"elsewhere"}},
		{name: "bad driver parameter", dsn: filepath.Join(dir, "x.db") + "?_txlock=sometimes", wantIn: []string{"_txlock"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := store.Open(t.Context(), tt.dsn, nil)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%q) succeeded, want an error", tt.dsn)
			}
			for _, s := range tt.wantIn {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Open(%q) error %q does not contain %q", tt.dsn, err, s)
				}
			}
			if tt.notIn != "" && strings.Contains(err.Error(), tt.notIn) {
				t.Errorf("Open(%q) error %q leaks %q", tt.dsn, err, tt.notIn)
			}
			if got := errors.Is(err, errors.ErrUnsupported); got != tt.unsupported {
				t.Errorf("errors.Is(err, errors.ErrUnsupported) = %v, want %v", got, tt.unsupported)
			}
		})
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open created the missing directory %q (stat: %v)", missing, err)
	}
}

// TestClose checks Close is idempotent, and that a transaction's handle
// refuses to close the store under it.
func TestClose(t *testing.T) {
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Transact(t.Context(), func(tx *store.DB) error { return tx.Close() })
	if err == nil {
		t.Error("Close on a transaction's handle succeeded, want an error")
	}
	if err := db.Ping(t.Context()); err != nil {
		t.Errorf("Ping after refused Close: %v", err)
	}
	for i := range 2 {
		if err := db.Close(); err != nil {
			t.Errorf("Close #%d = %v", i+1, err)
		}
	}
	if err := db.Ping(t.Context()); err == nil {
		t.Error("Ping after Close succeeded, want an error")
	}
}

func TestAppliedMigrations(t *testing.T) {
	db := openSQLite(t)
	got, err := db.AppliedMigrations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, m := range got {
		versions = append(versions, m.Version)
		if m.AppliedAt.IsZero() {
			t.Errorf("migration %s has no AppliedAt", m.Version)
		}
	}
	if diff := cmp.Diff([]string{"0001_servers_tools_history", "0002_keys_grants_tokens_breakers_audit"}, versions); diff != "" {
		t.Errorf("applied migrations (-want +got):\n%s", diff)
	}
}
