package app_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/config"
)

// oauthUpstream is an MCP server protected by its own authorization
// server, which approves every authorization request at once (no person)
// and issues opaque tokens: what the gateway's OAuth client meets at a
// hosted MCP server.
type oauthUpstream struct {
	as, rs *httptest.Server
	secret string // of the pre-registered client "gw", for client_credentials

	mu     sync.Mutex
	codes  map[string]string // code -> S256 challenge
	tokens map[string]bool   // live access tokens
	issued []string          // every token issued, for the no-leak checks
}

func newOAuthUpstream(t *testing.T, secret string) *oauthUpstream {
	t.Helper()
	u := &oauthUpstream{secret: secret, codes: map[string]string{}, tokens: map[string]bool{}}
	as := http.NewServeMux()
	as.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeTestJSON(w, http.StatusOK, oauthex.AuthServerMeta{Issuer: u.as.URL,
			AuthorizationEndpoint: u.as.URL + "/authorize", TokenEndpoint: u.as.URL + "/token", RegistrationEndpoint: u.as.URL + "/register",
			ResponseTypesSupported: []string{"code"}, GrantTypesSupported: []string{"authorization_code", "refresh_token", "client_credentials"},
			CodeChallengeMethodsSupported: []string{"S256"}, TokenEndpointAuthMethodsSupported: []string{"client_secret_basic", "none"},
			ScopesSupported: []string{"mcp:read", "offline_access"}, AuthorizationResponseIssParameterSupported: true})
	})
	as.HandleFunc("POST /register", func(w http.ResponseWriter, _ *http.Request) {
		writeTestJSON(w, http.StatusCreated, map[string]any{"client_id": "dynamic-client", "token_endpoint_auth_method": "none", "redirect_uris": []string{}})
	})
	as.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code := rand.Text()
		u.mu.Lock()
		u.codes[code] = q.Get("code_challenge")
		u.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		v := back.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		v.Set("iss", u.as.URL)
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	as.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			u.mu.Lock()
			want, ok := u.codes[r.PostForm.Get("code")]
			delete(u.codes, r.PostForm.Get("code"))
			u.mu.Unlock()
			if !ok || want != base64.RawURLEncoding.EncodeToString(sum[:]) {
				writeTestJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
				return
			}
		case "client_credentials":
			if id, s, ok := r.BasicAuth(); !ok || id != "gw" || s != u.secret {
				writeTestJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
				return
			}
		default:
			writeTestJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
			return
		}
		tok := "at-" + rand.Text()
		u.mu.Lock()
		u.tokens[tok] = true
		u.issued = append(u.issued, tok)
		u.mu.Unlock()
		writeTestJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
	})
	u.as = httptest.NewServer(as)
	t.Cleanup(u.as.Close)

	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you are authorized"}}}, nil, nil
	})
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		u.mu.Lock()
		defer u.mu.Unlock()
		if !u.tokens[tok] {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
	}
	rs := http.NewServeMux()
	rs.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: u.rs.URL + "/mcp",
			AuthorizationServers: []string{u.as.URL}}).ServeHTTP(w, r)
	})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	rs.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: u.rs.URL + "/.well-known/oauth-protected-resource/mcp"})(
			mcpHandler).ServeHTTP(w, r)
	}))
	u.rs = httptest.NewServer(rs)
	t.Cleanup(u.rs.Close)
	return u
}

func writeTestJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

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

func (u *oauthUpstream) assertNoToken(t *testing.T, where string, body any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, tok := range u.issued {
		if strings.Contains(string(raw), tok) {
			t.Errorf("%s shows an access token: %s", where, raw)
		}
	}
}

// TestUpstreamOAuthClientCredentials: a machine-to-machine server
// (auth: {grant: client_credentials}) connects at start with a token the
// gateway fetched itself, and its tools are callable through /mcp.
func TestUpstreamOAuthClientCredentials(t *testing.T) {
	up := newOAuthUpstream(t, "cc-secret-value")
	g := startUpstreamOAuthGateway(t, fmt.Sprintf(`  prot:
    transport: http
    url: %s/mcp
    auto_start: true
    auth: {type: oauth, grant: client_credentials, client_id: gw, client_secret_env: UP_SECRET}
`, up.rs.URL), map[string]string{"UP_SECRET": "cc-secret-value"})

	if s := g.serverByName(t, "prot"); s["status"] != "CONNECTED" {
		t.Fatalf("status = %v, want CONNECTED: %v", s["status"], s)
	}
	cs := g.connect(t, "/mcp")
	if text, res := callText(t, cs, "prot.whoami", map[string]any{}); res.IsError || text != "you are authorized" {
		t.Fatalf("prot.whoami = %q (error %v)", text, res.IsError)
	}
	code, st := g.rest(t, "GET", "/api/v1/aggregator/servers/prot/auth", nil)
	grant, _ := st["grant"].(map[string]any)
	if code != http.StatusOK || grant["authorized"] != true || grant["type"] != "client_credentials" || grant["issuer"] != up.as.URL {
		t.Errorf("GET auth = %d %v", code, st)
	}
	up.assertNoToken(t, "GET auth", st)
	// servers auth on a client_credentials server fetches a new token at
	// once: no URL, the flow is over when the call returns.
	code, st = g.rest(t, "POST", "/api/v1/aggregator/servers/prot/auth", nil)
	if code != http.StatusOK || st["state"] != "done" || st["authorization_url"] != "" {
		t.Errorf("POST auth = %d %v", code, st)
	}
	up.assertNoToken(t, "POST auth", st)
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
	up := newOAuthUpstream(t, "")
	g := startUpstreamOAuthGateway(t, fmt.Sprintf(`  prot:
    transport: http
    url: %s/mcp
    auto_start: true
    auth: {type: oauth}
  plain:
    transport: http
    url: %s/mcp
`, up.rs.URL, up.rs.URL), nil)

	if s := g.serverByName(t, "prot"); s["status"] != "NEEDS_AUTH" {
		t.Fatalf("status = %v, want NEEDS_AUTH: %v", s["status"], s)
	}
	if code, body := g.rest(t, "GET", "/api/v1/aggregator/servers/plain/auth", nil); code != http.StatusNotFound ||
		body["error"].(map[string]any)["code"] != "upstream_auth_not_configured" {
		t.Errorf("GET auth of a server without auth = %d %v", code, body)
	}
	code, started := g.rest(t, "POST", "/api/v1/aggregator/servers/prot/auth", nil)
	authURL, _ := started["authorization_url"].(string)
	if code != http.StatusOK || started["state"] != "pending" || !strings.HasPrefix(authURL, up.as.URL+"/authorize?") {
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
	up.assertNoToken(t, "GET auth", st)
	cs := g.connect(t, "/mcp")
	if text, res := callText(t, cs, "prot.whoami", map[string]any{}); res.IsError || text != "you are authorized" {
		t.Fatalf("prot.whoami = %q (error %v)", text, res.IsError)
	}
	up.assertNoToken(t, "the gateway's logs", g.logs.String())
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
	up := newOAuthUpstream(t, "reload-secret")
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
	g := &gateway{app: a, http: srv, logs: &syncBuffer{}}

	yaml := fmt.Sprintf("servers:\n  prot:\n    transport: http\n    url: %s/mcp\n    auto_start: true\n"+
		"    auth: {type: oauth, grant: client_credentials, client_id: gw, client_secret_env: UP_SECRET}\n", up.rs.URL)
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(t.Context()); err != nil {
		t.Fatalf("reload: %v", err)
	}
	waitFor(t, "prot CONNECTED", func() bool { return g.serverByName(t, "prot")["status"] == "CONNECTED" })
	cs := g.connect(t, "/mcp")
	if text, res := callText(t, cs, "prot.whoami", map[string]any{}); res.IsError || text != "you are authorized" {
		t.Fatalf("prot.whoami = %q (error %v)", text, res.IsError)
	}
}

// TestUpstreamOAuthRegisteredAtRuntime: a server registered through the
// REST API with an auth section signs in as one from the config file does;
// its view shows the section (no secret in it), and the store keeps the
// variable's name, not its value.
func TestUpstreamOAuthRegisteredAtRuntime(t *testing.T) {
	up := newOAuthUpstream(t, "rt-secret-value")
	g := startUpstreamOAuthGateway(t, "  {}\n", map[string]string{"UP_SECRET": "rt-secret-value"})
	code, body := g.rest(t, "POST", "/api/v1/aggregator/servers", map[string]any{
		"name": "prot", "transport_type": "HTTP", "auto_connect": true,
		"connection_config": map[string]any{"url": up.rs.URL + "/mcp"},
		"auth":              map[string]any{"type": "oauth", "grant": "client_credentials", "client_id": "gw", "client_secret_env": "UP_SECRET"},
	})
	if code != http.StatusCreated {
		t.Fatalf("register: %d %v", code, body)
	}
	waitFor(t, "prot to connect", func() bool { return g.serverByName(t, "prot")["status"] == "CONNECTED" })
	cs := g.connect(t, "/mcp")
	if text, res := callText(t, cs, "prot.whoami", map[string]any{}); res.IsError || text != "you are authorized" {
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
	up.assertNoToken(t, "the server's view", s)
	// A definition that cannot use auth is refused with the field named.
	code, body = g.rest(t, "POST", "/api/v1/aggregator/servers", map[string]any{
		"name": "local", "transport_type": "STDIO", "connection_config": map[string]any{"command": "true"},
		"auth": map[string]any{"type": "oauth"},
	})
	if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(body), "servers.local.auth") {
		t.Errorf("auth on a stdio server: %d %v", code, body)
	}
}
