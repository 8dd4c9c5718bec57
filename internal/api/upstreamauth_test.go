package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// fakeUpstreamAuth authorizes "demo" and knows no other server.
type fakeUpstreamAuth struct {
	started []string
	has     bool
}

func (f *fakeUpstreamAuth) flow(server string) (UpstreamAuthFlow, error) {
	if !f.has {
		return UpstreamAuthFlow{}, fmt.Errorf("server %q: %w", server, ErrNoUpstreamAuth)
	}
	return UpstreamAuthFlow{Server: server, State: FlowPending, AuthorizationURL: "https://as.example/authorize"}, nil
}

func (f *fakeUpstreamAuth) StartAuth(_ context.Context, server string) (UpstreamAuthFlow, error) {
	f.started = append(f.started, server)
	return f.flow(server)
}

func (f *fakeUpstreamAuth) AuthStatus(_ context.Context, server string) (UpstreamAuthFlow, error) {
	return f.flow(server)
}

// TestUpstreamAuthRoutes: POST starts (admins only, audited), GET reads;
// the server is resolved by id or name first; a gateway or server without
// upstream OAuth answers 404 upstream_auth_not_configured.
func TestUpstreamAuthRoutes(t *testing.T) {
	tests := []struct {
		name     string
		auth     *fakeUpstreamAuth // nil: Options.UpstreamAuth unset
		method   string
		path     string
		agent    bool
		wantCode int
		wantErr  string
		wantOps  []string
	}{
		{"start by id", &fakeUpstreamAuth{has: true}, "POST", "/api/v1/aggregator/servers/id-1/auth", false, 200, "", []string{"server.auth server=demo by=root err=false: upstream OAuth authorization started"}},
		{"status", &fakeUpstreamAuth{has: true}, "GET", "/api/v1/aggregator/servers/demo/auth", false, 200, "", nil},
		{"agent refused", &fakeUpstreamAuth{has: true}, "POST", "/api/v1/aggregator/servers/demo/auth", true, 403, "forbidden", nil},
		{"unknown server", &fakeUpstreamAuth{has: true}, "GET", "/api/v1/aggregator/servers/nope/auth", false, 404, CodeServerNotFound, nil},
		{"server without auth", &fakeUpstreamAuth{}, "POST", "/api/v1/aggregator/servers/demo/auth", false, 404, CodeUpstreamAuthOff, []string{"server.auth server=demo by=root err=true: upstream OAuth authorization started"}},
		{"gateway without upstream auth", nil, "GET", "/api/v1/aggregator/servers/demo/auth", false, 404, CodeUpstreamAuthOff, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops := &opLog{}
			o := &Options{Operation: ops.record}
			if tc.auth != nil {
				o.UpstreamAuth = tc.auth
			}
			h := New(&fakeServers{}, catalog.New(nil), &fakeCaller{}, o)
			id := &adminID
			if tc.agent {
				id = &agentA
			}
			rec := httptest.NewRecorder()
			as(h, id).ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			var out map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if rec.Code != tc.wantCode || (tc.wantErr != "" && errCode(out) != tc.wantErr) {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if tc.wantErr == "" && (out["state"] != FlowPending || out["authorization_url"] != "https://as.example/authorize" || out["server"] != "demo") {
				t.Errorf("answer %s", rec.Body)
			}
			if diff := cmp.Diff(tc.wantOps, ops.ops); diff != "" {
				t.Errorf("operations (-want +got):\n%s", diff)
			}
		})
	}
}
