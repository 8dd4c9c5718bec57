package cluster_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, to end listener sessions from outside

	"github.com/switchboard-mcp/switchboard/internal/cluster"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

// TestMain shares one throwaway PostgreSQL server among the tests that
// need one, and stops it at the end.
func TestMain(m *testing.M) { os.Exit(storetest.PostgresMain(m)) }

func openDB(t *testing.T, dsn string) *store.DB {
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

// backends give the DSN of a new, empty store.
var backends = []struct {
	name string
	dsn  func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "switchboard.db") }},
	{"postgres", func(t *testing.T) string { return storetest.StartPostgres(t) }},
}

// run runs c until the test ends, and fails the test if Run fails or
// does not return.
func run(t *testing.T, c *cluster.Cluster, h cluster.Handlers) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("Run did not return within 30 s of its context ending")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// feed records the changes a replica applied, in order.
type feed struct {
	mu      sync.Mutex
	applied []string // kind/key
	got     chan struct{}
	probed  chan struct{} // closed on the first probe
	probe   sync.Once
	resyncs chan struct{}
}

func newFeed() *feed {
	return &feed{got: make(chan struct{}, 1), probed: make(chan struct{}), resyncs: make(chan struct{}, 10)}
}

// kinds are the kinds the handlers apply; "failing" always fails.
var kinds = []string{cluster.KindServers, cluster.KindPolicy, cluster.KindKey, cluster.KindPins, cluster.KindBreaker,
	cluster.KindBreakers, "failing", "fence"}

func (f *feed) handlers() cluster.Handlers {
	h := cluster.Handlers{Apply: map[string]func(context.Context, string) error{
		// probe tells the listener is up; not recorded.
		"probe": func(context.Context, string) error {
			f.probe.Do(func() { close(f.probed) })
			return nil
		},
	}, Resync: func(context.Context) { f.resyncs <- struct{}{} }}
	for _, kind := range kinds {
		h.Apply[kind] = func(_ context.Context, key string) error {
			f.mu.Lock()
			f.applied = append(f.applied, kind+"/"+key)
			f.mu.Unlock()
			select {
			case f.got <- struct{}{}:
			default:
			}
			if kind == "failing" {
				return errors.New("cannot apply")
			}
			return nil
		}
	}
	return h
}

// until waits for f to have applied want last, and returns everything it
// applied.
func (f *feed) until(t *testing.T, want string) []string {
	t.Helper()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	for {
		f.mu.Lock()
		got := slices.Clone(f.applied)
		f.mu.Unlock()
		if slices.Contains(got, want) {
			return got
		}
		select {
		case <-f.got:
		case <-timer.C:
			t.Fatalf("%s not applied within 30 s; applied %v", want, got)
		}
	}
}

// listening waits until to applies what from publishes: a listener that
// starts after a notification never sees it.
func listening(t *testing.T, from *cluster.Cluster, to *feed) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		from.Publish("probe", "")
		select {
		case <-to.probed:
			return
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the listener did not start within 30 s")
		}
	}
}

// TestFeed checks two replicas on one PostgreSQL store apply each other's
// changes, in order, with their keys, and never their own.
func TestFeed(t *testing.T) {
	dsn := storetest.StartPostgres(t)
	a := cluster.New(openDB(t, dsn), "replica-a", nil)
	b := cluster.New(openDB(t, dsn), "replica-b", nil)
	fa, fb := newFeed(), newFeed()
	run(t, a, fa.handlers())
	run(t, b, fb.handlers())
	listening(t, a, fb)
	listening(t, b, fa)
	// Once listening, each replica has read the shared state again (what
	// changed since it started would otherwise be missed) before it says so.
	for _, c := range []*cluster.Cluster{a, b} {
		select {
		case <-c.Listening():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: Listening not closed", c.ID())
		}
	}
	for name, f := range map[string]*feed{"a": fa, "b": fb} {
		f.mu.Lock()
		if got, want := f.applied, []string{"servers/", "policy/", "breakers/"}; !slices.Equal(got, want) {
			t.Errorf("replica %s applied %v on start, want the resync %v", name, got, want)
		}
		f.applied = nil
		f.mu.Unlock()
	}

	type change struct {
		from      *cluster.Cluster
		kind, key string
	}
	changes := []change{
		{a, cluster.KindServers, ""},
		{b, cluster.KindKey, "0123abcd"},
		{a, cluster.KindPins, "github"},
		{a, "failing", "x"}, // a handler's error does not stop the feed
		{b, "no-handler", "y"},
		{a, cluster.KindBreaker, "github:create_issue"},
		{b, cluster.KindPolicy, ""},
		{b, cluster.KindBreaker, `a key with "quotes" and ünicode`},
	}
	var wantA, wantB []string
	for _, c := range changes {
		c.from.Publish(c.kind, c.key)
		if c.kind == "no-handler" {
			continue
		}
		if c.from == a {
			wantB = append(wantB, c.kind+"/"+c.key)
		} else {
			wantA = append(wantA, c.kind+"/"+c.key)
		}
	}
	// The fences come last: once each replica has the other's, it has
	// everything before it, and its own would be there if it applied it.
	a.Publish("fence", "a")
	b.Publish("fence", "b")
	if diff := cmp.Diff(append(wantA, "fence/b"), fa.until(t, "fence/b")); diff != "" {
		t.Errorf("replica a applied (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(append(wantB, "fence/a"), fb.until(t, "fence/a")); diff != "" {
		t.Errorf("replica b applied (-want +got):\n%s", diff)
	}
}

// TestFeedResync checks a replica whose listener lost its session reloads
// everything the feed carries, then follows the feed again.
func TestFeedResync(t *testing.T) {
	dsn := storetest.StartPostgres(t)
	a := cluster.New(openDB(t, dsn), "replica-a", nil)
	b := cluster.New(openDB(t, dsn), "replica-b", nil)
	fb := newFeed()
	run(t, b, fb.handlers())
	listening(t, a, fb)
	// The resync b made when it started listening is not the one under test.
	<-b.Listening()
	select {
	case <-fb.resyncs:
	case <-time.After(30 * time.Second):
		t.Fatal("no resync when the listener started")
	}
	fb.mu.Lock()
	fb.applied = nil
	fb.mu.Unlock()

	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var n int
	if err := raw.QueryRowContext(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'switchboard-listen'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("ended %d listener sessions, want 1", n)
	}
	select {
	case <-fb.resyncs:
	case <-time.After(30 * time.Second):
		t.Fatal("no resync within 30 s of the listener losing its session")
	}
	a.Publish("fence", "a")
	want := []string{cluster.KindServers + "/", cluster.KindPolicy + "/", cluster.KindBreakers + "/", "fence/a"}
	if diff := cmp.Diff(want, fb.until(t, "fence/a")); diff != "" {
		t.Errorf("applied after the gap (-want +got):\n%s", diff)
	}
}

// TestPublishSQLite checks Publish announces nothing on SQLite, which no
// other replica shares.
func TestPublishSQLite(t *testing.T) {
	ctx := t.Context()
	db := openDB(t, filepath.Join(t.TempDir(), "switchboard.db"))
	ch, err := db.Listen(ctx, cluster.Channel)
	if err != nil {
		t.Fatal(err)
	}
	cluster.New(db, "replica-a", nil).Publish(cluster.KindServers, "")
	var nilCluster *cluster.Cluster
	nilCluster.Publish(cluster.KindServers, "") // a gateway without a cluster
	if err := db.Notify(ctx, cluster.Channel, "fence"); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Receive(t, ch); got.Payload != "fence" {
		t.Errorf("first notification %+v, want the fence: Publish announced on SQLite", got)
	}
}

func TestSpendOnce(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := t.Context()
			dsn := be.dsn(t)
			a := cluster.New(openDB(t, dsn), "replica-a", nil)
			b := cluster.New(openDB(t, dsn), "replica-b", nil)
			expires := time.Now().Add(time.Hour)
			steps := []struct {
				by    *cluster.Cluster
				nonce string
				want  bool
			}{
				{a, "n1", true},
				{b, "n1", false}, // a replay on another replica
				{a, "n1", false}, // a replay on the same one
				{b, "n2", true},
				{a, "n2", false},
			}
			for i, st := range steps {
				got, err := st.by.SpendOnce(ctx, st.nonce, expires)
				if err != nil {
					t.Fatal(err)
				}
				if got != st.want {
					t.Errorf("step %d: %s spending %s = %v, want %v", i, st.by.ID(), st.nonce, got, st.want)
				}
			}
		})
	}
}

func TestReplicaAddr(t *testing.T) {
	ctx := t.Context()
	db := openDB(t, filepath.Join(t.TempDir(), "switchboard.db"))
	now := time.Now()
	for _, r := range []store.Replica{
		{ID: "any-v4", Host: "node1", Address: "0.0.0.0:8080"},
		{ID: "any-v6", Host: "node2", Address: "[::]:8443"},
		{ID: "no-host", Host: "node3", Address: ":7000"},
		{ID: "loopback", Host: "node4", Address: "127.0.0.1:9000"},
		{ID: "v6", Host: "node5", Address: "[fd00::1]:80"},
		{ID: "named", Host: "node6", Address: "gw.internal:8080"},
		{ID: "garbled", Host: "node7", Address: "nonsense"},
		{ID: "dead", Host: "node8", Address: "10.0.0.8:8080", HeartbeatAt: now.Add(-2 * cluster.ReplicaTimeout)},
	} {
		if err := db.Heartbeat(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		id, scheme, want, wantErr string
	}{
		{id: "any-v4", want: "http://node1:8080"},
		{id: "any-v6", scheme: "https", want: "https://node2:8443"},
		{id: "no-host", want: "http://node3:7000"},
		{id: "loopback", want: "http://127.0.0.1:9000"},
		{id: "v6", want: "http://[fd00::1]:80"},
		{id: "named", scheme: "https", want: "https://gw.internal:8080"},
		{id: "garbled", wantErr: `listens on "nonsense"`},
		{id: "dead", wantErr: "not alive"},
		{id: "unknown", wantErr: "not alive"},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			c := cluster.New(db, "self", &cluster.Options{Scheme: tc.scheme})
			got, err := c.ReplicaAddr(ctx, tc.id)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ReplicaAddr = %q, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ReplicaAddr = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestRunView checks a running replica is in every replica's view, marked
// as itself in its own, and gone from the store once Run returns.
func TestRunView(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := t.Context()
			dsn := be.dsn(t)
			a := cluster.New(openDB(t, dsn), "replica-a", &cluster.Options{Version: "v1.2.3", Addr: "127.0.0.1:8080"})
			b := cluster.New(openDB(t, dsn), "replica-b", &cluster.Options{Version: "v1.2.3", Addr: "127.0.0.1:8081"})
			stopA := run(t, a, cluster.Handlers{})
			run(t, b, cluster.Handlers{})
			type row struct {
				ID, Version, Address string
				Self                 bool
			}
			view := func(c *cluster.Cluster) (string, []row) {
				v, err := c.View(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if v.Self != c.ID() {
					t.Errorf("view of %s says self is %s", c.ID(), v.Self)
				}
				var rows []row
				for _, r := range v.Replicas {
					rows = append(rows, row{r.ID, r.Version, r.Address, r.Self})
				}
				return v.Backend, rows
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				if _, rows := view(a); len(rows) == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("both replicas not in the view within 30 s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			for _, c := range []*cluster.Cluster{a, b} {
				backend, rows := view(c)
				want := []row{{"replica-a", "v1.2.3", "127.0.0.1:8080", c == a}, {"replica-b", "v1.2.3", "127.0.0.1:8081", c == b}}
				slices.SortFunc(rows, func(x, y row) int { return strings.Compare(x.ID, y.ID) })
				if diff := cmp.Diff(want, rows); diff != "" {
					t.Errorf("view of %s (-want +got):\n%s", c.ID(), diff)
				}
				if backend != be.name {
					t.Errorf("backend %q, want %q", backend, be.name)
				}
			}

			stopA()
			all, err := openDB(t, dsn).Replicas(ctx, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range all {
				ids = append(ids, r.ID)
			}
			if diff := cmp.Diff([]string{"replica-b"}, ids); diff != "" {
				t.Errorf("rows once a stopped (-want +got):\n%s", diff)
			}
		})
	}
}
