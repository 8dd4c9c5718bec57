package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
)

// startUpstreamOAuthGateway serves a gateway whose settings.listen is its real
// address, so that the OAuth callback URL it gives out reaches it.
func startUpstreamOAuthGateway(t *testing.T, server string, env map[string]string) *gateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("settings:\n  listen: %s\nservers:\n%s", ln.Addr(), server)
	return startGatewayOn(t, ln, yaml, env, filepath.Join(t.TempDir(), "switchboard.db"), nil)
}

// TestUpstreamOAuthClientCredentials: a machine-to-machine server
// (auth: {grant: client_credentials}) connects at start with a token the
// gateway fetched itself, and its tools are callable through /mcp.
func TestUpstreamOAuthClientCredentials(t *testing.T) {
	up := oauthtest.NewUpstream(t, "cc-secret-value")
	g := startUpstreamOAuthGateway(t, fmt.Sprintf(`  prot:
    transport: http
    url: %s
    auto_start: true
    auth: {type: oauth, grant: client_credentials, client_id: gw, client_secret_env: UP_SECRET}
`, up.MCPURL()), map[string]string{"UP_SECRET": "cc-secret-value"})

	if s := g.serverByName(t, "prot"); s["status"] != "CONNECTED" {
		t.Fatalf("status = %v, want CONNECTED: %v", s["status"], s)
	}
	cs := g.connect(t, "/mcp")
	if text, res := callText(t, cs, "prot.whoami", map[string]any{}); res.IsError || text != oauthtest.WhoamiText {
		t.Fatalf("prot.whoami = %q (error %v)", text, res.IsError)
	}
	code, st := g.rest(t, "GET", "/api/v1/aggregator/servers/prot/auth", nil)
	grant, _ := st["grant"].(map[string]any)
	if code != http.StatusOK || grant["authorized"] != true || grant["type"] != "client_credentials" || grant["issuer"] != up.Issuer() {
		t.Errorf("GET auth = %d %v", code, st)
	}
	up.AssertNoToken(t, "GET auth", st)
	// servers auth on a client_credentials server fetches a new token at
	// once: no URL, the flow is over when the call returns.
	code, st = g.rest(t, "POST", "/api/v1/aggregator/servers/prot/auth", nil)
	if code != http.StatusOK || st["state"] != "done" || st["authorization_url"] != "" {
		t.Errorf("POST auth = %d %v", code, st)
	}
	up.AssertNoToken(t, "POST auth", st)
	if strings.Contains(g.logs.String(), "cc-secret-value") {
		t.Error("the client secret is in the logs")
	}
}

// TestUpstreamOAuthAuthorizationCode: a server that needs a person's
// approval is NEEDS_AUTH until an operator starts the flow (POST
// .../auth); following the URL it returns (the test authorization server
// approves at once) reaches the gateway's callback, and the server
// connects without a restart.
func TestUpstreamOAuthAuthorizationCode(t *testing.T) {
	up := oauthtest.NewUpstream(t, "")
	g := startUpstreamOAuthGateway(t, fmt.Sprintf(`  prot:
    transport: http
    url: %s
    auto_start: true
    auth: {type: oauth}
  plain:
    transport: http
    url: %s
`, up.MCPURL(), up.MCPURL()), nil)

	if s := g.serverByName(t, "prot"); s["status"] != "NEEDS_AUTH" {
		t.Fatalf("status = %v, want NEEDS_AUTH: %v", s["status"], s)
	}
	if code, body := g.rest(t, "GET", "/api/v1/aggregator/servers/plain/auth", nil); code != http.StatusNotFound ||
		body["error"].(map[string]any)["code"] != "upstream_auth_not_configured" {
		t.Errorf("GET auth of a server without auth = %d %v", code, body)
	}
	code, started := g.rest(t, "POST", "/api/v1/aggregator/servers/prot/auth", nil)
	authURL, _ := started["authorization_url"].(string)
	if code != http.StatusOK || started["state"] != "pending" || !strings.HasPrefix(authURL, up.Issuer()+"/authorize?") {
		t.Fatalf("POST auth = %d %v", code, started)
	}
	// The browser: follow the authorization server's redirect to the
	// gateway's callback.
	resp, err := http.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/oauth/upstream/callback" {
		t.Fatalf("callback answered %s at %s: %s", resp.Status, resp.Request.URL, page)
	}
	waitFor(t, "prot CONNECTED", func() bool {
		if g.serverByName(t, "prot")["status"] == "CONNECTED" {
			return true
		}
		_, st := g.rest(t, "GET", "/api/v1/aggregator/servers/prot/auth", nil)
		if st["state"] == "failed" {
			t.Fatalf("the flow failed: %v", st)
		}
		return false
	})
	code, st := g.rest(t, "GET", "/api/v1/aggregator/servers/prot/auth", nil)
	grant, _ := st["grant"].(map[string]any)
	if code != http.StatusOK || st["state"] != "done" || grant["authorized"] != true || grant["type"] != "authorization_code" {
		t.Errorf("GET auth = %d %v", code, st)
	}
	up.AssertNoToken(t, "GET auth", st)
	cs := g.connect(t, "/mcp")
	if text, res := callText(t, cs, "prot.whoami", map[string]any{}); res.IsError || text != oauthtest.WhoamiText {
		t.Fatalf("prot.whoami = %q (error %v)", text, res.IsError)
	}
	up.AssertNoToken(t, "the gateway's logs", g.logs.String())
	// The state is good once: the same redirect again is refused.
	if resp, err := http.Get(resp.Request.URL.String()); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("replayed callback: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestUpstreamOAuthReload: a server with auth added by a config reload
// gets its OAuth handler while it is staged, before it replaces anything,
// and connects.
func TestUpstreamOAuthReload(t *testing.T) {
	up := oauthtest.NewUpstream(t, "reload-secret")
	dir := t.TempDir()
	path := filepath.Join(dir, "switchboard.yaml")
	getenv := func(k string) string {
		if k == "UP_SECRET" {
			return "reload-secret"
		}
		if k == "SWITCHBOARD_SECRET_KEY" {
			return testSecretKey
		}
		return ""
	}
	if err := os.WriteFile(path, []byte("servers: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Settings.Store = filepath.Join(dir, "sb.db")
	a, err := app.New(t.Context(), cfg, &app.Options{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	a.StartAndWait()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	g := &gateway{app: a, http: srv, logs: &logtest.Buffer{}}

	yaml := fmt.Sprintf("servers:\n  prot:\n    transport: http\n    url: %s\n    auto_start: true\n"+
		"    auth: {type: oauth, grant: client_credentials, client_id: gw, client_secret_env: UP_SECRET}\n", up.MCPURL())
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(t.Context()); err != nil {
		t.Fatalf("reload: %v", err)
	}
	waitFor(t, "prot CONNECTED", func() bool { return g.serverByName(t, "prot")["status"] == "CONNECTED" })
	cs := g.connect(t, "/mcp")
	if text, res := callText(t, cs, "prot.whoami", map[string]any{}); res.IsError || text != oauthtest.WhoamiText {
		t.Fatalf("prot.whoami = %q (error %v)", text, res.IsError)
	}
}

// TestUpstreamOAuthRegisteredAtRuntime: a server registered through the
// REST API with an auth section signs in as one from the config file does;
// its view shows the section (no secret in it), and the store keeps the
// variable's name, not its value.
func TestUpstreamOAuthRegisteredAtRuntime(t *testing.T) {
	up := oauthtest.NewUpstream(t, "rt-secret-value")
	g := startUpstreamOAuthGateway(t, "  {}\n", map[string]string{"UP_SECRET": "rt-secret-value"})
	code, body := g.rest(t, "POST", "/api/v1/aggregator/servers", map[string]any{
		"name": "prot", "transport_type": "HTTP", "auto_connect": true,
		"connection_config": map[string]any{"url": up.MCPURL()},
		"auth":              map[string]any{"type": "oauth", "grant": "client_credentials", "client_id": "gw", "client_secret_env": "UP_SECRET"},
	})
	if code != http.StatusCreated {
		t.Fatalf("register: %d %v", code, body)
	}
	waitFor(t, "prot to connect", func() bool { return g.serverByName(t, "prot")["status"] == "CONNECTED" })
	cs := g.connect(t, "/mcp")
	if text, res := callText(t, cs, "prot.whoami", map[string]any{}); res.IsError || text != oauthtest.WhoamiText {
		t.Fatalf("prot.whoami = %q (error %v)", text, res.IsError)
	}
	s := g.serverByName(t, "prot")
	if a, _ := s["auth"].(map[string]any); a["client_secret_env"] != "UP_SECRET" || a["grant"] != "client_credentials" {
		t.Errorf("the server's view shows auth %v", s["auth"])
	}
	raw, _ := json.Marshal(s)
	if strings.Contains(string(raw), "rt-secret-value") {
		t.Errorf("the view shows the client secret: %s", raw)
	}
	up.AssertNoToken(t, "the server's view", s)
	// A definition that cannot use auth is refused with the field named.
	code, body = g.rest(t, "POST", "/api/v1/aggregator/servers", map[string]any{
		"name": "local", "transport_type": "STDIO", "connection_config": map[string]any{"command": "true"},
		"auth": map[string]any{"type": "oauth"},
	})
	if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(body), "servers.local.auth") {
		t.Errorf("auth on a stdio server: %d %v", code, body)
	}
}
