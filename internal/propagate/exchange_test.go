package propagate_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/clocktest"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/propagate"
)

// exchangeAS is a token endpoint for token exchange that answers with
// status and, on 200, a token naming the subject of the assertion.
type exchangeAS struct {
	srv    *httptest.Server
	calls  atomic.Int64
	status int
	life   int64

	mu    sync.Mutex
	forms []map[string]string
}

func newExchangeAS(t *testing.T) *exchangeAS {
	a := &exchangeAS{status: http.StatusOK, life: 300}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.calls.Add(1)
		_ = r.ParseForm()
		form := map[string]string{}
		for k := range r.PostForm {
			form[k] = r.PostForm.Get(k)
		}
		if id, secret, ok := r.BasicAuth(); ok {
			form["client"] = id + ":" + secret
		}
		a.mu.Lock()
		a.forms = append(a.forms, form)
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if a.status != http.StatusOK {
			w.WriteHeader(a.status)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": "subject not allowed"})
			return
		}
		claims := jwt.MapClaims{}
		_, _, _ = jwt.NewParser().ParseUnverified(form["subject_token"], claims)
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "tok-for-" + claims["sub"].(string),
			"token_type": "Bearer", "expires_in": a.life, "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func exchangeServer(endpoint, header string) *config.Server {
	return &config.Server{Name: "tx", Transport: config.TransportHTTP, URL: "https://up.example/mcp",
		Identity: &config.ServerIdentity{Propagate: config.PropagateTokenExchange, TokenEndpoint: endpoint,
			ClientID: "gw", Header: header, Scopes: []string{"mcp", "read"}, Audience: "up"}}
}

// TestTokenExchange: the request is RFC 8693's, with the caller's
// assertion as subject token; the token is sent as a bearer token, cached
// per caller until near its expiry, fetched once for concurrent calls; the
// gateway's own requests exchange for the gateway; a refusal says the
// server's error and description.
func TestTokenExchange(t *testing.T) {
	as := newExchangeAS(t)
	c := clocktest.New(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	s := propagate.New(propagate.Options{Store: openStore(t), Keyring: keyring(t), Issuer: "https://gw.example", Clock: c.Now})
	f := s.For(exchangeServer(as.srv.URL+"/token", ""))
	alice := authz.Identity{ID: "key:alice", AgentID: "alice"}

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name, value, err := f(t.Context(), alice)
			if err != nil || name != "Authorization" || value != "Bearer tok-for-key:alice" {
				t.Errorf("header = %q %q %v", name, value, err)
			}
		}()
	}
	wg.Wait()
	if n := as.calls.Load(); n != 1 {
		t.Errorf("%d exchanges for 8 concurrent calls of one caller, want 1", n)
	}
	form := as.forms[0]
	for k, want := range map[string]string{"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
		"subject_token_type": "urn:ietf:params:oauth:token-type:jwt", "requested_token_type": "urn:ietf:params:oauth:token-type:access_token",
		"resource": "https://up.example/mcp", "audience": "up", "scope": "mcp read", "client": "gw:"} {
		if form[k] != want {
			t.Errorf("%s = %q, want %q", k, form[k], want)
		}
	}
	claims := jwt.MapClaims{}
	tok, _, _ := jwt.NewParser().ParseUnverified(form["subject_token"], claims)
	if aud, _ := claims.GetAudience(); tok.Header["typ"] != propagate.AssertionType || len(aud) != 1 || aud[0] != as.srv.URL+"/token" {
		t.Errorf("subject token %v %v: want an assertion for the token endpoint", tok.Header, claims)
	}

	// Reused until 30 s before its expiry, then exchanged again.
	c.Advance(269 * time.Second)
	_, _, _ = f(t.Context(), alice)
	if n := as.calls.Load(); n != 1 {
		t.Errorf("%d exchanges before the margin, want 1", n)
	}
	c.Advance(2 * time.Second)
	_, _, _ = f(t.Context(), alice)
	if n := as.calls.Load(); n != 2 {
		t.Errorf("%d exchanges after the margin, want 2", n)
	}

	// The gateway's own requests.
	if _, value, err := f(t.Context(), authz.Identity{}); err != nil || value != "Bearer tok-for-"+propagate.Gateway.ID {
		t.Errorf("the gateway's own request: %q %v", value, err)
	}
	// With its own header, the server has another credential for those.
	g := s.For(exchangeServer(as.srv.URL+"/token", "X-User-Token"))
	if name, value, err := g(t.Context(), authz.Identity{}); err != nil || name != "" || value != "" {
		t.Errorf("the gateway's own request with a custom header: %q %q %v", name, value, err)
	}
	if name, value, _ := g(t.Context(), alice); name != "X-User-Token" || value != "tok-for-key:alice" {
		t.Errorf("custom header: %q %q", name, value)
	}

	as.status = http.StatusBadRequest
	bob := authz.Identity{ID: "key:bob"}
	_, _, err := f(t.Context(), bob)
	if err == nil || !strings.Contains(err.Error(), "invalid_grant: subject not allowed") || strings.Contains(err.Error(), "eyJ") {
		t.Errorf("refusal = %v, want the server's error without the assertion", err)
	}
}
