package identity

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
)

func TestNewKey(t *testing.T) {
	k, secret, err := NewKey("agent-1", []string{"dev", "ops"}, "ws1", true)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^k_[a-z2-7]{12}$`).MatchString(k.ID) {
		t.Errorf("ID = %q, want k_ + 12 base32 chars", k.ID)
	}
	if !regexp.MustCompile(`^sbk_[a-z2-7]{40}$`).MatchString(secret) {
		t.Errorf("secret has the wrong shape (len %d)", len(secret))
	}
	if k.Prefix != secret[:10] {
		t.Errorf("Prefix = %q, want the first 10 chars of the secret", k.Prefix)
	}
	if k.Hash != HashSecret(secret) {
		t.Errorf("Hash is not HashSecret(secret)")
	}
	if k.CreatedAt.IsZero() {
		t.Errorf("CreatedAt is zero")
	}
	k2, secret2, err := NewKey("agent-1", nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if k2.ID == k.ID || secret2 == secret {
		t.Errorf("two keys share an ID or secret")
	}
	if k2.Roles == nil {
		t.Errorf("Roles = nil, want an empty list (JSON [])")
	}
	if _, _, err := NewKey(" ", nil, "", false); err == nil {
		t.Errorf("NewKey with an empty agent: no error")
	}

	k.AllowServers, k.DenyServers = []string{"a"}, []string{"b"}
	want := authz.Identity{ID: "key:" + k.ID, AgentID: "agent-1", Roles: []string{"dev", "ops"}, Workspace: "ws1",
		Admin: true, AllowServers: []string{"a"}, DenyServers: []string{"b"}, Method: "key"}
	if diff := cmp.Diff(want, k.Identity()); diff != "" {
		t.Errorf("Identity() mismatch (-want +got):\n%s", diff)
	}
	// A key made with a workspace policy says so; its lists are the policy.
	k.WorkspacePolicy, want.WorkspacePolicy = true, true
	if diff := cmp.Diff(want, k.Identity()); diff != "" {
		t.Errorf("Identity() of a workspace-policy key mismatch (-want +got):\n%s", diff)
	}
}

func TestHashSecret(t *testing.T) {
	// echo -n abc | sha256sum
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := HashSecret("abc"); got != want {
		t.Errorf("HashSecret(abc) = %s, want %s", got, want)
	}
}

func TestNewValidation(t *testing.T) {
	secret := strings.Repeat("s", 32)
	tests := []struct {
		name    string
		cfg     Config
		keys    KeyStore
		wantErr string // substring; "" = valid
	}{
		{"keys mode", Config{Mode: ModeKeys}, newStore(), ""},
		{"empty mode is keys", Config{}, newStore(), ""},
		{"keys mode needs a store", Config{Mode: ModeKeys}, nil, "KeyStore"},
		{"local without store", Config{Mode: ModeLocal}, nil, ""},
		{"unknown mode", Config{Mode: "oauth"}, newStore(), "Mode"},
		{"jwt without settings", Config{Mode: ModeJWT}, nil, "JWT"},
		{"jwt secret", Config{Mode: ModeJWT, JWT: &JWTConfig{Secret: secret}}, nil, ""},
		{"jwt jwks", Config{Mode: ModeJWT, JWT: &JWTConfig{JWKSURL: "https://idp.example/jwks"}}, nil, ""},
		{"jwt neither", Config{Mode: ModeJWT, JWT: &JWTConfig{Issuer: "x"}}, nil, "Secret or JWKSURL"},
		{"jwt both", Config{Mode: ModeJWT, JWT: &JWTConfig{Secret: secret, JWKSURL: "https://idp.example/jwks"}}, nil, "both"},
		{"jwt short secret", Config{Mode: ModeJWT, JWT: &JWTConfig{Secret: "short"}}, nil, "JWT.Secret"},
		{"jwt bad url", Config{Mode: ModeJWT, JWT: &JWTConfig{JWKSURL: "file:///etc/jwks"}}, nil, "JWT.JWKSURL"},
		{"jwt negative leeway", Config{Mode: ModeJWT, JWT: &JWTConfig{Secret: secret, Leeway: -time.Second}}, nil, "JWT.Leeway"},
		{"jwt negative refresh", Config{Mode: ModeJWT, JWT: &JWTConfig{JWKSURL: "https://idp.example/jwks", JWKSRefresh: -1}}, nil, "JWT.JWKSRefresh"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(tt.cfg, tt.keys, nil)
			if err == nil {
				a.Close()
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("New: no error, want one mentioning %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("New: %v, want it to mention %q", err, tt.wantErr)
			}
		})
	}
}

func TestAuthenticateKeys(t *testing.T) {
	clock := newClock()
	past, future := t0.Add(-time.Hour), t0.Add(time.Hour)
	good, goodSecret := mustKey(t, "alice", nil)
	revoked, revokedSecret := mustKey(t, "bob", func(k *Key) { k.RevokedAt = &past })
	expired, expiredSecret := mustKey(t, "carol", func(k *Key) { k.ExpiresAt = &past })
	later, laterSecret := mustKey(t, "dave", func(k *Key) { k.ExpiresAt = &future })
	a := mustNew(t, Config{Mode: ModeKeys}, newStore(good, revoked, expired, later), &Options{Clock: clock.Now})

	tests := []struct {
		name    string
		headers map[string]string
		want    authz.Identity
		code    string
	}{
		{"bearer", map[string]string{"Authorization": "Bearer " + goodSecret}, good.Identity(), ""},
		{"scheme is case-insensitive", map[string]string{"Authorization": "bEaReR   " + goodSecret}, good.Identity(), ""},
		{"X-API-Key", map[string]string{"X-API-Key": goodSecret}, good.Identity(), ""},
		{"other scheme with X-API-Key", map[string]string{"Authorization": "Basic Zm9vOmJhcg==", "X-API-Key": goodSecret}, good.Identity(), ""},
		{"not yet expired", map[string]string{"Authorization": "Bearer " + laterSecret}, later.Identity(), ""},
		{"unknown", map[string]string{"Authorization": "Bearer sbk_" + strings.Repeat("a", 40)}, authz.Identity{}, CodeInvalid},
		{"revoked", map[string]string{"Authorization": "Bearer " + revokedSecret}, authz.Identity{}, CodeInvalid},
		{"expired", map[string]string{"Authorization": "Bearer " + expiredSecret}, authz.Identity{}, CodeExpired},
		{"empty bearer", map[string]string{"Authorization": "Bearer "}, authz.Identity{}, CodeInvalid},
		{"basic scheme", map[string]string{"Authorization": "Basic Zm9vOmJhcg=="}, authz.Identity{}, CodeInvalid},
		{"no credentials", nil, authz.Identity{}, CodeMissing},
		{"a JWT in keys mode", map[string]string{"Authorization": "Bearer a.b.c"}, authz.Identity{}, CodeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			got, err := a.Authenticate(r)
			if c := codeOf(err); c != tt.code {
				t.Fatalf("code = %q, want %q", c, tt.code)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("identity mismatch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("expiry follows the clock", func(t *testing.T) {
		c := newClock()
		k, s := mustKey(t, "erin", func(k *Key) { e := t0.Add(time.Minute); k.ExpiresAt = &e })
		a := mustNew(t, Config{}, newStore(k), &Options{Clock: c.Now})
		if _, err := a.AuthenticateToken(t.Context(), s); err != nil {
			t.Fatalf("before expiry: %v", err)
		}
		c.Advance(time.Minute)
		if _, err := a.AuthenticateToken(t.Context(), s); codeOf(err) != CodeExpired {
			t.Fatalf("at expiry: code %q, want %q", codeOf(err), CodeExpired)
		}
	})
}

func TestKeyCache(t *testing.T) {
	k, secret := mustKey(t, "alice", nil)
	tests := []struct {
		name        string
		ttl         time.Duration
		wantLookups int // after three authentications
	}{
		{"cached", 0, 1},
		{"disabled", -1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(k)
			a := mustNew(t, Config{}, store, &Options{CacheTTL: tt.ttl, Clock: newClock().Now})
			for range 3 {
				if _, err := a.AuthenticateToken(t.Context(), secret); err != nil {
					t.Fatal(err)
				}
			}
			if got := store.count(); got != tt.wantLookups {
				t.Errorf("store lookups = %d, want %d", got, tt.wantLookups)
			}
		})
	}

	t.Run("revoke takes effect after Forget", func(t *testing.T) {
		store := newStore(k)
		a := mustNew(t, Config{}, store, &Options{Clock: newClock().Now})
		if _, err := a.AuthenticateToken(t.Context(), secret); err != nil {
			t.Fatal(err)
		}
		revokedAt := t0
		store.update(k.Hash, func(k *Key) { k.RevokedAt = &revokedAt })
		if _, err := a.AuthenticateToken(t.Context(), secret); err != nil {
			t.Fatalf("within TTL the cached key should still be used: %v", err)
		}
		a.Forget(k.Hash)
		if _, err := a.AuthenticateToken(t.Context(), secret); codeOf(err) != CodeInvalid {
			t.Fatalf("after Forget: code %q, want %q", codeOf(err), CodeInvalid)
		}
	})

	t.Run("revoke takes effect after ForgetAll", func(t *testing.T) {
		store := newStore(k)
		a := mustNew(t, Config{}, store, &Options{Clock: newClock().Now})
		if _, err := a.AuthenticateToken(t.Context(), secret); err != nil {
			t.Fatal(err)
		}
		revokedAt := t0
		store.update(k.Hash, func(k *Key) { k.RevokedAt = &revokedAt })
		a.ForgetAll()
		if _, err := a.AuthenticateToken(t.Context(), secret); codeOf(err) != CodeInvalid {
			t.Fatalf("after ForgetAll: code %q, want %q", codeOf(err), CodeInvalid)
		}
	})

	t.Run("entries expire after the TTL", func(t *testing.T) {
		store := newStore(k)
		c := newClock()
		a := mustNew(t, Config{}, store, &Options{Clock: c.Now, CacheTTL: time.Minute})
		a.AuthenticateToken(t.Context(), secret)
		c.Advance(time.Minute)
		a.AuthenticateToken(t.Context(), secret)
		if got := store.count(); got != 2 {
			t.Errorf("store lookups = %d, want 2", got)
		}
	})

	t.Run("unknown keys are not cached", func(t *testing.T) {
		store := newStore()
		a := mustNew(t, Config{}, store, nil)
		a.AuthenticateToken(t.Context(), secret)
		store.update(k.Hash, func(kk *Key) { *kk = k })
		if _, err := a.AuthenticateToken(t.Context(), secret); err != nil {
			t.Fatalf("a key added after a miss: %v", err)
		}
	})
}

func TestStoreFailureIsNotA401(t *testing.T) {
	_, secret := mustKey(t, "alice", nil)
	store := newStore()
	store.err = errors.New("database is locked")
	a := mustNew(t, Config{}, store, nil)
	_, err := a.AuthenticateToken(t.Context(), secret)
	var ae *Error
	if errors.As(err, &ae) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want an ErrUnavailable that is not an *Error", err)
	}
}

func TestAdminKey(t *testing.T) {
	const adminKey = "admin-secret-0123456789"
	admin := authz.Identity{ID: "admin-key", AgentID: "admin", Admin: true, Method: "key"}
	k, secret := mustKey(t, "alice", nil)
	tests := []struct {
		name   string
		cfg    Config
		bearer string
		want   authz.Identity
		code   string
	}{
		{"keys mode", Config{Mode: ModeKeys, AdminKey: adminKey}, adminKey, admin, ""},
		{"jwt mode", Config{Mode: ModeJWT, AdminKey: adminKey, JWT: &JWTConfig{Secret: strings.Repeat("x", 32)}}, adminKey, admin, ""},
		{"local mode", Config{Mode: ModeLocal, AdminKey: adminKey}, adminKey, admin, ""},
		{"same length, wrong", Config{AdminKey: adminKey}, strings.Repeat("a", len(adminKey)), authz.Identity{}, CodeInvalid},
		{"prefix", Config{AdminKey: adminKey}, adminKey[:len(adminKey)-1], authz.Identity{}, CodeInvalid},
		{"keys still work", Config{AdminKey: adminKey}, secret, k.Identity(), ""},
		{"disabled when empty", Config{}, adminKey, authz.Identity{}, CodeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustNew(t, tt.cfg, newStore(k), nil)
			got, err := a.AuthenticateToken(t.Context(), tt.bearer)
			if c := codeOf(err); c != tt.code {
				t.Fatalf("code = %q, want %q", c, tt.code)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("identity mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLocalMode(t *testing.T) {
	k, secret := mustKey(t, "alice", nil)
	tests := []struct {
		name    string
		mode    string
		remote  string
		headers map[string]string
		want    authz.Identity
		code    string
	}{
		{"loopback, no credentials", ModeLocal, "127.0.0.1:5000", nil, authz.LocalAdmin(), ""},
		{"127/8", ModeLocal, "127.1.2.3:5000", nil, authz.LocalAdmin(), ""},
		{"ipv6 loopback", ModeLocal, "[::1]:5000", nil, authz.LocalAdmin(), ""},
		{"v4-mapped loopback", ModeLocal, "[::ffff:127.0.0.1]:5000", nil, authz.LocalAdmin(), ""},
		{"remote, no credentials", ModeLocal, "192.0.2.7:5000", nil, authz.Identity{}, CodeMissing},
		{"remote claiming loopback via XFF", ModeLocal, "192.0.2.7:5000", map[string]string{"X-Forwarded-For": "127.0.0.1"}, authz.Identity{}, CodeMissing},
		{"loopback with a valid key is that key", ModeLocal, "127.0.0.1:5000", map[string]string{"Authorization": "Bearer " + secret}, k.Identity(), ""},
		{"loopback with a bad key is refused", ModeLocal, "127.0.0.1:5000", map[string]string{"Authorization": "Bearer nope"}, authz.Identity{}, CodeInvalid},
		{"remote with a valid key", ModeLocal, "192.0.2.7:5000", map[string]string{"X-API-Key": secret}, k.Identity(), ""},
		{"keys mode, loopback, no credentials", ModeKeys, "127.0.0.1:5000", nil, authz.Identity{}, CodeMissing},
		{"jwt mode, loopback, no credentials", ModeJWT, "127.0.0.1:5000", nil, authz.Identity{}, CodeMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustNew(t, Config{Mode: tt.mode, JWT: &JWTConfig{Secret: strings.Repeat("x", 32)}}, newStore(k), nil)
			r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
			r.RemoteAddr = tt.remote
			for h, v := range tt.headers {
				r.Header.Set(h, v)
			}
			got, err := a.Authenticate(r)
			if c := codeOf(err); c != tt.code {
				t.Fatalf("code = %q, want %q", c, tt.code)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("identity mismatch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("AuthenticateToken has no local shortcut", func(t *testing.T) {
		a := mustNew(t, Config{Mode: ModeLocal}, nil, nil)
		if _, err := a.AuthenticateToken(context.Background(), ""); codeOf(err) != CodeMissing {
			t.Fatalf("code = %q, want %q", codeOf(err), CodeMissing)
		}
	})
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		remote string
		want   bool
	}{
		{"127.0.0.1:80", true},
		{"127.255.0.1:80", true},
		{"[::1]:80", true},
		{"[::ffff:127.0.0.1]:80", true},
		{"127.0.0.1", true}, // no port
		{"10.0.0.1:80", false},
		{"[::2]:80", false},
		{"[fe80::1%eth0]:80", false},
		{"localhost:80", false}, // names are not resolved
		{"", false},
		{"@", false}, // unix socket peers have no IP
	}
	for _, tt := range tests {
		t.Run(tt.remote, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.remote
			if got := IsLoopback(r); got != tt.want {
				t.Errorf("IsLoopback(%q) = %v, want %v", tt.remote, got, tt.want)
			}
		})
	}
}

// TestNeverLogsSecrets drives every path at debug level and checks that no
// credential reaches the log.
func TestNeverLogsSecrets(t *testing.T) {
	const adminKey = "admin-secret-0123456789"
	hsSecret := strings.Repeat("h", 16) + "hmac-secret-tail"
	var buf logtest.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clock := newClock()
	k, keySecret := mustKey(t, "alice", nil)
	past := t0.Add(-time.Hour)
	revoked, revokedSecret := mustKey(t, "bob", func(k *Key) { k.RevokedAt = &past })
	a := mustNew(t, Config{Mode: ModeJWT, AdminKey: adminKey, JWT: &JWTConfig{Secret: hsSecret}},
		newStore(k, revoked), &Options{Logger: logger, Clock: clock.Now})

	good := sign(t, jwtHS256, []byte(hsSecret), "", claimsAt(clock.Now(), nil))
	expired := sign(t, jwtHS256, []byte(hsSecret), "", claimsAt(clock.Now().Add(-2*time.Hour), nil))
	wrong := sign(t, jwtHS256, []byte(strings.Repeat("w", 32)), "", claimsAt(clock.Now(), nil))
	secrets := []string{keySecret, revokedSecret, adminKey, good, expired, wrong, keySecret + "x"}
	for _, s := range secrets {
		a.AuthenticateToken(t.Context(), s)
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+s)
		a.Authenticate(r)
	}

	out := buf.String()
	for _, want := range []string{"authenticated", "authentication failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("log has no %q line; is debug logging wired? log:\n%s", want, out)
		}
	}
	leaks := append(secrets, hsSecret, HashSecret(keySecret))
	for _, tok := range []string{good, expired, wrong} { // signatures alone are secrets too
		leaks = append(leaks, tok[strings.LastIndex(tok, ".")+1:])
	}
	for _, s := range leaks {
		if strings.Contains(out, s) {
			t.Errorf("log contains a secret (len %d)", len(s))
		}
	}
}
