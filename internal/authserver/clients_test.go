package authserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
)

// TestRegistration: RFC 7591 registration, and the error of §3.2.2 for
// each malformed document, with nothing stored.
func TestRegistration(t *testing.T) {
	h := newHarness(t, nil)
	tests := []struct {
		name      string
		body      string
		ctype     string
		wantError string // "" = 201
	}{
		{name: "public client", body: `{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none"}`},
		{name: "confidential by default", body: `{"redirect_uris":["https://app.example/cb"],"client_name":"App"}`},
		{name: "native scheme", body: `{"redirect_uris":["com.example.app:/oauth"],"token_endpoint_auth_method":"none"}`},
		{name: "unknown members ignored", body: `{"redirect_uris":["http://[::1]/cb"],"token_endpoint_auth_method":"none","x_extra":{"a":1}}`},
		{name: "not JSON", body: `redirect_uris=x`, wantError: errInvalidClientMetadata},
		{name: "JSON array", body: `[]`, wantError: errInvalidClientMetadata},
		{name: "two documents", body: `{"redirect_uris":["http://127.0.0.1/cb"]} {}`, wantError: errInvalidClientMetadata},
		{name: "wrong type", body: `{"redirect_uris":"http://127.0.0.1/cb"}`, wantError: errInvalidClientMetadata},
		{name: "wrong member type", body: `{"redirect_uris":["http://127.0.0.1/cb"],"client_name":7}`, wantError: errInvalidClientMetadata},
		{name: "no redirect_uris", body: `{"client_name":"x"}`, wantError: errInvalidRedirectURI},
		{name: "empty redirect_uris", body: `{"redirect_uris":[]}`, wantError: errInvalidRedirectURI},
		{name: "null", body: `null`, wantError: errInvalidRedirectURI},
		{name: "http to a remote host", body: `{"redirect_uris":["http://app.example/cb"]}`, wantError: errInvalidRedirectURI},
		{name: "localhost by name", body: `{"redirect_uris":["http://localhost:5681/oauth/callback"],"token_endpoint_auth_method":"none"}`},
		{name: "a name under localhost", body: `{"redirect_uris":["http://localhost.app.example/cb"]}`, wantError: errInvalidRedirectURI},
		{name: "javascript", body: `{"redirect_uris":["javascript:alert(1)"]}`, wantError: errInvalidRedirectURI},
		{name: "data", body: `{"redirect_uris":["data:text/html,x"]}`, wantError: errInvalidRedirectURI},
		{name: "fragment", body: `{"redirect_uris":["https://app.example/cb#x"]}`, wantError: errInvalidRedirectURI},
		{name: "relative", body: `{"redirect_uris":["/cb"]}`, wantError: errInvalidRedirectURI},
		{name: "credentials", body: `{"redirect_uris":["https://u:p@app.example/cb"]}`, wantError: errInvalidRedirectURI},
		{name: "implicit grant", body: `{"redirect_uris":["http://127.0.0.1/cb"],"grant_types":["implicit"]}`, wantError: errInvalidClientMetadata},
		{name: "refresh only", body: `{"redirect_uris":["http://127.0.0.1/cb"],"grant_types":["refresh_token"]}`, wantError: errInvalidClientMetadata},
		{name: "token response", body: `{"redirect_uris":["http://127.0.0.1/cb"],"response_types":["token"]}`, wantError: errInvalidClientMetadata},
		{name: "private_key_jwt", body: `{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"private_key_jwt"}`, wantError: errInvalidClientMetadata},
		{name: "own client_id", body: `{"redirect_uris":["http://127.0.0.1/cb"],"client_id":"mine"}`, wantError: errInvalidClientMetadata},
		{name: "bad logo_uri", body: `{"redirect_uris":["http://127.0.0.1/cb"],"logo_uri":"javascript:x"}`, wantError: errInvalidClientMetadata},
		{name: "long name", body: `{"redirect_uris":["http://127.0.0.1/cb"],"client_name":"` + strings.Repeat("n", 300) + `"}`, wantError: errInvalidClientMetadata},
		{name: "control in name", body: `{"redirect_uris":["http://127.0.0.1/cb"],"client_name":"a\u0007b"}`, wantError: errInvalidClientMetadata},
		{name: "bad scope", body: `{"redirect_uris":["http://127.0.0.1/cb"],"scope":"a\\b"}`, wantError: errInvalidClientMetadata},
		{name: "too many redirect_uris", body: `{"redirect_uris":[` + strings.Repeat(`"http://127.0.0.1/cb",`, 20) + `"http://127.0.0.1/cb"]}`, wantError: errInvalidRedirectURI},
		{name: "oversized", body: `{"redirect_uris":["http://127.0.0.1/cb"],"x":"` + strings.Repeat("a", maxRegistrationBytes) + `"}`, wantError: errInvalidClientMetadata},
		{name: "form content type", body: `{"redirect_uris":["http://127.0.0.1/cb"]}`, ctype: "application/x-www-form-urlencoded", wantError: errInvalidClientMetadata},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := count(t, h.db, "clients")
			ctype := tc.ctype
			if ctype == "" {
				ctype = "application/json"
			}
			r := h.post(t, PathRegister, ctype, tc.body, nil)
			if tc.wantError != "" {
				if r.status != http.StatusBadRequest || oauthErr(t, r) != tc.wantError {
					t.Errorf("got %d %s, want 400 %s", r.status, r.body, tc.wantError)
				}
				if n := count(t, h.db, "clients"); n != before {
					t.Errorf("a refused registration stored a client")
				}
				return
			}
			if r.status != http.StatusCreated || r.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("got %d %s", r.status, r.body)
			}
			var m map[string]any
			json.Unmarshal([]byte(r.body), &m)
			id, _ := m["client_id"].(string)
			secret, hasSecret := m["client_secret"].(string)
			if !strings.HasPrefix(id, prefixClient) || (m["token_endpoint_auth_method"] != "none") != hasSecret {
				t.Errorf("response = %s", r.body)
			}
			// Metadata the client did not send is left out, not null or "":
			// clients validate the response (the TypeScript SDK, under
			// mcp-remote, refuses "contacts": null or "logo_uri": "").
			for k, v := range m {
				if v == nil || v == "" {
					t.Errorf("response member %s = %#v in %s", k, v, r.body)
				}
			}
			if hasSecret {
				stored, err := h.db.OAuthClient(t.Context(), id)
				if err != nil || stored.SecretHash != hash(secret) || strings.Contains(string(stored.Metadata), secret) {
					t.Errorf("the secret is not stored as its hash alone: %+v", stored)
				}
			}
		})
	}
}

// TestRegistrationModes: off refuses, token mode wants the initial access
// token, and the cap on registered clients holds.
func TestRegistrationModes(t *testing.T) {
	doc := `{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none"}`
	off := newHarness(t, &harnessOpts{cfg: func(c *Config) { c.Registration.Mode = RegistrationOff }})
	if r := off.post(t, PathRegister, "application/json", doc, nil); r.status != http.StatusForbidden {
		t.Errorf("registration off: %d %s", r.status, r.body)
	}
	const iat = "initial-access-token-0123456789"
	tok := newHarness(t, &harnessOpts{cfg: func(c *Config) {
		c.Registration = RegistrationConfig{Mode: RegistrationToken, InitialAccessToken: iat, MaxClients: 2}
	}})
	bearer := func(v string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+v) }
	}
	if r := tok.post(t, PathRegister, "application/json", doc, nil); r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") == "" {
		t.Errorf("without the token: %d %s", r.status, r.body)
	}
	if r := tok.post(t, PathRegister, "application/json", doc, bearer("wrong")); r.status != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", r.status)
	}
	for i := range 2 {
		if r := tok.post(t, PathRegister, "application/json", doc, bearer(iat)); r.status != http.StatusCreated {
			t.Fatalf("registration %d with the token: %d %s", i, r.status, r.body)
		}
	}
	if r := tok.post(t, PathRegister, "application/json", doc, bearer(iat)); r.status != http.StatusForbidden {
		t.Errorf("past MaxClients: %d %s", r.status, r.body)
	}
	if _, err := New(off.db, testKeyring(t), Config{Issuer: "https://gw.example", Registration: RegistrationConfig{Mode: RegistrationToken}},
		&Options{SignIn: func(context.Context, string) (authz.Identity, error) { return authz.Identity{}, nil }}); err == nil || !strings.Contains(err.Error(), "InitialAccessToken") {
		t.Error("token mode without a token was accepted")
	}
}

// TestRedirectURIRules: OAuth 2.1's rules for registered redirect URIs and
// their matching: exact, except the port of a loopback http URI.
func TestRedirectURIRules(t *testing.T) {
	for _, tc := range []struct {
		uri string
		ok  bool
	}{
		{"https://app.example/cb", true},
		{"https://app.example/cb?x=1", true},
		{"http://127.0.0.1/cb", true},
		{"http://127.0.0.1:8080/cb", true},
		{"http://[::1]:8080/cb", true},
		{"com.example.app:/oauth2redirect", true},
		{"cursor://anysphere.cursor-retrieval/oauth/callback", true},
		{"http://localhost:8080/cb", true},
		{"http://localhost/cb", true},
		{"http://localhost.app.example/cb", false},
		{"http://127.0.0.1.app.example/cb", false},
		{"http://app.example/cb", false},
		{"http://10.0.0.1/cb", false},
		{"https:///cb", false},
		{"https://app.example/cb#frag", false},
		{"https://app.example/cb#", false},
		{"javascript:alert(1)", false},
		{"JavaScript:alert(1)", false},
		{"data:text/html;base64,PHNjcmlwdD4=", false},
		{"file:///etc/passwd", false},
		{"cb", false},
		{"//app.example/cb", false},
		{"https://" + strings.Repeat("a", maxURILen) + ".example/", false},
	} {
		if err := checkRedirectURI(tc.uri); (err == nil) != tc.ok {
			t.Errorf("checkRedirectURI(%q) = %v, want ok=%v", tc.uri, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		registered, requested string
		match                 bool
	}{
		{"https://app.example/cb", "https://app.example/cb", true},
		{"https://app.example/cb", "https://app.example/cb/", false},
		{"https://app.example/cb", "https://APP.example/cb", false},
		{"https://app.example/cb", "https://app.example:443/cb", false},
		{"https://app.example/cb", "https://app.example/cb?x=1", false},
		{"https://app.example:8443/cb", "https://app.example:9443/cb", false},
		{"http://127.0.0.1/cb", "http://127.0.0.1:51000/cb", true},
		{"http://127.0.0.1:3000/cb", "http://127.0.0.1:51000/cb", true},
		{"http://[::1]/cb", "http://[::1]:51000/cb", true},
		{"http://127.0.0.1/cb", "http://[::1]:51000/cb", false},
		{"http://localhost:5681/oauth/callback", "http://localhost:5682/oauth/callback", true},
		{"http://localhost/cb", "http://127.0.0.1:51000/cb", false},
		{"http://127.0.0.1/cb", "http://localhost:51000/cb", false},
		{"http://localhost/cb", "https://localhost:51000/cb", false},
		{"http://127.0.0.1/cb", "http://127.0.0.1:51000/other", false},
		{"http://127.0.0.1/cb?a=1", "http://127.0.0.1:51000/cb?a=2", false},
		{"http://127.0.0.1/cb", "http://127.0.0.1:51000/cb#x", false},
		{"http://127.0.0.1/cb", "https://127.0.0.1:51000/cb", false},
		{"com.example.app:/cb", "com.example.app:/cb", true},
		{"com.example.app:/cb", "com.example.app:/cb2", false},
	} {
		if got := redirectMatches(tc.registered, tc.requested); got != tc.match {
			t.Errorf("redirectMatches(%q, %q) = %v, want %v", tc.registered, tc.requested, got, tc.match)
		}
	}
}

// TestKeyRotation: the successor key is published KeyLead before it signs;
// after the rotation it signs, and the retired key stays published so that
// its tokens keep working until they expire.
func TestKeyRotation(t *testing.T) {
	h := newHarness(t, &harnessOpts{cfg: func(c *Config) {
		c.KeyRotation = 48 * time.Hour
		c.KeyLead = 2 * time.Hour
		c.AccessTokenTTL = 4 * time.Hour
	}})
	key := h.keys.add(t, "alice", nil)
	c := h.register(t, nil)
	kids := func() []string {
		var doc struct {
			Keys []struct {
				Kid string `json:"kid"`
			} `json:"keys"`
		}
		r := h.do(t, mustGet(t, h.issuer+PathJWKS))
		json.Unmarshal([]byte(r.body), &doc)
		var out []string
		for _, k := range doc.Keys {
			out = append(out, k.Kid)
		}
		return out
	}
	tk1 := h.flow(t, c, key)
	kid1, _ := jwtHeader(t, tk1.AccessToken)["kid"].(string)
	if got := kids(); len(got) != 1 || got[0] != kid1 {
		t.Fatalf("JWKS = %v, want the one key %s", got, kid1)
	}
	// Inside the lead time, the successor is made and published, but the
	// first key still signs.
	h.clock.Advance(47 * time.Hour)
	tk2 := h.flow(t, c, key)
	if kid, _ := jwtHeader(t, tk2.AccessToken)["kid"].(string); kid != kid1 {
		t.Errorf("signed with %s before the rotation, want %s", kid, kid1)
	}
	h.clock.Advance(keyCacheTTL) // the JWKS handler's cache
	published := kids()
	if len(published) != 2 {
		t.Fatalf("JWKS within the lead time = %v, want the key and its successor", published)
	}
	// After the rotation the successor signs; tokens of the first key still
	// verify while it is published.
	h.clock.Advance(90 * time.Minute)
	tk3 := h.flow(t, c, key)
	kid3, _ := jwtHeader(t, tk3.AccessToken)["kid"].(string)
	if kid3 == kid1 || kid3 != published[1] {
		t.Errorf("after the rotation signed with %s, want the successor %s", kid3, published[1])
	}
	if r := h.call(t, "/mcp", tk2.AccessToken); r.status != http.StatusOK {
		t.Errorf("a token of the retired key: %d %s", r.status, r.body)
	}
	if r := h.call(t, "/mcp", tk3.AccessToken); r.status != http.StatusOK {
		t.Errorf("a token of the new key: %d %s", r.status, r.body)
	}
	// The private keys are sealed in the store.
	rows, _ := h.db.OAuthSigningKeys(t.Context())
	for _, k := range rows {
		if !strings.HasPrefix(k.PrivateKey, "enc:v1:") {
			t.Errorf("key %s stored unsealed", k.ID)
		}
	}
}

func jwtHeader(t testing.TB, tok string) map[string]any {
	t.Helper()
	part, _, _ := strings.Cut(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	json.Unmarshal(raw, &m)
	return m
}

// FuzzParseRegistration: any body gives a client or an RFC 7591 error,
// never a panic, and what it accepts obeys the redirect URI rules.
func FuzzParseRegistration(f *testing.F) {
	for _, s := range []string{
		`{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none"}`,
		`{"redirect_uris":["https://app.example/cb"],"grant_types":["authorization_code","refresh_token"],"client_name":"x"}`,
		`{"redirect_uris":["javascript:x"]}`, `{"redirect_uris":"x"}`, `[]`, `null`, `{}`, `{"scope":"a b"}`,
		`{"redirect_uris":["com.example:/x"],"client_id":"https://a.example/c.json"}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, document bool) {
		m, oerr := parseRegistration(body, document)
		if oerr != nil {
			if oerr.status != http.StatusBadRequest || (oerr.Code != errInvalidClientMetadata && oerr.Code != errInvalidRedirectURI) {
				t.Fatalf("error %+v is not an RFC 7591 error", oerr)
			}
			return
		}
		if len(m.RedirectURIs) == 0 {
			t.Fatal("accepted without redirect_uris")
		}
		for _, u := range m.RedirectURIs {
			if err := checkRedirectURI(u); err != nil {
				t.Fatalf("accepted redirect URI %q: %v", u, err)
			}
			if pu, err := url.Parse(u); err != nil || strings.EqualFold(pu.Scheme, "javascript") {
				t.Fatalf("accepted %q", u)
			}
		}
		if m.TokenEndpointAuthMethod == "" || len(m.GrantTypes) == 0 || len(m.ResponseTypes) == 0 {
			t.Fatalf("defaults not filled: %+v", m)
		}
	})
}

// TestKeySealedElsewhere: a replica whose secret key cannot open the
// active signing key refuses to sign rather than make a key of its own,
// which the other replicas could not open in turn.
func TestKeySealedElsewhere(t *testing.T) {
	h := newHarness(t, nil)
	if _, err := h.srv().KeySet(t.Context()); err != nil {
		t.Fatal(err)
	}
	other, err := secrets.NewKeyring(bytes.Repeat([]byte{9}, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := New(h.db, other, Config{Issuer: h.issuer}, &Options{Clock: h.clock.Now,
		SignIn: func(context.Context, string) (authz.Identity, error) { return authz.Identity{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.keys.signer(t.Context()); err == nil || !strings.Contains(err.Error(), "SWITCHBOARD_SECRET_KEY") {
		t.Errorf("signer with the wrong secret key: %v", err)
	}
	if keys, _ := h.db.OAuthSigningKeys(t.Context()); len(keys) != 1 {
		t.Errorf("%d keys in the store, want the one", len(keys))
	}
	// It still publishes the key, so it verifies the others' tokens.
	if doc, err := s2.KeySet(t.Context()); err != nil || !strings.Contains(string(doc), `"kty":"EC"`) {
		t.Errorf("KeySet = %s, %v", doc, err)
	}
}
