package admin_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/admin"
	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/identity"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
	"github.com/switchboard-mcp/switchboard/internal/servers"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// The test binary doubles as the demo server the registry connects to
// (started with the argument "demo-server"), so that declared tools are
// checked against what a real upstream exposes.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "demo-server" {
		if err := demo.RunStdio(context.Background(), nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// env is the services under test over a real store, registry and catalog:
// servers "docs" (tools prefixed "d"), "files" (connected) and "cold"
// (never connected: its tools are unknown).
type env struct {
	path   string
	db     *store.DB
	engine *authz.Engine
	authn  *identity.Authenticator
	keys   admin.Keys
	pols   admin.Policies

	mu        sync.Mutex
	published []string
}

func (e *env) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.published
	e.published = nil
	return p
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := t.Context()
	e := &env{path: filepath.Join(t.TempDir(), "switchboard.db")}
	db, err := store.Open(ctx, e.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	e.db = db

	cat := catalog.New(nil)
	rctx, cancel := context.WithCancel(context.Background())
	reg := servers.New(rctx, db, cat, &upstream.Options{
		SelfExecutable: os.Args[0],
		// Under -race, a child would otherwise sleep 1 s at exit.
		BaseEnv: []string{"GORACE"},
		Getenv: func(k string) string {
			if k == "GORACE" {
				return "atexit_sleep_ms=0"
			}
			return ""
		},
	}, nil)
	t.Cleanup(func() {
		cancel()
		reg.Close()
		cctx, done := context.WithTimeout(context.Background(), 30*time.Second)
		defer done()
		if err := reg.Upstreams().Close(cctx); err != nil {
			t.Error(err)
		}
	})
	d := "d"
	for _, def := range []*config.Server{
		{Name: "docs", Prefix: &d},
		{Name: "files"},
		{Name: "cold"},
	} {
		def.Transport, def.Command, def.Args = config.TransportStdio, config.SelfCommand, []string{"demo-server"}
		if _, err := reg.Register(ctx, def, false); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"docs", "files"} {
		if v, err := reg.Connect(ctx, name, true); err != nil || v.Status != string(upstream.StateConnected) {
			t.Fatalf("connecting %s: %s %s %v", name, v.Status, v.ErrorMessage, err)
		}
	}

	if e.engine, err = authz.New(ctx, admin.GrantStore{DB: db}, authz.Policy{}, nil); err != nil {
		t.Fatal(err)
	}
	if e.authn, err = identity.New(identity.Config{Mode: identity.ModeKeys}, admin.KeyStore{DB: db}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.authn.Close)
	o := &admin.Options{DB: db, Engine: e.engine, Authn: e.authn, Catalog: cat, Servers: reg, Events: telemetry.NewBus(),
		Publish: func(kind, key string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.published = append(e.published, kind+"/"+key)
		}}
	e.keys, e.pols = admin.NewKeys(o), admin.NewPolicies(o)
	return e
}

// grantsOf are agent's grants in the engine and in the store, as
// "server/tool actions".
func (e *env) grantsOf(t *testing.T, agent string) (engine, stored []string) {
	t.Helper()
	for _, g := range e.engine.Grants(agent) {
		engine = append(engine, g.Server+"/"+g.Tool+" "+strings.Join(g.Actions, ","))
	}
	rows, err := e.db.ListGrants(t.Context(), agent)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rows {
		stored = append(stored, g.Server+"/"+g.Tool+" "+strings.Join(g.Actions, ","))
	}
	slices.Sort(engine)
	slices.Sort(stored)
	return engine, stored
}

func (e *env) keyCount(t *testing.T) int {
	t.Helper()
	keys, err := e.db.ListAPIKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

func TestKeysCreate(t *testing.T) {
	tests := []struct {
		name     string
		req      api.KeyRequest
		wantErr  []string // substrings of an ErrInvalid error; nil: success
		grants   []string // server/tool actions
		announce bool
	}{
		{name: "no declared tools", req: api.KeyRequest{AgentID: "bot"}},
		{name: "server:tool", req: api.KeyRequest{AgentID: "bot", DeclaredTools: []string{"docs:echo"}},
			grants: []string{"docs/echo invoke"}, announce: true},
		{name: "namespaced name of a server with another prefix",
			req:    api.KeyRequest{AgentID: "bot", DeclaredTools: []string{"d.echo", " files.add "}},
			grants: []string{"docs/echo invoke", "files/add invoke"}, announce: true},
		{name: "patterns are not checked against the tools",
			req:    api.KeyRequest{AgentID: "bot", DeclaredTools: []string{"files:e*", "d.*", "docs:[ab]dd"}},
			grants: []string{"docs/* invoke", "docs/[ab]dd invoke", "files/e* invoke"}, announce: true},
		{name: "the same tool twice is one grant",
			req:    api.KeyRequest{AgentID: "bot", DeclaredTools: []string{"docs:echo", "d.echo"}},
			grants: []string{"docs/echo invoke"}, announce: true},
		{name: "a server whose tools were never discovered takes any tool",
			req:    api.KeyRequest{AgentID: "bot", DeclaredTools: []string{"cold:anything"}},
			grants: []string{"cold/anything invoke"}, announce: true},
		{name: "unknown server", req: api.KeyRequest{AgentID: "bot", DeclaredTools: []string{"nosuch:echo"}},
			wantErr: []string{`declared_tools[0] "nosuch:echo": no server "nosuch" is registered`}},
		{name: "unknown tool", req: api.KeyRequest{AgentID: "bot", DeclaredTools: []string{"docs:echo", "d.nosuch"}},
			wantErr: []string{`declared_tools[1] "d.nosuch": server "docs" does not expose a tool "nosuch"`}},
		{name: "not a tool reference", req: api.KeyRequest{AgentID: "bot", DeclaredTools: []string{"justtext", "files:"}},
			wantErr: []string{`declared_tools[0] "justtext": want server:tool`, `declared_tools[1] "files:": want server:tool`}},
		{name: "every problem at once", req: api.KeyRequest{AgentID: "bot", DeclaredTools: []string{"nosuch:x", "files:nosuch"}},
			wantErr: []string{`no server "nosuch"`, `server "files" does not expose a tool "nosuch"`}},
		{name: "no agent", req: api.KeyRequest{AgentID: " "}, wantErr: []string{"agent id is empty"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			e := newEnv(t)
			rev := e.engine.Revision()
			created, err := e.keys.Create(ctx, tc.req, "admin")
			published := e.take()
			engine, stored := e.grantsOf(t, tc.req.AgentID)
			if tc.wantErr != nil {
				if !errors.Is(err, authz.ErrInvalid) {
					t.Fatalf("error %v, want authz.ErrInvalid", err)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				if n := e.keyCount(t); n != 0 || len(engine)+len(stored) > 0 || len(published) > 0 {
					t.Errorf("a refused key left %d keys, grants %v %v, published %v", n, engine, stored, published)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if created.Key == "" || created.AgentID != tc.req.AgentID || created.CreatedBy != "admin" {
				t.Errorf("created %+v", created.KeyView)
			}
			var returned []string
			for _, g := range created.Grants {
				returned = append(returned, g.Server+"/"+g.Tool+" "+strings.Join(g.Actions, ","))
			}
			slices.Sort(returned)
			for what, got := range map[string][]string{"returned": returned, "in the engine": engine, "stored": stored} {
				if diff := cmp.Diff(tc.grants, got); diff != "" {
					t.Errorf("grants %s (-want +got):\n%s", what, diff)
				}
			}
			if n := e.keyCount(t); n != 1 {
				t.Errorf("%d keys stored, want 1", n)
			}
			id, err := e.authn.AuthenticateToken(ctx, created.Key)
			if err != nil || id.AgentID != tc.req.AgentID {
				t.Errorf("the new key authenticates as %+v, %v", id, err)
			}
			wantPub := []string(nil)
			if tc.announce {
				wantPub = []string{"policy/"}
				if e.engine.Revision() == rev {
					t.Error("the engine's revision did not move with the new grants")
				}
			}
			if diff := cmp.Diff(wantPub, published); diff != "" {
				t.Errorf("published (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKeysCreateAtomic checks a key whose grants cannot be stored is not
// stored either.
func TestKeysCreateAtomic(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t)
	// The store refuses every grant from now on.
	raw, err := sql.Open("sqlite", e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.ExecContext(ctx, `CREATE TRIGGER refuse_grants BEFORE INSERT ON mcp_policies
		BEGIN SELECT RAISE(ABORT, 'grants refused'); END`); err != nil {
		t.Fatal(err)
	}
	_, err = e.keys.Create(ctx, api.KeyRequest{AgentID: "bot", DeclaredTools: []string{"docs:echo"}}, "admin")
	if err == nil || !strings.Contains(err.Error(), "grants refused") {
		t.Fatalf("error %v, want the store's refusal", err)
	}
	if n := e.keyCount(t); n != 0 {
		t.Errorf("%d keys stored without their grants", n)
	}
	if p := e.take(); len(p) > 0 {
		t.Errorf("published %v", p)
	}
}

func TestKeysRevoke(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t)
	created, err := e.keys.Create(ctx, api.KeyRequest{AgentID: "bot"}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	// Authenticated once, the key is in the authenticator's cache.
	if _, err := e.authn.AuthenticateToken(ctx, created.Key); err != nil {
		t.Fatal(err)
	}
	e.take()

	if err := e.keys.Revoke(ctx, "k_nosuch"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoking an unknown key: %v, want store.ErrNotFound", err)
	}
	if p := e.take(); len(p) > 0 {
		t.Errorf("a failed revoke published %v", p)
	}
	if _, err := e.authn.AuthenticateToken(ctx, created.Key); err != nil {
		t.Fatalf("a failed revoke of another key affected this one: %v", err)
	}

	if err := e.keys.Revoke(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.authn.AuthenticateToken(ctx, created.Key); err == nil {
		t.Error("the revoked key still authenticates (from the cache)")
	}
	if diff := cmp.Diff([]string{"key/" + identity.HashSecret(created.Key)}, e.take()); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}
	list, err := e.keys.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].RevokedAt == nil {
		t.Errorf("listed %+v, want the key marked revoked", list)
	}
}

// TestPoliciesGrantTarget checks how a grant's tool is resolved when no
// server is given: a namespaced name, a pattern under a prefix (a server's
// own prefix or its name), or the server given apart.
func TestPoliciesGrantTarget(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		server, tool string
		want         string // server/tool; "" for a refusal
	}{
		{"", "d.echo", "docs/echo"},
		{"", "files.echo", "files/echo"},
		{"", "d.*", "docs/*"},
		{"", "docs.*", "docs/*"},
		{"", "files.e*", "files/e*"},
		{"", "d__echo", "docs/echo"}, // the other separator
		{"files", "echo", "files/echo"},
		{"files", "d.echo", "files/d.echo"}, // a server given: the tool is its own name
		{"", "nosuch.tool", "nosuch/tool"},
		{"", "echo", ""},
	}
	for _, tc := range tests {
		t.Run(tc.server+"|"+tc.tool, func(t *testing.T) {
			ctx := t.Context()
			agent := "agent-" + strings.NewReplacer(".", "-", "*", "x", "|", "-").Replace(tc.server+tc.tool)
			res, err := e.pols.Grant(ctx, api.GrantRequest{AgentID: agent, Server: tc.server, Tool: tc.tool}, "admin")
			published := e.take()
			if tc.want == "" {
				if !errors.Is(err, authz.ErrInvalid) {
					t.Fatalf("error %v, want authz.ErrInvalid", err)
				}
				if len(published) > 0 {
					t.Errorf("a refused grant published %v", published)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Grant.Server + "/" + res.Grant.Tool; got != tc.want {
				t.Errorf("granted %s, want %s", got, tc.want)
			}
			engine, stored := e.grantsOf(t, agent)
			if want := []string{tc.want + " invoke"}; !slices.Equal(engine, want) || !slices.Equal(stored, want) {
				t.Errorf("grants in the engine %v, stored %v; want %v", engine, stored, want)
			}
			if !slices.Equal(published, []string{"policy/"}) {
				t.Errorf("published %v, want [policy/]", published)
			}
		})
	}
}

// TestPoliciesTokens checks a token is issued for the resolved target and
// its revocation is announced.
func TestPoliciesTokens(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t)
	res, err := e.pols.IssueToken(ctx, api.TokenRequest{AgentID: "bot", Tool: "d.echo", TTLMinutes: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Token == "" || res.TokenInfo.Server != "docs" || res.TokenInfo.Tool != "echo" {
		t.Errorf("token for %s/%s (secret set: %v), want docs/echo", res.TokenInfo.Server, res.TokenInfo.Tool, res.Token != "")
	}
	if err := e.pols.RevokeToken(ctx, res.TokenInfo.ID); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"policy/"}, e.take()); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}
	tok, err := admin.GrantStore{DB: e.db}.GetToken(ctx, res.TokenInfo.ID)
	if err != nil || !tok.Revoked {
		t.Errorf("stored token %+v, %v; want it revoked", tok, err)
	}
	if err := e.pols.RevokeToken(ctx, "nosuch"); !errors.Is(err, authz.ErrNotFound) {
		t.Errorf("revoking an unknown token: %v, want authz.ErrNotFound", err)
	}
}

// TestStoreAdapters checks the adapters translate the store's sentinel
// errors into those of the packages they serve.
func TestStoreAdapters(t *testing.T) {
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "switchboard.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	gs, ks := admin.GrantStore{DB: db}, admin.KeyStore{DB: db}
	ctx := t.Context()
	tok := authz.Token{ID: "t1", AgentID: "bot", Server: "s", Tool: "t", SingleUse: true,
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := gs.PutToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"unknown key", func() error { _, err := ks.KeyByHash(ctx, "nosuch"); return err }(), identity.ErrNotFound},
		{"unknown grant", gs.DeleteGrant(ctx, "nosuch"), authz.ErrNotFound},
		{"unknown token", func() error { _, err := gs.GetToken(ctx, "nosuch"); return err }(), authz.ErrNotFound},
		{"token used", func() error { _ = gs.UseToken(ctx, "t1", time.Now()); return gs.UseToken(ctx, "t1", time.Now()) }(), authz.ErrTokenUsed},
		{"revoke unknown token", gs.RevokeToken(ctx, "nosuch"), authz.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Errorf("error %v, want %v", tc.err, tc.want)
			}
		})
	}
}

// clock is a resilience.Clock moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestBreakersView checks the breaker view lists every breaker by key,
// with the next attempt of an open one only.
func TestBreakersView(t *testing.T) {
	clk := &clock{now: time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)}
	bs := resilience.NewBreakers(resilience.BreakerSettings{FailureThreshold: 1, Cooldown: time.Minute, Clock: clk})
	call := func(key string, ok bool) {
		t.Helper()
		done, err := bs.Get(key).Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(ok)
	}
	call("c:tool", true)
	call("b:tool", false) // open
	call("a:tool", false) // open, then half open below
	clk.advance(time.Minute)
	if _, err := bs.Get("a:tool").Allow(); err != nil { // a trial call, left in flight
		t.Fatal(err)
	}
	call("b:tool", false) // a failed trial: open again, from now
	opened := clk.Now()

	views, err := admin.Breakers{Set: bs}.Breakers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		Key, Server, Tool, State string
		Failures                 int
		Opened, Next             *time.Time
	}
	var got []view
	for _, v := range views {
		got = append(got, view{v.Key, v.Server, v.Tool, v.State, v.Failures, v.OpenedAt, v.NextAttemptAt})
	}
	firstOpened, next := opened.Add(-time.Minute), opened.Add(time.Minute)
	want := []view{
		{"a:tool", "a", "tool", "HALF_OPEN", 1, &firstOpened, nil},
		{"b:tool", "b", "tool", "OPEN", 2, &opened, &next},
		{"c:tool", "c", "tool", "CLOSED", 0, nil, nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("views (-want +got):\n%s", diff)
	}
}
