package store_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

// TestMain shares one throwaway PostgreSQL server among the tests and stops
// it at the end.
func TestMain(m *testing.M) { os.Exit(storetest.PostgresMain(m)) }

func openPostgres(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), storetest.StartPostgres(t), nil)
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

// rawPostgres opens dsn with the driver alone, to look behind the store.
func rawPostgres(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
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

func TestPostgres(t *testing.T) {
	storetest.Run(t, openPostgres)
}

func TestPostgresReopen(t *testing.T) {
	dsnForms := map[string]func(dsn string) string{
		"postgres://":   func(dsn string) string { return dsn },
		"postgresql://": func(dsn string) string { return "postgresql://" + strings.TrimPrefix(dsn, "postgres://") },
		"upper case":    func(dsn string) string { return "POSTGRES://" + strings.TrimPrefix(dsn, "postgres://") },
	}
	for name, form := range dsnForms {
		t.Run(name, func(t *testing.T) {
			storetest.RunReopen(t, func(t *testing.T) string { return form(storetest.StartPostgres(t)) })
		})
	}
}

// TestPostgresSchemaMatchesSQLite checks the two migration sets create the
// same tables, columns (in the same order) and named indexes.
func TestPostgresSchemaMatchesSQLite(t *testing.T) {
	type schema struct {
		Columns map[string][]string // table → columns
		Indexes []string
	}
	read := func(t *testing.T, db *sql.DB, columnsQuery, indexesQuery string) schema {
		t.Helper()
		s := schema{Columns: map[string][]string{}}
		rows, err := db.QueryContext(t.Context(), columnsQuery)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var table, column string
			if err := rows.Scan(&table, &column); err != nil {
				t.Fatal(err)
			}
			s.Columns[table] = append(s.Columns[table], column)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows, err = db.QueryContext(t.Context(), indexesQuery)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			s.Indexes = append(s.Indexes, name)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return s
	}

	path := filepath.Join(t.TempDir(), "x.db")
	sdb, err := store.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sdb.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	want := read(t, raw,
		`SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, p.cid`,
		`SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'idx_%' ORDER BY name`)

	dsn := storetest.StartPostgres(t)
	pdb, err := store.Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pdb.Close(); err != nil {
		t.Fatal(err)
	}
	got := read(t, rawPostgres(t, dsn),
		`SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() ORDER BY table_name COLLATE "C", ordinal_position`,
		`SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE 'idx\_%'
		ORDER BY indexname COLLATE "C"`)
	if len(want.Columns) == 0 {
		t.Fatal("SQLite schema is empty")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schema (-sqlite +postgres):\n%s", diff)
	}
}

func TestPostgresAppliedMigrations(t *testing.T) {
	versions := func(db *store.DB) []string {
		t.Helper()
		applied, err := db.AppliedMigrations(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range applied {
			out = append(out, m.Version)
			if m.AppliedAt.IsZero() {
				t.Errorf("migration %s has no AppliedAt", m.Version)
			}
		}
		return out
	}
	want, got := versions(openSQLite(t)), versions(openPostgres(t))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("applied migrations (-sqlite +postgres):\n%s", diff)
	}
}

func pgTables(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(),
		`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()
		ORDER BY table_name COLLATE "C"`)
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

// TestPostgresMigrateFailureIsAtomic relies on PostgreSQL's transactional
// DDL: a migration that fails halfway leaves nothing behind.
func TestPostgresMigrateFailureIsAtomic(t *testing.T) {
	db := rawPostgres(t, storetest.StartPostgres(t))
	migrations := fstest.MapFS{
		"0001_a.sql": {Data: []byte(`CREATE TABLE a (x TEXT);`)},
		"0002_b.sql": {Data: []byte(`CREATE TABLE b (x TEXT); INSERT INTO no_such_table VALUES (1);`)},
	}
	err := store.MigratePostgres(t.Context(), db, migrations, nil)
	if err == nil || !strings.Contains(err.Error(), "0002_b") {
		t.Fatalf("migrate = %v, want an error naming 0002_b", err)
	}
	if diff := cmp.Diff([]string{"a", "schema_migrations"}, pgTables(t, db)); diff != "" {
		t.Errorf("tables after failed migration (-want +got):\n%s", diff)
	}
	migrations["0002_b.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE b (x TEXT);`)}
	if err := store.MigratePostgres(t.Context(), db, migrations, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "schema_migrations"}, pgTables(t, db)); diff != "" {
		t.Errorf("tables after fixed migration (-want +got):\n%s", diff)
	}
}

// TestPostgresMigrationLock checks Open migrates under the advisory lock
// (it waits while another session holds it) and releases it.
func TestPostgresMigrationLock(t *testing.T) {
	dsn := storetest.StartPostgres(t)
	raw := rawPostgres(t, dsn)
	conn, err := raw.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `SELECT pg_advisory_lock($1)`, store.PostgresMigrationLock); err != nil {
		t.Fatal(err)
	}

	// The lock is held, so this Open can only end with its context.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if db, err := store.Open(ctx, dsn, nil); err == nil {
		db.Close()
		t.Fatal("Open succeeded while another session held the migration lock")
	}
	var table sql.NullString
	if err := raw.QueryRowContext(t.Context(), `SELECT to_regclass('schema_migrations')::text`).Scan(&table); err != nil {
		t.Fatal(err)
	}
	if table.Valid {
		t.Errorf("Open created %s before taking the migration lock", table.String)
	}

	if _, err := conn.ExecContext(t.Context(), `SELECT pg_advisory_unlock($1)`, store.PostgresMigrationLock); err != nil {
		t.Fatal(err)
	}
	db := func() *store.DB {
		db, err := store.Open(t.Context(), dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}()
	// The open store keeps connections in its pool: one of them must not
	// have kept the lock.
	var free bool
	if err := conn.QueryRowContext(t.Context(), `SELECT pg_try_advisory_lock($1)`, store.PostgresMigrationLock).Scan(&free); err != nil {
		t.Fatal(err)
	}
	if !free {
		t.Error("the migration lock is still held after Open returned")
	}
	if err := db.Ping(t.Context()); err != nil {
		t.Error(err)
	}
}

// TestPostgresOpenErrors checks errors name the database but never the
// password, wherever the DSN carries it.
func TestPostgresOpenErrors(t *testing.T) {
	const password = "s3cret-pw"
	live := strings.TrimPrefix(storetest.StartPostgres(t), "postgres://postgres@")
	host, _, _ := strings.Cut(live, "/")
	tests := []struct {
		name   string
		dsn    string
		wantIn []string
	}{
		{"refused", "postgres://user:" + password + "@127.0.0.1:1/sb?connect_timeout=5",
			[]string{"postgres://user@127.0.0.1:1/sb", "connecting"}},
		{"password parameter", "postgresql://user@127.0.0.1:1/sb?password=" + password + "&connect_timeout=5",
			[]string{"postgres://user@127.0.0.1:1/sb"}},
		{"escaped password", "postgres://user:" + strings.Replace(password, "-", "%2D", 1) + "@127.0.0.1:1/sb?connect_timeout=5",
			[]string{"127.0.0.1:1"}},
		{"bad port", "postgres://user:" + password + "@db.example:notaport/sb", []string{"parsing"}},
		{"missing database", "postgres://postgres:" + password + "@" + host + "/no_such_db", []string{"no_such_db"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := store.Open(t.Context(), tt.dsn, nil)
			if err == nil {
				db.Close()
				t.Fatalf("Open succeeded, want an error")
			}
			for _, s := range tt.wantIn {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("error %q leaks the password", err)
			}
		})
	}
}

// openPostgresDSN opens dsn, closing it when t ends.
func openPostgresDSN(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), dsn, nil)
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

// TestPostgresNotifyAcrossHandles checks a change announced on one replica
// reaches another on the same database, and only at commit.
func TestPostgresNotifyAcrossHandles(t *testing.T) {
	ctx := t.Context()
	dsn := storetest.StartPostgres(t)
	a, b := openPostgresDSN(t, dsn), openPostgresDSN(t, dsn)
	if !a.IsPostgres() {
		t.Fatal("IsPostgres = false on PostgreSQL")
	}
	listen := func(db *store.DB, channel string) <-chan store.Notification {
		t.Helper()
		ch, err := db.Listen(ctx, channel)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	onA, servers, grants := listen(a, "servers"), listen(b, "servers"), listen(b, "grants")

	if err := a.Notify(ctx, "servers", "github"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.Notification{Channel: "servers", Payload: "github"}, storetest.Receive(t, servers)); diff != "" {
		t.Errorf("on b (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(store.Notification{Channel: "servers", Payload: "github", Self: true}, storetest.Receive(t, onA)); diff != "" {
		t.Errorf("on a, the sender (-want +got):\n%s", diff)
	}

	boom := errors.New("boom")
	if err := a.Transact(ctx, func(tx *store.DB) error {
		if err := tx.Notify(ctx, "grants", "rolled back"); err != nil {
			t.Fatal(err)
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Transact = %v, want boom", err)
	}
	if err := a.Transact(ctx, func(tx *store.DB) error {
		return tx.Notify(ctx, "grants", "committed")
	}); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Receive(t, grants); got.Payload != "committed" || got.Channel != "grants" {
		t.Errorf("on b's grants listener got %+v, want the committed notification first", got)
	}
	// Nothing on grants reached the servers listener: the next thing it
	// gets is the next notification on servers.
	if err := b.Notify(ctx, "servers", "from b"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.Notification{Channel: "servers", Payload: "from b", Self: true}, storetest.Receive(t, servers)); diff != "" {
		t.Errorf("on b's servers listener (-want +got):\n%s", diff)
	}
}

// terminateListeners ends, from outside, the listener sessions on the
// database of dsn, as a failover or an administrator would, and returns how
// many there were.
func terminateListeners(t *testing.T, raw *sql.DB) int {
	t.Helper()
	var n int
	err := raw.QueryRowContext(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'switchboard-listen'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPostgresListenReconnect checks a listener whose session is killed
// reconnects, says it may have missed changes, then delivers again.
func TestPostgresListenReconnect(t *testing.T) {
	ctx := t.Context()
	dsn := storetest.StartPostgres(t)
	a, b := openPostgresDSN(t, dsn), openPostgresDSN(t, dsn)
	ch, err := b.Listen(ctx, "servers")
	if err != nil {
		t.Fatal(err)
	}
	if n := terminateListeners(t, rawPostgres(t, dsn)); n != 1 {
		t.Fatalf("terminated %d listener sessions, want 1", n)
	}
	if diff := cmp.Diff(store.Notification{Channel: "servers", Resync: true}, storetest.Receive(t, ch)); diff != "" {
		t.Errorf("after the kill (-want +got):\n%s", diff)
	}
	for _, p := range []string{"one", "two"} {
		if err := a.Notify(ctx, "servers", p); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(store.Notification{Channel: "servers", Payload: p}, storetest.Receive(t, ch)); diff != "" {
			t.Errorf("after reconnecting (-want +got):\n%s", diff)
		}
	}
}

// TestPostgresNotifyConnBroken checks Notify recovers when its pinned
// connection is killed: one call may fail, the next ones succeed.
func TestPostgresNotifyConnBroken(t *testing.T) {
	ctx := t.Context()
	dsn := storetest.StartPostgres(t)
	db := openPostgresDSN(t, dsn)
	ch, err := db.Listen(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Notify(ctx, "c", "before"); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Receive(t, ch); got.Payload != "before" || !got.Self {
		t.Fatalf("got %+v", got)
	}
	// Kill every session but the listener's: the notify connection among them.
	raw := rawPostgres(t, dsn)
	if _, err := raw.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'switchboard'`); err != nil {
		t.Fatal(err)
	}
	_ = db.Notify(ctx, "c", "maybe lost") // finds its connection dead
	if err := db.Notify(ctx, "c", "after"); err != nil {
		t.Fatalf("Notify after its connection was killed: %v", err)
	}
	for {
		got := storetest.Receive(t, ch)
		if got.Payload == "maybe lost" {
			continue
		}
		if diff := cmp.Diff(store.Notification{Channel: "c", Payload: "after", Self: true}, got); diff != "" {
			t.Errorf("after the kill (-want +got):\n%s", diff)
		}
		break
	}
}

// TestPostgresListenLifetime checks listeners end with their ctx or with
// Close, leaving no goroutine and no session behind.
func TestPostgresListenLifetime(t *testing.T) {
	dsn := storetest.StartPostgres(t)
	before := listenerGoroutines()
	db, err := store.Open(t.Context(), dsn, nil)
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
	// The server notices the closed sockets on its own time: wait for it.
	raw := rawPostgres(t, dsn)
	deadline := time.Now().Add(storetest.NotifyTimeout)
	for {
		var n int
		if err := raw.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name LIKE 'switchboard%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d store sessions still open after Close", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
