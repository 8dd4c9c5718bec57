//go:build unix

package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/authserver/authservertest"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/web"
)

// noServers is a registry without servers: the OAuth page needs none,
// and the app does not wire the authorization server in yet, so this
// test serves the API itself. Methods other than List and Get are not
// called (the embedded nil interface would panic).
type noServers struct{ api.Servers }

func (noServers) List(context.Context) ([]api.Server, error) { return []api.Server{}, nil }
func (noServers) Get(_ context.Context, id string) (api.Server, error) {
	return api.Server{}, &api.Error{Status: http.StatusNotFound, Code: api.CodeServerNotFound, Message: "server " + id + " not found"}
}

// TestOAuthPageInBrowser drives the dashboard's OAuth page in headless
// Chromium against the API with a real authorization server (see
// testdata/oauth.cjs): it lists the clients and grants made by the whole
// flow, revokes a grant and deletes a client through the buttons. Then
// the revoked grant's refresh token and the deleted client's are refused,
// and another user's still works; the page never showed a secret.
func TestOAuthPageInBrowser(t *testing.T) {
	browserDeps(t)
	as := authservertest.New(t)
	desktop := as.Register(t, "Claude Desktop", true)
	as.Advance(time.Second) // clients are listed by their creation second
	remote := as.Register(t, "mcp-remote", false)
	aliceDesktop := as.Authorize(t, desktop, "alice")
	bob := as.Authorize(t, remote, "bob")
	aliceRemote := as.Authorize(t, remote, "alice")

	const adminKey = "sbk_oauth_page_admin"
	h := api.New(noServers{}, catalog.New(nil), nil, &api.Options{OAuth: as.Server})
	mux := http.NewServeMux()
	mux.Handle(web.Prefix, web.Handler())
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A stand-in for the app's authentication: one admin key.
		if r.Header.Get("Authorization") != "Bearer "+adminKey {
			api.WriteError(w, &api.Error{Status: http.StatusUnauthorized, Code: "missing_credentials", Message: "authentication required"})
			return
		}
		id := authz.Identity{ID: "admin-key", AgentID: "ops", Admin: true, Method: "key"}
		h.ServeHTTP(w, r.WithContext(authz.WithIdentity(r.Context(), id)))
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	artifacts := runScript(t, "oauth", srv.URL, adminKey,
		"OAUTH_DESKTOP="+desktop.ID, "OAUTH_REMOTE="+remote.ID,
		"OAUTH_GRANT_ALICE_REMOTE="+aliceRemote.GrantID(t), "OAUTH_GRANT_BOB="+bob.GrantID(t))

	if _, err := as.Refresh(t, remote, aliceRemote.RefreshToken); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("the grant revoked in the dashboard still refreshes: %v", err)
	}
	if err := as.CheckToken(t.Context(), aliceRemote.Claims(t)); err == nil {
		t.Error("the grant revoked in the dashboard still has its access token accepted")
	}
	if _, err := as.Refresh(t, desktop, aliceDesktop.RefreshToken); err == nil {
		t.Error("the client deleted in the dashboard still refreshes")
	}
	if _, err := as.Refresh(t, remote, bob.RefreshToken); err != nil {
		t.Errorf("bob's grant fell too: %v", err)
	}

	// What the page showed holds no secret: not the client secret, no
	// token, no hash of either.
	html, err := os.ReadFile(filepath.Join(artifacts, "oauth.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{desktop.Secret, aliceDesktop.RefreshToken, bob.RefreshToken, aliceRemote.RefreshToken, aliceRemote.AccessToken} {
		sum := sha256.Sum256([]byte(s))
		if strings.Contains(string(html), s) || strings.Contains(string(html), hex.EncodeToString(sum[:])) {
			t.Errorf("the page shows a secret or its hash (%.10s…)", s)
		}
	}
	if !strings.Contains(string(html), remote.ID) {
		t.Error("the saved page is not the OAuth page")
	}
}
