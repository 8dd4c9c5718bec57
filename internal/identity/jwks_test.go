package identity

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestJWKSRotation(t *testing.T) {
	keys := testKeys()
	srv := newJWKSServer(t, rsaJWK("old", &keys.rsa1.PublicKey))
	clock := newClock()
	a := mustNew(t, Config{Mode: ModeJWT, JWT: &JWTConfig{JWKSURL: srv.URL}}, nil, &Options{Clock: clock.Now})
	token := func(priv any, kid string) string {
		return sign(t, jwt.SigningMethodRS256, priv, kid, claimsAt(clock.Now(), nil))
	}

	steps := []struct {
		name      string
		before    func()
		token     func() string
		code      string
		wantFetch int32 // total JWKS fetches after the step
	}{
		{"first token fetches the set", nil, func() string { return token(keys.rsa1, "old") }, "", 1},
		{"known kid: no fetch", nil, func() string { return token(keys.rsa1, "old") }, "", 1},
		{"rotated kid is fetched on demand", func() {
			srv.set(t, rsaJWK("old", &keys.rsa1.PublicKey), rsaJWK("new", &keys.rsa2.PublicKey))
			clock.Advance(jwksMinRefetch)
		}, func() string { return token(keys.rsa2, "new") }, "", 2},
		{"unknown kid soon after: rate-limited", func() { clock.Advance(jwksMinRefetch / 2) },
			func() string { return token(keys.rsa2, "bogus") }, CodeInvalid, 2},
		{"old key removed, new one still served", func() {
			srv.set(t, rsaJWK("new", &keys.rsa2.PublicKey))
			clock.Advance(jwksMinRefetch)
		}, func() string { return token(keys.rsa2, "new") }, "", 2},
		{"old kid still valid until the next fetch", nil, func() string { return token(keys.rsa1, "old") }, "", 2},
		{"once allowed, the refetch drops the old key", func() { clock.Advance(jwksMinRefetch) },
			func() string { return token(keys.rsa1, "unknown-kid") }, CodeInvalid, 3},
		{"old key is gone", nil, func() string { return token(keys.rsa1, "old") }, CodeInvalid, 3},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		_, err := a.AuthenticateToken(t.Context(), s.token())
		if c := codeOf(err); c != s.code {
			t.Fatalf("%s: code = %q (%v), want %q", s.name, c, err, s.code)
		}
		if n := srv.hits.Load(); n != s.wantFetch {
			t.Fatalf("%s: %d JWKS fetches, want %d", s.name, n, s.wantFetch)
		}
	}
}

func TestJWKSUnavailable(t *testing.T) {
	keys := testKeys()
	srv := newJWKSServer(t, rsaJWK("k1", &keys.rsa1.PublicKey))
	srv.status.Store(http.StatusBadGateway)
	clock := newClock()
	a := mustNew(t, Config{Mode: ModeJWT, JWT: &JWTConfig{JWKSURL: srv.URL}}, nil, &Options{Clock: clock.Now})
	tok := sign(t, jwt.SigningMethodRS256, keys.rsa1, "k1", claimsAt(clock.Now(), nil))

	_, err := a.AuthenticateToken(t.Context(), tok)
	var ae *Error
	if errors.As(err, &ae) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("IdP down: err = %v, want ErrUnavailable, not a 401", err)
	}
	srv.status.Store(http.StatusOK)
	clock.Advance(jwksMinRefetch)
	if _, err := a.AuthenticateToken(t.Context(), tok); err != nil {
		t.Fatalf("IdP back: %v", err)
	}
	// Once keys are loaded, an outage keeps them.
	srv.status.Store(http.StatusInternalServerError)
	clock.Advance(jwksMinRefetch)
	if _, err := a.AuthenticateToken(t.Context(), sign(t, jwt.SigningMethodRS256, keys.rsa1, "other", claimsAt(clock.Now(), nil))); codeOf(err) != CodeInvalid {
		t.Fatalf("unknown kid during an outage: code %q (%v), want %q", codeOf(err), err, CodeInvalid)
	}
	if _, err := a.AuthenticateToken(t.Context(), tok); err != nil {
		t.Fatalf("known kid during an outage: %v", err)
	}
}

func TestJWKSBadDocuments(t *testing.T) {
	keys := testKeys()
	small := rsaJWK("small", &keys.rsa1.PublicKey)
	small["n"] = b64(keys.rsa1.N.Bytes()[:64]) // 512 bits
	offCurve := ecJWK(t, "off", "P-256", &keys.ec256.PublicKey)
	offCurve["y"] = offCurve["x"]
	tests := []struct {
		name string
		keys []map[string]any
	}{
		{"empty set", nil},
		{"short RSA key", []map[string]any{small}},
		{"point not on the curve", []map[string]any{offCurve}},
		{"unsupported curve", []map[string]any{{"kty": "EC", "kid": "k", "crv": "P-521", "x": "AA", "y": "AA"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t, tt.keys...)
			clock := newClock()
			a := mustNew(t, Config{Mode: ModeJWT, JWT: &JWTConfig{JWKSURL: srv.URL}}, nil, &Options{Clock: clock.Now})
			tok := sign(t, jwt.SigningMethodRS256, keys.rsa1, "", claimsAt(clock.Now(), nil))
			_, err := a.AuthenticateToken(t.Context(), tok)
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("err = %v, want ErrUnavailable (no usable keys)", err)
			}
		})
	}
}

// countingTransport counts requests on the client side: the server may still
// see a request that the client has already abandoned.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestJWKSRefresherStopsOnClose(t *testing.T) {
	keys := testKeys()
	srv := newJWKSServer(t, rsaJWK("k1", &keys.rsa1.PublicKey))
	clock := newClock()
	rt := &countingTransport{}
	a, err := New(Config{Mode: ModeJWT, JWT: &JWTConfig{JWKSURL: srv.URL, JWKSRefresh: time.Millisecond,
		HTTPClient: &http.Client{Transport: rt}}}, nil, &Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	// The refresher fetches on its own; wait (bounded by the test timeout)
	// for two background fetches.
	for rt.n.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	a.Close()
	a.Close() // idempotent
	n := rt.n.Load()
	time.Sleep(20 * time.Millisecond)
	if got := rt.n.Load(); got != n {
		t.Errorf("JWKS fetched %d more times after Close", got-n)
	}
	// A closed Authenticator fetches nothing on demand either.
	clock.Advance(time.Hour)
	tok := sign(t, jwt.SigningMethodRS256, keys.rsa1, "new-kid", claimsAt(clock.Now(), nil))
	if _, err := a.AuthenticateToken(context.Background(), tok); err == nil {
		t.Fatal("unknown kid after Close: no error")
	}
	if got := rt.n.Load(); got != n {
		t.Errorf("JWKS fetched after Close")
	}
}

func TestJWKSWaitHonoursContext(t *testing.T) {
	keys := testKeys()
	// The IdP hangs until the fetch is abandoned (Close cancels it).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	clock := newClock()
	a := mustNew(t, Config{Mode: ModeJWT, JWT: &JWTConfig{JWKSURL: srv.URL}}, nil, &Options{Clock: clock.Now})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	tok := sign(t, jwt.SigningMethodRS256, keys.rsa1, "k1", claimsAt(clock.Now(), nil))
	_, err := a.AuthenticateToken(ctx, tok)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	var ae *Error
	if errors.As(err, &ae) {
		t.Fatalf("a cancelled wait is not a 401: %v", err)
	}
}
