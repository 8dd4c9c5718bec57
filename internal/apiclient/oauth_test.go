package apiclient

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/authserver/authservertest"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// TestOAuth drives the OAuth admin methods against the real API and a
// real authorization server: listings, filters, revocation, deletion, and
// the errors a caller switches on.
func TestOAuth(t *testing.T) {
	as := authservertest.New(t)
	app := as.Register(t, "App", true)
	as.Advance(time.Second)
	cli := as.Register(t, "CLI tool", false)
	aliceApp := as.Authorize(t, app, "alice")
	bobCLI := as.Authorize(t, cli, "bob")

	h := api.New(&fakeServers{}, catalog.New(nil), fakeCaller{}, &api.Options{OAuth: as.Server})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(authz.WithIdentity(r.Context(), authz.LocalAdmin())))
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	clients, err := c.OAuthClients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range clients.Clients {
		names = append(names, x.Name)
	}
	if !slices.Equal(names, []string{"App", "CLI tool"}) || clients.Total != 2 {
		t.Errorf("clients = %v (total %d)", names, clients.Total)
	}

	grantIDs := func(q OAuthGrantQuery) []string {
		t.Helper()
		l, err := c.OAuthGrants(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, g := range l.Grants {
			ids = append(ids, g.ID)
		}
		return ids
	}
	for _, tc := range []struct {
		name string
		q    OAuthGrantQuery
		want []string
	}{
		{"all", OAuthGrantQuery{}, []string{bobCLI.GrantID(t), aliceApp.GrantID(t)}},
		{"subject", OAuthGrantQuery{Subject: "alice"}, []string{aliceApp.GrantID(t)}},
		{"client", OAuthGrantQuery{ClientID: cli.ID}, []string{bobCLI.GrantID(t)}},
		{"limit", OAuthGrantQuery{Limit: 1}, []string{bobCLI.GrantID(t)}},
	} {
		if got := grantIDs(tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	if err := c.RevokeOAuthGrant(ctx, aliceApp.GrantID(t)); err != nil {
		t.Fatal(err)
	}
	if got := grantIDs(OAuthGrantQuery{ActiveOnly: true}); !slices.Equal(got, []string{bobCLI.GrantID(t)}) {
		t.Errorf("active after the revocation: %v", got)
	}
	if err := c.DeleteOAuthClient(ctx, cli.ID); err != nil {
		t.Fatal(err)
	}
	if got := grantIDs(OAuthGrantQuery{ActiveOnly: true}); len(got) != 0 {
		t.Errorf("active after deleting the client: %v", got)
	}

	var ae *Error
	if err := c.DeleteOAuthClient(ctx, cli.ID); !errors.As(err, &ae) || ae.Status != 404 || ae.Code != api.CodeNotFound || ae.Unsupported() {
		t.Errorf("deleting it again: %v", err)
	}
	if _, err := c.OAuthGrants(ctx, OAuthGrantQuery{Limit: 5000}); !errors.As(err, &ae) || ae.Status != 400 {
		t.Errorf("limit 5000: %v", err)
	}

	// A gateway without the authorization server.
	off, _ := newTestAPI(t, nil)
	if _, err := off.OAuthClients(ctx); !errors.As(err, &ae) || ae.Status != 404 || ae.Code != api.CodeOAuthServerOff || ae.Unsupported() {
		t.Errorf("without the server: %v", err)
	}
}
