package authserver

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

// idp is an OpenID provider for the tests: it signs in whoever it is told
// to, and checks the gateway's PKCE verifier and client secret the way a
// real provider does.
type idp struct {
	*httptest.Server
	mu       sync.Mutex
	user     map[string]any // claims of the next sign-in
	deny     bool           // answer error=access_denied
	badNonce bool
	codes    map[string]idpCode
	exchange int
}

type idpCode struct{ challenge, nonce, redirect string }

func newIdP(t *testing.T) *idp {
	p := &idp{codes: map[string]idpCode{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": p.URL, "authorization_endpoint": p.URL + "/authorize", "token_endpoint": p.URL + "/token",
		})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		back, _ := url.Parse(q.Get("redirect_uri"))
		v := url.Values{"state": {q.Get("state")}}
		p.mu.Lock()
		defer p.mu.Unlock()
		switch {
		case q.Get("client_id") != "gw" || q.Get("code_challenge_method") != "S256" || q.Get("nonce") == "" ||
			!strings.Contains(q.Get("scope"), "openid"):
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		case p.deny:
			v.Set("error", "access_denied")
		default:
			code := random(16)
			p.codes[code] = idpCode{challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), redirect: q.Get("redirect_uri")}
			v.Set("code", code)
		}
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.exchange++
		c, found := p.codes[r.PostFormValue("code")]
		delete(p.codes, r.PostFormValue("code"))
		sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
		switch {
		case id != "gw" || secret != "idp-secret":
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client"})
			return
		case !found || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge || r.PostFormValue("redirect_uri") != c.redirect:
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
			return
		}
		claims := jwt.MapClaims{"iss": p.URL, "aud": "gw", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(), "nonce": c.nonce}
		if p.badNonce {
			claims["nonce"] = "other"
		}
		for k, v := range p.user {
			claims[k] = v
		}
		idt, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte("idp-signing-key-of-32-bytes-long!"))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "idp-at", "token_type": "Bearer", "id_token": idt, "expires_in": 3600})
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	return p
}

func (p *idp) set(f func(*idp)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

// TestUpstreamSignIn: with an OIDC provider configured, the user signs in
// there (code + PKCE + nonce); the provider's claims become the token's
// identity, seed 003's workspace policy included.
func TestUpstreamSignIn(t *testing.T) {
	p := newIdP(t)
	h := newHarness(t, &harnessOpts{cfg: func(c *Config) {
		c.Upstream = &UpstreamConfig{Issuer: p.URL, ClientID: "gw", ClientSecret: "idp-secret", SubjectClaim: "email"}
	}, opts: func(o *Options) { o.SignIn = nil }})
	c := h.register(t, nil)
	p.set(func(p *idp) {
		p.user = map[string]any{"sub": "u-123", "email": "carol@example.com", "roles": []string{"dev"},
			"isAdmin": false, "mcpServerDenyIds": []string{"secret-server"}}
	})

	// signIn drives the browser through the provider back to the consent
	// page, or returns where it ended otherwise.
	signIn := func(b *browser, challenge string) response {
		r := b.get(t, h.authorizeURL(c, challenge, nil))
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), p.URL+"/authorize?") {
			t.Fatalf("authorize: %d %s", r.status, r.header.Get("Location"))
		}
		r = b.get(t, r.header.Get("Location")) // the provider
		if r.status != http.StatusFound {
			t.Fatalf("provider: %d %s", r.status, r.body)
		}
		return b.get(t, r.header.Get("Location")) // our callback
	}

	verifier, challenge := pkce()
	b := h.browser(t)
	r := signIn(b, challenge)
	if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), PathConsent) {
		t.Fatalf("callback: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	back := b.consent(t, r.header.Get("Location"), "approve")
	tk := decodeTokens(t, h.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")},
		"code_verifier": {verifier}, "client_id": {c.ID}}, nil))
	res := h.call(t, "/mcp", tk.AccessToken)
	if res.status != http.StatusOK {
		t.Fatalf("/mcp: %d %s", res.status, res.body)
	}
	var id authz.Identity
	json.Unmarshal([]byte(res.body), &id)
	if id.AgentID != "carol@example.com" || !id.WorkspacePolicy || id.Admin || len(id.DenyServers) != 1 || id.DenyServers[0] != "secret-server" {
		t.Errorf("identity at the resource = %+v", id)
	}
	grants, _ := h.srv().Grants(t.Context(), GrantFilter{})
	if len(grants) != 1 || grants[0].IdentityID != "oidc:"+p.URL+"|u-123" {
		t.Errorf("grants = %+v", grants)
	}

	t.Run("provider denies", func(t *testing.T) {
		p.set(func(p *idp) { p.deny = true })
		defer p.set(func(p *idp) { p.deny = false })
		_, challenge := pkce()
		r := signIn(h.browser(t), challenge)
		loc, _ := url.Parse(r.header.Get("Location"))
		if r.status != http.StatusSeeOther || loc.Query().Get("error") != errAccessDenied || !strings.HasPrefix(loc.String(), c.Redirect) {
			t.Errorf("got %d %s, want the client told access_denied", r.status, loc)
		}
	})
	t.Run("wrong nonce", func(t *testing.T) {
		p.set(func(p *idp) { p.badNonce = true })
		defer p.set(func(p *idp) { p.badNonce = false })
		_, challenge := pkce()
		if r := signIn(h.browser(t), challenge); r.status != http.StatusBadGateway || r.header.Get("Location") != "" {
			t.Errorf("got %d %s, want an error page", r.status, r.header.Get("Location"))
		}
	})
	t.Run("callback in another browser", func(t *testing.T) {
		_, challenge := pkce()
		b := h.browser(t)
		r := b.get(t, h.authorizeURL(c, challenge, nil))
		r = b.get(t, r.header.Get("Location"))
		var before, after int
		p.set(func(p *idp) { before = p.exchange })
		if r := h.browser(t).get(t, r.header.Get("Location")); r.status != http.StatusForbidden {
			t.Errorf("callback without the cookie: %d", r.status)
		}
		p.set(func(p *idp) { after = p.exchange })
		if after != before {
			t.Error("the provider's code was exchanged for a browser that did not start the sign-in")
		}
	})
	t.Run("forged state", func(t *testing.T) {
		if r := h.browser(t).get(t, PathCallback+"?state=forged&code=x"); r.status != http.StatusBadRequest {
			t.Errorf("got %d", r.status)
		}
	})
	t.Run("no API key sign-in", func(t *testing.T) {
		if r := h.browser(t).get(t, PathSignIn+"?request=x"); r.status != http.StatusNotFound {
			t.Errorf("got %d", r.status)
		}
	})
	// The verifier sent to the provider is sealed in the store.
	if strings.Contains(h.logs.String(), "idp-secret") {
		t.Error("the provider's client secret is in the log")
	}
}
