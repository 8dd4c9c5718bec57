package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// fakeAccounts keeps the callers' credentials of server "demo" (the
// per_user one) in the clear, for the routes' bookkeeping only.
type fakeAccounts struct {
	fakeUpstreamAuth
	creds  map[string]PersonalCredential // by subject
	shared bool                          // demo has no per_user
}

func (f *fakeAccounts) check(server string) error {
	if server != "demo" || f.shared {
		return fmt.Errorf("server %q: %w", server, ErrNotPerUser)
	}
	return nil
}

func (f *fakeAccounts) StartUserAuth(_ context.Context, server, subject string) (UpstreamAuthFlow, error) {
	if err := f.check(server); err != nil {
		return UpstreamAuthFlow{}, err
	}
	return UpstreamAuthFlow{Server: server, State: FlowPending, AuthorizationURL: "https://as.example/authorize?for=" + subject}, nil
}

func (f *fakeAccounts) UserAuthStatus(_ context.Context, server, subject string) (UpstreamAuthFlow, error) {
	if err := f.check(server); err != nil {
		return UpstreamAuthFlow{}, err
	}
	_, ok := f.creds[subject]
	return UpstreamAuthFlow{Server: server, State: FlowNone, Grant: UpstreamGrant{Authorized: ok}}, nil
}

func (f *fakeAccounts) PutPersonalCredential(_ context.Context, server, subject string, c PersonalCredential) error {
	if err := f.check(server); err != nil {
		return err
	}
	f.creds[subject] = c
	return nil
}

func (f *fakeAccounts) Unlink(_ context.Context, server, subject string) error {
	delete(f.creds, subject)
	return nil
}

func (f *fakeAccounts) LinkedAccounts(_ context.Context, server, subject string) ([]LinkedAccount, error) {
	var out []LinkedAccount
	for s, c := range f.creds {
		if subject == "" || s == subject {
			out = append(out, LinkedAccount{Server: "demo", Subject: s, Kind: c.Type})
		}
	}
	return out, nil
}

// TestAccountRoutes: each caller links, reads and unlinks their own
// account (audited); a server without per_user answers 404 not_per_user;
// an agent may not touch a server it may not use, nor list or delete
// others' accounts; an admin may list and delete, and the answers never
// carry the credential.
func TestAccountRoutes(t *testing.T) {
	tests := []struct {
		name     string
		id       *authz.Identity
		method   string
		path     string
		body     string
		wantCode int
		wantErr  string
		wantOps  []string
	}{
		{"connect", &agentA, "POST", "/api/v1/me/accounts/demo/connect", "", 200, "",
			[]string{"account.connect server=demo by=agent-a err=false: linking the account of agent-a started"}},
		{"status", &agentA, "GET", "/api/v1/me/accounts/demo", "", 200, "", nil},
		{"store a token", &agentA, "PUT", "/api/v1/me/accounts/demo", `{"type":"bearer","token":"tok-secret-1"}`, 204, "",
			[]string{"account.credential server=demo by=agent-a err=false: personal credential of agent-a stored"}},
		{"a bad body", &agentA, "PUT", "/api/v1/me/accounts/demo", `{"type":`, 400, "", nil},
		{"unknown server", &agentA, "GET", "/api/v1/me/accounts/nope", "", 404, CodeServerNotFound, nil},
		{"my list", &agentA, "GET", "/api/v1/me/accounts", "", 200, "", nil},
		{"agent lists others", &agentA, "GET", "/api/v1/aggregator/servers/demo/accounts", "", 403, "forbidden", nil},
		{"agent deletes others", &agentA, "DELETE", "/api/v1/aggregator/servers/demo/accounts/agent-b", "", 403, "forbidden", nil},
		{"admin lists", &adminID, "GET", "/api/v1/aggregator/servers/demo/accounts", "", 200, "", nil},
		{"admin deletes", &adminID, "DELETE", "/api/v1/aggregator/servers/demo/accounts/agent-a", "", 204, "",
			[]string{"account.unlink server=demo by=root err=false: account of agent-a deleted by an administrator"}},
		{"unlink", &agentA, "DELETE", "/api/v1/me/accounts/demo", "", 204, "",
			[]string{"account.unlink server=demo by=agent-a err=false: account of agent-a unlinked"}},
	}
	acc := &fakeAccounts{fakeUpstreamAuth: fakeUpstreamAuth{has: true}, creds: map[string]PersonalCredential{"agent-b": {Type: "basic", Password: "pw-secret-2"}}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops := &opLog{}
			h := New(&fakeServers{}, catalog.New(nil), &fakeCaller{}, &Options{Operation: ops.record, UpstreamAuth: acc})
			rec := httptest.NewRecorder()
			as(h, tc.id).ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
			if rec.Code != tc.wantCode {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if tc.wantErr != "" {
				var out map[string]any
				if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || errCode(out) != tc.wantErr {
					t.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
			for _, secret := range []string{"tok-secret-1", "pw-secret-2"} {
				if strings.Contains(rec.Body.String(), secret) {
					t.Errorf("the answer carries a credential: %s", rec.Body)
				}
			}
			if diff := cmp.Diff(tc.wantOps, ops.ops); diff != "" {
				t.Errorf("operations (-want +got):\n%s", diff)
			}
		})
	}
	if _, ok := acc.creds["agent-a"]; ok {
		t.Error("agent-a's credential is still there after the unlink")
	}

	// A server without per_user, and a gateway that links no accounts.
	h := New(&fakeServers{}, catalog.New(nil), &fakeCaller{}, &Options{UpstreamAuth: &fakeAccounts{creds: map[string]PersonalCredential{}, shared: true}})
	rec := httptest.NewRecorder()
	as(h, &agentA).ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/me/accounts/demo/connect", nil))
	if rec.Code != 404 || !strings.Contains(rec.Body.String(), CodeNotPerUser) {
		t.Errorf("a server without per_user: %d %s", rec.Code, rec.Body)
	}
	h = New(&fakeServers{}, catalog.New(nil), &fakeCaller{}, &Options{UpstreamAuth: acc,
		ServerVisible: func(authz.Identity, string) bool { return false }})
	rec = httptest.NewRecorder()
	as(h, &agentA).ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/me/accounts/demo/connect", nil))
	if rec.Code != 403 {
		t.Errorf("a server the agent may not use: %d %s", rec.Code, rec.Body)
	}
	h = New(&fakeServers{}, catalog.New(nil), &fakeCaller{}, &Options{UpstreamAuth: &fakeUpstreamAuth{}})
	rec = httptest.NewRecorder()
	as(h, &agentA).ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/me/accounts", nil))
	if rec.Code != 501 || !strings.Contains(rec.Body.String(), CodeNotConfigured) {
		t.Errorf("no per-user accounts: %d %s", rec.Code, rec.Body)
	}
}
