package app_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// TestSSRFRegistration: a server whose URL points at a metadata endpoint
// (or any destination the outbound policy refuses) is refused by the REST
// API with 400 ssrf_blocked, before it is stored or started; loopback
// upstreams work by default, are refused with outbound_deny_loopback, and
// outbound_allow wins.
func TestSSRFRegistration(t *testing.T) {
	up := newFaultyUpstream(t)
	reg := func(name, transport, url, health string) map[string]any {
		r := map[string]any{"name": name, "transport_type": transport, "auto_connect": true,
			"connection_config": map[string]any{"url": url}}
		if health != "" {
			r["health_check_url"] = health
		}
		return r
	}
	type attempt struct {
		body    map[string]any
		status  int
		reason  string   // details.reason of a refusal
		message []string // in the refusal's message
	}
	metadata := []attempt{
		{reg("meta", "HTTP", "http://169.254.169.254/latest/meta-data/", ""), 400, "metadata",
			[]string{`servers.meta.url: outbound request to "169.254.169.254" refused`, "cloud metadata", "settings.outbound_allow"}},
		{reg("meta", "SSE", "http://169.254.169.254/latest/meta-data/", ""), 400, "metadata", []string{"169.254.169.254"}},
		{reg("meta", "HTTP", "http://[fd00:ec2::254]/latest/meta-data/", ""), 400, "metadata", []string{"fd00:ec2::254"}},
		{reg("meta", "HTTP", "http://[::ffff:169.254.169.254]/", ""), 400, "metadata", nil},
		{reg("meta", "SSE", "http://metadata.google.internal/computeMetadata/v1/", ""), 400, "metadata", []string{"metadata.google.internal"}},
		{reg("meta", "HTTP", "http://100.100.100.200/latest/meta-data/", ""), 400, "metadata", nil},
		{reg("meta", "HTTP", "http://169.254.10.1:8080/mcp", ""), 400, "link_local", []string{"link-local"}},
		{reg("meta", "HTTP", "http://2852039166/", ""), 400, "ambiguous_ip_literal", nil},
		{reg("meta", "HTTP", up.srv.URL+"/mcp", "http://169.254.169.254/health"), 400, "metadata",
			[]string{"servers.meta.health_check_url"}},
	}
	for _, tc := range []struct {
		name     string
		settings string
		attempts []attempt
	}{
		{"default", "", append(metadata, attempt{reg("local", "HTTP", up.srv.URL+"/mcp", ""), 201, "", nil})},
		{"deny loopback", "settings:\n  outbound_deny_loopback: true\n", []attempt{
			{reg("local", "HTTP", up.srv.URL+"/mcp", ""), 400, "loopback", []string{"settings.outbound_deny_loopback"}},
			{reg("local", "SSE", "http://localhost:1/sse", ""), 400, "loopback", nil},
		}},
		{"allow list wins", "settings:\n  outbound_deny_loopback: true\n  outbound_deny_private: true\n  outbound_allow: [127.0.0.1]\n",
			[]attempt{{reg("local", "HTTP", up.srv.URL+"/mcp", ""), 201, "", nil}}},
		{"allow list is exact", "settings:\n  outbound_allow: [169.254.169.254]\n",
			[]attempt{{reg("meta", "HTTP", "http://169.254.10.1:8080/mcp", ""), 400, "link_local", nil}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storePath := filepath.Join(t.TempDir(), "switchboard.db")
			g := startGatewayStore(t, tc.settings+"servers: {}\n", nil, storePath)
			want := map[string]bool{}
			for _, a := range tc.attempts {
				code, body := g.rest(t, "POST", "/api/v1/aggregator/servers", a.body)
				if code != a.status {
					t.Fatalf("register %v: %d %v, want %d", a.body, code, body, a.status)
				}
				if code == 201 {
					want[a.body["name"].(string)] = true
					continue
				}
				e, _ := body["error"].(map[string]any)
				details, _ := e["details"].(map[string]any)
				msg, _ := e["message"].(string)
				if e["code"] != "ssrf_blocked" || details["reason"] != a.reason {
					t.Errorf("register %v: %v, want code ssrf_blocked with reason %q", a.body, body, a.reason)
				}
				for _, w := range a.message {
					if !strings.Contains(msg, w) {
						t.Errorf("register %v: message %q does not contain %q", a.body, msg, w)
					}
				}
			}
			// Nothing refused is listed, stored or started.
			_, body := g.rest(t, "GET", "/api/v1/aggregator/servers", nil)
			listed := map[string]bool{}
			for _, s := range body["servers"].([]any) {
				listed[s.(map[string]any)["name"].(string)] = true
			}
			db, err := store.Open(t.Context(), storePath, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			rows, err := db.ListServers(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			stored := map[string]bool{}
			for _, r := range rows {
				stored[r.Name] = true
			}
			if len(listed) != len(want) || len(stored) != len(want) {
				t.Errorf("listed %v, stored %v; want only %v", listed, stored, want)
			}
			for name := range want {
				waitFor(t, name+" connected", func() bool { return g.serverByName(t, name)["status"] == "CONNECTED" })
			}
		})
	}
}

// TestSSRFConfigServer: a config-file server with a metadata URL fails its
// connect with the guard's message and is not restarted; the gateway and
// its other servers start.
func TestSSRFConfigServer(t *testing.T) {
	up := newFaultyUpstream(t)
	g := startGateway(t, "servers:\n  meta:\n    transport: http\n    url: http://169.254.169.254/latest/meta-data/\n    auto_start: true\n"+
		up.yaml("local"), nil)
	s := g.serverByName(t, "meta")
	msg, _ := s["error_message"].(string)
	if s["status"] != "ERROR" || !strings.Contains(msg, `outbound request to "169.254.169.254" refused`) ||
		!strings.Contains(msg, "settings.outbound_allow") || s["next_restart_at"] != nil {
		t.Errorf("meta = status %v, error %q, next restart %v; want ERROR with the refusal, no restart", s["status"], msg, s["next_restart_at"])
	}
	if st := g.serverByName(t, "local")["status"]; st != "CONNECTED" {
		t.Errorf("local = %v, want CONNECTED", st)
	}
	// Connecting again says the same, at once.
	code, body := g.rest(t, "POST", "/api/v1/aggregator/servers/meta/connect?wait=true", nil)
	if srv, _ := body["server"].(map[string]any); code != 200 || !strings.Contains(srv["error_message"].(string), "refused") {
		t.Errorf("connect: %d %v, want the refusal again", code, body)
	}
}

// TestSSRFConfiguredEndpoints: the JWKS, embeddings and classifier URLs of
// the config file are refused at start when the guard refuses them by
// address or name.
func TestSSRFConfiguredEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"jwks", "auth:\n  mode: jwt\n  jwt:\n    jwks_url: http://169.254.169.254/keys\n", "auth.jwt.jwks_url: outbound request"},
		{"embeddings", "search:\n  embeddings:\n    url: http://metadata.google.internal/v1\n    model: m\n", "search.embeddings.url: outbound request"},
		{"classifier", "skills:\n  classifier:\n    mode: llm\n    url: http://[fd00:ec2::254]/v1\n    model: m\n", "skills.classifier.url: outbound request"},
		{"deny loopback", "settings:\n  outbound_deny_loopback: true\nsearch:\n  embeddings:\n    url: http://127.0.0.1:1/v1\n    model: m\n",
			"settings.outbound_deny_loopback is true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("test.yaml", []byte(tc.yaml+"servers: {}\n"), func(string) string { return "" })
			if err != nil {
				t.Fatalf("config: %v", err)
			}
			cfg.Settings.Store = filepath.Join(t.TempDir(), "switchboard.db")
			a, err := app.New(t.Context(), cfg, &app.Options{Getenv: func(string) string { return "" }, SelfExecutable: os.Args[0]})
			if err == nil {
				a.Close(context.Background())
				t.Fatalf("app.New succeeded, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("app.New: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestSSRFJWKSRedirect: the JWKS client is guarded at every hop: a key set
// URL that redirects to the metadata endpoint fails the fetch, and the
// bearer is not authenticated.
func TestSSRFJWKSRedirect(t *testing.T) {
	var hits atomic.Int64
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/", http.StatusFound)
	}))
	t.Cleanup(idp.Close)
	g := startGateway(t, "auth:\n  mode: jwt\n  jwt:\n    jwks_url: "+idp.URL+"/keys\nservers: {}\n", nil)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": "agent", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "k1"
	bearer, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	code, body := g.restAs(t, bearer, "GET", "/api/v1/aggregator/servers", nil)
	if code < 400 {
		t.Fatalf("a bearer whose key set could not be fetched was accepted: %d %v", code, body)
	}
	if hits.Load() == 0 {
		t.Fatalf("the key set URL was never fetched")
	}
	waitFor(t, "the JWKS failure logged", func() bool {
		logs := g.logs.String()
		return strings.Contains(logs, "JWKS fetch failed") && strings.Contains(logs, `outbound request to \"169.254.169.254\" refused`)
	})
}
