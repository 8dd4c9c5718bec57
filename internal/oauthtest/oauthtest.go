// Package oauthtest serves OAuth-protected MCP servers for the tests of the
// gateway's OAuth client (package upstreamauth, through the gateway, its
// REST API and its dashboard): the resource-server half that any
// authorization server can stand behind ([NewProtectedServer]), and a whole
// upstream with an authorization server of its own that approves at once
// ([NewUpstream]).
//
// It is test support: only _test.go files import it, never the gateway.
package oauthtest

import (
	"context"
	"crypto/rand"
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

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// metadataPath is where RFC 9728 puts the protected-resource metadata of
// the resource at /mcp.
const metadataPath = "/.well-known/oauth-protected-resource/mcp"

// NewProtectedServer serves h at /mcp as a protected resource, for the
// test's lifetime: a request needs a bearer token that verify accepts
// (auth.RequireBearerToken, whose 401 names the metadata URL), and the
// protected-resource metadata names authServer as the resource's
// authorization server and scopes (none: the field is left out) as the
// scopes it supports. The resource is the server's URL + "/mcp".
func NewProtectedServer(t testing.TB, h http.Handler, verify auth.TokenVerifier, authServer string, scopes ...string) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc(metadataPath, func(w http.ResponseWriter, r *http.Request) {
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: srv.URL + "/mcp",
			AuthorizationServers: []string{authServer}, ScopesSupported: scopes}).ServeHTTP(w, r)
	})
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: srv.URL + metadataPath})(h).ServeHTTP(w, r)
	}))
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// ClientID is the client that [Upstream]'s authorization server knows
// before any registration, for the client_credentials grant.
const ClientID = "gw"

// WhoamiText is the answer of [Upstream]'s one tool, whoami.
const WhoamiText = "you are authorized"

// Upstream is an MCP server protected by its own authorization server,
// which approves every authorization request at once (no person at a login
// page) and issues opaque access tokens: what the gateway's OAuth client
// meets at a hosted MCP server. The MCP server has one tool, whoami.
//
// The authorization server publishes its metadata (RFC 8414), registers
// any client (RFC 7591) as a public one, redirects /authorize straight back
// with a code (and iss), and at /token redeems a code against its S256
// PKCE challenge, once, or grants client_credentials to [ClientID].
type Upstream struct {
	as, rs *httptest.Server
	secret string

	mu     sync.Mutex
	codes  map[string]string // code -> S256 challenge
	tokens map[string]bool   // live access tokens
	issued []string          // every token issued, for the no-leak checks
}

// NewUpstream starts an Upstream for the test's lifetime. clientSecret is
// the secret [ClientID] presents (HTTP Basic) for the client_credentials
// grant; "" refuses that grant.
func NewUpstream(t testing.TB, clientSecret string) *Upstream {
	t.Helper()
	u := &Upstream{secret: clientSecret, codes: map[string]string{}, tokens: map[string]bool{}}
	as := http.NewServeMux()
	as.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, oauthex.AuthServerMeta{Issuer: u.as.URL,
			AuthorizationEndpoint: u.as.URL + "/authorize", TokenEndpoint: u.as.URL + "/token", RegistrationEndpoint: u.as.URL + "/register",
			ResponseTypesSupported: []string{"code"}, GrantTypesSupported: []string{"authorization_code", "refresh_token", "client_credentials"},
			CodeChallengeMethodsSupported: []string{"S256"}, TokenEndpointAuthMethodsSupported: []string{"client_secret_basic", "none"},
			ScopesSupported: []string{"mcp:read", "offline_access"}, AuthorizationResponseIssParameterSupported: true})
	})
	as.HandleFunc("POST /register", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusCreated, map[string]any{"client_id": "dynamic-client", "token_endpoint_auth_method": "none", "redirect_uris": []string{}})
	})
	as.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code := rand.Text()
		u.mu.Lock()
		u.codes[code] = q.Get("code_challenge")
		u.mu.Unlock()
		back, err := url.Parse(q.Get("redirect_uri"))
		if err != nil {
			http.Error(w, "bad redirect_uri", http.StatusBadRequest)
			return
		}
		v := back.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		v.Set("iss", u.as.URL)
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	as.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			u.mu.Lock()
			want, ok := u.codes[r.PostForm.Get("code")]
			delete(u.codes, r.PostForm.Get("code"))
			u.mu.Unlock()
			if !ok || want != base64.RawURLEncoding.EncodeToString(sum[:]) {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
				return
			}
		case "client_credentials":
			if id, s, ok := r.BasicAuth(); !ok || u.secret == "" || id != ClientID || s != u.secret {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
				return
			}
		default:
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
			return
		}
		tok := "at-" + rand.Text()
		u.mu.Lock()
		u.tokens[tok] = true
		u.issued = append(u.issued, tok)
		u.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
	})
	u.as = httptest.NewServer(as)
	t.Cleanup(u.as.Close)

	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: WhoamiText}}}, nil, nil
	})
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		u.mu.Lock()
		defer u.mu.Unlock()
		if !u.tokens[tok] {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
	}
	u.rs = NewProtectedServer(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil), verify, u.as.URL)
	return u
}

// Issuer is the authorization server's issuer (its base URL).
func (u *Upstream) Issuer() string { return u.as.URL }

// MCPURL is the MCP endpoint, the URL a gateway's server definition names.
func (u *Upstream) MCPURL() string { return u.rs.URL + "/mcp" }

// Issued is every access token issued so far, oldest first.
func (u *Upstream) Issued() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.issued...)
}

// AssertNoToken fails the test if body (as JSON; a string is searched as
// it is quoted, which leaves a token's characters alone) holds any access
// token issued so far; where names body in the failure.
func (u *Upstream) AssertNoToken(t testing.TB, where string, body any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	for _, tok := range u.Issued() {
		if strings.Contains(string(raw), tok) {
			t.Errorf("%s shows an access token: %s", where, raw)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
