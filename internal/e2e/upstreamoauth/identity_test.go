package upstreamoauth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/propagate"
)

// seenRequest is one POST an upstream received: the JSON-RPC method, the
// tool's name for a tools/call, and the identity header as sent.
type seenRequest struct {
	method, tool, assertion string
}

// recordingUpstream is the demo server over Streamable HTTP behind a
// handler that records, per request, the header the gateway's assertions
// travel in.
type recordingUpstream struct {
	srv    *httptest.Server
	header string

	mu   sync.Mutex
	seen []seenRequest
}

func newRecordingUpstream(t *testing.T, header string) *recordingUpstream {
	t.Helper()
	u := &recordingUpstream{header: header}
	h := demo.Handler(nil)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			_ = json.Unmarshal(body, &msg)
			u.mu.Lock()
			u.seen = append(u.seen, seenRequest{method: msg.Method, tool: msg.Params.Name, assertion: r.Header.Get(header)})
			u.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *recordingUpstream) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenRequest(nil), u.seen...)
}

// jwksVerifier verifies assertions with the keys a gateway publishes at
// propagate.JWKSPath, fetched as an upstream would: without credentials.
type jwksVerifier struct {
	keys map[string]*ecdsa.PublicKey
}

func fetchJWKS(t *testing.T, url string) *jwksVerifier {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Keys []struct {
			Kty, Crv, Kid, Alg, Use, X, Y string
			D                             string `json:"d"`
		} `json:"keys"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || len(doc.Keys) == 0 {
		t.Fatalf("JWKS at %s: %v %+v", url, err, doc)
	}
	v := &jwksVerifier{keys: map[string]*ecdsa.PublicKey{}}
	for _, k := range doc.Keys {
		if k.D != "" {
			t.Fatalf("the JWKS publishes a private key: %s", k.Kid)
		}
		if k.Kty != "EC" || k.Crv != "P-256" || k.Alg != "ES256" {
			t.Fatalf("unexpected key %+v", k)
		}
		x, _ := base64.RawURLEncoding.DecodeString(k.X)
		y, _ := base64.RawURLEncoding.DecodeString(k.Y)
		v.keys[k.Kid] = &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
	}
	return v
}

// verify checks an assertion as an upstream should: signature by a
// published key, ES256 only, typ, issuer, audience, expiry.
func (v *jwksVerifier) verify(raw, issuer, audience string) (jwt.MapClaims, error) {
	claims := jwt.MapClaims{}
	p := jwt.NewParser(jwt.WithValidMethods([]string{"ES256"}), jwt.WithIssuer(issuer), jwt.WithAudience(audience),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	tok, err := p.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if k, ok := v.keys[kid]; ok {
			return k, nil
		}
		return nil, fmt.Errorf("unknown kid %q", kid)
	})
	if err != nil {
		return nil, err
	}
	if typ, _ := tok.Header["typ"].(string); typ != propagate.AssertionType {
		return nil, fmt.Errorf("typ %q", typ)
	}
	return claims, nil
}

// TestIdentityPropagationAssertion: a server with `identity: {propagate:
// assertion}` receives, on each call, a JWT the gateway signed naming
// the caller, verifiable with the JWKS the gateway publishes; two callers
// on the same shared upstream session are told apart, over MCP and over
// the REST API; a server without `identity` and the gateway's own requests
// get no header; the callers' API keys never reach the upstream.
func TestIdentityPropagationAssertion(t *testing.T) {
	const header = "X-Caller-Assertion"
	up := newRecordingUpstream(t, header)
	dir := t.TempDir()
	g := startGateway(t, fmt.Sprintf(`settings:
  listen: LISTEN
auth:
  mode: keys
servers:
  who:
    transport: http
    url: %[1]s/mcp
    auto_start: true
    identity: {propagate: assertion, header: %[2]s, ttl_seconds: 30}
  plain:
    transport: http
    url: %[1]s/mcp
    auto_start: true
`, up.srv.URL, header), nil, filepath.Join(dir, "sb.db"))

	keyA, keyB := g.newKey(t, "agent-a"), g.newKey(t, "agent-b")
	// A over MCP, B over the REST API: both fronts carry the caller.
	csA := g.connect(t, keyA)
	for _, tool := range []string{"who.echo", "plain.echo"} {
		res, err := csA.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "from a"}})
		if err != nil || res.IsError {
			t.Fatalf("%s as A: %v %v", tool, err, res)
		}
	}
	for _, server := range []string{"who", "plain"} {
		code, body := g.rest(t, keyB, "POST", "/api/v1/mcp/invoke", map[string]any{"server_id": server, "tool_name": "echo", "params": map[string]any{"text": "from b"}})
		if code != http.StatusOK || body["success"] != true {
			t.Fatalf("invoke %s as B: %d %v", server, code, body)
		}
	}

	v := fetchJWKS(t, g.url()+propagate.JWKSPath)
	var subs, agents []string
	var toWho, toPlain int
	for _, r := range up.requests() {
		if r.method != "tools/call" {
			if r.assertion != "" {
				t.Errorf("the gateway's own %s carried an assertion", r.method)
			}
			continue
		}
		// Both servers are the same upstream: tell them apart by header.
		if r.assertion == "" {
			toPlain++
			continue
		}
		toWho++
		claims, err := v.verify(r.assertion, g.url(), up.srv.URL+"/mcp")
		if err != nil {
			t.Fatalf("assertion does not verify: %v", err)
		}
		sub, _ := claims["sub"].(string)
		agent, _ := claims["agent_id"].(string)
		exp, _ := claims.GetExpirationTime()
		iat, _ := claims.GetIssuedAt()
		if jti, _ := claims["jti"].(string); jti == "" || !strings.HasPrefix(sub, "key:") || exp.Sub(iat.Time).Seconds() != 30 {
			t.Errorf("claims %v: want a jti, a key identity as sub, a 30 s lifetime", claims)
		}
		subs, agents = append(subs, sub), append(agents, agent)
	}
	if toWho != 2 || toPlain != 2 {
		t.Fatalf("tools/call with an assertion %d, without %d; want 2 and 2: %+v", toWho, toPlain, up.requests())
	}
	if agents[0] != "agent-a" || agents[1] != "agent-b" || subs[0] == subs[1] {
		t.Errorf("callers asserted: subs %v agents %v; want A's then B's", subs, agents)
	}

	// A server registered through the REST API takes the section too.
	code, body := g.rest(t, adminKey, "POST", "/api/v1/aggregator/servers", map[string]any{
		"name": "rt", "transport_type": "HTTP", "auto_connect": true,
		"connection_config": map[string]any{"url": up.srv.URL + "/mcp"},
		"identity":          map[string]any{"propagate": "assertion", "header": header},
	})
	if code != http.StatusCreated {
		t.Fatalf("register rt: %d %v", code, body)
	}
	if id, _ := body["identity"].(map[string]any); id["propagate"] != "assertion" {
		t.Errorf("the view of rt shows identity %v", body["identity"])
	}
	waitFor(t, "rt CONNECTED", func() bool { return g.serverByName(t, adminKey, "rt")["status"] == "CONNECTED" })
	before := len(up.requests())
	if code, body := g.rest(t, keyA, "POST", "/api/v1/mcp/invoke", map[string]any{"server_id": "rt", "tool_name": "echo", "params": map[string]any{"text": "rt"}}); code != http.StatusOK || body["success"] != true {
		t.Fatalf("invoke rt as A: %d %v", code, body)
	}
	var rtAssertion string
	for _, r := range up.requests()[before:] {
		if r.method == "tools/call" {
			rtAssertion = r.assertion
		}
	}
	if claims, err := v.verify(rtAssertion, g.url(), up.srv.URL+"/mcp"); err != nil || claims["agent_id"] != "agent-a" {
		t.Errorf("the runtime server's assertion: %v %v", claims, err)
	}
	code, body = g.rest(t, adminKey, "POST", "/api/v1/aggregator/servers", map[string]any{
		"name": "bad", "transport_type": "SSE", "connection_config": map[string]any{"url": up.srv.URL + "/sse"},
		"identity": map[string]any{"propagate": "assertion"},
	})
	if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(body), "servers.bad.identity") {
		t.Errorf("identity on an sse server through the API: %d %v", code, body)
	}

	// The verifier can fail: a tampered assertion, another audience.
	var last string
	for _, r := range up.requests() {
		if r.assertion != "" {
			last = r.assertion
		}
	}
	parts := strings.Split(last, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	claims["agent_id"] = "someone-else"
	raw, _ = json.Marshal(claims)
	forged := strings.Join([]string{parts[0], base64.RawURLEncoding.EncodeToString(raw), parts[2]}, ".")
	if _, err := v.verify(forged, g.url(), up.srv.URL+"/mcp"); !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
		t.Errorf("a forged assertion: %v, want an invalid signature", err)
	}
	if _, err := v.verify(last, g.url(), "https://elsewhere.example/mcp"); !errors.Is(err, jwt.ErrTokenInvalidAudience) {
		t.Errorf("another audience: %v, want invalid audience", err)
	}

	// The upstream never saw the callers' keys; the log has no assertion.
	for _, r := range up.requests() {
		if strings.Contains(r.assertion, keyA) || strings.Contains(r.assertion, keyB) {
			t.Error("an API key reached the upstream")
		}
	}
	if strings.Contains(g.logs.String(), last) {
		t.Error("an assertion is in the gateway's log")
	}
	// The private key is sealed in the store: no PKCS#8 private key in
	// clear in the SQLite files.
	files, _ := filepath.Glob(filepath.Join(dir, "sb.db*"))
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		if bytes.Contains(raw, []byte("MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg")) {
			t.Errorf("%s holds a signing key in clear", f)
		}
	}
}
