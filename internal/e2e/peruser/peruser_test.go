// Package peruser tests per-user upstream credentials (credentials:
// per_user; docs/auth.md "Per-user credentials") end to end: a real OpenID
// provider (oidc-provider, testdata/npm/oidc-provider-peruser-fixture.mjs)
// signs people in, a real MCP server (the demo server) sits behind a
// resource-server check of its tokens that records whose token each call
// carried, and the gateway (internal/app) is between them. It is a package
// of its own so that it runs beside internal/app's long test run.
package peruser_test

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/cli"
	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/gatewaytest"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

// startIdP runs the fixture for the test's lifetime and returns its issuer.
func startIdP(t *testing.T) string {
	t.Helper()
	return oauthtest.StartOIDCProvider(t, "oidc-provider-peruser-fixture.mjs")
}

// protectedDemo is the demo server behind a resource-server check: a
// request needs an access token the IdP signed for this resource; the
// subject of every tools/call is recorded.
type protectedDemo struct {
	srv    *httptest.Server
	issuer string

	mu     sync.Mutex
	calls  []string // the subject of each tools/call, in order
	seen   []string // "subject HTTP-method MCP-method" of every request, in order
	tokens []string // every token seen, for the no-leak checks
	// refusedTokens counts the tokens the check refused.
	refusedTokens map[string]int
}

func (p *protectedDemo) resource() string { return p.srv.URL + "/mcp" }

func startProtectedDemo(t *testing.T, issuer string) *protectedDemo {
	t.Helper()
	p := &protectedDemo{issuer: issuer, refusedTokens: map[string]int{}}
	keys := map[string]*rsa.PublicKey{}
	var keysMu sync.Mutex
	keyOf := func(tok *jwt.Token) (any, error) {
		kid, _ := tok.Header["kid"].(string)
		keysMu.Lock()
		defer keysMu.Unlock()
		if k := keys[kid]; k != nil {
			return k, nil
		}
		resp, err := http.Get(issuer + "/jwks")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var set struct {
			Keys []struct{ Kid, N, E string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
			return nil, err
		}
		for _, k := range set.Keys {
			n, _ := base64.RawURLEncoding.DecodeString(k.N)
			e, _ := base64.RawURLEncoding.DecodeString(k.E)
			keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		}
		if k := keys[kid]; k != nil {
			return k, nil
		}
		return nil, fmt.Errorf("no key %q", kid)
	}
	verify := func(_ context.Context, raw string, _ *http.Request) (*auth.TokenInfo, error) {
		claims := jwt.MapClaims{}
		_, err := jwt.ParseWithClaims(raw, claims, keyOf, jwt.WithIssuer(issuer), jwt.WithAudience(p.resource()),
			jwt.WithValidMethods([]string{"RS256"}), jwt.WithExpirationRequired())
		if err != nil {
			p.mu.Lock()
			p.refusedTokens[raw]++
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		sub, _ := claims.GetSubject()
		exp, _ := claims.GetExpirationTime()
		p.mu.Lock()
		p.tokens = append(p.tokens, raw)
		p.mu.Unlock()
		return &auth.TokenInfo{UserID: sub, Expiration: exp.Time, Scopes: strings.Fields(fmt.Sprint(claims["scope"]))}, nil
	}
	server := demo.NewServer(nil)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sub := auth.TokenInfoFromContext(r.Context()).UserID
		var msg struct{ Method string }
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			_ = json.Unmarshal(body, &msg)
		}
		p.mu.Lock()
		p.seen = append(p.seen, sub+" "+r.Method+" "+msg.Method)
		if msg.Method == "tools/call" {
			p.calls = append(p.calls, sub)
		}
		p.mu.Unlock()
		mcpHandler.ServeHTTP(w, r)
	})
	p.srv = oauthtest.NewProtectedServer(t, record, verify, issuer, "mcp")
	return p
}

func (p *protectedDemo) lastCall() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.calls) == 0 {
		return ""
	}
	return p.calls[len(p.calls)-1]
}

const (
	adminKey  = "peruser-admin-bootstrap-key"
	secretKey = "c3dpdGNoYm9hcmQtdGVzdC1zZWNyZXQta2V5LTMyYnk="
)

type gateway struct {
	url  string
	logs *logtest.Buffer
	db   string
}

// startGateway starts a gateway in front of upstreamURL on store: a
// PostgreSQL DSN, or "" for a new SQLite file.
func startGateway(t *testing.T, upstreamURL, store string) *gateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if store == "" {
		store = filepath.Join(t.TempDir(), "switchboard.db")
	}
	yaml := "settings:\n  listen: " + ln.Addr().String() + "\nauth:\n  mode: keys\nservers:\n  crm:\n    transport: http\n    url: " + upstreamURL +
		"\n    credentials: per_user\n    user_session_idle_seconds: 1\n    auto_start: true\n"
	g := gatewaytest.Start(t, yaml, &gatewaytest.Options{Env: map[string]string{"SWITCHBOARD_ADMIN_KEY": adminKey, "SWITCHBOARD_SECRET_KEY": secretKey},
		Store: store, Listener: ln})
	return &gateway{url: g.URL(), logs: g.Logs, db: store}
}

// rest calls the API as key and returns the status and the raw body.
func (g *gateway) rest(t *testing.T, key, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, g.url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

func (g *gateway) newKey(t *testing.T, agent string) string {
	t.Helper()
	code, raw := g.rest(t, adminKey, "POST", "/api/v1/keys", map[string]any{"agent_id": agent, "workspace_policy": true})
	var res struct{ Key string }
	if code != 201 || json.Unmarshal(raw, &res) != nil || res.Key == "" {
		t.Fatalf("create key for %s: %d %s", agent, code, raw)
	}
	return res.Key
}

// browse is the person's browser at authURL: it signs in as account (the
// fixture's login_hint) and follows the redirects back to the gateway.
func browse(t *testing.T, authURL, account string) {
	t.Helper()
	if err := signIn(authURL, account); err != nil {
		t.Fatal(err)
	}
}

func signIn(authURL, account string) error {
	u, err := url.Parse(authURL)
	if err != nil {
		return err
	}
	q := u.Query()
	q.Set("login_hint", account)
	u.RawQuery = q.Encode()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(u.String())
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/oauth/upstream/callback" {
		return fmt.Errorf("sign-in as %s ended at %s: %d %s", account, resp.Request.URL.Redacted(), resp.StatusCode, body)
	}
	return nil
}

type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t *testing.T, g *gateway, key string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "peruser-test", Version: "1"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{key}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callEcho(t *testing.T, cs *mcp.ClientSession) (string, error) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "crm.echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("tool error: %s", sb.String())
	}
	return sb.String(), nil
}

// link runs the OAuth linking of agent's account on crm as the person
// signed in at the IdP as account, through the API (what `switchboard
// connect-account crm` does).
func link(t *testing.T, g *gateway, key, account string) {
	t.Helper()
	code, raw := g.rest(t, key, "POST", "/api/v1/me/accounts/crm/connect", nil)
	var f struct {
		State            string `json:"state"`
		AuthorizationURL string `json:"authorization_url"`
	}
	if code != 200 || json.Unmarshal(raw, &f) != nil || f.AuthorizationURL == "" {
		t.Fatalf("connect-account: %d %s", code, raw)
	}
	browse(t, f.AuthorizationURL, account)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, raw = g.rest(t, key, "GET", "/api/v1/me/accounts/crm", nil)
		if err := json.Unmarshal(raw, &f); err == nil && f.State == "done" {
			return
		}
		if f.State == "failed" || time.Now().After(deadline) {
			t.Fatalf("linking %s: %d %s", account, code, raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestMain(m *testing.M) { os.Exit(storetest.PostgresMain(m)) }

// TestPerUserAccounts, on SQLite and on PostgreSQL: users A and B link
// their own accounts at a real IdP (A through the API, B with
// `switchboard connect-account`); the upstream sees A's subject on A's
// calls and B's on B's, each on a session of their own, closed when idle;
// C, who linked nothing, gets upstream_auth_required naming how to link,
// audited; a go-sdk client declaring URL elicitation gets the
// authorization URL in an elicitation and its call goes on once the
// person signed in; a personal bearer token is sent as stored, and only
// deleted by an admin. No token is in the logs, the API's answers, the
// audit rows, the metrics, the SQLite files or a pg_dump.
func TestPerUserAccounts(t *testing.T) {
	issuer := startIdP(t)
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			dsn := ""
			if store == "postgres" {
				dsn = storetest.StartPostgres(t)
			}
			testPerUserAccounts(t, issuer, dsn)
		})
	}
}

func testPerUserAccounts(t *testing.T, issuer, dsn string) {
	up := startProtectedDemo(t, issuer)
	g := startGateway(t, up.resource(), dsn)
	keyA, keyB, keyC, keyD := g.newKey(t, "agent-a"), g.newKey(t, "agent-b"), g.newKey(t, "agent-c"), g.newKey(t, "agent-d")

	// Nobody linked an account: the server cannot list its tools yet.
	code, raw := g.rest(t, adminKey, "GET", "/api/v1/aggregator/servers/crm", nil)
	if code != 200 || !strings.Contains(string(raw), "NEEDS_AUTH") || !strings.Contains(string(raw), "connect-account crm") {
		t.Fatalf("crm before any account: %d %s", code, raw)
	}

	link(t, g, keyA, "alice")
	waitConnected(t, g)
	linkWithCLI(t, g, keyB, "bob")

	csA, csB, csC := connect(t, g, keyA, nil), connect(t, g, keyB, nil), connect(t, g, keyC, nil)
	for i := range 3 {
		for _, c := range []struct {
			cs   *mcp.ClientSession
			want string
		}{{csA, "alice"}, {csB, "bob"}} {
			if _, err := callEcho(t, c.cs); err != nil {
				t.Fatalf("round %d, %s's call: %v", i, c.want, err)
			}
			if got := up.lastCall(); got != c.want {
				t.Fatalf("round %d: the upstream saw %q on %s's call", i, got, c.want)
			}
		}
	}

	// Pooled per caller: alice's account opened the server's own session
	// and A's, bob's one session served all of B's calls.
	if a, b := up.count("alice POST initialize"), up.count("bob POST initialize"); a != 2 || b != 1 {
		t.Errorf("sessions initialized: alice %d (want 2: the server's and A's), bob %d (want 1)", a, b)
	}
	// Idle for user_session_idle_seconds (1): closed; the next call opens
	// another.
	waitFor(t, "A's and B's idle sessions to close", func() bool {
		return up.count("alice DELETE ") == 1 && up.count("bob DELETE ") == 1
	})
	if _, err := callEcho(t, csA); err != nil || up.lastCall() != "alice" || up.count("alice POST initialize") != 3 {
		t.Fatalf("A's call after the idle close: %v, seen by %q, alice sessions %d", err, up.lastCall(), up.count("alice POST initialize"))
	}

	// C linked nothing.
	_, err := callEcho(t, csC)
	if err == nil || !strings.Contains(err.Error(), "upstream_auth_required") || !strings.Contains(err.Error(), "connect-account crm") {
		t.Fatalf("C's call: %v, want upstream_auth_required naming connect-account", err)
	}
	code, raw = g.rest(t, keyC, "POST", "/api/v1/tools/call", map[string]any{"name": "crm.echo", "arguments": map[string]any{"text": "x"}})
	if code != 403 || !strings.Contains(string(raw), `"code":"upstream_auth_required"`) {
		t.Fatalf("C's REST call: %d %s", code, raw)
	}
	code, raw = g.rest(t, adminKey, "GET", "/api/v1/audit?agent_id=agent-c", nil)
	if code != 200 || !strings.Contains(string(raw), "upstream_auth_required") {
		t.Fatalf("audit of C's calls: %d %s", code, raw)
	}

	// D's client declares URL elicitation: the first call sends the
	// authorization URL, D signs in as dave, and the call goes on.
	var elicited []*mcp.ElicitParams
	csD := connect(t, g, keyD, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicited = append(elicited, req.Params)
			go func() {
				if err := signIn(req.Params.URL, "dave"); err != nil {
					t.Error(err)
				}
			}()
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	if _, err := callEcho(t, csD); err != nil {
		t.Fatalf("D's call after the elicitation: %v", err)
	}
	if len(elicited) != 1 || elicited[0].Mode != "url" || !strings.HasPrefix(elicited[0].URL, issuer+"/auth?") {
		t.Fatalf("D's client was elicited %+v", elicited)
	}
	if got := up.lastCall(); got != "dave" {
		t.Fatalf("the upstream saw %q on D's call", got)
	}

	// E's client declines: the call fails with upstream_auth_required,
	// saying so.
	keyE := g.newKey(t, "agent-e")
	csE := connect(t, g, keyE, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	if _, err := callEcho(t, csE); err == nil || !strings.Contains(err.Error(), "upstream_auth_required") || !strings.Contains(err.Error(), "declined") {
		t.Fatalf("E's call after declining: %v", err)
	}

	// A personal bearer token replaces C's nothing; the upstream refuses
	// it (it is no token of the IdP's), so C's call fails at the
	// upstream, not with upstream_auth_required.
	const personal = "personal-secret-token-of-agent-c-0123456789"
	if code, out := runCLI(t, g, keyC, map[string]string{"C_TOKEN": personal}, "connect-account", "crm", "--bearer-env", "C_TOKEN"); code != 0 || !strings.Contains(out, "bearer credential is stored") {
		t.Fatalf("storing C's personal token with the CLI: exit %d\n%s", code, out)
	}
	if code, raw = g.rest(t, keyA, "PUT", "/api/v1/me/accounts/crm", map[string]any{"type": "bearer", "token": "a\r\nb"}); code != 400 || strings.Contains(string(raw), "a\r\nb") {
		t.Fatalf("a bad personal credential: %d %s", code, raw)
	}
	before := up.count(" POST initialize")
	if _, err := callEcho(t, csC); err == nil || strings.Contains(err.Error(), "connect-account crm` (OAuth)") {
		t.Fatalf("C's call with a personal token the upstream refuses: %v", err)
	}
	if up.count(" POST initialize") != before {
		t.Fatal("the upstream accepted C's personal token")
	}
	if up.refused(personal) == 0 {
		t.Fatal("C's personal token never reached the upstream")
	}

	// Nobody else sees a credential: the admin's list names kinds only,
	// and C's own view has no token either.
	code, raw = g.rest(t, adminKey, "GET", "/api/v1/aggregator/servers/crm/accounts", nil)
	if code != 200 || !strings.Contains(string(raw), `"subject":"agent-c"`) || !strings.Contains(string(raw), `"kind":"bearer"`) {
		t.Fatalf("admin's list: %d %s", code, raw)
	}
	seen := [][]byte{raw}
	_, raw = g.rest(t, keyC, "GET", "/api/v1/me/accounts", nil)
	seen = append(seen, raw)
	// The admin may delete C's credential, which C then lacks again.
	if code, raw = g.rest(t, adminKey, "DELETE", "/api/v1/aggregator/servers/crm/accounts/agent-c", nil); code != 204 {
		t.Fatalf("admin's delete: %d %s", code, raw)
	}
	if _, err := callEcho(t, csC); err == nil || !strings.Contains(err.Error(), "upstream_auth_required") {
		t.Fatalf("C's call after the admin's delete: %v", err)
	}
	// A unlinks the account the server's own session went as: the server
	// reconnects as the newest linked one (dave's); A is refused, B served.
	daveSessions := up.count("dave POST initialize")
	if code, raw = g.rest(t, keyA, "DELETE", "/api/v1/me/accounts/crm", nil); code != 204 {
		t.Fatalf("A's unlink: %d %s", code, raw)
	}
	waitFor(t, "crm to reconnect as dave", func() bool { return up.count("dave POST initialize") > daveSessions })
	waitConnected(t, g)
	if _, err := callEcho(t, csA); err == nil || !strings.Contains(err.Error(), "upstream_auth_required") {
		t.Fatalf("A's call after unlinking: %v", err)
	}
	if _, err := callEcho(t, csB); err != nil || up.lastCall() != "bob" {
		t.Fatalf("B's call after the reconnect: %v (seen by %q)", err, up.lastCall())
	}

	// Registered at run time: the field is validated as the file's.
	code, raw = g.rest(t, adminKey, "POST", "/api/v1/aggregator/servers", map[string]any{"name": "crm2", "transport_type": "HTTP",
		"connection_config": map[string]any{"url": up.resource()}, "credentials": "per_user", "user_session_idle_seconds": 30})
	if code != 201 || !strings.Contains(string(raw), `"credentials":"per_user"`) || !strings.Contains(string(raw), `"user_session_idle_seconds":30`) {
		t.Fatalf("registering a per_user server: %d %s", code, raw)
	}
	code, raw = g.rest(t, adminKey, "POST", "/api/v1/aggregator/servers", map[string]any{"name": "crm3", "transport_type": "HTTP",
		"connection_config": map[string]any{"url": up.resource()}, "credentials": "everyone"})
	if code != 422 || !strings.Contains(string(raw), "servers.crm3.credentials") {
		t.Fatalf("registering a bad credentials value: %d %s", code, raw)
	}
	code, audit := g.rest(t, adminKey, "GET", "/api/v1/audit", nil)
	if code != 200 {
		t.Fatalf("audit: %d", code)
	}
	seen = append(seen, audit, []byte(g.logs.String()))
	code, metrics := g.rest(t, adminKey, "GET", "/metrics", nil)
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	seen = append(seen, metrics)
	if dsn == "" {
		dbFiles, _ := filepath.Glob(g.db + "*")
		for _, f := range dbFiles {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			seen = append(seen, b)
		}
	} else {
		dump := []byte(storetest.Dump(t, dsn))
		if !bytes.Contains(dump, []byte("upstream_tokens")) || !bytes.Contains(dump, []byte("agent-a")) {
			t.Fatal("the dump holds no per-user grant: was it stored at all?")
		}
		seen = append(seen, dump)
	}
	up.mu.Lock()
	tokens := append([]string{personal}, up.tokens...)
	up.mu.Unlock()
	if len(tokens) < 4 {
		t.Fatalf("the upstream saw only %d tokens", len(tokens))
	}
	for _, tok := range tokens {
		for i, b := range seen {
			if bytes.Contains(b, []byte(tok)) || bytes.Contains(b, []byte(tok[len(tok)-20:])) {
				t.Errorf("a token is in clear in place %d of %d", i, len(seen))
			}
		}
	}
}

// count is how many requests the upstream saw whose "subject HTTP-method
// MCP-method" line contains part.
func (p *protectedDemo) count(part string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.seen {
		if strings.Contains(s, part) {
			n++
		}
	}
	return n
}

// refused is how many times the resource server refused tok.
func (p *protectedDemo) refused(tok string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusedTokens[tok]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runCLI runs the switchboard command line against g as key.
func runCLI(t *testing.T, g *gateway, key string, env map[string]string, args ...string) (int, string) {
	t.Helper()
	out := &logtest.Buffer{}
	code := runCLIInto(t.Context(), out, g, key, env, args...)
	return code, out.String()
}

func runCLIInto(ctx context.Context, out *logtest.Buffer, g *gateway, key string, env map[string]string, args ...string) int {
	getenv := func(k string) string {
		switch k {
		case "SWITCHBOARD_URL":
			return g.url
		case "SWITCHBOARD_API_KEY":
			return key
		}
		return env[k]
	}
	return cli.Run(ctx, args, strings.NewReader(""), out, out, getenv)
}

// linkWithCLI is link through `switchboard connect-account crm`, which
// prints the URL and waits for the person to sign in.
func linkWithCLI(t *testing.T, g *gateway, key, account string) {
	t.Helper()
	out := &logtest.Buffer{}
	done := make(chan int, 1)
	go func() { done <- runCLIInto(t.Context(), out, g, key, nil, "connect-account", "crm") }()
	var authURL string
	waitFor(t, "connect-account to print the URL", func() bool {
		for _, f := range strings.Fields(out.String()) {
			if strings.HasPrefix(f, "http") && strings.Contains(f, "/auth?") {
				authURL = f
				return true
			}
		}
		return false
	})
	browse(t, authURL, account)
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(out.String(), "crm: your account is linked") {
			t.Fatalf("connect-account exited %d:\n%s", code, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("connect-account did not end:\n%s", out.String())
	}
}

// waitConnected waits for crm to list its tools.
func waitConnected(t *testing.T, g *gateway) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, raw := g.rest(t, adminKey, "GET", "/api/v1/aggregator/servers/crm", nil)
		if code == 200 && strings.Contains(string(raw), `"CONNECTED"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("crm did not connect: %d %s", code, raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
