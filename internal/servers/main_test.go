package servers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/servers"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// The test binary doubles as the stdio upstreams of the tests (the go-sdk
// cmd_test.go trick): started with the argument "demo-server" it is the
// built-in demo server, with "broken-server" a server that fails at
// startup the way a misconfigured one does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "demo-server":
			if err := demo.RunStdio(context.Background(), nil); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			os.Exit(0)
		case "broken-server":
			fmt.Fprintln(os.Stderr, "error: missing API key")
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// demoDef is a stdio server running the demo server from this binary.
func demoDef(name string) *config.Server {
	return &config.Server{Name: name, Transport: config.TransportStdio, Command: config.SelfCommand, Args: []string{"demo-server"}}
}

// brokenDef is a stdio server that exits at once with status 1.
func brokenDef(name string) *config.Server {
	return &config.Server{Name: name, Transport: config.TransportStdio, Command: config.SelfCommand, Args: []string{"broken-server"}}
}

// upstreamOptions runs config.SelfCommand as this test binary.
func upstreamOptions() *upstream.Options {
	return &upstream.Options{
		SelfExecutable: os.Args[0],
		// Under -race, a child would otherwise sleep 1 s at exit (tsan's
		// default); nothing else of our environment reaches it.
		BaseEnv: []string{"GORACE"},
		Getenv: func(k string) string {
			if k == "GORACE" {
				return "atexit_sleep_ms=0"
			}
			return ""
		},
	}
}

// storePath is a new SQLite store file.
func storePath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "switchboard.db")
}

// openStore opens the store at path until the test ends; two handles on
// one file are two replicas sharing it.
func openStore(t *testing.T, path string) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), path, nil)
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

// hooks records what the registry tells its owner.
type hooks struct {
	mu        sync.Mutex
	published []string // kind/key
	removed   []string
	renamed   []string // from>to
	changed   int
}

func (h *hooks) options(o *servers.Options) *servers.Options {
	var opts servers.Options
	if o != nil {
		opts = *o
	}
	opts.Publish = func(kind, key string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.published = append(h.published, kind+"/"+key)
	}
	opts.OnRemove = func(name string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.removed = append(h.removed, name)
	}
	opts.OnRename = func(_ context.Context, from, to string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.renamed = append(h.renamed, from+">"+to)
	}
	opts.OnChange = func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.changed++
	}
	return &opts
}

// take returns what was recorded since the last take and forgets it.
func (h *hooks) take() (published, removed, renamed []string, changed int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	published, removed, renamed, changed = h.published, h.removed, h.renamed, h.changed
	h.published, h.removed, h.renamed, h.changed = nil, nil, nil, 0
	return
}

// harness is a registry on a store, with its catalog and hooks.
type harness struct {
	db  *store.DB
	cat *catalog.Catalog
	reg *servers.Registry
	h   *hooks
}

// newHarness builds a registry on db, stopped (with its upstreams) when
// the test ends.
func newHarness(t *testing.T, db *store.DB, o *servers.Options) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &hooks{}
	cat := catalog.New(nil)
	reg := servers.New(ctx, db, cat, upstreamOptions(), h.options(o))
	t.Cleanup(func() {
		cancel()
		reg.Close()
		cctx, done := context.WithTimeout(context.Background(), 30*time.Second)
		defer done()
		if err := reg.Upstreams().Close(cctx); err != nil {
			t.Errorf("closing the upstreams: %v", err)
		}
	})
	return &harness{db: db, cat: cat, reg: reg, h: h}
}

// toolNames are the namespaced tools the catalog lists for server.
func (hs *harness) toolNames(server string) []string {
	var out []string
	for _, tl := range hs.cat.Snapshot().ServerTools(server) {
		out = append(out, tl.Name)
	}
	slices.Sort(out)
	return out
}

// rows are the store's server rows, as "source:name" sorted.
func rows(t *testing.T, db *store.DB) []string {
	t.Helper()
	all, err := db.ListServers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(all))
	for _, s := range all {
		out = append(out, s.Source+":"+s.Name)
	}
	slices.Sort(out)
	return out
}

// apiError fails t unless err is an *api.Error with status and code.
func apiError(t *testing.T, err error, status int, code string) *api.Error {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T), want an *api.Error %d %s", err, err, status, code)
	}
	if ae.Status != status || ae.Code != code {
		t.Fatalf("error %d %s %q, want %d %s", ae.Status, ae.Code, ae.Message, status, code)
	}
	return ae
}

// notFound fails t unless err is the API's server_not_found.
func notFound(t *testing.T, err error) {
	t.Helper()
	apiError(t, err, http.StatusNotFound, api.CodeServerNotFound)
}

// configErrors fails t unless err is a validation error of the config
// package, and returns its text.
func configErrors(t *testing.T, err error) string {
	t.Helper()
	var ce *config.Errors
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want *config.Errors", err, err)
	}
	return ce.Error()
}

// waitFor polls cond every 10 ms; it fails the test after 30 s (a bound
// on a broken build, not a speed requirement).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// status is a registered server's status; it fails t for an unknown one.
func (hs *harness) status(t *testing.T, name string) api.Server {
	t.Helper()
	v, err := hs.reg.Get(t.Context(), name)
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	return v
}

// connect connects name and fails t unless it is CONNECTED.
func (hs *harness) connect(t *testing.T, name string) api.Server {
	t.Helper()
	v, err := hs.reg.Connect(t.Context(), name, true)
	if err != nil {
		t.Fatalf("Connect(%q): %v", name, err)
	}
	if v.Status != string(upstream.StateConnected) {
		t.Fatalf("Connect(%q): status %s (%s), want CONNECTED", name, v.Status, v.ErrorMessage)
	}
	return v
}

// configOf is a config with servers and the default settings.
func configOf(defs ...*config.Server) *config.Config {
	slices.SortFunc(defs, func(a, b *config.Server) int { return strings.Compare(a.Name, b.Name) })
	return &config.Config{Servers: defs, Settings: config.DefaultSettings()}
}

// auto is def starting automatically.
func auto(def *config.Server) *config.Server {
	on := true
	def.AutoStart = &on
	return def
}
