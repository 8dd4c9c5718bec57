//go:build unix

package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/upstreamauth"
	"github.com/switchboard-mcp/switchboard/internal/web"
)

// perUserServers is a registry with one server, crm, with credentials:
// per_user; the server page's other panels get empty answers.
type perUserServers struct{ api.Servers }

var crm = api.Server{ID: "crm", Name: "crm", TransportType: "HTTP", Source: "config", Status: "CONNECTED", Credentials: config.CredentialsPerUser}

func (perUserServers) List(context.Context) ([]api.Server, error) { return []api.Server{crm}, nil }
func (perUserServers) Get(_ context.Context, id string) (api.Server, error) {
	if id != "crm" {
		return api.Server{}, &api.Error{Status: http.StatusNotFound, Code: api.CodeServerNotFound, Message: "server " + id + " not found"}
	}
	return crm, nil
}
func (perUserServers) History(context.Context, string, int) ([]api.ConnectionEvent, error) {
	return nil, nil
}
func (perUserServers) Logs(context.Context, string, int) ([]string, error) { return nil, nil }

// TestAccountPanelInBrowser drives the "Your account" panel of a
// per_user server in headless Chromium (testdata/accounts.cjs) against the
// API with the real per-user store (upstreamauth.Set, sealed with a
// keyring): alice stores a personal token through the form and sees it
// linked, never shown; the admin sees who linked what kind and deletes
// alice's credential, which is then gone from the store; "Link my
// account" answers on the page. No page the script saved shows the token.
func TestAccountPanelInBrowser(t *testing.T) {
	browserDeps(t)
	kr, err := secrets.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	mem := upstreamauth.NewMemoryStore()
	def := &config.Server{Name: "crm", Transport: "http", URL: "http://127.0.0.1:1/mcp", Credentials: config.CredentialsPerUser}
	set := upstreamauth.NewSet(upstreamauth.SetOptions{PublicURL: "http://127.0.0.1:1",
		Authorizer: upstreamauth.Options{Keyring: kr, Store: mem},
		Definition: func(n string) (*config.Server, error) {
			if n == "crm" {
				return def, nil
			}
			return nil, nil
		}})
	t.Cleanup(set.Close)

	const adminKey, aliceKey = "sbk_accounts_admin", "sbk_accounts_alice"
	const token = "alice-personal-token-4f9c2e81"
	h := api.New(perUserServers{}, catalog.New(nil), nil, &api.Options{UpstreamAuth: set})
	mux := http.NewServeMux()
	mux.Handle(web.Prefix, web.Handler())
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id authz.Identity
		switch r.Header.Get("Authorization") {
		case "Bearer " + adminKey:
			id = authz.Identity{ID: "admin-key", AgentID: "ops", Admin: true, Method: "key"}
		case "Bearer " + aliceKey:
			id = authz.Identity{ID: "key:alice", AgentID: "alice", Method: "key"}
		default:
			api.WriteError(w, &api.Error{Status: http.StatusUnauthorized, Code: "missing_credentials", Message: "authentication required"})
			return
		}
		h.ServeHTTP(w, r.WithContext(authz.WithIdentity(r.Context(), id)))
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	artifacts := runScript(t, "accounts", srv.URL, adminKey, "ACCOUNTS_USER_KEY="+aliceKey, "ACCOUNTS_TOKEN="+token)

	if rows, err := mem.UserUpstreamTokens(t.Context(), "crm", ""); err != nil || len(rows) != 0 {
		t.Errorf("after the admin's delete the store holds %d credentials (%v)", len(rows), err)
	}
	for _, name := range []string{"accounts-user.html", "accounts-admin.html"} {
		html, err := os.ReadFile(filepath.Join(artifacts, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(html), "Your account") {
			t.Errorf("%s is not the server page with its account panel", name)
		}
		if strings.Contains(string(html), token) {
			t.Errorf("%s shows the personal token", name)
		}
	}
}
