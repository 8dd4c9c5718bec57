package app_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// The end-to-end tests of the built-in authorization server (issue 17 item
// 2, docs/auth.md "Built-in authorization server"): auth: {mode: oauth}
// without an issuer, users signing in with an API key.

// oauthAdminKey is the SWITCHBOARD_ADMIN_KEY of these gateways: the user
// who signs in, and the operator who revokes grants.
const oauthAdminKey = "oauth-e2e-admin-key"

// builtinOAuthGateway is a gateway running its own authorization server.
type builtinOAuthGateway struct {
	*gateway
	// answers records what the gateway answered on its MCP endpoints.
	answers *answerLog
}

// startBuiltinOAuthGateway starts a gateway in mode oauth without an
// issuer, with the demo server; server is the YAML of
// auth.oauth.server's settings (indented by six spaces), if any. The
// gateway listens before its config is written: auth.oauth.resource must
// be the URL its clients use.
func startBuiltinOAuthGateway(t *testing.T, server string) *builtinOAuthGateway {
	t.Helper()
	return startBuiltinOAuthGatewayStore(t, server, filepath.Join(t.TempDir(), "switchboard.db"))
}

// startBuiltinOAuthGatewayStore is startBuiltinOAuthGateway on the store
// at storePath (a SQLite file or a PostgreSQL DSN).
func startBuiltinOAuthGatewayStore(t *testing.T, server, storePath string) *builtinOAuthGateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() }) // in case the gateway fails to start
	base := "http://" + ln.Addr().String()
	yaml := "auth:\n  mode: oauth\n  oauth:\n    resource: " + base + "\n"
	// Access tokens are checked against their exp without the default
	// 30 s of leeway, so that a short TTL really ends them.
	yaml += "    leeway_seconds: 0\n"
	if server != "" {
		yaml += "    server:\n" + server
	}
	yaml += "servers:" + demoServer("demo")
	answers := &answerLog{}
	g := startGatewayOn(t, ln, yaml, map[string]string{"SWITCHBOARD_ADMIN_KEY": oauthAdminKey}, storePath, answers.wrap)
	if g.url() != base {
		t.Fatalf("gateway serves %s, configured for %s", g.url(), base)
	}
	return &builtinOAuthGateway{gateway: g, answers: answers}
}

// answer is one response of the gateway on an MCP endpoint.
type answer struct {
	method, path string
	bearer       bool
	status       int
	challenge    []string // WWW-Authenticate
}

// answerLog records the gateway's answers on its MCP endpoints, to see
// what a client that hides them (mcp-remote) was told.
type answerLog struct {
	mu  sync.Mutex
	all []answer
}

func (l *answerLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/mcp") {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		l.mu.Lock()
		l.all = append(l.all, answer{method: r.Method, path: r.URL.Path, bearer: r.Header.Get("Authorization") != "",
			status: sw.status, challenge: w.Header().Values("WWW-Authenticate")})
		l.mu.Unlock()
	})
}

// since returns the answers recorded after the first n.
func (l *answerLog) since(n int) []answer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all[min(n, len(l.all)):])
}

func (l *answerLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

// statusWriter remembers the status of a response; it keeps Flush for
// the streaming answers of the MCP endpoints.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// noRedirects is a browser that shows each redirect to the test.
func noRedirects(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var formField = regexp.MustCompile(`name="(request|csrf)" value="([^"]*)"`)

// signInAndConsent is the user's browser: it opens authURL (the
// authorization endpoint, as a client built it), signs in with key on the
// sign-in page, allows on the consent page, and returns where the gateway
// sends the browser back to the client (the redirect URI with the code).
// It also checks what the consent page tells the user.
func (g *builtinOAuthGateway) signInAndConsent(t *testing.T, authURL, key string, consentShows ...string) *url.URL {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := noRedirects(jar)
	step := func(method, target string, form url.Values) (int, string, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(t.Context(), method, target, body)
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", g.url()) // the page's own origin
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		loc := resp.Header.Get("Location")
		if loc != "" {
			u, err := resp.Request.URL.Parse(loc)
			if err != nil {
				t.Fatalf("Location %q: %v", loc, err)
			}
			loc = u.String()
		}
		return resp.StatusCode, loc, string(b)
	}
	form := func(page string) url.Values {
		t.Helper()
		v := url.Values{}
		for _, m := range formField.FindAllStringSubmatch(page, -1) {
			v.Set(m[1], m[2])
		}
		if v.Get("request") == "" || v.Get("csrf") == "" {
			t.Fatalf("no form in page:\n%s", page)
		}
		return v
	}
	status, loc, page := step(http.MethodGet, authURL, nil)
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, g.url()+"/oauth/signin") {
		t.Fatalf("authorize %s: %d to %q\n%s", authURL, status, loc, page)
	}
	status, _, page = step(http.MethodGet, loc, nil)
	if status != http.StatusOK {
		t.Fatalf("sign-in page: %d\n%s", status, page)
	}
	f := form(page)
	f.Set("key", key)
	status, loc, page = step(http.MethodPost, g.url()+"/oauth/signin", f)
	if status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d\n%s", status, page)
	}
	status, _, page = step(http.MethodGet, loc, nil)
	if status != http.StatusOK {
		t.Fatalf("consent page: %d\n%s", status, page)
	}
	for _, s := range consentShows {
		if !strings.Contains(page, s) {
			t.Errorf("the consent page does not show %q:\n%s", s, page)
		}
	}
	f = form(page)
	f.Set("decision", "approve")
	status, loc, page = step(http.MethodPost, g.url()+"/oauth/consent", f)
	if status != http.StatusSeeOther {
		t.Fatalf("consent: %d\n%s", status, page)
	}
	back, err := url.Parse(loc)
	if err != nil || back.Query().Get("code") == "" {
		t.Fatalf("consent sends the browser to %q: no code", loc)
	}
	return back
}

// grants lists the gateway's grants as an admin sees them (GET
// /api/v1/oauth/grants).
func (g *builtinOAuthGateway) grants(t *testing.T, query string) []oauthGrant {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, g.url()+"/api/v1/oauth/grants?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+oauthAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Grants []oauthGrant `json:"grants"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/oauth/grants: %d %v", resp.StatusCode, err)
	}
	return out.Grants
}

// oauthGrant is a grant as GET /api/v1/oauth/grants lists it.
type oauthGrant struct {
	ID            string     `json:"id"`
	ClientID      string     `json:"client_id"`
	ClientName    string     `json:"client_name"`
	Subject       string     `json:"subject"`
	Scope         string     `json:"scope"`
	Resource      string     `json:"resource"`
	RefreshedAt   *time.Time `json:"refreshed_at"`
	RevokedAt     *time.Time `json:"revoked_at"`
	RevokedReason string     `json:"revoked_reason"`
	Active        bool       `json:"active"`
}

// revokeGrant is an admin's DELETE /api/v1/oauth/grants/{id}.
func (g *builtinOAuthGateway) revokeGrant(t *testing.T, id string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodDelete, g.url()+"/api/v1/oauth/grants/"+url.PathEscape(id), nil)
	req.Header.Set("Authorization", "Bearer "+oauthAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE /api/v1/oauth/grants/%s: %d %s", id, resp.StatusCode, b)
	}
}

// checkChallenge checks a 401 of an MCP endpoint: a Bearer challenge
// pointing at the endpoint's protected resource metadata (RFC 9728).
func checkChallenge(t *testing.T, base, path string, a answer) {
	t.Helper()
	cs, err := oauthex.ParseWWWAuthenticate(a.challenge)
	if a.status != http.StatusUnauthorized || err != nil || len(cs) != 1 || cs[0].Scheme != "bearer" {
		t.Fatalf("answer %+v: want 401 with one Bearer challenge (%v)", a, err)
	}
	if want := base + "/.well-known/oauth-protected-resource" + path; cs[0].Params["resource_metadata"] != want {
		t.Errorf("challenge %v: resource_metadata want %s", cs[0].Params, want)
	}
}

// pkce is a PKCE verifier and its S256 challenge.
func pkce() (verifier, challenge string) {
	raw := make([]byte, 32)
	rand.Read(raw) // never fails (crypto/rand, Go ≥ 1.24)
	verifier = base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// tokenResponse is a token endpoint's answer, or its error.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
	Error        string `json:"error"`
}

// postToken posts form to the token endpoint.
func postToken(t *testing.T, endpoint string, form url.Values) (int, tokenResponse) {
	t.Helper()
	resp, err := http.PostForm(endpoint, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr tokenResponse
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil {
		t.Fatalf("token endpoint answer: %d, not JSON: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, tr
}

// recordingTransport adds a bearer token to every request and keeps the
// answer to the last POST (the last JSON-RPC message the client sent; its
// event stream is a GET).
type recordingTransport struct {
	mu    sync.Mutex
	token string
	last  *http.Response
}

func (rt *recordingTransport) setToken(tok string) {
	rt.mu.Lock()
	rt.token = tok
	rt.mu.Unlock()
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	tok := rt.token
	rt.mu.Unlock()
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost {
		rt.mu.Lock()
		rt.last = resp
		rt.mu.Unlock()
	}
	return resp, err
}

// TestBuiltinAuthServerFlow runs the MCP authorization flow against the
// gateway's own authorization server as an MCP client does, from the first
// 401 to a revoked grant: discovery (RFC 9728, RFC 8414), dynamic
// registration (RFC 7591), authorization code with PKCE through the
// sign-in (API key) and consent pages, token exchange with a resource
// (RFC 8707); a go-sdk client then lists and calls demo.echo on /mcp, and
// on /servers/demo/mcp with a token for that endpoint (neither token
// opens the other endpoint); the refresh token rotates; revoking the grant (admin REST) ends
// its access token at the next request (401 with the RFC 9728 challenge)
// and its refresh token.
func TestBuiltinAuthServerFlow(t *testing.T) {
	g := startBuiltinOAuthGateway(t, "")
	base := g.url()
	ctx := t.Context()

	// The 401 that starts it all.
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	post := func(path, token string) answer {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return answer{method: req.Method, path: path, bearer: token != "", status: resp.StatusCode,
			challenge: resp.Header.Values("WWW-Authenticate")}
	}
	first := post("/mcp", "")
	checkChallenge(t, base, "/mcp", first)

	// Discovery, with the go-sdk's checks (resource, issuer, PKCE, URL schemes).
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, base+"/.well-known/oauth-protected-resource/mcp", base+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(prm.AuthorizationServers, []string{base}) {
		t.Fatalf("authorization_servers = %v, want the gateway %s", prm.AuthorizationServers, base)
	}
	asm, err := oauthex.GetAuthServerMeta(ctx, base+"/.well-known/oauth-authorization-server", base, nil)
	if err != nil || asm == nil {
		t.Fatalf("authorization server metadata: %v", err)
	}
	if !slices.Contains(asm.CodeChallengeMethodsSupported, "S256") || asm.RegistrationEndpoint != base+"/oauth/register" {
		t.Fatalf("metadata %+v", asm)
	}

	// Dynamic registration of a public native client.
	const redirect = "http://127.0.0.1/callback"
	reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		ClientName: "e2e native app", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none",
		GrantTypes: []string{"authorization_code", "refresh_token"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}

	// authorize runs one authorization for resource and returns its tokens.
	authorize := func(resource string) tokenResponse {
		t.Helper()
		verifier, challenge := pkce()
		q := url.Values{"response_type": {"code"}, "client_id": {reg.ClientID}, "redirect_uri": {"http://127.0.0.1:49152/callback"},
			"state": {"e2e-state"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
			"resource": {resource}, "scope": {strings.Join(prm.ScopesSupported, " ")}}
		back := g.signInAndConsent(t, asm.AuthorizationEndpoint+"?"+q.Encode(), oauthAdminKey, "e2e native app")
		// The loopback redirect keeps the port the client asked for (OAuth 2.1 §8.4.2).
		if back.Host != "127.0.0.1:49152" || back.Path != "/callback" || back.Query().Get("state") != "e2e-state" ||
			back.Query().Get("iss") != base {
			t.Fatalf("redirect back %s", back)
		}
		status, tk := postToken(t, asm.TokenEndpoint, url.Values{"grant_type": {"authorization_code"}, "client_id": {reg.ClientID},
			"code": {back.Query().Get("code")}, "code_verifier": {verifier}, "redirect_uri": {"http://127.0.0.1:49152/callback"},
			"resource": {resource}})
		if status != http.StatusOK || tk.AccessToken == "" || tk.RefreshToken == "" || !strings.EqualFold(tk.TokenType, "bearer") {
			t.Fatalf("code exchange: %d %+v", status, tk)
		}
		return tk
	}

	// connect opens a go-sdk session on path with the tokens of rt.
	connect := func(path string, rt *recordingTransport) *mcp.ClientSession {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: "e2e-oauth-client", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + path, HTTPClient: &http.Client{Transport: rt}}, nil)
		if err != nil {
			t.Fatalf("connect %s: %v", path, err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	echo := func(cs *mcp.ClientSession, tool, text string) error {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text}})
		if err != nil {
			return err
		}
		if got := textOf(res); res.IsError || got != text {
			t.Fatalf("%s = %q (isError %v), want %q", tool, got, res.IsError, text)
		}
		return nil
	}

	// The whole gateway: /mcp.
	gw := authorize(base + "/mcp")
	gwRT := &recordingTransport{token: gw.AccessToken}
	cs := connect("/mcp", gwRT)
	if tools := toolNames(t, cs); tools["demo.echo"] == nil {
		t.Fatalf("tools/list on /mcp = %v", keys(tools))
	}
	if err := echo(cs, "demo.echo", "through the gateway"); err != nil {
		t.Fatal(err)
	}

	// One server: /servers/demo/mcp, its tools under their own names.
	one := authorize(base + "/servers/demo/mcp")
	ds := connect("/servers/demo/mcp", &recordingTransport{token: one.AccessToken})
	if tools := toolNames(t, ds); tools["echo"] == nil || tools["demo.echo"] != nil {
		t.Fatalf("tools/list on /servers/demo/mcp = %v", keys(tools))
	}
	if err := echo(ds, "echo", "through one server"); err != nil {
		t.Fatal(err)
	}
	// identity's audience rule: an endpoint's token opens that endpoint
	// only (a token for the gateway as a whole would open both).
	for _, tc := range []struct{ path, token, aud string }{
		{"/mcp", one.AccessToken, "/servers/demo/mcp"},
		{"/servers/demo/mcp", gw.AccessToken, "/mcp"},
	} {
		if a := post(tc.path, tc.token); a.status != http.StatusUnauthorized {
			t.Errorf("a token for %s on %s: %d, want 401", tc.aud, tc.path, a.status)
		} else {
			checkChallenge(t, base, tc.path, a)
		}
	}

	grants := g.grants(t, "client_id="+url.QueryEscape(reg.ClientID))
	var grant oauthGrant
	for _, gr := range grants {
		if gr.Resource == base+"/mcp" {
			grant = gr
		}
	}
	if len(grants) != 2 || grant.ID == "" || !grant.Active || grant.Subject == "" || grant.ClientName != "e2e native app" {
		t.Fatalf("grants of the client = %+v", grants)
	}

	// The refresh token rotates; the new access token works on the same session.
	status, refreshed := postToken(t, asm.TokenEndpoint, url.Values{"grant_type": {"refresh_token"}, "client_id": {reg.ClientID},
		"refresh_token": {gw.RefreshToken}, "resource": {base + "/mcp"}})
	if status != http.StatusOK || refreshed.RefreshToken == "" || refreshed.RefreshToken == gw.RefreshToken {
		t.Fatalf("refresh: %d %+v", status, refreshed)
	}
	gwRT.setToken(refreshed.AccessToken)
	if err := echo(cs, "demo.echo", "after a refresh"); err != nil {
		t.Fatal(err)
	}

	// An admin revokes the grant: the next request is refused with the
	// challenge that sends a client back to the authorization server.
	g.revokeGrant(t, grant.ID)
	if err := echo(cs, "demo.echo", "after the revocation"); err == nil {
		t.Fatal("demo.echo succeeded with the access token of a revoked grant")
	}
	gwRT.mu.Lock()
	last := gwRT.last
	gwRT.mu.Unlock()
	checkChallenge(t, base, "/mcp", answer{status: last.StatusCode, challenge: last.Header.Values("WWW-Authenticate")})
	if a := post("/mcp", refreshed.AccessToken); a.status != http.StatusUnauthorized {
		t.Errorf("a new session with the revoked grant's access token: %d, want 401", a.status)
	}
	// Neither refresh token opens it again.
	for _, rtok := range []string{refreshed.RefreshToken, gw.RefreshToken} {
		status, tk := postToken(t, asm.TokenEndpoint, url.Values{"grant_type": {"refresh_token"}, "client_id": {reg.ClientID},
			"refresh_token": {rtok}})
		if status != http.StatusBadRequest || tk.Error != "invalid_grant" || tk.AccessToken != "" {
			t.Errorf("refresh after the revocation: %d %+v, want 400 invalid_grant", status, tk)
		}
	}
	for _, gr := range g.grants(t, "client_id="+url.QueryEscape(reg.ClientID)) {
		if gr.ID == grant.ID && (gr.Active || gr.RevokedAt == nil || !strings.Contains(gr.RevokedReason, "revoked by")) {
			t.Errorf("revoked grant listed as %+v", gr)
		}
	}
	// The other grant stands.
	if err := echo(ds, "echo", "the other grant stands"); err != nil {
		t.Fatalf("the grant for /servers/demo/mcp after revoking the other: %v", err)
	}
}

// textOf is the text content of a tool result.
func textOf(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

// mcpRemote is mcp-remote (npm, pinned in testdata/npm) bridging a go-sdk
// client over stdio to one of the gateway's MCP endpoints, running the
// OAuth flow by itself: discovery, registration, the authorization URL
// (which it prints, having no browser to open), its loopback callback,
// tokens, refresh.
type mcpRemote struct {
	cs     *mcp.ClientSession
	stderr *authURLWatcher
	dir    string // MCP_REMOTE_CONFIG_DIR: its token store
}

// authURLWatcher is mcp-remote's stderr: it keeps the text and passes on
// each authorization URL printed.
type authURLWatcher struct {
	mu      sync.Mutex
	text    strings.Builder
	partial string
	marked  bool            // the previous line announced a URL
	seen    map[string]bool // with --debug each message is printed twice
	urls    chan string
}

const authURLMarker = "Please authorize this client by visiting:"

func (w *authURLWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text.Write(p)
	w.partial += string(p)
	for {
		line, rest, ok := strings.Cut(w.partial, "\n")
		if !ok {
			break
		}
		w.partial = rest
		line = strings.TrimSpace(line)
		switch {
		case strings.Contains(line, authURLMarker):
			w.marked = true
		case w.marked && line != "":
			w.marked = false
			if w.seen[line] {
				continue
			}
			w.seen[line] = true
			select {
			case w.urls <- line:
			default: // the test asks for no more; count it all the same
			}
		}
	}
	return len(p), nil
}

// count is how many authorization URLs were printed: how many
// authorizations mcp-remote started (each has its own state and PKCE
// challenge).
func (w *authURLWatcher) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

func (w *authURLWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.text.String()
}

// startMCPRemote runs mcp-remote for the gateway's endpoint path and
// connects a go-sdk client to it; the connection needs the first
// authorization, which the user (key) gives in the browser.
func startMCPRemote(t *testing.T, g *builtinOAuthGateway, path, key string) *mcpRemote {
	t.Helper()
	node := filepath.Join(npmModule(t, "node"), "bin", "node")
	proxy := npmModule(t, "mcp-remote/dist/proxy.js")
	dir := t.TempDir()
	m := &mcpRemote{stderr: &authURLWatcher{seen: map[string]bool{}, urls: make(chan string, 4)}, dir: dir}
	// --auth-timeout: the callback waits for the test's browser as long
	// as a slow machine needs.
	cmd := exec.Command(node, proxy, g.url()+path, "--auth-timeout", "180", "--debug")
	cmd.Env = append(withoutEnv(os.Environ(), "DISPLAY", "WAYLAND_DISPLAY", "BROWSER", "MCP_REMOTE_CONFIG_DIR", "HOME"),
		"MCP_REMOTE_CONFIG_DIR="+dir, "HOME="+dir,
		// What xdg-open runs as the browser: nothing; the test is the browser.
		"BROWSER=true")
	cmd.Stderr = m.stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mcp-remote %s stderr:\n%s", path, m.stderr.String())
			logs, _ := filepath.Glob(filepath.Join(dir, "*debug.log"))
			more, _ := filepath.Glob(filepath.Join(dir, "*", "*debug.log"))
			for _, f := range append(logs, more...) {
				b, _ := os.ReadFile(f)
				t.Logf("%s:\n%s", f, b)
			}
		}
	})
	m.authorizeDuring(t, g, key, func() error {
		c := mcp.NewClient(&mcp.Implementation{Name: "e2e-mcp-remote-host", Version: "1"}, nil)
		cs, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			return err
		}
		m.cs = cs
		return nil
	})
	t.Cleanup(func() { m.cs.Close() })
	return m
}

// withoutEnv drops the named variables from env.
func withoutEnv(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
}

// authorizeDuring runs do, during which mcp-remote must ask for an
// authorization: the test then is the user's browser on the URL it
// printed (sign-in with key, consent), and follows the last redirect to
// mcp-remote's own callback. It fails the test unless do then succeeds.
func (m *mcpRemote) authorizeDuring(t *testing.T, g *builtinOAuthGateway, key string, do func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- do() }()
	const patience = 3 * time.Minute // generous: npm start-up on a busy machine
	select {
	case authURL := <-m.stderr.urls:
		back := g.signInAndConsent(t, authURL, key, "MCP CLI Proxy") // its client_name
		// The redirect is to mcp-remote's loopback callback, which answers
		// once it has exchanged the code.
		if back.Scheme != "http" || !isLoopbackName(back.Hostname()) {
			t.Fatalf("redirect back to %s: not a loopback callback", back)
		}
		// Mid-session, mcp-remote prints the URL before its callback server
		// listens (a person takes longer than that to sign in): a refused
		// connection is tried again.
		var resp *http.Response
		deadline := time.Now().Add(patience)
		for {
			var err error
			resp, err = (&http.Client{Timeout: patience}).Get(back.String())
			if err == nil {
				break
			}
			if !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
				t.Fatalf("mcp-remote's callback %s: %v", back, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("mcp-remote's callback: %d\n%s", resp.StatusCode, body)
		}
	case err := <-done:
		t.Fatalf("mcp-remote asked for no authorization (result %v)", err)
	case <-time.After(patience):
		t.Fatal("mcp-remote printed no authorization URL")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after the authorization: %v", err)
		}
	case <-time.After(patience):
		t.Fatal("mcp-remote did not go on after the authorization")
	}
}

// isLoopbackName reports whether host is this machine by name or address.
func isLoopbackName(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// echo calls tool (demo's echo) through mcp-remote.
func (m *mcpRemote) echo(t *testing.T, tool, text string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	res, err := m.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text}})
	if err != nil {
		return err
	}
	if got := textOf(res); res.IsError || got != text {
		return fmt.Errorf("%s = %q (isError %v), want %q", tool, got, res.IsError, text)
	}
	return nil
}

// TestMCPRemoteBuiltinAuthServer drives mcp-remote 0.15.1, the bridge
// desktop hosts use for OAuth servers, against the gateway's own
// authorization server, to the end and through both kinds of endpoint:
// it discovers, registers, prints the authorization URL, and the test
// signs in and consents as the user's browser would and follows the
// redirect to mcp-remote's callback; a go-sdk client on mcp-remote's stdio
// then lists and calls demo.echo. With access tokens of 3 s, a call after
// expiry succeeds by a refresh, without a new authorization; revoking the
// grant (admin REST) gets the next call a 401, and mcp-remote starts a new
// authorization. On /servers/demo/mcp the tools keep their own names.
func TestMCPRemoteBuiltinAuthServer(t *testing.T) {
	npmModule(t, "mcp-remote/dist/proxy.js")
	const ttl = 3 * time.Second
	g := startBuiltinOAuthGateway(t, fmt.Sprintf("      access_token_ttl_seconds: %d\n", int(ttl/time.Second)))
	base := g.url()

	t.Run("/mcp", func(t *testing.T) {
		m := startMCPRemote(t, g, "/mcp", oauthAdminKey)
		if tools := toolNames(t, m.cs); tools["demo.echo"] == nil {
			t.Fatalf("tools/list through mcp-remote = %v", keys(tools))
		}
		if err := m.echo(t, "demo.echo", "through mcp-remote"); err != nil {
			t.Fatal(err)
		}
		active := g.grants(t, "active=true")
		if len(active) != 1 || active[0].Resource != base+"/mcp" || active[0].ClientName == "" {
			t.Fatalf("grants after mcp-remote's authorization: %+v", active)
		}
		grant := active[0]

		// The access token expires; the next call is served all the same,
		// through a refresh of the same grant and no new authorization.
		expired := time.Now().Add(ttl + time.Second)
		time.Sleep(time.Until(expired))
		if err := m.echo(t, "demo.echo", "after the access token expired"); err != nil {
			t.Fatal(err)
		}
		if n := m.stderr.count(); n != 1 {
			t.Fatalf("mcp-remote printed %d authorization URLs, want the first only", n)
		}
		active = g.grants(t, "active=true")
		if len(active) != 1 || active[0].ID != grant.ID || active[0].RefreshedAt == nil || active[0].RefreshedAt.Before(expired) {
			t.Fatalf("grants after the expiry: %+v, want %s refreshed after %s", active, grant.ID, expired)
		}

		// An admin revokes the grant: the next call is refused (401 with
		// the challenge) and mcp-remote asks the user again.
		g.revokeGrant(t, grant.ID)
		from := g.answers.len()
		m.authorizeDuring(t, g, oauthAdminKey, func() error { return m.echo(t, "demo.echo", "after the revocation") })
		if n := m.stderr.count(); n != 2 {
			t.Errorf("mcp-remote printed %d authorization URLs, want 2", n)
		}
		var refused []answer
		for _, a := range g.answers.since(from) {
			if a.status == http.StatusUnauthorized && a.bearer {
				refused = append(refused, a)
			}
		}
		if len(refused) == 0 {
			t.Fatalf("no 401 to mcp-remote's bearer after the revocation; answers %+v", g.answers.since(from))
		}
		checkChallenge(t, base, "/mcp", refused[0])
		active = g.grants(t, "active=true")
		if len(active) != 1 || active[0].ID == grant.ID {
			t.Fatalf("grants after the new authorization: %+v", active)
		}
		if err := m.echo(t, "demo.echo", "with the new grant"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("/servers/demo/mcp", func(t *testing.T) {
		m := startMCPRemote(t, g, "/servers/demo/mcp", oauthAdminKey)
		tools := toolNames(t, m.cs)
		if tools["echo"] == nil || tools["demo.echo"] != nil {
			t.Fatalf("tools/list through mcp-remote on /servers/demo/mcp = %v", keys(tools))
		}
		if err := m.echo(t, "echo", "through one server"); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, gr := range g.grants(t, "active=true") {
			found = found || gr.Resource == base+"/servers/demo/mcp"
		}
		if !found {
			t.Errorf("no grant for %s/servers/demo/mcp: %+v", base, g.grants(t, "active=true"))
		}
	})
}
