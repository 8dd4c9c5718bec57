package app_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// oauthIdP is an external authorization server for the gateway's oauth
// mode: it publishes a JWKS, and signs access tokens with its key.
type oauthIdP struct {
	*httptest.Server
	key *rsa.PrivateKey
}

func newOAuthIdP(t *testing.T) *oauthIdP {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	idp := &oauthIdP{key: key}
	idp.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		json.NewEncoder(w).Encode(map[string]any{"keys": []any{map[string]any{
			"kty": "RSA", "kid": "k1", "use": "sig", "n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
		}}})
	}))
	t.Cleanup(idp.Close)
	return idp
}

// token signs an access token for aud with the seed 003 claims that let it
// use every server with default access; edit adjusts the claims.
func (idp *oauthIdP) token(t *testing.T, aud string, edit func(jwt.MapClaims)) string {
	t.Helper()
	c := jwt.MapClaims{"iss": idp.URL, "sub": "alice", "aud": aud, "scope": "mcp", "exp": time.Now().Add(time.Hour).Unix(),
		"mcpServerDenyIds": []string{}}
	if edit != nil {
		edit(c)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(idp.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func startOAuthGateway(t *testing.T) (*gateway, *oauthIdP) {
	idp := newOAuthIdP(t)
	g := startGateway(t, "auth:\n  mode: oauth\n  oauth:\n    issuer: "+idp.URL+"\n    jwks_url: "+idp.URL+"/jwks\n    scopes: [mcp]\n"+
		"servers:"+demoServer("demo")+demoServer("other"), nil)
	return g, idp
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestOAuthResourceServer: over /mcp and REST, access tokens of the
// external issuer are accepted only when valid, for this gateway and with
// the scope; refusals carry the RFC 9728 challenge.
func TestOAuthResourceServer(t *testing.T) {
	g, idp := startOAuthGateway(t)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	mcpAud := g.url() + "/mcp"
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"iss": idp.URL, "sub": "alice", "aud": mcpAud, "scope": "mcp",
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	forged := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": idp.URL, "sub": "alice", "aud": mcpAud, "scope": "mcp",
		"exp": time.Now().Add(time.Hour).Unix()})
	forged.Header["kid"] = "k1"
	tampered, _ := forged.SignedString(other)

	tests := []struct {
		name   string
		bearer string
		status int
		errPar string // the error parameter of the challenge
	}{
		{"valid", idp.token(t, mcpAud, nil), 200, ""},
		{"no token", "", 401, ""},
		{"expired", idp.token(t, mcpAud, func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), 401, "invalid_token"},
		{"wrong audience", idp.token(t, "https://elsewhere.example/mcp", nil), 401, "invalid_token"},
		{"wrong issuer", idp.token(t, mcpAud, func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), 401, "invalid_token"},
		{"alg none", none, 401, "invalid_token"},
		{"tampered", tampered, 401, "invalid_token"},
		{"no scope", idp.token(t, mcpAud, func(c jwt.MapClaims) { c["scope"] = "email" }), 403, "insufficient_scope"},
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, route := range []struct{ method, path, body, metadata string }{
		{"POST", "/mcp", init, "/.well-known/oauth-protected-resource/mcp"},
		{"GET", "/api/v1/tools", "", "/.well-known/oauth-protected-resource"},
	} {
		for _, tc := range tests {
			t.Run(route.path+" "+tc.name, func(t *testing.T) {
				req, _ := http.NewRequest(route.method, g.url()+route.path, strings.NewReader(route.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if tc.bearer != "" {
					req.Header.Set("Authorization", "Bearer "+tc.bearer)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
				}
				if tc.status == 200 {
					return
				}
				cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
				if err != nil || len(cs) != 1 {
					t.Fatalf("WWW-Authenticate %q: %v", resp.Header.Values("WWW-Authenticate"), err)
				}
				p := cs[0].Params
				if cs[0].Scheme != "bearer" || p["resource_metadata"] != g.url()+route.metadata || p["scope"] != "mcp" || p["error"] != tc.errPar {
					t.Errorf("challenge %+v, want resource_metadata %s, scope mcp, error %q", cs[0], g.url()+route.metadata, tc.errPar)
				}
			})
		}
	}
}

// TestOAuthMetadataDocuments: each MCP endpoint's protected resource
// metadata names it and the issuer, also for a browser client on another
// origin.
func TestOAuthMetadataDocuments(t *testing.T) {
	g, idp := startOAuthGateway(t)
	for _, path := range []string{"", "/mcp", "/sse", "/servers/demo/mcp"} {
		req, _ := http.NewRequest("GET", g.url()+"/.well-known/oauth-protected-resource"+path, nil)
		req.Header.Set("Origin", "https://claude.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var prm oauthex.ProtectedResourceMetadata
		err = json.NewDecoder(resp.Body).Decode(&prm)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Fatalf("GET metadata%s: %d %v", path, resp.StatusCode, err)
		}
		if prm.Resource != g.url()+path || !slices.Equal(prm.AuthorizationServers, []string{idp.URL}) ||
			!slices.Equal(prm.ScopesSupported, []string{"mcp"}) || !slices.Equal(prm.BearerMethodsSupported, []string{"header"}) {
			t.Errorf("metadata%s = %+v", path, prm)
		}
	}
}

// TestOAuthGoSDKClient: a go-sdk client with an access token lists and
// calls tools through /mcp and /servers/demo/mcp; a deny-listed server id
// claim hides that server (seed 003); a token for one endpoint does not
// open another.
func TestOAuthGoSDKClient(t *testing.T) {
	g, idp := startOAuthGateway(t)
	connect := func(path, token string) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "oauth-client", Version: "1"}, nil)
		return c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.url() + path,
			HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
	}
	tools := func(cs *mcp.ClientSession) []string {
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			if strings.HasSuffix(tl.Name, ".echo") || tl.Name == "echo" {
				names = append(names, tl.Name)
			}
		}
		return names
	}
	tests := []struct {
		name, path string
		edit       func(jwt.MapClaims)
		aud        string
		wantTools  []string
		callTool   string
	}{
		{"gateway", "/mcp", nil, "/mcp", []string{"demo.echo", "other.echo"}, "demo.echo"},
		{"deny-listed server", "/mcp", func(c jwt.MapClaims) { c["mcpServerDenyIds"] = []string{"other"} }, "/mcp", []string{"demo.echo"}, "other.echo"},
		{"per-server endpoint", "/servers/demo/mcp", nil, "/servers/demo/mcp", []string{"echo"}, "echo"},
		{"gateway-wide audience on a server endpoint", "/servers/demo/mcp", nil, "", []string{"echo"}, "echo"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := connect(tc.path, idp.token(t, g.url()+tc.aud, tc.edit))
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := tools(cs); !slices.Equal(got, tc.wantTools) {
				t.Errorf("tools %v, want %v", got, tc.wantTools)
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tc.callTool, Arguments: map[string]any{"text": "hi"}})
			denied := !slices.Contains(tc.wantTools, tc.callTool)
			switch {
			case denied && err == nil && !res.IsError:
				t.Errorf("call %s succeeded for a token that deny-lists it", tc.callTool)
			case !denied && (err != nil || res.IsError):
				t.Errorf("call %s: %v %+v", tc.callTool, err, res)
			}
		})
	}
	if _, err := connect("/servers/other/mcp", idp.token(t, g.url()+"/servers/demo/mcp", nil)); err == nil {
		t.Error("a token for /servers/demo/mcp opened /servers/other/mcp")
	}
}
