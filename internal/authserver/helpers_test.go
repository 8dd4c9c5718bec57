package authserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/clocktest"
	"github.com/switchboard-mcp/switchboard/internal/identity"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

// TestMain shares one throwaway PostgreSQL server among the tests that
// need one, and stops it at the end.
func TestMain(m *testing.M) { os.Exit(storetest.PostgresMain(m)) }

// newClock is the clock shared by the server and the resource server,
// from the current second on.
func newClock() *clocktest.Clock { return clocktest.New(time.Now().UTC().Truncate(time.Second)) }

// keyStore is the API keys users sign in with.
type keyStore struct {
	mu   sync.Mutex
	keys map[string]identity.Key
}

func (ks *keyStore) KeyByHash(_ context.Context, h string) (identity.Key, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	k, ok := ks.keys[h]
	if !ok {
		return identity.Key{}, identity.ErrNotFound
	}
	return k, nil
}

func (ks *keyStore) add(t testing.TB, agent string, edit func(*identity.Key)) string {
	t.Helper()
	k, secret, err := identity.NewKey(agent, []string{"dev"}, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&k)
	}
	ks.mu.Lock()
	ks.keys[k.Hash] = k
	ks.mu.Unlock()
	return secret
}

func testKeyring(t testing.TB) *secrets.Keyring {
	t.Helper()
	k, err := secrets.NewKeyring(bytes.Repeat([]byte{7}, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// swap is a handler set after its server started, so that the issuer can
// be the server's own URL.
type swap struct{ h atomic.Pointer[http.Handler] }

func (s *swap) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*s.h.Load()).ServeHTTP(w, r) }
func (s *swap) set(h http.Handler)                               { s.h.Store(&h) }

// replica is one gateway: an authorization server and a resource endpoint
// whose tokens identity checks, as the app will wire them.
type replica struct {
	srv   *Server
	authn *identity.Authenticator
	mux   *http.ServeMux
}

// harness is a gateway at ts.URL: one replica, or several behind a
// round-robin balancer.
type harness struct {
	t        *testing.T
	ts       *httptest.Server
	issuer   string
	clock    *clocktest.Clock
	keys     *keyStore
	db       *store.DB // the first replica's
	dbPath   string    // the SQLite file, when the harness made it
	replicas []*replica
	next     atomic.Int64
	logs     *logtest.Buffer
}

type harnessOpts struct {
	cfg      func(*Config)
	opts     func(*Options)
	dbs      []*store.DB // one per replica; nil = one SQLite file
	tls      bool
	scopeMap map[string]string
}

func newHarness(t *testing.T, ho *harnessOpts) *harness {
	t.Helper()
	if ho == nil {
		ho = &harnessOpts{}
	}
	h := &harness{t: t, clock: newClock(), keys: &keyStore{keys: map[string]identity.Key{}}, logs: &logtest.Buffer{}}
	sw := &swap{}
	if ho.tls {
		h.ts = httptest.NewTLSServer(sw)
	} else {
		h.ts = httptest.NewServer(sw)
	}
	t.Cleanup(h.ts.Close)
	h.issuer = h.ts.URL
	dbs := ho.dbs
	if dbs == nil {
		h.dbPath = filepath.Join(t.TempDir(), "sb.db")
		dbs = []*store.DB{openStore(t, h.dbPath)}
	}
	h.db = dbs[0]
	seal := testKeyring(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i, db := range dbs {
		cfg := Config{Issuer: h.issuer, Scopes: []string{"mcp", "mcp:admin"}, DefaultScopes: []string{"mcp"},
			ScopeRoles: map[string]string{"mcp:admin": "operator"}}
		if ho.cfg != nil {
			ho.cfg(&cfg)
		}
		var authn *identity.Authenticator
		o := &Options{
			Clock:  h.clock.Now,
			Logger: testLogger(h.logs, i),
			SignIn: func(ctx context.Context, key string) (authz.Identity, error) {
				return authn.AuthenticateToken(ctx, key)
			},
		}
		if ho.tls {
			o.HTTPClient = h.ts.Client()
		}
		if ho.opts != nil {
			ho.opts(o)
		}
		srv, err := New(db, seal, cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		authn, err = identity.New(identity.Config{Mode: identity.ModeOAuth, OAuth: &identity.OAuthConfig{
			Resource:   h.issuer,
			Token:      identity.JWTConfig{Issuer: h.issuer, KeySet: srv.KeySet},
			Scopes:     []string{"mcp"},
			ScopeRoles: cfg.ScopeRoles,
			Check:      srv.CheckToken,
		}}, h.keys, &identity.Options{Clock: h.clock.Now, CacheTTL: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(authn.Close)
		mux := http.NewServeMux()
		srv.Register(mux)
		resource := func(w http.ResponseWriter, r *http.Request) {
			id, err := authn.Authenticate(r)
			if err != nil {
				var ae *identity.Error
				if !errors.As(err, &ae) {
					http.Error(w, err.Error(), http.StatusServiceUnavailable)
					return
				}
				w.Header().Set("WWW-Authenticate", authn.Challenge(r, ae))
				http.Error(w, ae.Reason, identity.Status(ae))
				return
			}
			json.NewEncoder(w).Encode(id)
		}
		mux.HandleFunc("/mcp", resource)
		mux.HandleFunc("/servers/{name}/mcp", resource)
		mux.Handle(identity.MetadataPath, authn.MetadataHandler())
		mux.Handle(identity.MetadataPath+"/", authn.MetadataHandler())
		wg.Go(func() {
			if err := srv.Run(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
		h.replicas = append(h.replicas, &replica{srv: srv, authn: authn, mux: mux})
	}
	// Revocations reach a replica only once it listens for them.
	for _, r := range h.replicas {
		select {
		case <-r.srv.listening:
		case <-time.After(30 * time.Second):
			t.Fatal("a replica did not start listening for revocations")
		}
	}
	// Round robin: each request of a flow goes to the next replica.
	sw.set(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := h.next.Add(1) % int64(len(h.replicas))
		h.replicas[i].mux.ServeHTTP(w, r)
	}))
	return h
}

func (h *harness) srv() *Server { return h.replicas[0].srv }

func openStore(t testing.TB, path string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// client is a registered OAuth client.
type client struct {
	ID, Secret string
	Redirect   string
}

// register registers a client through the registration endpoint.
func (h *harness) register(t *testing.T, doc map[string]any) client {
	t.Helper()
	if doc == nil {
		doc = map[string]any{}
	}
	if _, ok := doc["redirect_uris"]; !ok {
		doc["redirect_uris"] = []string{"http://127.0.0.1/callback"}
	}
	if _, ok := doc["token_endpoint_auth_method"]; !ok {
		doc["token_endpoint_auth_method"] = "none"
	}
	if _, ok := doc["grant_types"]; !ok {
		doc["grant_types"] = []string{"authorization_code", "refresh_token"}
	}
	if _, ok := doc["client_name"]; !ok {
		doc["client_name"] = "Test Client"
	}
	body, _ := json.Marshal(doc)
	resp := h.post(t, PathRegister, "application/json", string(body), nil)
	if resp.status != http.StatusCreated {
		t.Fatalf("register: %d %s", resp.status, resp.body)
	}
	var out struct {
		ClientID     string   `json:"client_id"`
		ClientSecret string   `json:"client_secret"`
		RedirectURIs []string `json:"redirect_uris"`
	}
	if err := json.Unmarshal([]byte(resp.body), &out); err != nil {
		t.Fatal(err)
	}
	return client{ID: out.ClientID, Secret: out.ClientSecret, Redirect: out.RedirectURIs[0]}
}

type response struct {
	status int
	header http.Header
	body   string
}

func (h *harness) do(t testing.TB, req *http.Request) response {
	t.Helper()
	// A client of our own: ts.Client() is shared, and browsers set jars.
	c := &http.Client{Transport: h.ts.Client().Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (h *harness) post(t testing.TB, path, contentType, body string, edit func(*http.Request)) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.issuer+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if edit != nil {
		edit(req)
	}
	return h.do(t, req)
}

func (h *harness) token(t testing.TB, form url.Values, edit func(*http.Request)) response {
	t.Helper()
	return h.post(t, PathToken, "application/x-www-form-urlencoded", form.Encode(), edit)
}

// call calls the resource endpoint path with an access token.
func (h *harness) call(t testing.TB, path, token string) response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.issuer+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	return h.do(t, req)
}

// pkce returns a verifier and its S256 challenge.
func pkce() (verifier, challenge string) {
	verifier = random(32)
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// browser is a user agent with its cookies, driving the pages the way a
// person would: it reads the forms' hidden fields and posts them back.
type browser struct {
	h      *harness
	client *http.Client
}

func (h *harness) browser(t testing.TB) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: h.ts.Client().Transport, Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &browser{h: h, client: c}
}

func (b *browser) get(t testing.TB, u string) response {
	t.Helper()
	if strings.HasPrefix(u, "/") {
		u = b.h.issuer + u
	}
	resp, err := b.client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (b *browser) postForm(t testing.TB, path string, form url.Values) response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.h.issuer+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.h.issuer)
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

var hiddenField = regexp.MustCompile(`name="(request|csrf)" value="([^"]*)"`)

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

// authorizeURL builds an authorization request.
func (h *harness) authorizeURL(c client, challenge string, edit func(url.Values)) string {
	q := url.Values{
		"response_type": {"code"}, "client_id": {c.ID}, "redirect_uri": {c.Redirect}, "state": {"st-1"},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "resource": {h.issuer + "/mcp"},
		"scope": {"mcp"},
	}
	if edit != nil {
		edit(q)
	}
	return h.issuer + PathAuthorize + "?" + q.Encode()
}

// approve runs the browser part of a flow with an API key and the given
// decision, and returns where the server sent the browser back.
func (b *browser) approve(t testing.TB, authorizeURL, key, decision string) *url.URL {
	t.Helper()
	r := b.get(t, authorizeURL)
	if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), PathSignIn) {
		t.Fatalf("authorize: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	r = b.get(t, r.header.Get("Location"))
	if r.status != http.StatusOK {
		t.Fatalf("sign-in page: %d %s", r.status, r.body)
	}
	f := fields(t, r.body)
	f.Set("key", key)
	r = b.postForm(t, PathSignIn, f)
	if r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", r.status, r.body)
	}
	return b.consent(t, r.header.Get("Location"), decision)
}

// consent answers the consent page at u.
func (b *browser) consent(t testing.TB, u, decision string) *url.URL {
	t.Helper()
	r := b.get(t, u)
	if r.status != http.StatusOK {
		t.Fatalf("consent page: %d %s", r.status, r.body)
	}
	f := fields(t, r.body)
	f.Set("decision", decision)
	r = b.postForm(t, PathConsent, f)
	if r.status != http.StatusSeeOther {
		t.Fatalf("consent: %d %s", r.status, r.body)
	}
	back, err := url.Parse(r.header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// tokens is a decoded token response.
type tokens struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

func decodeTokens(t testing.TB, r response) tokens {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("token endpoint: %d %s", r.status, r.body)
	}
	var tk tokens
	if err := json.Unmarshal([]byte(r.body), &tk); err != nil {
		t.Fatal(err)
	}
	return tk
}

// flow runs a whole authorization for c with key and returns the tokens.
func (h *harness) flow(t testing.TB, c client, key string) tokens {
	t.Helper()
	verifier, challenge := pkce()
	back := h.browser(t).approve(t, h.authorizeURL(c, challenge, nil), key, "approve")
	code := back.Query().Get("code")
	if code == "" {
		t.Fatalf("no code in %s", back)
	}
	form := url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"client_id": {c.ID}, "redirect_uri": {c.Redirect}, "resource": {h.issuer + "/mcp"},
	}
	if c.Secret != "" {
		form.Set("client_secret", c.Secret)
	}
	return decodeTokens(t, h.token(t, form, nil))
}

// oauthErr decodes an OAuth error body.
func oauthErr(t testing.TB, r response) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("not an OAuth error body: %d %q", r.status, r.body)
	}
	return e.Error
}

// claimsOf decodes a JWT's claims without checking it.
func claimsOf(t testing.TB, tok string) jwt.MapClaims {
	t.Helper()
	c := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(tok, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// count counts rows of a table, to check what a refused request stored.
func count(t testing.TB, db *store.DB, what string) int {
	t.Helper()
	ctx := context.Background()
	switch what {
	case "grants":
		g, err := db.OAuthGrants(ctx, store.OAuthGrantFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(g)
	case "clients":
		c, err := db.OAuthClients(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(c)
	}
	t.Fatalf("count %s?", what)
	return 0
}
