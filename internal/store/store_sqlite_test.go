package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

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
	if diff := cmp.Diff([]string{"0001_servers_tools_history", "0002_keys_grants_tokens_breakers_audit", "0003_replicas", "0004_idempotency", "0005_tool_pins", "0006_workspace_access", "0007_default_access_overrides", "0008_escalations_approvals", "0009_oauth_server", "0010_upstream_tokens", "0012_upstream_signing_keys"}, versions); diff != "" {
		t.Errorf("applied migrations (-want +got):\n%s", diff)
	}
}

// listenerGoroutines counts the goroutines running the store's listeners.
func listenerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "internal/store.(*notifier)") || strings.Contains(g, "internal/store.(*DB).Listen") {
			count++
		}
	}
	return count
}

// TestSQLiteNotifySharedFile checks that handles of one process on one file
// hear each other, as replicas on one PostgreSQL do, and handles on another
// file do not.
func TestSQLiteNotifySharedFile(t *testing.T) {
	open := func(path string) *store.DB {
		db, err := store.Open(t.Context(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	dir := t.TempDir()
	a := open(filepath.Join(dir, "one.db"))
	b := open(filepath.Join(dir, ".", "one.db"))
	other := open(filepath.Join(dir, "two.db"))
	if a.IsPostgres() {
		t.Error("IsPostgres on SQLite = true")
	}
	onA, err := a.Listen(t.Context(), "servers")
	if err != nil {
		t.Fatal(err)
	}
	onB, err := b.Listen(t.Context(), "servers")
	if err != nil {
		t.Fatal(err)
	}
	onOther, err := other.Listen(t.Context(), "servers")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Notify(t.Context(), "servers", "from a"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.Notification{Channel: "servers", Payload: "from a", Self: true}, storetest.Receive(t, onA)); diff != "" {
		t.Errorf("on a (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(store.Notification{Channel: "servers", Payload: "from a"}, storetest.Receive(t, onB)); diff != "" {
		t.Errorf("on b (-want +got):\n%s", diff)
	}
	if err := other.Notify(t.Context(), "servers", "from other"); err != nil {
		t.Fatal(err)
	}
	// Delivery is synchronous: had a's notification reached other's
	// listener, it would be queued ahead of other's own.
	if got := storetest.Receive(t, onOther); got.Payload != "from other" {
		t.Errorf("listener on another file got %+v", got)
	}
}

// TestSQLiteNotifyOverflow checks a listener that does not read loses what
// overflows its buffer, counted, and never blocks the sender.
func TestSQLiteNotifyOverflow(t *testing.T) {
	db := openSQLite(t)
	ch, err := db.Listen(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	const buffer, extra = 1024, 5
	for i := range buffer + extra {
		if err := db.Notify(t.Context(), "c", strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := db.DroppedNotifications(); got != extra {
		t.Errorf("DroppedNotifications = %d, want %d", got, extra)
	}
	for i := range buffer {
		if got := storetest.Receive(t, ch); got.Payload != strconv.Itoa(i) {
			t.Fatalf("notification %d has payload %q", i, got.Payload)
		}
	}
	select {
	case n := <-ch:
		t.Errorf("got %+v beyond the buffer", n)
	default:
	}
}

// TestSQLiteListenLifetime checks listeners end with their ctx or with
// Close, leaving no goroutine behind, and a closed store refuses both calls.
func TestSQLiteListenLifetime(t *testing.T) {
	before := listenerGoroutines()
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	byCtx, err := db.Listen(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	byClose, err := db.Listen(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	storetest.ExpectClosed(t, byCtx)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	storetest.ExpectClosed(t, byClose)
	if _, err := db.Listen(t.Context(), "c"); err == nil {
		t.Error("Listen after Close succeeded")
	}
	if err := db.Notify(t.Context(), "c", "x"); err == nil {
		t.Error("Notify after Close succeeded")
	}
	waitListenerGoroutines(t, before)
}

// waitListenerGoroutines waits for the listener goroutines to be back to
// want. Close waits for every listener to finish its work; the goroutines
// themselves return an instant later (after their deferred Done), so one
// count right after Close can see one still on its way out.
func waitListenerGoroutines(t *testing.T, want int) {
	t.Helper()
	for deadline := time.Now().Add(storetest.NotifyTimeout); ; time.Sleep(10 * time.Millisecond) {
		n := listenerGoroutines()
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d listener goroutines after Close, %d before", n, want)
		}
	}
}

// TestDurableSyncsEveryCommit: with Durable the write connection runs
// synchronous=FULL (2), so a commit is on disk when it returns; without it
// NORMAL (1), which survives a crash of the process only.
func TestDurableSyncsEveryCommit(t *testing.T) {
	for _, tt := range []struct {
		durable bool
		want    string
	}{{true, "2"}, {false, "1"}} {
		db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "s.db"), &store.Options{Durable: tt.durable})
		if err != nil {
			t.Fatal(err)
		}
		got, err := store.WritePragma(t.Context(), db, "synchronous")
		db.Close()
		if err != nil || got != tt.want {
			t.Errorf("Durable=%v: synchronous = %q, %v; want %s", tt.durable, got, err, tt.want)
		}
	}
}
