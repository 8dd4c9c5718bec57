package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/authserver/authservertest"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// testAgentKey is a non-admin key of startAPIGateway.
const testAgentKey = "sbk_cli_test_agent_key"

// startAPIGateway serves the REST API with opts behind a stand-in for the
// app's authentication (testAdminKey is an admin, testAgentKey an agent,
// anything else 401). The app does not wire the authorization server in,
// so the oauth commands are tested against the API with a real one.
func startAPIGateway(t *testing.T, opts *api.Options) *testGateway {
	t.Helper()
	h := api.New(nil, catalog.New(nil), nil, opts)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id authz.Identity
		switch r.Header.Get("Authorization") {
		case "Bearer " + testAdminKey:
			id = authz.Identity{ID: "admin-key", AgentID: "ops", Admin: true, Method: "key"}
		case "Bearer " + testAgentKey:
			id = authz.Identity{ID: "key:ci", AgentID: "ci", Method: "key"}
		default:
			api.WriteError(w, &api.Error{Status: http.StatusUnauthorized, Code: "missing_credentials", Message: "authentication required"})
			return
		}
		h.ServeHTTP(w, r.WithContext(authz.WithIdentity(r.Context(), id)))
	}))
	t.Cleanup(srv.Close)
	return &testGateway{url: srv.URL}
}

// TestOAuthCommands runs `oauth clients|grants [delete|revoke]` against a
// real authorization server whose clients registered and whose users
// consented through the whole flow, and pins their output. The subtests
// run in order.
func TestOAuthCommands(t *testing.T) {
	as := authservertest.New(t)
	g := startAPIGateway(t, &api.Options{OAuth: as.Server})

	t.Run("no clients yet", func(t *testing.T) {
		code, out, errOut := g.cli(t, "oauth", "clients")
		if code != ExitOK || out != "no OAuth clients\n" {
			t.Errorf("exit %d, %q, %q", code, out, errOut)
		}
		if code, out, _ := g.cli(t, "oauth", "grants", "--all"); code != ExitOK || out != "no OAuth grants\n" {
			t.Errorf("grants: exit %d, %q", code, out)
		}
	})

	desktop := as.Register(t, "Claude Desktop", true)
	as.Advance(time.Second) // clients are listed by their creation second
	remote := as.Register(t, "mcp-remote", false)
	aliceDesktop := as.Authorize(t, desktop, "alice")
	bob := as.Authorize(t, remote, "bob")
	aliceRemote := as.Authorize(t, remote, "alice")
	// Table output shows IDs, which are random: placeholders stand in.
	ids := []string{desktop.ID, "<desktop>", remote.ID, "<remote>",
		aliceDesktop.GrantID(t), "<grant-alice-desktop>", bob.GrantID(t), "<grant-bob>", aliceRemote.GrantID(t), "<grant-alice-remote>"}

	t.Run("clients", func(t *testing.T) {
		code, out, errOut := g.cli(t, "oauth", "clients")
		if code != ExitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		checkGolden(t, "oauth_clients.txt", normalizeText(out, ids...))
		if strings.Contains(out, desktop.Secret) {
			t.Error("the client secret is shown")
		}
		code, out, _ = g.cli(t, "oauth", "clients", "-o", "json")
		if code != ExitOK {
			t.Fatalf("-o json: exit %d", code)
		}
		jsonGolden(t, "oauth_clients", out, g.get(t, "/api/v1/oauth/clients"))
	})

	t.Run("grants", func(t *testing.T) {
		code, out, errOut := g.cli(t, "oauth", "grants")
		if code != ExitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		checkGolden(t, "oauth_grants.txt", normalizeText(out, ids...))
		for _, tc := range []struct {
			args []string
			want []string // placeholders of the grants listed, in order
		}{
			{[]string{"--subject", "alice"}, []string{"<grant-alice-remote>", "<grant-alice-desktop>"}},
			{[]string{"--client", remote.ID}, []string{"<grant-alice-remote>", "<grant-bob>"}},
			{[]string{"--subject", "alice", "--client", desktop.ID}, []string{"<grant-alice-desktop>"}},
		} {
			code, out, errOut := g.cli(t, append([]string{"oauth", "grants"}, tc.args...)...)
			if code != ExitOK {
				t.Fatalf("%v: exit %d: %s", tc.args, code, errOut)
			}
			if got := listedGrants(normalizeText(out, ids...)); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("%v: %v, want %v", tc.args, got, tc.want)
			}
		}
		if code, out, _ := g.cli(t, "oauth", "grants", "--subject", "carol"); code != ExitOK || out != "no active OAuth grants\n" {
			t.Errorf("--subject carol: exit %d %q", code, out)
		}
	})

	t.Run("revoke a grant", func(t *testing.T) {
		code, out, errOut := g.cli(t, "oauth", "grants", "revoke", aliceRemote.GrantID(t))
		if code != ExitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		checkGolden(t, "oauth_grants_revoke.txt", normalizeText(out, ids...))
		if _, err := as.Refresh(t, remote, aliceRemote.RefreshToken); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
			t.Errorf("refreshing the revoked grant: %v, want invalid_grant", err)
		}
		if _, err := as.Refresh(t, remote, bob.RefreshToken); err != nil {
			t.Errorf("bob's grant of the same client: %v", err)
		}
		_, out, _ = g.cli(t, "oauth", "grants")
		if got := listedGrants(normalizeText(out, ids...)); strings.Join(got, " ") != "<grant-bob> <grant-alice-desktop>" {
			t.Errorf("active grants after the revocation: %v", got)
		}
		code, out, _ = g.cli(t, "oauth", "grants", "--all")
		if code != ExitOK {
			t.Fatalf("--all: exit %d", code)
		}
		checkGolden(t, "oauth_grants_all.txt", normalizeText(out, ids...))
		code, out, _ = g.cli(t, "oauth", "grants", "--all", "-o", "json")
		if code != ExitOK {
			t.Fatalf("--all -o json: exit %d", code)
		}
		jsonGolden(t, "oauth_grants", out, g.get(t, "/api/v1/oauth/grants"))
	})

	t.Run("delete a client", func(t *testing.T) {
		code, out, errOut := g.cli(t, "oauth", "clients", "delete", desktop.ID)
		if code != ExitOK || normalizeText(out, ids...) != "deleted OAuth client <desktop> and revoked its grants\n" {
			t.Fatalf("exit %d, %q, %q", code, out, errOut)
		}
		_, out, _ = g.cli(t, "oauth", "clients")
		if strings.Contains(out, desktop.ID) || !strings.Contains(out, remote.ID) {
			t.Errorf("clients after the deletion:\n%s", out)
		}
		_, out, _ = g.cli(t, "oauth", "grants")
		if got := listedGrants(normalizeText(out, ids...)); strings.Join(got, " ") != "<grant-bob>" {
			t.Errorf("active grants after the deletion: %v", got)
		}
	})

	t.Run("errors", func(t *testing.T) {
		agent := func(args ...string) (int, string, string) {
			t.Helper()
			return g.cli(t, append(args, "--api-key", testAgentKey)...)
		}
		off := startAPIGateway(t, nil)
		for _, tc := range []struct {
			name    string
			run     func() (int, string, string)
			code    int
			message string
		}{
			{"unknown grant", func() (int, string, string) { return g.cli(t, "oauth", "grants", "revoke", "g_nope") }, ExitFailure, `OAuth grant "g_nope": not found`},
			{"unknown client", func() (int, string, string) { return g.cli(t, "oauth", "clients", "delete", "nope") }, ExitFailure, `OAuth client "nope": not found`},
			{"no grant id", func() (int, string, string) { return g.cli(t, "oauth", "grants", "revoke") }, ExitUsage, "accepts 1 arg"},
			{"bad output", func() (int, string, string) { return g.cli(t, "oauth", "clients", "-o", "xml") }, ExitUsage, "want table, json or yaml"},
			{"not an admin", func() (int, string, string) { return agent("oauth", "grants") }, ExitFailure, "use an admin API key"},
			{"server off", func() (int, string, string) { return off.cli(t, "oauth", "clients") }, ExitFailure,
				"the built-in OAuth authorization server is not running on this gateway (auth.mode: oauth without an external issuer runs it)"},
			{"server off, revoke", func() (int, string, string) { return off.cli(t, "oauth", "grants", "revoke", "g_1") }, ExitFailure, "is not running"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, out, errOut := tc.run()
				if code != tc.code || !strings.Contains(errOut, tc.message) {
					t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, errOut, tc.code, tc.message)
				}
			})
		}
	})
}

// listedGrants returns the first column of a grants table's rows.
func listedGrants(table string) []string {
	var ids []string
	for i, line := range strings.Split(strings.TrimSpace(table), "\n") {
		if i == 0 || line == "" {
			continue
		}
		ids = append(ids, strings.Fields(line)[0])
	}
	return ids
}
