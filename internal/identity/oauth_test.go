package identity

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

const testResource = "https://gw.example"

// issuer is an authorization server under test: a JWKS and an RFC 7662
// introspection endpoint that knows the opaque tokens registered with it.
type issuer struct {
	*httptest.Server
	key   *rsa.PrivateKey
	hits  atomic.Int32 // introspection requests
	down  atomic.Bool
	mu    sync.Mutex
	known map[string]map[string]any // opaque token -> introspection answer
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key, known: map[string]map[string]any{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"keys": []any{rsaJWK("k1", &key.PublicKey)}})
	})
	mux.HandleFunc("POST /introspect", func(w http.ResponseWriter, r *http.Request) {
		is.hits.Add(1)
		if is.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		if id, secret, ok := r.BasicAuth(); !ok || id != "gw" || secret != "s3cret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		is.mu.Lock()
		answer, ok := is.known[r.PostFormValue("token")]
		is.mu.Unlock()
		if !ok {
			answer = map[string]any{"active": false}
		}
		json.NewEncoder(w).Encode(answer)
	})
	is.Server = httptest.NewServer(mux)
	t.Cleanup(is.Close)
	return is
}

// opaque registers an opaque token whose introspection answer is claims
// plus active: true.
func (is *issuer) opaque(name string, claims jwt.MapClaims) string {
	answer := map[string]any{"active": true}
	for k, v := range claims {
		answer[k] = v
	}
	is.mu.Lock()
	is.known[name] = answer
	is.mu.Unlock()
	return name
}

func oauthConfig(is *issuer, edit func(*OAuthConfig)) Config {
	oc := &OAuthConfig{
		Resource: testResource,
		Token:    JWTConfig{Issuer: testIssuer, JWKSURL: is.URL + "/jwks"},
		Introspection: &IntrospectionConfig{
			URL: is.URL + "/introspect", ClientID: "gw", ClientSecret: "s3cret", CacheTTL: time.Minute,
		},
		Scopes:     []string{"mcp"},
		ScopeRoles: map[string]string{"mcp:admin": "operator"},
	}
	if edit != nil {
		edit(oc)
	}
	return Config{Mode: ModeOAuth, OAuth: oc}
}

// accessClaims are the claims of a good access token for resource.
func accessClaims(now time.Time, resource string, edit func(jwt.MapClaims)) jwt.MapClaims {
	return claimsAt(now, func(c jwt.MapClaims) {
		c["aud"] = resource
		c["scope"] = "mcp"
		if edit != nil {
			edit(c)
		}
	})
}

func request(path, bearer string) *http.Request {
	r := httptest.NewRequest("POST", path, nil)
	r.Header.Set("Authorization", "Bearer "+bearer)
	return r
}

// TestOAuthTokens: access tokens, JWT and opaque, are accepted only when
// signed (or vouched for) by the issuer, unexpired, for this resource and
// with the required scope.
func TestOAuthTokens(t *testing.T) {
	is := newIssuer(t)
	clk := newClock()
	k, apiKey := mustKey(t, "robot", nil)
	a := mustNew(t, oauthConfig(is, nil), newStore(k), &Options{Clock: clk.Now})
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodRS256, is.key, "k1", c) }
	good := func(edit func(jwt.MapClaims)) string { return rs(accessClaims(t0, testResource+"/mcp", edit)) }
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, accessClaims(t0, testResource+"/mcp", nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, path, bearer string
		wantCode           string // "" = accepted
		wantAgent          string
		wantRoles          []string
	}{
		{name: "jwt for /mcp", path: "/mcp", bearer: good(nil), wantAgent: "user-1"},
		{name: "jwt for the gateway", path: "/mcp", bearer: rs(accessClaims(t0, testResource, nil)), wantAgent: "user-1"},
		{name: "trailing slash", path: "/mcp", bearer: rs(accessClaims(t0, testResource+"/", nil)), wantAgent: "user-1"},
		{name: "aud list", path: "/mcp", bearer: good(func(c jwt.MapClaims) { c["aud"] = []string{"x", testResource + "/mcp"} }), wantAgent: "user-1"},
		{name: "scope to role", path: "/mcp", bearer: good(func(c jwt.MapClaims) { c["scope"] = "mcp mcp:admin"; c["roles"] = []string{"dev"} }),
			wantAgent: "user-1", wantRoles: []string{"dev", "operator"}},
		{name: "scp list", path: "/mcp", bearer: good(func(c jwt.MapClaims) { delete(c, "scope"); c["scp"] = []string{"mcp"} }), wantAgent: "user-1"},
		{name: "/mcp token on REST", path: "/api/v1/tools", bearer: good(nil), wantAgent: "user-1"},
		{name: "per-server token", path: "/servers/a/mcp", bearer: rs(accessClaims(t0, testResource+"/servers/a/mcp", nil)), wantAgent: "user-1"},
		{name: "per-server token elsewhere", path: "/servers/b/mcp", bearer: rs(accessClaims(t0, testResource+"/servers/a/mcp", nil)), wantCode: CodeInvalid},
		{name: "per-server token on /mcp", path: "/mcp", bearer: rs(accessClaims(t0, testResource+"/servers/a/mcp", nil)), wantCode: CodeInvalid},
		{name: "/mcp token on /sse", path: "/sse", bearer: good(nil), wantCode: CodeInvalid},
		{name: "expired", path: "/mcp", bearer: good(func(c jwt.MapClaims) { c["exp"] = t0.Add(-time.Hour).Unix() }), wantCode: CodeExpired},
		{name: "wrong audience", path: "/mcp", bearer: good(func(c jwt.MapClaims) { c["aud"] = "https://evil.example/mcp" }), wantCode: CodeInvalid},
		{name: "no audience", path: "/mcp", bearer: good(func(c jwt.MapClaims) { delete(c, "aud") }), wantCode: CodeInvalid},
		{name: "wrong issuer", path: "/mcp", bearer: good(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), wantCode: CodeInvalid},
		{name: "no scope", path: "/mcp", bearer: good(func(c jwt.MapClaims) { delete(c, "scope") }), wantCode: CodeInsufficientScope},
		{name: "other scope", path: "/mcp", bearer: good(func(c jwt.MapClaims) { c["scope"] = "email" }), wantCode: CodeInsufficientScope},
		{name: "alg none", path: "/mcp", bearer: none, wantCode: CodeInvalid},
		{name: "tampered", path: "/mcp", bearer: tamper(t, good(nil), func(m map[string]any) { m["sub"] = "admin" }), wantCode: CodeInvalid},
		{name: "other key", path: "/mcp", bearer: sign(t, jwt.SigningMethodRS256, other, "k1", accessClaims(t0, testResource+"/mcp", nil)), wantCode: CodeInvalid},
		{name: "opaque", path: "/mcp", bearer: is.opaque("op-good", accessClaims(t0, testResource+"/mcp", nil)), wantAgent: "user-1"},
		{name: "opaque unknown", path: "/mcp", bearer: "op-unknown", wantCode: CodeInvalid},
		{name: "opaque expired", path: "/mcp", bearer: is.opaque("op-exp", accessClaims(t0, testResource+"/mcp", func(c jwt.MapClaims) { c["exp"] = t0.Add(-time.Hour).Unix() })), wantCode: CodeExpired},
		{name: "opaque wrong audience", path: "/mcp", bearer: is.opaque("op-aud", accessClaims(t0, "https://evil.example", nil)), wantCode: CodeInvalid},
		{name: "opaque wrong issuer", path: "/mcp", bearer: is.opaque("op-iss", accessClaims(t0, testResource, func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })), wantCode: CodeInvalid},
		{name: "opaque no scope", path: "/mcp", bearer: is.opaque("op-scope", accessClaims(t0, testResource, func(c jwt.MapClaims) { c["scope"] = "" })), wantCode: CodeInsufficientScope},
		{name: "API key", path: "/mcp", bearer: apiKey, wantAgent: "robot", wantRoles: []string{"dev"}},
		{name: "unknown API key", path: "/mcp", bearer: SecretPrefix + "nope", wantCode: CodeInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, err := a.Authenticate(request(tc.path, tc.bearer))
			if got := codeOf(err); got != tc.wantCode {
				t.Fatalf("code = %q, want %q (err %v)", got, tc.wantCode, err)
			}
			if tc.wantCode != "" {
				return
			}
			if id.AgentID != tc.wantAgent {
				t.Errorf("agent = %q, want %q", id.AgentID, tc.wantAgent)
			}
			if diff := cmp.Diff(tc.wantRoles, id.Roles); diff != "" {
				t.Errorf("roles (-want +got):\n%s", diff)
			}
			if tc.bearer != apiKey && (id.Method != "oauth" || id.ID != "jwt:"+testIssuer+"|user-1") {
				t.Errorf("identity = %+v, want method oauth and ID from iss|sub", id)
			}
		})
	}
}

// TestOAuthSeed003Claims: the access token's workspace claims map to the
// identity as in jwt mode.
func TestOAuthSeed003Claims(t *testing.T) {
	is := newIssuer(t)
	a := mustNew(t, oauthConfig(is, nil), newStore(), &Options{Clock: newClock().Now})
	tok := sign(t, jwt.SigningMethodRS256, is.key, "k1", accessClaims(t0, testResource, func(c jwt.MapClaims) {
		c["isAdmin"] = false
		c["mcpServerDenyIds"] = []string{"secret-server"}
		c["workspace"] = "ws9"
	}))
	id, err := a.Authenticate(request("/mcp", tok))
	if err != nil {
		t.Fatal(err)
	}
	if !id.WorkspacePolicy || id.Admin || id.Workspace != "ws9" || !cmp.Equal(id.DenyServers, []string{"secret-server"}) {
		t.Errorf("identity = %+v, want the workspace policy of the claims", id)
	}
}

// TestOAuthIntrospectionCache: an active answer is reused until the cache
// TTL or the token's exp, whichever is first; a failing endpoint is a 503
// (ErrUnavailable), not a 401.
func TestOAuthIntrospectionCache(t *testing.T) {
	is := newIssuer(t)
	clk := newClock()
	a := mustNew(t, oauthConfig(is, nil), newStore(), &Options{Clock: clk.Now})
	long := is.opaque("long", accessClaims(t0, testResource, nil))
	short := is.opaque("short", accessClaims(t0, testResource, func(c jwt.MapClaims) { c["exp"] = t0.Add(10 * time.Second).Unix() }))
	auth := func(tok string) error { _, err := a.Authenticate(request("/mcp", tok)); return err }

	for range 3 {
		if err := auth(long); err != nil {
			t.Fatal(err)
		}
	}
	if n := is.hits.Load(); n != 1 {
		t.Fatalf("introspection requests = %d after three uses, want 1 (cached)", n)
	}
	if err := auth(short); err != nil {
		t.Fatal(err)
	}
	clk.Advance(41 * time.Second) // past short's exp and the 30s leeway, within the TTL
	if err := auth(long); err != nil {
		t.Fatal(err)
	}
	if n := is.hits.Load(); n != 2 {
		t.Fatalf("introspection requests = %d, want 2 (long still cached)", n)
	}
	if err := auth(short); codeOf(err) != CodeExpired {
		t.Fatalf("short after its exp: %v, want expired", err)
	}
	clk.Advance(time.Minute) // past the TTL
	is.down.Store(true)
	err := auth(long)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("endpoint down: %v, want ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), long) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %q shows the token or the client secret", err)
	}
}

// TestOAuthChallenge: refusals point the client at the metadata of the
// resource it called, with the scope it needs.
func TestOAuthChallenge(t *testing.T) {
	is := newIssuer(t)
	derived := mustNew(t, oauthConfig(is, func(oc *OAuthConfig) { oc.Resource = "" }), newStore(), nil)
	fixed := mustNew(t, oauthConfig(is, nil), newStore(), nil)
	tests := []struct {
		name string
		a    *Authenticator
		path string
		code string
		want string
	}{
		{"missing", fixed, "/mcp", CodeMissing, `Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp", scope="mcp"`},
		{"invalid", fixed, "/servers/demo/mcp", CodeInvalid,
			`Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource/servers/demo/mcp", scope="mcp", error="invalid_token"`},
		{"scope", fixed, "/sse", CodeInsufficientScope,
			`Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource/sse", scope="mcp", error="insufficient_scope"`},
		{"REST", fixed, "/api/v1/tools", CodeExpired, `Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource", scope="mcp", error="invalid_token"`},
		{"derived", derived, "/mcp", CodeMissing, `Bearer resource_metadata="http://127.0.0.1:7777/.well-known/oauth-protected-resource/mcp", scope="mcp"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://127.0.0.1:7777"+tc.path, nil)
			if got := tc.a.Challenge(r, &Error{Code: tc.code}); got != tc.want {
				t.Errorf("Challenge = %s\nwant        %s", got, tc.want)
			}
		})
	}
	keys := mustNew(t, Config{Mode: ModeKeys}, newStore(), nil)
	if got := keys.Challenge(httptest.NewRequest("GET", "/mcp", nil), &Error{Code: CodeMissing}); got != `Bearer realm="switchboard"` {
		t.Errorf("keys mode Challenge = %s", got)
	}
	if keys.MetadataHandler() != nil {
		t.Error("keys mode serves OAuth metadata")
	}
}

// TestOAuthMetadata: the RFC 9728 documents of the gateway and of each MCP
// endpoint, as the go-sdk client fetches and validates them.
func TestOAuthMetadata(t *testing.T) {
	is := newIssuer(t)
	a := mustNew(t, oauthConfig(is, func(oc *OAuthConfig) { oc.Resource = "" }), newStore(), nil)
	srv := httptest.NewServer(a.MetadataHandler())
	t.Cleanup(srv.Close)
	for _, path := range []string{"", "/mcp", "/sse", "/servers/demo/mcp", "/servers/demo/sse"} {
		t.Run("doc"+path, func(t *testing.T) {
			prm, err := oauthex.GetProtectedResourceMetadata(t.Context(), srv.URL+MetadataPath+path, srv.URL+path, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			want := &oauthex.ProtectedResourceMetadata{
				Resource: srv.URL + path, AuthorizationServers: []string{testIssuer},
				ScopesSupported: []string{"mcp", "mcp:admin"}, BearerMethodsSupported: []string{"header"},
				ResourceName: "switchboard MCP gateway",
			}
			if diff := cmp.Diff(want, prm); diff != "" {
				t.Errorf("metadata (-want +got):\n%s", diff)
			}
		})
	}
	for _, path := range []string{"/api", "/servers/a/b/mcp", "/servers//mcp", "x"} {
		resp, err := srv.Client().Get(srv.URL + MetadataPath + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", MetadataPath+path, resp.StatusCode)
		}
	}
}

// TestOAuthConfigErrors: New refuses a configuration that cannot work.
func TestOAuthConfigErrors(t *testing.T) {
	is := newIssuer(t)
	tests := []struct {
		name string
		edit func(*OAuthConfig)
		want string
	}{
		{"no issuer", func(oc *OAuthConfig) { oc.Token.Issuer = "" }, "Issuer is required"},
		{"no source", func(oc *OAuthConfig) { oc.Token.JWKSURL = ""; oc.Introspection = nil }, "needs Token.JWKSURL or Introspection"},
		{"resource path", func(oc *OAuthConfig) { oc.Resource = "https://gw.example/mcp" }, "must be an origin"},
		{"resource scheme", func(oc *OAuthConfig) { oc.Resource = "gw.example" }, "not an http(s) URL"},
		{"audience", func(oc *OAuthConfig) { oc.Token.Audience = "x" }, "no Secret or Audience"},
		{"introspection url", func(oc *OAuthConfig) { oc.Introspection.URL = "ftp://x" }, "Introspection.URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(oauthConfig(is, tc.edit), newStore(), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// Introspection alone is a complete setup.
	a := mustNew(t, oauthConfig(is, func(oc *OAuthConfig) { oc.Token.JWKSURL = "" }), newStore(), nil)
	jwtTok := sign(t, jwt.SigningMethodRS256, is.key, "k1", accessClaims(t0, testResource, nil))
	is.opaque(jwtTok, accessClaims(time.Now(), testResource, nil))
	if _, err := a.Authenticate(request("/mcp", jwtTok)); err != nil {
		t.Fatalf("introspection-only: a JWT-shaped token the issuer vouches for: %v", err)
	}
}

// TestOAuthKeySetAndCheck: with KeySet the keys come from the function, not
// over HTTP, and an unknown kid asks it again; Check refuses a token that
// passed every other check (a revoked grant), and a failing Check is 503,
// not 401.
func TestOAuthKeySetAndCheck(t *testing.T) {
	clk := newClock()
	k1, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	published := []any{rsaJWK("k1", &k1.PublicKey)}
	var calls atomic.Int32
	keySet := func(context.Context) ([]byte, error) {
		calls.Add(1)
		mu.Lock()
		defer mu.Unlock()
		return json.Marshal(map[string]any{"keys": published})
	}
	check := func(_ context.Context, c map[string]any) error {
		switch c["grant_id"] {
		case "revoked":
			return &Error{Code: CodeInvalid, Reason: "token's grant was revoked"}
		case "broken":
			return errors.New("store down")
		}
		return nil
	}
	cfg := Config{Mode: ModeOAuth, OAuth: &OAuthConfig{
		Resource: testResource,
		Token:    JWTConfig{Issuer: testIssuer, KeySet: keySet},
		Check:    check,
	}}
	a := mustNew(t, cfg, newStore(), &Options{Clock: clk.Now})
	tok := func(key *rsa.PrivateKey, kid, grant string) string {
		return sign(t, jwt.SigningMethodRS256, key, kid, accessClaims(t0, testResource+"/mcp", func(c jwt.MapClaims) { c["grant_id"] = grant }))
	}
	if _, err := a.Authenticate(request("/mcp", tok(k1, "k1", "g1"))); err != nil {
		t.Fatalf("token signed by the key set: %v", err)
	}
	if _, err := a.Authenticate(request("/mcp", tok(k1, "k1", "revoked"))); codeOf(err) != CodeInvalid || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("revoked grant: %v, want invalid_credentials naming the revocation", err)
	}
	if _, err := a.Authenticate(request("/mcp", tok(k1, "k1", "broken"))); !errors.Is(err, ErrUnavailable) {
		t.Errorf("failing check: %v, want ErrUnavailable", err)
	}
	// A key published later is found by asking the set again.
	mu.Lock()
	published = append(published, rsaJWK("k2", &k2.PublicKey))
	mu.Unlock()
	clk.Advance(time.Minute)
	before := calls.Load()
	if _, err := a.Authenticate(request("/mcp", tok(k2, "k2", "g1"))); err != nil {
		t.Fatalf("token signed by a newly published key: %v", err)
	}
	if calls.Load() == before {
		t.Error("the key set was not asked again for an unknown kid")
	}
	for name, jc := range map[string]JWTConfig{
		"KeySet and JWKSURL": {Issuer: testIssuer, KeySet: keySet, JWKSURL: "https://idp.example/jwks"},
		"KeySet and Secret":  {Issuer: testIssuer, KeySet: keySet, Secret: strings.Repeat("s", 32)},
	} {
		if _, err := New(Config{Mode: ModeJWT, JWT: &jc}, newStore(), nil); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}
