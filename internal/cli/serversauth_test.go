package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/api"
)

// TestServersAuth runs `servers auth` against a fake API: the URL is
// printed, the flow polled until it ends, and its end decides the exit
// code.
func TestServersAuth(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	done := api.UpstreamAuthFlow{Server: "gh", State: api.FlowDone, AuthorizationURL: "https://as.example/authorize?x=1",
		Grant: api.UpstreamGrant{Authorized: true, Type: "authorization_code", Issuer: "https://as.example", ExpiresAt: &exp,
			Refreshable: true, Scopes: []string{"repo"}}}
	pending := done
	pending.State, pending.Grant = api.FlowPending, api.UpstreamGrant{}
	failed := pending
	failed.State, failed.Error = api.FlowFailed, "the authorization server refused: access_denied"
	tests := []struct {
		name     string
		polls    []api.UpstreamAuthFlow // answers of POST, then of each GET
		status   int                    // of POST; 0 = 200
		args     []string
		wantCode int
		wantOut  []string
		wantErr  string
	}{
		{name: "approved", polls: []api.UpstreamAuthFlow{pending, pending, done}, wantCode: ExitOK,
			wantOut: []string{"Open this URL in a browser to authorize gh:", "https://as.example/authorize?x=1",
				"gh: authorized (authorization_code) by https://as.example, scopes repo, access token valid until", "renewed before it expires"}},
		{name: "refused", polls: []api.UpstreamAuthFlow{pending, failed}, wantCode: ExitFailure,
			wantErr: "gh: authorization failed: the authorization server refused: access_denied"},
		{name: "no wait", polls: []api.UpstreamAuthFlow{pending}, args: []string{"--no-wait"}, wantCode: ExitOK,
			wantOut: []string{"https://as.example/authorize?x=1"}},
		{name: "no auth configured", status: http.StatusNotFound, wantCode: ExitFailure, wantErr: "has no OAuth client"},
	}
	old := authPollInterval
	authPollInterval = time.Millisecond
	t.Cleanup(func() { authPollInterval = old })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				if r.URL.Path != "/api/v1/aggregator/servers/gh/auth" || (n == 0) != (r.Method == http.MethodPost) {
					http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				if tc.status != 0 {
					w.WriteHeader(tc.status)
					_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": api.CodeUpstreamAuthOff,
						"message": `server "gh" has no OAuth client configured`}})
					return
				}
				f := tc.polls[min(n, len(tc.polls)-1)]
				n++
				_ = json.NewEncoder(w).Encode(f)
			}))
			defer srv.Close()
			code, out, errOut := run(t, append([]string{"servers", "auth", "gh", "--url", srv.URL}, tc.args...)...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.wantCode, out, errOut)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantErr, errOut)
			}
		})
	}
}
