package upstreamauth_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/upstreamauth"
)

// fakeAS is an authorization server that approves every authorization
// request at once (no person), issues short-lived tokens with rotating
// refresh tokens, and records what it is asked.
type fakeAS struct {
	srv *httptest.Server

	mu           sync.Mutex
	expiresIn    int                     // seconds; default 3600
	issuerOver   string                  // metadata issuer, if not the server's URL
	metadataH    http.Handler            // replaces the metadata document
	oidcOnly     bool                    // metadata only at the OpenID Connect discovery URL
	refreshDelay time.Duration           // makes refreshes slow, so that replicas overlap
	access       map[string]*fakeToken   // issued access tokens
	refresh      map[string]*fakeRefresh // live refresh tokens
	codes        map[string]fakeCode
	issued       []string // every access and refresh token issued, for the secret checks
	refreshes    int      // refresh_token grants answered with a token
	authorizes   int      // authorization requests
	tokenForms   []url.Values
	revokedWhy   string // when set, every refresh is refused with it
	clientSecret string // the pre-registered client's secret, if any
	paths        []string
}

type fakeToken struct {
	scopes  []string
	expires time.Time
	revoked bool
}

type fakeRefresh struct {
	scopes []string
}

type fakeCode struct {
	challenge, redirect, scope, resource string
}

func newFakeAS(t *testing.T) *fakeAS {
	t.Helper()
	as := &fakeAS{access: map[string]*fakeToken{}, refresh: map[string]*fakeRefresh{}, codes: map[string]fakeCode{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		as.mu.Lock()
		oidc := as.oidcOnly
		as.mu.Unlock()
		if oidc {
			http.NotFound(w, r)
			return
		}
		as.serveMetadata(w, r)
	})
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		as.mu.Lock()
		oidc := as.oidcOnly
		as.mu.Unlock()
		if !oidc {
			http.NotFound(w, r)
			return
		}
		as.serveMetadata(w, r)
	})
	mux.HandleFunc("GET /authorize", as.serveAuthorize)
	mux.HandleFunc("POST /token", as.serveToken)
	mux.HandleFunc("POST /register", as.serveRegister)
	as.srv = httptest.NewServer(as.record(mux))
	t.Cleanup(as.srv.Close)
	return as
}

func (as *fakeAS) URL() string { return as.srv.URL }

func (as *fakeAS) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		as.mu.Lock()
		as.paths = append(as.paths, r.Method+" "+r.URL.Path)
		as.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (as *fakeAS) serveMetadata(w http.ResponseWriter, r *http.Request) {
	as.mu.Lock()
	md, issuer := as.metadataH, as.issuerOver
	as.mu.Unlock()
	if md != nil {
		md.ServeHTTP(w, r)
		return
	}
	if issuer == "" {
		issuer = as.URL()
	}
	writeJSON(w, http.StatusOK, oauthex.AuthServerMeta{
		Issuer:                            issuer,
		AuthorizationEndpoint:             as.URL() + "/authorize",
		TokenEndpoint:                     as.URL() + "/token",
		RegistrationEndpoint:              as.URL() + "/register",
		ResponseTypesSupported:            []string{"code"},
		GrantTypesSupported:               []string{"authorization_code", "refresh_token", "client_credentials"},
		CodeChallengeMethodsSupported:     []string{"S256"},
		TokenEndpointAuthMethodsSupported: []string{"client_secret_basic", "none"},
		ScopesSupported:                   []string{"mcp:read", "mcp:write", "offline_access"},
	})
}

func (as *fakeAS) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	code := rand.Text()
	as.mu.Lock()
	as.authorizes++
	as.codes[code] = fakeCode{challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), scope: q.Get("scope"), resource: q.Get("resource")}
	as.mu.Unlock()
	u, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	v := u.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (as *fakeAS) serveRegister(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusCreated, map[string]any{"client_id": "dynamic-client", "token_endpoint_auth_method": "none",
		"redirect_uris": []string{}})
}

func (as *fakeAS) serveToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	form := r.PostForm
	as.mu.Lock()
	as.tokenForms = append(as.tokenForms, form)
	delay := as.refreshDelay
	as.mu.Unlock()
	refuse := func(code, desc string) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": desc})
	}
	var scopes []string
	switch form.Get("grant_type") {
	case "authorization_code":
		as.mu.Lock()
		c, ok := as.codes[form.Get("code")]
		delete(as.codes, form.Get("code"))
		as.mu.Unlock()
		sum := sha256.Sum256([]byte(form.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge || form.Get("redirect_uri") != c.redirect {
			refuse("invalid_grant", "bad code or verifier")
			return
		}
		scopes = strings.Fields(c.scope)
	case "refresh_token":
		time.Sleep(delay) // a slow authorization server, so that replicas overlap
		as.mu.Lock()
		rt, ok := as.refresh[form.Get("refresh_token")]
		why := as.revokedWhy
		if ok && why == "" {
			delete(as.refresh, form.Get("refresh_token")) // rotated: good once
			as.refreshes++
		}
		as.mu.Unlock()
		if why != "" {
			refuse("invalid_grant", why)
			return
		}
		if !ok {
			refuse("invalid_grant", "unknown refresh token")
			return
		}
		scopes = rt.scopes
	case "client_credentials":
		id, secret, ok := r.BasicAuth()
		as.mu.Lock()
		want := as.clientSecret
		as.mu.Unlock()
		if !ok || id == "" || secret != want {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "bad client credentials"})
			return
		}
		scopes = strings.Fields(form.Get("scope"))
	default:
		refuse("unsupported_grant_type", form.Get("grant_type"))
		return
	}
	access, refresh := "at-"+rand.Text(), "rt-"+rand.Text()
	as.mu.Lock()
	exp := as.expiresIn
	if exp == 0 {
		exp = 3600
	}
	as.access[access] = &fakeToken{scopes: scopes, expires: time.Now().Add(time.Duration(exp) * time.Second)}
	as.issued = append(as.issued, access)
	resp := map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": exp, "scope": strings.Join(scopes, " ")}
	if form.Get("grant_type") != "client_credentials" {
		as.refresh[refresh] = &fakeRefresh{scopes: scopes}
		as.issued = append(as.issued, refresh)
		resp["refresh_token"] = refresh
	}
	as.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
}

// revoke refuses every refresh from now on with why, and every access
// token issued so far.
func (as *fakeAS) revoke(why string) {
	as.mu.Lock()
	defer as.mu.Unlock()
	as.revokedWhy = why
	for _, t := range as.access {
		t.revoked = true
	}
}

func (as *fakeAS) counts() (authorizes, refreshes, tokenRequests int) {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.authorizes, as.refreshes, len(as.tokenForms)
}

func (as *fakeAS) lastTokenForm() url.Values {
	as.mu.Lock()
	defer as.mu.Unlock()
	if len(as.tokenForms) == 0 {
		return nil
	}
	return as.tokenForms[len(as.tokenForms)-1]
}

func (as *fakeAS) secrets() []string {
	as.mu.Lock()
	defer as.mu.Unlock()
	return slices.Clone(as.issued)
}

// verify is the resource server's check of a token.
func (as *fakeAS) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	as.mu.Lock()
	defer as.mu.Unlock()
	t, ok := as.access[token]
	if !ok || t.revoked || time.Now().After(t.expires) {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{Scopes: t.scopes, Expiration: t.expires}, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // test server
}

// resourceServer is an MCP server behind a bearer-token check by as, with
// its protected-resource metadata at the path-suffixed well-known URL,
// unless prm replaces what the metadata URLs serve.
type resourceServer struct {
	srv *httptest.Server
	as  *fakeAS

	mu    sync.Mutex
	prm   map[string]http.Handler // path → handler, replacing the default metadata
	calls int
	paths []string // of the requests other than /mcp
}

func newResourceServer(t *testing.T, as *fakeAS, scopes ...string) *resourceServer {
	t.Helper()
	rs := &resourceServer{as: as, prm: map[string]http.Handler{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		rs.mu.Lock()
		rs.calls++
		rs.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you are authorized"}}}, nil, nil
	})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	sseHandler := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		h := rs.prm[r.URL.Path]
		if r.URL.Path != "/mcp" {
			rs.paths = append(rs.paths, r.URL.Path)
		}
		rs.mu.Unlock()
		switch {
		case h != nil:
			h.ServeHTTP(w, r)
		case r.URL.Path == "/.well-known/oauth-protected-resource/mcp":
			auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
				Resource: rs.URL(), AuthorizationServers: []string{as.URL()}, ScopesSupported: []string{"mcp:read"},
			}).ServeHTTP(w, r)
		case r.URL.Path == "/.well-known/oauth-protected-resource/sse":
			auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
				Resource: rs.srv.URL + "/sse", AuthorizationServers: []string{as.URL()},
			}).ServeHTTP(w, r)
		case r.URL.Path == "/mcp":
			auth.RequireBearerToken(as.verify, &auth.RequireBearerTokenOptions{
				ResourceMetadataURL: rs.srv.URL + "/.well-known/oauth-protected-resource/mcp", Scopes: scopes,
			})(mcpHandler).ServeHTTP(w, r)
		case r.URL.Path == "/sse":
			auth.RequireBearerToken(as.verify, &auth.RequireBearerTokenOptions{
				ResourceMetadataURL: rs.srv.URL + "/.well-known/oauth-protected-resource/sse", Scopes: scopes,
			})(sseHandler).ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
	rs.srv = httptest.NewServer(mux)
	t.Cleanup(rs.srv.Close)
	return rs
}

// URL is the MCP endpoint.
func (rs *resourceServer) URL() string { return rs.srv.URL + "/mcp" }

func (rs *resourceServer) callCount() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.calls
}

func (rs *resourceServer) requested() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.paths)
}

// jsonBody answers with body as a JSON document.
func jsonBody(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	})
}

// serve makes path answer with h instead of the default.
func (rs *resourceServer) serve(path string, h http.Handler) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.prm[path] = h
}

// callbackServer serves the callbacks of authorization-code flows, and
// a fetcher that follows the authorization server's redirects to them.
type callbackServer struct {
	cb       *upstreamauth.Callbacks
	srv      *httptest.Server
	redirect string
}

func newCallbackServer(t *testing.T) *callbackServer {
	t.Helper()
	c := &callbackServer{cb: upstreamauth.NewCallbacks()}
	mux := http.NewServeMux()
	mux.Handle(upstreamauth.CallbackPath, c.cb)
	c.srv = httptest.NewServer(mux)
	t.Cleanup(c.srv.Close)
	c.redirect = c.srv.URL + upstreamauth.CallbackPath
	return c
}

// fetcher approves headlessly, as a browser following redirects would.
func (c *callbackServer) fetcher() auth.AuthorizationCodeFetcher {
	return c.cb.Fetcher(upstreamauth.Headless(&http.Client{Timeout: 10 * time.Second}, c.redirect))
}

func testKeyring(t *testing.T) *secrets.Keyring {
	t.Helper()
	kr, err := secrets.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// clock is a settable clock for the Authorizer.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(start time.Time, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = start.Add(d)
}
