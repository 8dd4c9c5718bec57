// Package authservertest runs a real built-in authorization server for the
// tests of the packages that consume it (the REST API, the CLI, the
// dashboard): on a SQLite file in the test's temporary directory, served
// by an httptest server whose URL is the issuer, with users who sign in by
// name. Clients register through the registration endpoint and grants
// come from the whole flow (authorize, sign-in, consent, token), as an MCP
// client would get them.
package authservertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/internal/authserver"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// UserKey is the sign-in key of the user agent: the test server accepts
// "user:<agent>" and signs that agent in.
func UserKey(agent string) string { return "user:" + agent }

// Server is a running authorization server. Its embedded
// [*authserver.Server] is what the app hands to the API.
type Server struct {
	*authserver.Server
	// URL is the issuer and the httptest server's address.
	URL string
	// DB is the server's store, to check what it keeps (no secret in clear).
	DB *store.DB
	// Path is the SQLite file.
	Path string

	mu     sync.Mutex
	offset time.Duration
}

// Now is the server's clock: the real time, plus what [Server.Advance]
// added.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Add(s.offset)
}

// Advance moves the server's clock forward, e.g. so that two clients
// registered in a row do not share their creation second (the order of
// a listing).
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	s.offset += d
	s.mu.Unlock()
}

// New starts a server that runs until the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	// Unstarted, the server has its address already: the issuer.
	ts := httptest.NewUnstartedServer(nil)
	issuer := "http://" + ts.Listener.Addr().String()
	path := filepath.Join(t.TempDir(), "authserver.db")
	db, err := store.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	seal, err := secrets.NewKeyring(bytes.Repeat([]byte{7}, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{DB: db, Path: path}
	srv, err := authserver.New(db, seal, authserver.Config{Issuer: issuer}, &authserver.Options{
		Clock: s.Now,
		SignIn: func(_ context.Context, key string) (authz.Identity, error) {
			agent, ok := strings.CutPrefix(key, "user:")
			if !ok || agent == "" {
				return authz.Identity{}, errors.New("unknown key")
			}
			return authz.Identity{ID: "key:" + agent, AgentID: agent, Method: "key"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Run(ctx); err != nil {
			t.Errorf("authserver Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	s.Server, s.URL = srv, ts.URL
	return s
}

// Client is a registered client; Secret is empty for a public one.
type Client struct {
	ID, Secret, Redirect string
}

// Register registers a client named name through the registration
// endpoint: confidential (client_secret_post) or public.
func (s *Server) Register(t testing.TB, name string, confidential bool) Client {
	t.Helper()
	method := "none"
	if confidential {
		method = "client_secret_post"
	}
	doc, _ := json.Marshal(map[string]any{
		"client_name": name, "redirect_uris": []string{"http://127.0.0.1/callback"},
		"token_endpoint_auth_method": method, "grant_types": []string{"authorization_code", "refresh_token"},
	})
	status, body := s.send(t, nil, http.MethodPost, authserver.PathRegister, "application/json", string(doc))
	if status != http.StatusCreated {
		t.Fatalf("register %s: %d %s", name, status, body)
	}
	var out struct {
		ClientID     string   `json:"client_id"`
		ClientSecret string   `json:"client_secret"`
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	return Client{ID: out.ClientID, Secret: out.ClientSecret, Redirect: out.RedirectURIs[0]}
}

// Tokens is a token endpoint answer.
type Tokens struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// GrantID is the grant an access token was issued under.
func (tk Tokens) GrantID(t testing.TB) string {
	t.Helper()
	c := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(tk.AccessToken, c); err != nil {
		t.Fatal(err)
	}
	id, _ := c["grant_id"].(string)
	if id == "" {
		t.Fatalf("access token without grant_id: %v", c)
	}
	return id
}

// Claims are an access token's claims, unverified: what
// [authserver.Server.CheckToken] is asked about.
func (tk Tokens) Claims(t testing.TB) map[string]any {
	t.Helper()
	c := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(tk.AccessToken, c); err != nil {
		t.Fatal(err)
	}
	return c
}

var hiddenField = regexp.MustCompile(`name="(request|csrf)" value="([^"]*)"`)

// Authorize runs a whole authorization of c by agent (sign-in with
// [UserKey], consent approved, code exchanged) and returns the tokens: one
// new grant.
func (s *Server) Authorize(t testing.TB, c Client, agent string) Tokens {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 32)
	rand.Read(raw) // never fails (crypto/rand, Go ≥ 1.24)
	verifier := base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type": {"code"}, "client_id": {c.ID}, "redirect_uri": {c.Redirect}, "state": {"st"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"resource": {s.URL + "/mcp"}, "scope": {"mcp"},
	}
	status, loc, _ := s.browse(t, jar, http.MethodGet, authserver.PathAuthorize+"?"+q.Encode(), nil)
	if status != http.StatusSeeOther {
		t.Fatalf("authorize: %d", status)
	}
	status, _, page := s.browse(t, jar, http.MethodGet, loc, nil)
	if status != http.StatusOK {
		t.Fatalf("sign-in page: %d %s", status, page)
	}
	form := fields(t, page)
	form.Set("key", UserKey(agent))
	status, loc, page = s.browse(t, jar, http.MethodPost, authserver.PathSignIn, form)
	if status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", status, page)
	}
	status, _, page = s.browse(t, jar, http.MethodGet, loc, nil)
	if status != http.StatusOK {
		t.Fatalf("consent page: %d %s", status, page)
	}
	form = fields(t, page)
	form.Set("decision", "approve")
	status, loc, page = s.browse(t, jar, http.MethodPost, authserver.PathConsent, form)
	if status != http.StatusSeeOther {
		t.Fatalf("consent: %d %s", status, page)
	}
	back, err := url.Parse(loc)
	if err != nil || back.Query().Get("code") == "" {
		t.Fatalf("no code in %q", loc)
	}
	tk, err := s.token(t, c, url.Values{
		"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")}, "code_verifier": {verifier},
		"redirect_uri": {c.Redirect}, "resource": {s.URL + "/mcp"},
	})
	if err != nil {
		t.Fatalf("code exchange: %v", err)
	}
	return tk
}

// Refresh exchanges a refresh token; a refusal is an error naming the
// OAuth error code (invalid_grant once the grant is revoked).
func (s *Server) Refresh(t testing.TB, c Client, refresh string) (Tokens, error) {
	t.Helper()
	return s.token(t, c, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}})
}

func (s *Server) token(t testing.TB, c Client, form url.Values) (Tokens, error) {
	t.Helper()
	form.Set("client_id", c.ID)
	if c.Secret != "" {
		form.Set("client_secret", c.Secret)
	}
	status, body := s.send(t, nil, http.MethodPost, authserver.PathToken, "application/x-www-form-urlencoded", form.Encode())
	if status != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal([]byte(body), &e) // a non-JSON refusal keeps an empty code
		return Tokens{}, fmt.Errorf("token endpoint: %d %s", status, e.Error)
	}
	var tk Tokens
	if err := json.Unmarshal([]byte(body), &tk); err != nil {
		t.Fatal(err)
	}
	return tk, nil
}

// fields reads the hidden fields of a page's form.
func fields(t testing.TB, page string) url.Values {
	t.Helper()
	v := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(page, -1) {
		v.Set(m[1], m[2])
	}
	if v.Get("request") == "" || v.Get("csrf") == "" {
		t.Fatalf("no form fields in page:\n%s", page)
	}
	return v
}

// browse is a browser's request (cookies in jar, redirects not followed,
// forms posted from the issuer's origin); it returns the status, the
// Location and the body.
func (s *Server) browse(t testing.TB, jar http.CookieJar, method, path string, form url.Values) (int, string, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	if strings.HasPrefix(path, "/") {
		path = s.URL + path
	}
	req, err := http.NewRequest(method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.URL)
	}
	resp, err := s.client(jar).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// send is a client's (not a browser's) request.
func (s *Server) send(t testing.TB, jar http.CookieJar, method, path, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := s.client(jar).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *Server) client(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
