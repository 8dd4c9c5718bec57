package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/internal/clocktest"
)

// t0 is the fake "now" of every test, so tokens and keys never age by
// wall-clock time.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newClock is a clock at t0.
func newClock() *clocktest.Clock { return clocktest.New(t0) }

// memStore is an in-memory KeyStore that counts lookups.
type memStore struct {
	mu      sync.Mutex
	keys    map[string]Key
	lookups int
	err     error // returned instead of a lookup when set
}

func newStore(keys ...Key) *memStore {
	s := &memStore{keys: make(map[string]Key)}
	for _, k := range keys {
		s.keys[k.Hash] = k
	}
	return s
}

func (s *memStore) KeyByHash(_ context.Context, hash string) (Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups++
	if s.err != nil {
		return Key{}, s.err
	}
	k, ok := s.keys[hash]
	if !ok {
		return Key{}, fmt.Errorf("key by hash: %w", ErrNotFound)
	}
	return k, nil
}

func (s *memStore) update(hash string, f func(*Key)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[hash]
	f(&k)
	s.keys[hash] = k
}

func (s *memStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookups
}

// mustKey makes a key for agent and applies edit to it.
func mustKey(t testing.TB, agent string, edit func(*Key)) (Key, string) {
	t.Helper()
	k, secret, err := NewKey(agent, []string{"dev"}, "ws1", false)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&k)
	}
	return k, secret
}

func mustNew(t testing.TB, cfg Config, ks KeyStore, opts *Options) *Authenticator {
	t.Helper()
	a, err := New(cfg, ks, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// codeOf returns the *Error code of err, "" for nil, or "other:<err>".
func codeOf(err error) string {
	if err == nil {
		return ""
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return "other: " + err.Error()
}

// sign signs claims with method and key, setting kid when not "".
func sign(t testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, pub *rsa.PublicKey) map[string]any {
	return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes())}
}

func ecJWK(t testing.TB, kid, crv string, pub *ecdsa.PublicKey) map[string]any {
	t.Helper()
	raw, err := pub.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	n := (len(raw) - 1) / 2
	return map[string]any{"kty": "EC", "kid": kid, "crv": crv, "x": b64(raw[1 : 1+n]), "y": b64(raw[1+n:])}
}

// jwksServer serves a key set that tests may swap, and counts fetches.
type jwksServer struct {
	*httptest.Server
	body   atomic.Pointer[[]byte]
	status atomic.Int32
	hits   atomic.Int32
}

func newJWKSServer(t testing.TB, keys ...map[string]any) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.set(t, keys...)
	s.status.Store(http.StatusOK)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if st := int(s.status.Load()); st != http.StatusOK {
			http.Error(w, "down", st)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(t testing.TB, keys ...map[string]any) {
	t.Helper()
	if keys == nil {
		keys = []map[string]any{}
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	s.body.Store(&b)
}
