package authserver

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/identity"
)

func testLogger(w io.Writer, replica int) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})).With("replica", replica)
}

// TestMetadata: RFC 8414 metadata and the OpenID configuration name the
// endpoints and what MCP clients check (S256, code, the issuer itself,
// client ID metadata documents); registration disappears when disabled.
func TestMetadata(t *testing.T) {
	h := newHarness(t, nil)
	for _, path := range []string{PathMetadata, PathOpenIDConfig} {
		r := h.do(t, mustGet(t, h.issuer+path))
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Fatalf("%s: %d %s", path, r.status, r.header.Get("Content-Type"))
		}
		if r.header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: no CORS for browser-based clients", path)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(r.body), &m); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"issuer":                                         h.issuer,
			"authorization_endpoint":                         h.issuer + PathAuthorize,
			"token_endpoint":                                 h.issuer + PathToken,
			"registration_endpoint":                          h.issuer + PathRegister,
			"revocation_endpoint":                            h.issuer + PathRevoke,
			"jwks_uri":                                       h.issuer + PathJWKS,
			"code_challenge_methods_supported":               []any{"S256"},
			"response_types_supported":                       []any{"code"},
			"grant_types_supported":                          []any{"authorization_code", "refresh_token"},
			"client_id_metadata_document_supported":          true,
			"authorization_response_iss_parameter_supported": true,
			"scopes_supported":                               []any{"mcp", "mcp:admin"},
		}
		for k, v := range want {
			if diff := cmp.Diff(v, m[k]); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", path, k, diff)
			}
		}
		if _, ok := m["subject_types_supported"]; ok != (path == PathOpenIDConfig) {
			t.Errorf("%s: subject_types_supported present = %v", path, ok)
		}
	}
	off := newHarness(t, &harnessOpts{cfg: func(c *Config) { c.Registration.Mode = RegistrationOff }})
	var m map[string]any
	json.Unmarshal([]byte(off.do(t, mustGet(t, off.issuer+PathMetadata)).body), &m)
	if _, ok := m["registration_endpoint"]; ok {
		t.Error("registration_endpoint advertised while registration is off")
	}
}

func mustGet(t testing.TB, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestAuthorizationCodeFlow: a public client registers, a user signs in
// with an API key and approves; the code and PKCE verifier buy an access
// token that the resource server (package identity) accepts as the user,
// and a refresh token that rotates.
func TestAuthorizationCodeFlow(t *testing.T) {
	h := newHarness(t, nil)
	key := h.keys.add(t, "alice", func(k *identity.Key) { k.Roles = []string{"dev"}; k.Workspace = "ws1" })
	c := h.register(t, nil)
	tk := h.flow(t, c, key)
	if tk.TokenType != "Bearer" || tk.ExpiresIn != int64(DefaultAccessTokenTTL.Seconds()) || tk.Scope != "mcp" ||
		!strings.HasPrefix(tk.RefreshToken, prefixRefresh) {
		t.Errorf("token response = %+v", tk)
	}
	claims := claimsOf(t, tk.AccessToken)
	for k, want := range map[string]any{"iss": h.issuer, "sub": "alice", "aud": h.issuer + "/mcp", "client_id": c.ID,
		"scope": "mcp", "workspace": "ws1"} {
		if claims[k] != want {
			t.Errorf("claim %s = %v, want %v", k, claims[k], want)
		}
	}
	// The resource server accepts it for /mcp, as alice, and refuses it
	// for another endpoint (the token is bound to its resource).
	r := h.call(t, "/mcp", tk.AccessToken)
	if r.status != http.StatusOK {
		t.Fatalf("/mcp with the access token: %d %s", r.status, r.body)
	}
	var id authz.Identity
	json.Unmarshal([]byte(r.body), &id)
	if id.AgentID != "alice" || id.Method != "oauth" || id.Workspace != "ws1" || !slices.Contains(id.Roles, "dev") {
		t.Errorf("identity at the resource = %+v", id)
	}
	if r := h.call(t, "/servers/other/mcp", tk.AccessToken); r.status != http.StatusUnauthorized {
		t.Errorf("token for /mcp on /servers/other/mcp: %d, want 401", r.status)
	}

	// Refresh: a new pair; the old refresh token is spent.
	h.clock.Advance(time.Minute)
	tk2 := decodeTokens(t, h.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tk.RefreshToken}, "client_id": {c.ID}}, nil))
	if tk2.RefreshToken == tk.RefreshToken || tk2.AccessToken == tk.AccessToken {
		t.Fatal("refresh did not rotate the tokens")
	}
	if r := h.call(t, "/mcp", tk2.AccessToken); r.status != http.StatusOK {
		t.Fatalf("refreshed access token: %d %s", r.status, r.body)
	}
	// A narrower scope on refresh is fine; a wider one is not.
	if r := h.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tk2.RefreshToken}, "client_id": {c.ID},
		"scope": {"mcp mcp:admin"}}, nil); oauthErr(t, r) != errInvalidScope {
		t.Errorf("refresh with a wider scope: %d %s", r.status, r.body)
	}
	// The secrets never reach the log.
	for _, secret := range []string{key, tk.RefreshToken, tk2.RefreshToken, tk.AccessToken} {
		if strings.Contains(h.logs.String(), secret) {
			t.Errorf("a secret is in the log: %.12s…", secret)
		}
	}
}

// TestRefreshReuse: presenting a spent refresh token revokes the whole
// family: the newest refresh token and every access token stop working.
func TestRefreshReuse(t *testing.T) {
	h := newHarness(t, nil)
	key := h.keys.add(t, "alice", nil)
	c := h.register(t, nil)
	tk := h.flow(t, c, key)
	refresh := func(rt string) response {
		return h.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {c.ID}}, nil)
	}
	tk2 := decodeTokens(t, refresh(tk.RefreshToken))
	r := refresh(tk.RefreshToken) // the reuse
	if r.status != http.StatusBadRequest || oauthErr(t, r) != errInvalidGrant {
		t.Fatalf("reused refresh token: %d %s", r.status, r.body)
	}
	if r := refresh(tk2.RefreshToken); oauthErr(t, r) != errInvalidGrant {
		t.Errorf("the newest refresh token of a revoked family: %d %s", r.status, r.body)
	}
	for _, at := range []string{tk.AccessToken, tk2.AccessToken} {
		if r := h.call(t, "/mcp", at); r.status != http.StatusUnauthorized || !strings.Contains(r.body, "revoked") {
			t.Errorf("access token of a revoked family: %d %s", r.status, r.body)
		}
	}
	grants, err := h.srv().Grants(t.Context(), GrantFilter{})
	if err != nil || len(grants) != 1 || grants[0].Active || grants[0].RevokedReason != "refresh token reused" {
		t.Errorf("grants = %+v, %v", grants, err)
	}
	if !strings.Contains(h.logs.String(), "refresh token reused") {
		t.Error("the reuse is not logged")
	}
}

// TestCodeReuse: a code is good once; its second use fails and revokes
// what the first use issued.
func TestCodeReuse(t *testing.T) {
	h := newHarness(t, nil)
	key := h.keys.add(t, "alice", nil)
	c := h.register(t, nil)
	verifier, challenge := pkce()
	back := h.browser(t).approve(t, h.authorizeURL(c, challenge, nil), key, "approve")
	form := url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")}, "code_verifier": {verifier},
		"client_id": {c.ID}, "redirect_uri": {c.Redirect}}
	tk := decodeTokens(t, h.token(t, form, nil))
	if r := h.call(t, "/mcp", tk.AccessToken); r.status != http.StatusOK {
		t.Fatalf("first token: %d %s", r.status, r.body)
	}
	r := h.token(t, form, nil)
	if r.status != http.StatusBadRequest || oauthErr(t, r) != errInvalidGrant {
		t.Fatalf("second exchange: %d %s", r.status, r.body)
	}
	if r := h.call(t, "/mcp", tk.AccessToken); r.status != http.StatusUnauthorized {
		t.Errorf("access token after the code's reuse: %d, want 401", r.status)
	}
	if r := h.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tk.RefreshToken}, "client_id": {c.ID}}, nil); oauthErr(t, r) != errInvalidGrant {
		t.Errorf("refresh token after the code's reuse: %d %s", r.status, r.body)
	}
}

// TestTokenErrors: bad token requests get the OAuth error of the spec,
// never a 500, and store no grant.
func TestTokenErrors(t *testing.T) {
	h := newHarness(t, nil)
	key := h.keys.add(t, "alice", nil)
	pub := h.register(t, nil)
	conf := h.register(t, map[string]any{"token_endpoint_auth_method": "client_secret_basic"})
	other := h.register(t, nil)
	// codeFor makes a fresh code for c.
	codeFor := func(c client) (code, verifier string) {
		verifier, challenge := pkce()
		back := h.browser(t).approve(t, h.authorizeURL(c, challenge, nil), key, "approve")
		return back.Query().Get("code"), verifier
	}
	basic := func(id, secret string) func(*http.Request) {
		return func(r *http.Request) { r.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret)) }
	}
	tests := []struct {
		name       string
		form       func() url.Values
		edit       func(*http.Request)
		body       string // instead of form
		ctype      string
		wantStatus int
		wantError  string
	}{
		{name: "no grant_type", form: func() url.Values { return url.Values{"client_id": {pub.ID}} }, wantStatus: 400, wantError: errInvalidRequest},
		{name: "client_credentials", form: func() url.Values { return url.Values{"grant_type": {"client_credentials"}, "client_id": {pub.ID}} },
			wantStatus: 400, wantError: errUnsupportedGrantType},
		{name: "no client", form: func() url.Values { return url.Values{"grant_type": {"authorization_code"}} }, wantStatus: 401, wantError: errInvalidClient},
		{name: "unknown client", form: func() url.Values { return url.Values{"grant_type": {"authorization_code"}, "client_id": {"nope"}} },
			wantStatus: 401, wantError: errInvalidClient},
		{name: "PKCE verifier missing", form: func() url.Values {
			code, _ := codeFor(pub)
			return url.Values{"grant_type": {"authorization_code"}, "client_id": {pub.ID}, "code": {code}}
		}, wantStatus: 400, wantError: errInvalidRequest},
		{name: "PKCE verifier wrong", form: func() url.Values {
			code, _ := codeFor(pub)
			v, _ := pkce()
			return url.Values{"grant_type": {"authorization_code"}, "client_id": {pub.ID}, "code": {code}, "code_verifier": {v}}
		}, wantStatus: 400, wantError: errInvalidGrant},
		{name: "PKCE verifier malformed", form: func() url.Values {
			code, _ := codeFor(pub)
			return url.Values{"grant_type": {"authorization_code"}, "client_id": {pub.ID}, "code": {code}, "code_verifier": {"short"}}
		}, wantStatus: 400, wantError: errInvalidRequest},
		{name: "code of another client", form: func() url.Values {
			code, v := codeFor(pub)
			return url.Values{"grant_type": {"authorization_code"}, "client_id": {other.ID}, "code": {code}, "code_verifier": {v}}
		}, wantStatus: 400, wantError: errInvalidGrant},
		{name: "redirect_uri differs", form: func() url.Values {
			code, v := codeFor(pub)
			return url.Values{"grant_type": {"authorization_code"}, "client_id": {pub.ID}, "code": {code}, "code_verifier": {v},
				"redirect_uri": {"http://127.0.0.1/other"}}
		}, wantStatus: 400, wantError: errInvalidGrant},
		{name: "resource differs", form: func() url.Values {
			code, v := codeFor(pub)
			return url.Values{"grant_type": {"authorization_code"}, "client_id": {pub.ID}, "code": {code}, "code_verifier": {v},
				"resource": {h.issuer + "/servers/x/mcp"}}
		}, wantStatus: 400, wantError: errInvalidTarget},
		{name: "expired code", form: func() url.Values {
			code, v := codeFor(pub)
			h.clock.Advance(DefaultCodeTTL + time.Second)
			return url.Values{"grant_type": {"authorization_code"}, "client_id": {pub.ID}, "code": {code}, "code_verifier": {v}}
		}, wantStatus: 400, wantError: errInvalidGrant},
		{name: "made-up code", form: func() url.Values {
			v, _ := pkce()
			return url.Values{"grant_type": {"authorization_code"}, "client_id": {pub.ID}, "code": {prefixCode + "x"}, "code_verifier": {v}}
		}, wantStatus: 400, wantError: errInvalidGrant},
		{name: "made-up refresh token", form: func() url.Values {
			return url.Values{"grant_type": {"refresh_token"}, "client_id": {pub.ID}, "refresh_token": {prefixRefresh + "x"}}
		}, wantStatus: 400, wantError: errInvalidGrant},
		{name: "confidential without secret", form: func() url.Values {
			return url.Values{"grant_type": {"authorization_code"}, "client_id": {conf.ID}}
		}, wantStatus: 401, wantError: errInvalidClient},
		{name: "confidential wrong secret", form: func() url.Values { return url.Values{"grant_type": {"authorization_code"}} },
			edit: basic(conf.ID, "sbcs_wrong"), wantStatus: 401, wantError: errInvalidClient},
		{name: "public with a secret", form: func() url.Values {
			return url.Values{"grant_type": {"authorization_code"}, "client_id": {pub.ID}, "client_secret": {"x"}}
		}, wantStatus: 401, wantError: errInvalidClient},
		{name: "two authentication methods", form: func() url.Values {
			return url.Values{"grant_type": {"authorization_code"}, "client_secret": {conf.Secret}}
		}, edit: basic(conf.ID, conf.Secret), wantStatus: 400, wantError: errInvalidRequest},
		{name: "repeated parameter", body: "grant_type=authorization_code&grant_type=refresh_token&client_id=" + pub.ID,
			wantStatus: 400, wantError: errInvalidRequest},
		{name: "JSON body", body: `{"grant_type":"authorization_code"}`, ctype: "application/json", wantStatus: 400, wantError: errInvalidRequest},
		{name: "oversized body", body: "grant_type=authorization_code&pad=" + strings.Repeat("a", maxFormBytes), wantStatus: 400, wantError: errInvalidRequest},
		{name: "malformed form", body: "grant_type=%zz", wantStatus: 400, wantError: errInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body, ctype := tc.body, tc.ctype
			if tc.form != nil {
				body = tc.form().Encode()
			}
			if ctype == "" {
				ctype = "application/x-www-form-urlencoded"
			}
			r := h.post(t, PathToken, ctype, body, tc.edit)
			if r.status != tc.wantStatus || oauthErr(t, r) != tc.wantError {
				t.Errorf("got %d %s, want %d %s", r.status, r.body, tc.wantStatus, tc.wantError)
			}
			if r.header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control = %q", r.header.Get("Cache-Control"))
			}
			if tc.edit != nil && r.status == http.StatusUnauthorized && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 to a Basic client without WWW-Authenticate")
			}
			if n := count(t, h.db, "grants"); n != 0 {
				t.Errorf("%d grants stored by a refused request", n)
			}
		})
	}
	// The confidential client with its secret, Basic and post, succeeds.
	for name, auth := range map[string]func(url.Values) func(*http.Request){
		"basic": func(url.Values) func(*http.Request) { return basic(conf.ID, conf.Secret) },
		"post": func(f url.Values) func(*http.Request) {
			f.Set("client_id", conf.ID)
			f.Set("client_secret", conf.Secret)
			return nil
		},
	} {
		code, v := codeFor(conf)
		f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {v}}
		edit := auth(f)
		if r := h.token(t, f, edit); r.status != http.StatusOK {
			t.Errorf("confidential client (%s): %d %s", name, r.status, r.body)
		}
	}
}

// TestAuthorizeErrors: before the client and redirect URI are trusted,
// errors are pages (never a redirect); after, they go back to the client
// with state and iss.
func TestAuthorizeErrors(t *testing.T) {
	h := newHarness(t, nil)
	c := h.register(t, map[string]any{"redirect_uris": []string{"http://127.0.0.1/callback", "https://app.example/cb"}})
	_, challenge := pkce()
	tests := []struct {
		name       string
		edit       func(url.Values)
		wantPage   int    // status of an error page; 0 = a redirect
		wantError  string // error on the redirect
		wantPrefix string // where the redirect goes
	}{
		{name: "unknown client", edit: func(q url.Values) { q.Set("client_id", "nope") }, wantPage: 400},
		{name: "no client", edit: func(q url.Values) { q.Del("client_id") }, wantPage: 400},
		{name: "redirect mismatch", edit: func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") }, wantPage: 400},
		{name: "redirect path differs", edit: func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1/other") }, wantPage: 400},
		{name: "redirect with a query added", edit: func(q url.Values) { q.Set("redirect_uri", "https://app.example/cb?x=1") }, wantPage: 400},
		{name: "no redirect and several registered", edit: func(q url.Values) { q.Del("redirect_uri") }, wantPage: 400},
		{name: "redirect twice", edit: func(q url.Values) { q.Add("redirect_uri", "https://app.example/cb") }, wantPage: 400},
		{name: "loopback any port", edit: func(q url.Values) {
			q.Set("redirect_uri", "http://127.0.0.1:54321/callback")
			q.Del("code_challenge")
		}, wantError: errInvalidRequest, wantPrefix: "http://127.0.0.1:54321/callback?"},
		{name: "no PKCE", edit: func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") },
			wantError: errInvalidRequest, wantPrefix: "http://127.0.0.1/callback?"},
		{name: "PKCE plain", edit: func(q url.Values) { q.Set("code_challenge_method", "plain") }, wantError: errInvalidRequest},
		{name: "PKCE method missing", edit: func(q url.Values) { q.Del("code_challenge_method") }, wantError: errInvalidRequest},
		{name: "challenge malformed", edit: func(q url.Values) { q.Set("code_challenge", "abc") }, wantError: errInvalidRequest},
		{name: "implicit", edit: func(q url.Values) { q.Set("response_type", "token") }, wantError: errUnsupportedResponseType},
		{name: "foreign resource", edit: func(q url.Values) { q.Set("resource", "https://evil.example/mcp") }, wantError: errInvalidTarget},
		{name: "resource not an endpoint", edit: func(q url.Values) { q.Set("resource", h.issuer+"/api/v1/tools") }, wantError: errInvalidTarget},
		{name: "two resources", edit: func(q url.Values) { q.Add("resource", h.issuer) }, wantError: errInvalidTarget},
		{name: "state twice", edit: func(q url.Values) { q.Add("state", "x") }, wantError: errInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.browser(t).get(t, h.authorizeURL(c, challenge, tc.edit))
			if tc.wantPage != 0 {
				if r.status != tc.wantPage || r.header.Get("Location") != "" || !strings.Contains(r.header.Get("Content-Type"), "text/html") {
					t.Errorf("got %d Location=%q, want an error page %d", r.status, r.header.Get("Location"), tc.wantPage)
				}
				return
			}
			loc, err := url.Parse(r.header.Get("Location"))
			if r.status != http.StatusSeeOther || err != nil {
				t.Fatalf("got %d %q, want a redirect", r.status, r.header.Get("Location"))
			}
			q := loc.Query()
			if q.Get("error") != tc.wantError || q.Get("state") != "st-1" || q.Get("iss") != h.issuer || q.Get("code") != "" {
				t.Errorf("redirect %s: want error %s with state and iss", loc, tc.wantError)
			}
			if tc.wantPrefix != "" && !strings.HasPrefix(loc.String(), tc.wantPrefix) {
				t.Errorf("redirect to %s, want %s…", loc, tc.wantPrefix)
			}
		})
	}
}

// TestConsent: deny goes back with access_denied and no code; the forms
// refuse another browser, a missing or wrong CSRF token, a foreign Origin,
// and a second answer; a scope that gives a role the user lacks is not
// granted.
func TestConsent(t *testing.T) {
	h := newHarness(t, nil)
	key := h.keys.add(t, "alice", nil)
	c := h.register(t, nil)
	_, challenge := pkce()

	back := h.browser(t).approve(t, h.authorizeURL(c, challenge, nil), key, "deny")
	if q := back.Query(); q.Get("error") != errAccessDenied || q.Get("code") != "" || q.Get("state") != "st-1" {
		t.Errorf("deny went back with %s", back)
	}

	// Up to the consent page in one browser.
	b := h.browser(t)
	r := b.get(t, h.authorizeURL(c, challenge, nil))
	r = b.get(t, r.header.Get("Location"))
	f := fields(t, r.body)
	f.Set("key", "sbk_not-a-key")
	if r := b.postForm(t, PathSignIn, f); r.status != http.StatusUnauthorized || !strings.Contains(r.body, "not accepted") {
		t.Errorf("wrong key: %d", r.status)
	}
	f.Set("key", key)
	r = b.postForm(t, PathSignIn, f)
	consentURL := r.header.Get("Location")
	r = b.get(t, consentURL)
	f = fields(t, r.body)
	f.Set("decision", "approve")

	tests := []struct {
		name string
		send func() response
		want int
	}{
		{"another browser", func() response { return h.browser(t).postForm(t, PathConsent, f) }, http.StatusForbidden},
		{"no CSRF token", func() response {
			g := url.Values{"request": {f.Get("request")}, "decision": {"approve"}}
			return b.postForm(t, PathConsent, g)
		}, http.StatusForbidden},
		{"wrong CSRF token", func() response {
			g := url.Values{"request": {f.Get("request")}, "decision": {"approve"}, "csrf": {"x"}}
			return b.postForm(t, PathConsent, g)
		}, http.StatusForbidden},
		{"foreign origin", func() response {
			req, _ := http.NewRequest(http.MethodPost, h.issuer+PathConsent, strings.NewReader(f.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", "https://evil.example")
			resp, err := b.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return response{status: resp.StatusCode}
		}, http.StatusForbidden},
		{"another browser's page", func() response { return h.browser(t).get(t, consentURL) }, http.StatusForbidden},
		{"no decision", func() response {
			g := url.Values{"request": {f.Get("request")}, "csrf": {f.Get("csrf")}}
			return b.postForm(t, PathConsent, g)
		}, http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if r := tc.send(); r.status != tc.want {
				t.Errorf("got %d, want %d", r.status, tc.want)
			}
		})
	}
	// The real answer still works once, and only once.
	if r := b.postForm(t, PathConsent, f); r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "code=") {
		t.Fatalf("approve: %d %s", r.status, r.header.Get("Location"))
	}
	if r := b.postForm(t, PathConsent, f); r.status != http.StatusBadRequest {
		t.Errorf("second answer: %d, want 400", r.status)
	}

	// A scope mapped to a role: granted to an operator, not to a developer.
	op := h.keys.add(t, "olga", func(k *identity.Key) { k.Roles = []string{"operator"} })
	for _, tc := range []struct {
		key, want string
	}{{key, "mcp"}, {op, "mcp mcp:admin"}} {
		verifier, challenge := pkce()
		back := h.browser(t).approve(t, h.authorizeURL(c, challenge, func(q url.Values) { q.Set("scope", "mcp mcp:admin") }), tc.key, "approve")
		tk := decodeTokens(t, h.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")},
			"code_verifier": {verifier}, "client_id": {c.ID}}, nil))
		if tk.Scope != tc.want {
			t.Errorf("scope = %q, want %q", tk.Scope, tc.want)
		}
	}
}

// TestRevoke: RFC 7009. Revoking either token of a grant ends the grant;
// unknown tokens and other clients' tokens are answered 200 and change
// nothing.
func TestRevoke(t *testing.T) {
	h := newHarness(t, nil)
	key := h.keys.add(t, "alice", nil)
	c := h.register(t, nil)
	other := h.register(t, nil)
	revoke := func(clientID, tok string) response {
		return h.post(t, PathRevoke, "application/x-www-form-urlencoded", url.Values{"token": {tok}, "client_id": {clientID}}.Encode(), nil)
	}
	for _, which := range []string{"refresh", "access"} {
		t.Run(which, func(t *testing.T) {
			tk := h.flow(t, c, key)
			tok := tk.RefreshToken
			if which == "access" {
				tok = tk.AccessToken
			}
			if r := revoke(other.ID, tok); r.status != http.StatusOK {
				t.Fatalf("revoke by another client: %d %s", r.status, r.body)
			}
			if which == "access" {
				if r := h.call(t, "/mcp", tk.AccessToken); r.status != http.StatusOK {
					t.Errorf("another client revoked the token: %d", r.status)
				}
			}
			if r := revoke(c.ID, tok); r.status != http.StatusOK {
				t.Fatalf("revoke: %d %s", r.status, r.body)
			}
			if r := h.call(t, "/mcp", tk.AccessToken); r.status != http.StatusUnauthorized {
				t.Errorf("access token after revocation: %d", r.status)
			}
			r := h.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tk.RefreshToken}, "client_id": {c.ID}}, nil)
			if oauthErr(t, r) != errInvalidGrant {
				t.Errorf("refresh after revocation: %d %s", r.status, r.body)
			}
		})
	}
	for name, tok := range map[string]string{"unknown refresh": prefixRefresh + "nope", "garbage": "x.y.z", "opaque": "abc"} {
		if r := revoke(c.ID, tok); r.status != http.StatusOK {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	if r := revoke(c.ID, ""); oauthErr(t, r) != errInvalidRequest {
		t.Errorf("no token: %d %s", r.status, r.body)
	}
	if r := h.post(t, PathRevoke, "application/x-www-form-urlencoded", "token=x", nil); r.status != http.StatusUnauthorized {
		t.Errorf("no client: %d", r.status)
	}
}

// TestAdmin: clients and grants are listed without secrets; revoking a
// grant from the admin side ends its access at once; deleting a client
// revokes its grants.
func TestAdmin(t *testing.T) {
	h := newHarness(t, nil)
	key := h.keys.add(t, "alice", nil)
	c := h.register(t, map[string]any{"token_endpoint_auth_method": "client_secret_post", "client_name": "Editor"})
	tk := h.flow(t, c, key)
	ctx := t.Context()
	clients, err := h.srv().Clients(ctx)
	if err != nil || len(clients) != 1 || clients[0].ID != c.ID || clients[0].Name != "Editor" || !clients[0].Confidential || clients[0].ActiveGrants != 1 {
		t.Fatalf("Clients = %+v, %v", clients, err)
	}
	raw, _ := json.Marshal(clients)
	if strings.Contains(string(raw), c.Secret) || strings.Contains(string(raw), hash(c.Secret)) {
		t.Error("the client list carries its secret or its hash")
	}
	grants, err := h.srv().Grants(ctx, GrantFilter{ActiveOnly: true})
	if err != nil || len(grants) != 1 || grants[0].Subject != "alice" || grants[0].ClientName != "Editor" || !grants[0].Active {
		t.Fatalf("Grants = %+v, %v", grants, err)
	}
	if err := h.srv().RevokeGrant(ctx, grants[0].ID, "admin"); err != nil {
		t.Fatal(err)
	}
	if r := h.call(t, "/mcp", tk.AccessToken); r.status != http.StatusUnauthorized {
		t.Errorf("access token after an admin revoke: %d", r.status)
	}
	if err := h.srv().RevokeGrant(ctx, "g_nope", "admin"); !errorsIs(err, ErrNotFound) {
		t.Errorf("revoke unknown grant: %v", err)
	}
	tk2 := h.flow(t, c, key)
	if err := h.srv().DeleteClient(ctx, c.ID, "admin"); err != nil {
		t.Fatal(err)
	}
	if r := h.call(t, "/mcp", tk2.AccessToken); r.status != http.StatusUnauthorized {
		t.Errorf("access token of a deleted client: %d", r.status)
	}
	if err := h.srv().DeleteClient(ctx, c.ID, "admin"); !errorsIs(err, ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	if n, err := h.srv().RevokeSubjectGrants(ctx, "alice", "admin"); err != nil || n != 0 {
		t.Errorf("RevokeSubjectGrants = %d, %v; all were revoked already", n, err)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// TestNoSecretsInStore: after registrations, flows, refreshes and a key
// made, the SQLite files hold none of the secrets in clear: client
// secrets, codes, refresh tokens, access tokens, the signing key.
func TestNoSecretsInStore(t *testing.T) {
	h := newHarness(t, nil)
	key := h.keys.add(t, "alice", nil)
	c := h.register(t, map[string]any{"token_endpoint_auth_method": "client_secret_post"})
	verifier, challenge := pkce()
	back := h.browser(t).approve(t, h.authorizeURL(c, challenge, nil), key, "approve")
	code := back.Query().Get("code")
	tk := decodeTokens(t, h.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"client_id": {c.ID}, "client_secret": {c.Secret}}, nil))
	tk2 := decodeTokens(t, h.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tk.RefreshToken},
		"client_id": {c.ID}, "client_secret": {c.Secret}}, nil))
	k, err := h.srv().keys.signer(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k.Priv)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"client secret": c.Secret, "code": code, "refresh token": tk.RefreshToken, "rotated refresh token": tk2.RefreshToken,
		"access token": tk.AccessToken, "API key": key, "signing key": base64.StdEncoding.EncodeToString(der),
		"PKCE verifier": verifier,
	}
	var files []byte
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(h.dbPath + suffix)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		files = append(files, b...)
	}
	// The files read are the ones written: the hashes are there.
	for what, s := range map[string]string{"code": code, "refresh token": tk.RefreshToken, "client secret": c.Secret} {
		if !bytes.Contains(files, []byte(hash(s))) {
			t.Fatalf("the store files do not hold the %s's hash: the check reads the wrong files", what)
		}
	}
	for what, s := range secrets {
		if bytes.Contains(files, []byte(s)) {
			t.Errorf("the %s is in the store in clear", what)
		}
		if strings.Contains(h.logs.String(), s) {
			t.Errorf("the %s is in the log", what)
		}
	}
}
