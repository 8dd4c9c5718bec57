//go:build unix

package web_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/web"
)

// approvingUpstream is an MCP server behind its own authorization server,
// which approves every authorization request at once (no person at a
// login page) and issues opaque tokens.
type approvingUpstream struct {
	as, rs *httptest.Server

	mu     sync.Mutex
	codes  map[string]string // code -> S256 challenge
	tokens map[string]bool
}

func newApprovingUpstream(t *testing.T) *approvingUpstream {
	t.Helper()
	u := &approvingUpstream{codes: map[string]string{}, tokens: map[string]bool{}}
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	as := http.NewServeMux()
	as.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, oauthex.AuthServerMeta{Issuer: u.as.URL, AuthorizationEndpoint: u.as.URL + "/authorize",
			TokenEndpoint: u.as.URL + "/token", RegistrationEndpoint: u.as.URL + "/register", ResponseTypesSupported: []string{"code"},
			GrantTypesSupported: []string{"authorization_code", "refresh_token"}, CodeChallengeMethodsSupported: []string{"S256"},
			TokenEndpointAuthMethodsSupported: []string{"none"}, ScopesSupported: []string{"mcp"}, AuthorizationResponseIssParameterSupported: true})
	})
	as.HandleFunc("POST /register", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusCreated, map[string]any{"client_id": "dashboard-client", "token_endpoint_auth_method": "none", "redirect_uris": []string{}})
	})
	as.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code := rand.Text()
		u.mu.Lock()
		u.codes[code] = q.Get("code_challenge")
		u.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		v := back.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		v.Set("iss", u.as.URL)
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	as.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		u.mu.Lock()
		want, ok := u.codes[r.PostForm.Get("code")]
		delete(u.codes, r.PostForm.Get("code"))
		tok := "at-" + rand.Text()
		if ok {
			u.tokens[tok] = true
		}
		u.mu.Unlock()
		if r.PostForm.Get("grant_type") != "authorization_code" || !ok || want != base64.RawURLEncoding.EncodeToString(sum[:]) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
	})
	u.as = httptest.NewServer(as)
	t.Cleanup(u.as.Close)

	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "authorized"}}}, nil, nil
	})
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		u.mu.Lock()
		defer u.mu.Unlock()
		if !u.tokens[tok] {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
	}
	rs := http.NewServeMux()
	rs.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: u.rs.URL + "/mcp",
			AuthorizationServers: []string{u.as.URL}}).ServeHTTP(w, r)
	})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	rs.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: u.rs.URL + "/.well-known/oauth-protected-resource/mcp"})(
			mcpHandler).ServeHTTP(w, r)
	}))
	u.rs = httptest.NewServer(rs)
	t.Cleanup(u.rs.Close)
	return u
}

// TestUpstreamConnectInBrowser drives the server page of an OAuth server
// in NEEDS_AUTH in headless Chromium (testdata/upstreamauth.cjs): the page
// says why, its "Connect with OAuth" button starts the flow and links the
// authorization page, which (approved at once) returns to the gateway's
// callback; the page then shows the grant and the server CONNECTED,
// without a restart, and never a token.
func TestUpstreamConnectInBrowser(t *testing.T) {
	browserDeps(t)
	up := newApprovingUpstream(t)
	adminKey := "sb_test_admin_" + rand.Text()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// listen is the gateway's real address: the callback URL it gives the
	// authorization server must reach it.
	yaml := fmt.Sprintf("settings:\n  listen: %s\nauth:\n  mode: keys\nservers:\n  prot:\n    transport: http\n    url: %s/mcp\n    auto_start: true\n    auth: {type: oauth}\n",
		ln.Addr(), up.rs.URL)
	getenv := func(k string) string {
		switch k {
		case app.AdminKeyEnv:
			return adminKey
		case "SWITCHBOARD_SECRET_KEY":
			return "c3dpdGNoYm9hcmQtdGVzdC1zZWNyZXQta2V5LTMyYnk="
		}
		return os.Getenv(k)
	}
	cfg, err := config.Parse("test.yaml", []byte(yaml), getenv)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Settings.Store = filepath.Join(t.TempDir(), "switchboard.db")
	logs := &lockedBuffer{}
	a, err := app.New(t.Context(), cfg, &app.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Getenv: getenv, SelfExecutable: os.Args[0]})
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	a.StartAndWait()
	mux := http.NewServeMux()
	mux.Handle(web.Prefix, web.Handler())
	mux.Handle("/", a.Handler())
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		a.Close(context.Background())
		if t.Failed() {
			t.Logf("gateway logs:\n%s", logs.String())
		}
	})

	artifacts := runScript(t, "upstreamauth", srv.URL, adminKey)

	html, err := os.ReadFile(filepath.Join(artifacts, "upstreamauth.html"))
	if err != nil {
		t.Fatal(err)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.tokens) == 0 {
		t.Fatal("no token was issued: the flow did not run")
	}
	for tok := range up.tokens {
		if strings.Contains(string(html), tok) || strings.Contains(logs.String(), tok) {
			t.Error("the page or the log shows the access token")
		}
	}
}
