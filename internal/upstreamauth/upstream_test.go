package upstreamauth_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstreamauth"
)

// gateway is an upstream connector with one OAuth-protected server, as the
// gateway builds it: the Authorizer has no browser, an operator's flows
// come back through Callbacks.
type gateway struct {
	m     *upstream.Manager
	a     *upstreamauth.Authorizer
	cb    *callbackServer
	flows *upstreamauth.Flows
	db    *store.DB
	dbDir string
	logs  *logtest.Buffer

	mu          sync.Mutex
	transitions []upstream.Transition
}

func newGateway(t *testing.T, rs *resourceServer, spec upstreamauth.Spec, clk *clock) *gateway {
	t.Helper()
	return newGatewayOn(t, rs, config.TransportHTTP, rs.URL(), spec, clk)
}

func newGatewayOn(t *testing.T, rs *resourceServer, transport, serverURL string, spec upstreamauth.Spec, clk *clock) *gateway {
	t.Helper()
	g := &gateway{cb: newCallbackServer(t), logs: &logtest.Buffer{}, dbDir: t.TempDir()}
	logger := slog.New(slog.NewJSONHandler(g.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	db, err := store.Open(t.Context(), filepath.Join(g.dbDir, "switchboard.db"), &store.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	g.db = db
	t.Cleanup(func() { db.Close() })
	g.a = newAuthorizer(t, serverURL, spec, &upstreamauth.Options{Store: db, Keyring: testKeyring(t),
		RedirectURL: g.cb.redirect, Logger: logger, Now: clk.Now})
	g.flows = upstreamauth.NewFlows(g.cb.cb, time.Minute, nil)
	t.Cleanup(g.flows.Close)
	g.m = upstream.NewManager(&upstream.Options{
		Logger:         logger,
		ConnectTimeout: 20 * time.Second,
		Restart:        upstream.RestartPolicy{BackoffInitial: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond},
		OAuth:          func(*config.Server) auth.OAuthHandler { return g.a },
		OnTransition: func(tr upstream.Transition) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.transitions = append(g.transitions, tr)
		},
	})
	t.Cleanup(func() { g.m.Close(context.Background()) })
	if err := g.m.Add(&config.Server{Name: "srv", Transport: transport, URL: serverURL}); err != nil {
		t.Fatal(err)
	}
	return g
}

// authorize is the operator's `servers auth srv`: start the flow, approve
// in the "browser", wait for the grant, reconnect.
func (g *gateway) authorize(t *testing.T) {
	t.Helper()
	f, err := g.flows.Start(t.Context(), g.a)
	if err != nil {
		t.Fatal(err)
	}
	if f.URL == "" {
		t.Fatal("the flow has no URL to open")
	}
	if err := upstreamauth.Headless(&http.Client{Timeout: 10 * time.Second}, g.cb.redirect)(t.Context(), f.URL); err != nil {
		t.Fatal(err)
	}
	if err := f.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := g.m.Connect(t.Context(), "srv"); err != nil {
		t.Fatalf("connect after the authorization: %v", err)
	}
}

func (g *gateway) status(t *testing.T) upstream.Status {
	t.Helper()
	st, err := g.m.Status("srv")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (g *gateway) states() []upstream.State {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []upstream.State
	for _, tr := range g.transitions {
		out = append(out, tr.To)
	}
	return out
}

func (g *gateway) call(t *testing.T) (*mcp.CallToolResult, error) {
	t.Helper()
	return g.m.CallTool(t.Context(), "srv", &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
}

// wantNeedsAuth checks that err and the status say NEEDS_AUTH with a
// reason saying want, and that no restart is planned.
func (g *gateway) wantNeedsAuth(t *testing.T, err error, want string) {
	t.Helper()
	var u *upstream.UnavailableError
	if !errors.As(err, &u) || u.State != upstream.StateNeedsAuth || !strings.Contains(u.Reason, want) {
		t.Fatalf("error = %v, want NEEDS_AUTH saying %q", err, want)
	}
	if upstream.Transient(err) {
		t.Error("NEEDS_AUTH is reported transient: callers would retry it")
	}
	st := g.status(t)
	if st.State != upstream.StateNeedsAuth || !strings.Contains(st.LastError, want) || !st.NextRestartAt.IsZero() {
		t.Fatalf("status = %s %q (restart at %v), want NEEDS_AUTH saying %q and no restart", st.State, st.LastError, st.NextRestartAt, want)
	}
}

// TestGatewayOAuthLifecycle runs the life of an OAuth-protected upstream
// in the gateway: not authorized (NEEDS_AUTH, no restarts), authorized by
// an operator's flow, a refresh before expiry on a call, revoked at the
// authorization server (NEEDS_AUTH with its reason on the very call that
// found out), authorized again and CONNECTED without restarting anything.
// Then no token, refresh token or client secret is in the logs, the
// errors, the statuses or the SQLite files.
func TestGatewayOAuthLifecycle(t *testing.T) {
	as := newFakeAS(t)
	rs := newResourceServer(t, as)
	clk := newClock()
	start := clk.Now()
	const clientSecret = "pre-registered-secret-7d1e"
	g := newGateway(t, rs, upstreamauth.Spec{ClientID: "pre-client", ClientSecret: clientSecret}, clk)
	var texts []string // everything shown to a person

	// Never authorized: NEEDS_AUTH saying how to authorize.
	err := g.m.Connect(t.Context(), "srv")
	g.wantNeedsAuth(t, err, "switchboard servers auth srv")
	texts = append(texts, err.Error())

	g.authorize(t)
	if res, err := g.call(t); err != nil || res.IsError {
		t.Fatalf("call after authorizing: %v %v", res, err)
	}
	if authorizes, _, _ := as.counts(); authorizes != 1 {
		t.Errorf("%d authorization requests, want 1", authorizes)
	}

	// Within the refresh margin (60 s by default) of the hour-long token:
	// the call refreshes first and goes through.
	clk.set(start, time.Hour-30*time.Second)
	if res, err := g.call(t); err != nil || res.IsError {
		t.Fatalf("call in the refresh margin: %v %v", res, err)
	}
	if _, refreshes, _ := as.counts(); refreshes != 1 {
		t.Errorf("%d refreshes, want 1", refreshes)
	}

	// Revoked at the authorization server: the resource server refuses
	// the token, the refresh is refused, the call says why and the server
	// is NEEDS_AUTH.
	as.revoke("access revoked by the identity provider")
	_, err = g.call(t)
	g.wantNeedsAuth(t, err, "access revoked by the identity provider")
	texts = append(texts, err.Error(), g.status(t).LastError)
	// A second call does not go out: the server is not serving.
	calls := rs.callCount()
	if _, err := g.call(t); err == nil {
		t.Fatal("a call went through to a NEEDS_AUTH server")
	}
	if rs.callCount() != calls {
		t.Error("the upstream ran a call while NEEDS_AUTH")
	}

	// Authorized again: CONNECTED, same Manager, same process.
	g.authorize(t)
	if res, err := g.call(t); err != nil || res.IsError {
		t.Fatalf("call after authorizing again: %v %v", res, err)
	}
	if st := g.status(t); st.State != upstream.StateConnected || st.Restarts != 0 {
		t.Errorf("status = %s after %d restarts, want CONNECTED after none", st.State, st.Restarts)
	}
	if slices.Contains(g.states(), upstream.StateError) {
		t.Errorf("the server went through ERROR: %v", g.states())
	}
	want := []upstream.State{
		upstream.StateConnecting, upstream.StateNeedsAuth, // not authorized
		upstream.StateConnecting, upstream.StateConnected, // authorized
		upstream.StateNeedsAuth,                           // revoked
		upstream.StateConnecting, upstream.StateConnected, // authorized again
	}
	if got := g.states(); !slices.Equal(got, want) {
		t.Errorf("transitions %v, want %v", got, want)
	}
	for _, tr := range g.transitions {
		texts = append(texts, tr.Error)
	}

	// No secret in clear anywhere.
	if err := g.m.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := g.db.Close(); err != nil {
		t.Fatal(err)
	}
	secrets := append(as.secrets(), clientSecret)
	if len(secrets) < 5 {
		t.Fatalf("only %d secrets issued: the test is wrong", len(secrets))
	}
	places := map[string]string{"logs": g.logs.String(), "errors and statuses": strings.Join(texts, "\n")}
	files, _ := filepath.Glob(filepath.Join(g.dbDir, "switchboard.db*"))
	if len(files) == 0 {
		t.Fatal("no SQLite file to check")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		places[filepath.Base(f)] = string(b)
	}
	if !strings.Contains(places["logs"], "upstream token refreshed") {
		t.Error("the logs do not record the refresh: the test looks at the wrong log")
	}
	for where, text := range places {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("a secret (%.6s...) is in clear in the %s", s, where)
			}
		}
	}
}

// TestBadMetadataOnStatus checks that discovery's error reaches the
// server's status, and the gateway does not keep retrying it.
func TestBadMetadataOnStatus(t *testing.T) {
	as := newFakeAS(t)
	as.issuerOver = "https://attacker.example.com"
	rs := newResourceServer(t, as)
	g := newGateway(t, rs, upstreamauth.Spec{}, newClock())
	err := g.m.Connect(t.Context(), "srv")
	g.wantNeedsAuth(t, err, `metadata issuer "https://attacker.example.com" does not match`)
	// The operator's flow fails before it has a URL to open, and says why.
	f, err := g.flows.Start(t.Context(), g.a)
	if err == nil || f.URL != "" || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("flow = %+v, %v; want an error and no URL", f, err)
	}
	if _, _, n := as.counts(); n != 0 {
		t.Errorf("%d token requests", n)
	}
}

// TestFlowsClientCredentials checks that an operator's flow for a client
// credentials grant needs no browser: it ends with the grant stored.
func TestFlowsClientCredentials(t *testing.T) {
	as := newFakeAS(t)
	rs := newResourceServer(t, as)
	g := newGateway(t, rs, ccSpec(as), newClock())
	f, err := g.flows.Start(t.Context(), g.a)
	if err != nil || f.URL != "" {
		t.Fatalf("flow = %+v, %v; want done without a URL", f, err)
	}
	if err := f.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := g.m.Connect(t.Context(), "srv"); err != nil {
		t.Fatal(err)
	}
	if res, err := g.call(t); err != nil || res.IsError {
		t.Fatalf("call: %v %v", res, err)
	}
	if got, ok := g.flows.Get("srv"); !ok || got != f {
		t.Errorf("Get = %v, %v", got, ok)
	}
}

// TestGatewaySSE checks a legacy SSE upstream, whose transport takes no
// OAuth handler: not authorized, it is NEEDS_AUTH too; authorized, its
// stream and its messages carry the token.
func TestGatewaySSE(t *testing.T) {
	as := newFakeAS(t)
	rs := newResourceServer(t, as)
	g := newGatewayOn(t, rs, config.TransportSSE, rs.srv.URL+"/sse", upstreamauth.Spec{}, newClock())
	err := g.m.Connect(t.Context(), "srv")
	g.wantNeedsAuth(t, err, "switchboard servers auth srv")
	g.authorize(t)
	if res, err := g.call(t); err != nil || res.IsError {
		t.Fatalf("call: %v %v", res, err)
	}
	if st := g.status(t); st.State != upstream.StateConnected {
		t.Errorf("status %s", st.State)
	}
}
