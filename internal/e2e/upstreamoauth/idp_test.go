package upstreamoauth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
)

// idp is a running testdata/npm/oidc-upstream-fixture.mjs.
type idp struct {
	issuer       string
	clientSecret string // of client "gateway"
	rsSecret     string // of client "rs"
}

// startIdP runs the fixture for the test's lifetime, with the gateway
// callbacks it may redirect to and access tokens living ttl; extraEnv
// turns on more (token exchange).
func startIdP(t *testing.T, redirectURIs []string, ttl time.Duration, extraEnv ...string) *idp {
	t.Helper()
	p := &idp{clientSecret: "gw-client-secret-" + randomText(), rsSecret: "rs-secret-" + randomText()}
	env := append([]string{"OIDC_REDIRECT_URIS=" + strings.Join(redirectURIs, ","), "OIDC_CLIENT_SECRET=" + p.clientSecret,
		"OIDC_RS_SECRET=" + p.rsSecret, fmt.Sprintf("OIDC_ACCESS_TTL=%d", int(ttl.Seconds()))}, extraEnv...)
	p.issuer = oauthtest.StartOIDCProvider(t, "oidc-upstream-fixture.mjs", env...)
	return p
}

func randomText() string {
	return strings.ToLower(strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", ""))
}

// issue is one token the provider issued.
type issue struct {
	GrantType string `json:"grant_type"`
	At        int64  `json:"at"` // Unix ms
	ExpiresIn int64  `json:"expires_in"`
}

func (p *idp) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get(p.issuer + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// issued is the provider's log of the tokens it issued, oldest first.
func (p *idp) issued(t *testing.T) []issue {
	var out []issue
	p.getJSON(t, "/test/log", &out)
	return out
}

// tokens are the values of every access and refresh token issued.
func (p *idp) tokens(t *testing.T) []string {
	var out []string
	p.getJSON(t, "/test/tokens", &out)
	return out
}

// revokeAll revokes every grant at the provider, as its administrator.
func (p *idp) revokeAll(t *testing.T) {
	t.Helper()
	resp, err := http.Post(p.issuer+"/test/revoke", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %s", resp.Status)
	}
}

// protectedDemo is the demo server over Streamable HTTP behind a resource
// server check: every request's bearer token is introspected at the
// provider (no cache, so a revocation shows on the next request) and must
// be active and for this resource.
type protectedDemo struct {
	srv *httptest.Server
	idp *idp

	rejected atomic.Int64 // requests refused for their token
	mu       sync.Mutex
	seen     map[string]bool // access tokens presented
	calls    []seenCall      // tools/call requests, with whose token
}

// seenCall is a tools/call the resource server let through: the tool, and
// the subject the provider said the token was for.
type seenCall struct {
	tool, sub string
}

func newProtectedDemo(t *testing.T, p *idp) *protectedDemo {
	t.Helper()
	d := &protectedDemo{idp: p, seen: map[string]bool{}}
	demoHandler := demo.Handler(nil)
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
				ti := auth.TokenInfoFromContext(r.Context())
				sub, _ := ti.Extra["sub"].(string)
				d.mu.Lock()
				d.calls = append(d.calls, seenCall{tool: msg.Params.Name, sub: sub})
				d.mu.Unlock()
			}
		}
		demoHandler.ServeHTTP(w, r)
	})
	d.srv = oauthtest.NewProtectedServer(t, record, d.introspect, p.issuer, "mcp")
	return d
}

func (d *protectedDemo) resource() string { return d.srv.URL + "/mcp" }

func (d *protectedDemo) introspect(ctx context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
	d.mu.Lock()
	d.seen[tok] = true
	d.mu.Unlock()
	form := url.Values{"token": {tok}, "token_type_hint": {"access_token"}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.idp.issuer+"/token/introspection", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("rs", d.idp.rsSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var ir struct {
		Active bool   `json:"active"`
		Aud    any    `json:"aud"`
		Exp    int64  `json:"exp"`
		Scope  string `json:"scope"`
		Sub    string `json:"sub"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ir); err != nil {
		return nil, err
	}
	var auds []string
	switch a := ir.Aud.(type) {
	case string:
		auds = []string{a}
	case []any:
		for _, x := range a {
			s, _ := x.(string)
			auds = append(auds, s)
		}
	}
	if !ir.Active || !slices.Contains(auds, d.resource()) || !slices.Contains(strings.Fields(ir.Scope), "mcp") {
		d.rejected.Add(1)
		return nil, auth.ErrInvalidToken
	}
	// No UserID: the go-sdk would bind the MCP session to it, and the
	// gateway shares one session among callers whose tokens differ.
	return &auth.TokenInfo{Scopes: strings.Fields(ir.Scope), Expiration: time.Unix(ir.Exp, 0),
		Extra: map[string]any{"sub": ir.Sub}}, nil
}

func (d *protectedDemo) toolCalls() []seenCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]seenCall(nil), d.calls...)
}

func (d *protectedDemo) presented() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for tok := range d.seen {
		out = append(out, tok)
	}
	return out
}

// serverYAML is the gateway's definition of the protected demo server.
func (d *protectedDemo) serverYAML() string {
	return fmt.Sprintf(`  prot:
    transport: http
    url: %s
    auto_start: true
    auth:
      type: oauth
      client_id: gateway
      client_secret_env: UP_SECRET
      token_endpoint_auth_method: client_secret_basic
      scopes: [openid, mcp]
      issuer: %s
      refresh_margin_seconds: 5
`, d.resource(), d.idp.issuer)
}

// authorize runs the authorization-code flow of prot on g as an operator
// does: POST .../auth, then the browser (a client with a cookie jar; the
// provider signs alice in and records her consent without a page) to the
// gateway's callback; it returns once g shows prot CONNECTED.
func authorize(t *testing.T, g *gateway) {
	t.Helper()
	code, started := g.rest(t, adminKey, "POST", "/api/v1/aggregator/servers/prot/auth", nil)
	authURL, _ := started["authorization_url"].(string)
	if code != http.StatusOK || started["state"] != "pending" || authURL == "" {
		t.Fatalf("POST auth = %d %v", code, started)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/oauth/upstream/callback" {
		t.Fatalf("the browser ended at %s with %s", resp.Request.URL, resp.Status)
	}
	waitFor(t, "prot CONNECTED", func() bool {
		if g.serverByName(t, adminKey, "prot")["status"] == "CONNECTED" {
			return true
		}
		if _, st := g.rest(t, adminKey, "GET", "/api/v1/aggregator/servers/prot/auth", nil); st["state"] == "failed" {
			t.Fatalf("the flow failed: %v", st)
		}
		return false
	})
}
