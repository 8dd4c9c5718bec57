package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/authserver/authservertest"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// TestOAuthAdmin drives the /api/v1/oauth routes against a real
// authorization server on SQLite: clients registered through its
// registration endpoint, grants made by the whole flow. A revoked grant's
// refresh token and access token stop working; a deleted client takes its
// grants along; the listings never carry a secret or a hash of one.
func TestOAuthAdmin(t *testing.T) {
	srv := authservertest.New(t)
	desktop := srv.Register(t, "Desktop App", true)
	srv.Advance(time.Second) // clients are listed by their creation second
	editor := srv.Register(t, "Editor", false)
	aliceDesktop := srv.Authorize(t, desktop, "alice")
	bobEditor := srv.Authorize(t, editor, "bob")
	aliceEditor := srv.Authorize(t, editor, "alice")

	ops := &opLog{}
	h := New(&fakeServers{}, catalog.New(nil), &fakeCaller{}, &Options{OAuth: srv.Server, Operation: ops.record})
	do := func(t *testing.T, id *authz.Identity, method, path string) (int, []byte) {
		t.Helper()
		req := httptest.NewRequest(method, path, nil)
		rec := httptest.NewRecorder()
		as(h, id).ServeHTTP(rec, req)
		return rec.Code, rec.Body.Bytes()
	}
	grants := func(t *testing.T, query string) OAuthGrantList {
		t.Helper()
		st, body := do(t, &adminID, "GET", "/api/v1/oauth/grants"+query)
		if st != 200 {
			t.Fatalf("grants%s: %d %s", query, st, body)
		}
		var l OAuthGrantList
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatal(err)
		}
		if l.Total != len(l.Grants) {
			t.Errorf("total %d for %d grants", l.Total, len(l.Grants))
		}
		return l
	}
	clients := func(t *testing.T) (OAuthClientList, []byte) {
		t.Helper()
		st, body := do(t, &adminID, "GET", "/api/v1/oauth/clients")
		if st != 200 {
			t.Fatalf("clients: %d %s", st, body)
		}
		var l OAuthClientList
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatal(err)
		}
		return l, body
	}

	t.Run("clients", func(t *testing.T) {
		l, body := clients(t)
		type row struct {
			ID, Name, Kind, AuthMethod string
			Confidential               bool
			Active                     int
		}
		var got []row
		for _, c := range l.Clients {
			got = append(got, row{c.ID, c.Name, c.Kind, c.AuthMethod, c.Confidential, c.ActiveGrants})
			if !slices.Equal(c.RedirectURIs, []string{"http://127.0.0.1/callback"}) || c.CreatedAt.IsZero() {
				t.Errorf("client %s: redirect URIs %v, created %v", c.ID, c.RedirectURIs, c.CreatedAt)
			}
		}
		want := []row{
			{desktop.ID, "Desktop App", "dynamic", "client_secret_post", true, 1},
			{editor.ID, "Editor", "dynamic", "none", false, 2},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("clients (-want +got):\n%s", diff)
		}
		if l.Total != 2 {
			t.Errorf("total = %d", l.Total)
		}
		noSecrets(t, srv, body, desktop.Secret)
	})

	t.Run("grants and filters", func(t *testing.T) {
		all := grants(t, "")
		type row struct{ Client, Subject, Identity, Scope string }
		var got []row
		for _, g := range all.Grants {
			got = append(got, row{g.ClientName, g.Subject, g.IdentityID, g.Scope})
			if !g.Active || g.RevokedAt != nil || g.Resource != srv.URL+"/mcp" {
				t.Errorf("grant %s: active %v, revoked %v, resource %q", g.ID, g.Active, g.RevokedAt, g.Resource)
			}
		}
		// Newest first.
		want := []row{{"Editor", "alice", "key:alice", "mcp"}, {"Editor", "bob", "key:bob", "mcp"}, {"Desktop App", "alice", "key:alice", "mcp"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("grants (-want +got):\n%s", diff)
		}
		for _, tc := range []struct {
			query string
			want  []string // grant IDs
		}{
			{"?subject=alice", []string{aliceEditor.GrantID(t), aliceDesktop.GrantID(t)}},
			{"?client_id=" + desktop.ID, []string{aliceDesktop.GrantID(t)}},
			{"?subject=alice&client_id=" + editor.ID, []string{aliceEditor.GrantID(t)}},
			{"?subject=carol", nil},
			{"?active=true&limit=2", []string{aliceEditor.GrantID(t), bobEditor.GrantID(t)}},
		} {
			var ids []string
			for _, g := range grants(t, tc.query).Grants {
				ids = append(ids, g.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("grants%s = %v, want %v", tc.query, ids, tc.want)
			}
		}
		_, body := do(t, &adminID, "GET", "/api/v1/oauth/grants")
		noSecrets(t, srv, body, aliceDesktop.RefreshToken, bobEditor.RefreshToken, aliceEditor.RefreshToken,
			aliceDesktop.AccessToken, bobEditor.AccessToken, aliceEditor.AccessToken)
	})

	t.Run("revoke a grant", func(t *testing.T) {
		id := aliceEditor.GrantID(t)
		if st, body := do(t, &adminID, "DELETE", "/api/v1/oauth/grants/"+id); st != http.StatusNoContent {
			t.Fatalf("revoke: %d %s", st, body)
		}
		if _, err := srv.Refresh(t, editor, aliceEditor.RefreshToken); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
			t.Errorf("refreshing a revoked grant: %v, want invalid_grant", err)
		}
		if err := srv.CheckToken(t.Context(), aliceEditor.Claims(t)); err == nil {
			t.Error("the revoked grant's access token still stands")
		}
		if err := srv.CheckToken(t.Context(), bobEditor.Claims(t)); err != nil {
			t.Errorf("another grant of the same client fell too: %v", err)
		}
		// Again: not an error.
		if st, body := do(t, &adminID, "DELETE", "/api/v1/oauth/grants/"+id); st != http.StatusNoContent {
			t.Errorf("revoking twice: %d %s", st, body)
		}
		var revoked *OAuthGrant
		for _, g := range grants(t, "?subject=alice").Grants {
			if g.ID == id {
				revoked = &g
			}
		}
		if revoked == nil || revoked.Active || revoked.RevokedAt == nil || revoked.RevokedReason != "revoked by root" {
			t.Errorf("the revoked grant is listed as %+v", revoked)
		}
		if n := len(grants(t, "?active=true").Grants); n != 2 {
			t.Errorf("%d active grants after the revocation, want 2", n)
		}
		if n := len(grants(t, "?active=false").Grants); n != 3 {
			t.Errorf("active=false lists %d grants, want all 3", n)
		}
		l, _ := clients(t)
		if l.Clients[1].ActiveGrants != 1 {
			t.Errorf("the editor has %d active grants, want 1", l.Clients[1].ActiveGrants)
		}
	})

	t.Run("delete a client", func(t *testing.T) {
		refreshed, err := srv.Refresh(t, desktop, aliceDesktop.RefreshToken)
		if err != nil {
			t.Fatalf("refresh before the deletion: %v", err)
		}
		if st, body := do(t, &adminID, "DELETE", "/api/v1/oauth/clients/"+desktop.ID); st != http.StatusNoContent {
			t.Fatalf("delete: %d %s", st, body)
		}
		if _, err := srv.Refresh(t, desktop, refreshed.RefreshToken); err == nil {
			t.Error("the deleted client still refreshes")
		}
		if err := srv.CheckToken(t.Context(), refreshed.Claims(t)); err == nil {
			t.Error("the deleted client's access token still stands")
		}
		l, _ := clients(t)
		if len(l.Clients) != 1 || l.Clients[0].ID != editor.ID {
			t.Errorf("clients after the deletion: %+v", l.Clients)
		}
		for _, g := range grants(t, "?client_id="+desktop.ID).Grants {
			if g.Active || !strings.Contains(g.RevokedReason, "client deleted by root") {
				t.Errorf("the deleted client's grant: active %v, reason %q", g.Active, g.RevokedReason)
			}
		}
	})

	take := func() []string {
		ops.mu.Lock()
		defer ops.mu.Unlock()
		got := ops.ops
		ops.ops = nil
		return got
	}
	take()
	t.Run("refusals", func(t *testing.T) {
		for _, tc := range []struct {
			name, method, path string
			id                 *authz.Identity
			status             int
			code               string
		}{
			{"unknown grant", "DELETE", "/api/v1/oauth/grants/nope", &adminID, 404, CodeNotFound},
			{"unknown client", "DELETE", "/api/v1/oauth/clients/nope", &adminID, 404, CodeNotFound},
			{"deleted client", "DELETE", "/api/v1/oauth/clients/" + desktop.ID, &adminID, 404, CodeNotFound},
			{"bad active", "GET", "/api/v1/oauth/grants?active=maybe", &adminID, 400, "invalid_argument"},
			{"bad limit", "GET", "/api/v1/oauth/grants?limit=0", &adminID, 400, "invalid_argument"},
			{"limit too high", "GET", "/api/v1/oauth/grants?limit=1001", &adminID, 400, "invalid_argument"},
			{"agent lists clients", "GET", "/api/v1/oauth/clients", &agentA, 403, CodeForbidden},
			{"agent lists grants", "GET", "/api/v1/oauth/grants", &agentA, 403, CodeForbidden},
			{"agent revokes", "DELETE", "/api/v1/oauth/grants/" + bobEditor.GrantID(t), &agentA, 403, CodeForbidden},
			{"agent deletes", "DELETE", "/api/v1/oauth/clients/" + editor.ID, &agentA, 403, CodeForbidden},
			{"anonymous", "GET", "/api/v1/oauth/grants", nil, 401, CodeUnauthenticated},
		} {
			t.Run(tc.name, func(t *testing.T) {
				st, body := do(t, tc.id, tc.method, tc.path)
				var out map[string]any
				_ = json.Unmarshal(body, &out) // a non-JSON body fails on its empty code
				if st != tc.status || errCode(out) != tc.code {
					t.Errorf("%d %s, want %d %s", st, body, tc.status, tc.code)
				}
			})
		}
		if err := srv.CheckToken(t.Context(), bobEditor.Claims(t)); err != nil {
			t.Errorf("a refused request touched bob's grant: %v", err)
		}
	})

	t.Run("audited", func(t *testing.T) {
		// The refusals above that reached the server are audited as
		// failures; the others never got that far.
		want := []string{
			`oauth.grant.revoke server= by=root err=true: OAuth grant "nope"`,
			`oauth.client.delete server= by=root err=true: OAuth client "nope" and its grants`,
			`oauth.client.delete server= by=root err=true: OAuth client "` + desktop.ID + `" and its grants`,
		}
		if diff := cmp.Diff(want, take()); diff != "" {
			t.Errorf("operations (-want +got):\n%s", diff)
		}
		if st, _ := do(t, &adminID, "DELETE", "/api/v1/oauth/grants/"+bobEditor.GrantID(t)); st != 204 {
			t.Fatalf("revoke: %d", st)
		}
		want = []string{`oauth.grant.revoke server= by=root err=false: OAuth grant "` + bobEditor.GrantID(t) + `"`}
		if diff := cmp.Diff(want, take()); diff != "" {
			t.Errorf("operations (-want +got):\n%s", diff)
		}
	})
}

// noSecrets fails if body holds a client's secret, the hash of it the
// store keeps, any of the given tokens or their hashes, or a field named
// like a secret.
func noSecrets(t *testing.T, srv *authservertest.Server, body []byte, tokens ...string) {
	t.Helper()
	rows, err := srv.DB.OAuthClients(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var leaks []string
	for _, c := range rows {
		if c.SecretHash != "" {
			leaks = append(leaks, c.SecretHash)
		}
	}
	for _, tok := range tokens {
		sum := sha256.Sum256([]byte(tok))
		leaks = append(leaks, tok, hex.EncodeToString(sum[:]))
	}
	for _, s := range leaks {
		if strings.Contains(string(body), s) {
			t.Errorf("the answer holds a secret or its hash %.12s…:\n%s", s, body)
		}
	}
	if strings.Contains(string(body), "sbcs_") || strings.Contains(string(body), "sbrt_") {
		t.Errorf("the answer holds a client secret or refresh token:\n%s", body)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				if strings.Contains(k, "secret") || strings.Contains(k, "hash") || (strings.Contains(k, "token") && k != "token_endpoint_auth_method") {
					t.Errorf("the answer has a field %q", k)
				}
				walk(val)
			}
		case []any:
			for _, val := range x {
				walk(val)
			}
		}
	}
	walk(v)
}

// TestOAuthServerOff: without the authorization server every OAuth route
// says so, in the API's error shape, to admins; others are refused first.
func TestOAuthServerOff(t *testing.T) {
	h := New(&fakeServers{}, catalog.New(nil), &fakeCaller{}, nil)
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/v1/oauth/clients"}, {"DELETE", "/api/v1/oauth/clients/c1"},
		{"GET", "/api/v1/oauth/grants"}, {"DELETE", "/api/v1/oauth/grants/g1"},
	} {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			as(h, &adminID).ServeHTTP(rec, httptest.NewRequest(r.method, r.path, nil))
			var out map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &out) // checked through its code
			e, _ := out["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if rec.Code != 404 || errCode(out) != CodeOAuthServerOff || !strings.Contains(msg, "not running") {
				t.Errorf("%d %s", rec.Code, rec.Body)
			}
			rec = httptest.NewRecorder()
			as(h, &agentA).ServeHTTP(rec, httptest.NewRequest(r.method, r.path, nil))
			if rec.Code != 403 {
				t.Errorf("agent: %d %s", rec.Code, rec.Body)
			}
		})
	}
}
