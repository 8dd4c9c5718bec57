package upstream_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

const oauthCanary = "oauth-token-canary-51c2"

// authError is an OAuth handler's error that needs an operator.
type authError struct{ reason string }

func (e *authError) Error() string      { return "needs authorization: " + e.reason }
func (e *authError) AuthReason() string { return e.reason }

// fakeOAuth hands out oauthCanary once granted, and fails with an
// authError once refused: an OAuth handler without the OAuth.
type fakeOAuth struct {
	granted atomic.Bool
	refused atomic.Pointer[string]
}

func (f *fakeOAuth) TokenSource(context.Context) (oauth2.TokenSource, error) {
	if r := f.refused.Load(); r != nil {
		return nil, &authError{*r}
	}
	if !f.granted.Load() {
		return nil, nil
	}
	return oauth2.StaticTokenSource(&oauth2.Token{AccessToken: oauthCanary}), nil
}

func (f *fakeOAuth) Authorize(_ context.Context, _ *http.Request, resp *http.Response) error {
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // draining
	resp.Body.Close()
	return &authError{"not authorized yet"}
}

// serveProtected serves the basic fake server over transport, answering
// 401 to requests without oauthCanary.
func serveProtected(t *testing.T, transport string) string {
	t.Helper()
	srv := newBasicServer()
	getServer := func(*http.Request) *mcp.Server { return srv }
	var h http.Handler = mcp.NewStreamableHTTPHandler(getServer, nil)
	if transport == config.TransportSSE {
		h = mcp.NewSSEHandler(getServer, nil)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+oauthCanary {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestNeedsAuth checks the NEEDS_AUTH state: an OAuth handler's
// AuthRequired error, at connect, on a call (on the shared session, or on
// the session a classic client's call opens) or on a health probe, stops
// the server with its reason and without a restart, and an operator's
// connect after the authorization brings it back.
func TestNeedsAuth(t *testing.T) {
	for _, transport := range []string{config.TransportHTTP, config.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			for _, when := range []string{"call", "peer", "probe"} {
				t.Run(when, func(t *testing.T) { testNeedsAuth(t, transport, when) })
			}
		})
	}
}

func testNeedsAuth(t *testing.T, transport, when string) {
	url := serveProtected(t, transport)
	rec := newRecorder()
	logs := &logtest.Buffer{}
	oauth := &fakeOAuth{}
	m := newManager(t, rec, logs, &upstream.Options{
		OAuth:   func(*config.Server) auth.OAuthHandler { return oauth },
		Restart: upstream.RestartPolicy{BackoffInitial: time.Millisecond, BackoffMax: time.Millisecond},
	})
	srv := &config.Server{Name: "remote", Transport: transport, URL: url}
	if when == "probe" {
		srv.HealthCheck = &config.HealthCheck{Interval: config.Seconds(20 * time.Millisecond), Timeout: config.Seconds(time.Second)}
	}
	if err := m.Add(srv); err != nil {
		t.Fatal(err)
	}
	wantNeedsAuth := func(err error, reason string) {
		t.Helper()
		var u *upstream.UnavailableError
		if err != nil && (!errors.As(err, &u) || u.State != upstream.StateNeedsAuth || u.Reason != reason || upstream.Transient(err)) {
			t.Fatalf("error = %v, want NEEDS_AUTH %q, not transient", err, reason)
		}
		st, _ := m.Status("remote")
		if st.State != upstream.StateNeedsAuth || st.LastError != reason || !st.NextRestartAt.IsZero() || st.Callable() {
			t.Fatalf("status = %s %q (restart at %v), want NEEDS_AUTH %q, no restart", st.State, st.LastError, st.NextRestartAt, reason)
		}
	}

	// No grant: the 401 asks the handler, which needs an operator.
	err := m.Connect(t.Context(), "remote")
	if err == nil {
		t.Fatal("connected without a grant")
	}
	wantNeedsAuth(err, "not authorized yet")

	// Authorized: an operator's connect.
	oauth.granted.Store(true)
	if err := m.Connect(t.Context(), "remote"); err != nil {
		t.Fatalf("connect after the authorization: %v", err)
	}
	if _, err := m.CallTool(t.Context(), "remote", &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}

	// The grant is refused: the first call (or probe) that finds out puts
	// the server in NEEDS_AUTH.
	const refused = "the authorization server refused to renew the grant: invalid_grant"
	r := refused
	oauth.refused.Store(&r)
	switch when {
	case "call":
		_, err := m.CallTool(t.Context(), "remote", &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
		if err == nil {
			t.Fatal("a call went through with a refused grant")
		}
		wantNeedsAuth(err, refused)
	case "peer":
		// A classic client's call opens its own session first: the
		// refusal comes from that session's initialize.
		ctx := upstream.WithPeer(t.Context(), newPeer("after-refusal", allCaps))
		_, err := m.CallTool(ctx, "remote", &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
		if err == nil {
			t.Fatal("a call went through with a refused grant")
		}
		wantNeedsAuth(err, refused)
	case "probe":
		rec.waitFor(t, "NEEDS_AUTH", func() bool {
			st, _ := m.Status("remote")
			return st.State == upstream.StateNeedsAuth
		})
		wantNeedsAuth(nil, refused)
	}
	steps := rec.steps("remote")
	if want := "CONNECTED>NEEDS_AUTH"; steps[len(steps)-1] != want || slices.Contains(steps, "CONNECTED>ERROR") {
		t.Errorf("transitions %v, want the last %s and no ERROR", steps, want)
	}
	if _, err := m.CallTool(t.Context(), "remote", &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); !strings.Contains(err.Error(), "NEEDS_AUTH") {
		t.Errorf("a call to a NEEDS_AUTH server: %v", err)
	}

	oauth.refused.Store(nil)
	if err := m.Connect(t.Context(), "remote"); err != nil {
		t.Fatalf("connect after the new authorization: %v", err)
	}
	if st, _ := m.Status("remote"); st.State != upstream.StateConnected || st.Restarts != 0 {
		t.Errorf("status %s after %d restarts, want CONNECTED after none", st.State, st.Restarts)
	}
	if strings.Contains(logs.String(), oauthCanary) {
		t.Error("the token is in the log")
	}
}
