package propagate_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/clocktest"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/propagate"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

func openStore(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "sb.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func keyring(t *testing.T) *secrets.Keyring {
	t.Helper()
	k, err := secrets.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// keySet fetches the JWKS the signer serves, as public keys by kid.
func keySet(t *testing.T, s *propagate.Signer) map[string]*ecdsa.PublicKey {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, propagate.JWKSPath, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("JWKS: %d %s", rec.Code, rec.Body)
	}
	var doc struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]*ecdsa.PublicKey{}
	for _, k := range doc.Keys {
		if k["d"] != "" {
			t.Fatal("the JWKS has a private key")
		}
		x, _ := base64.RawURLEncoding.DecodeString(k["x"])
		y, _ := base64.RawURLEncoding.DecodeString(k["y"])
		out[k["kid"]] = &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
	}
	return out
}

func verify(t *testing.T, keys map[string]*ecdsa.PublicKey, tok string, at time.Time) (jwt.MapClaims, string, error) {
	t.Helper()
	claims := jwt.MapClaims{}
	var kid string
	_, err := jwt.NewParser(jwt.WithValidMethods([]string{"ES256"}), jwt.WithTimeFunc(func() time.Time { return at }),
		jwt.WithAudience("https://up.example/mcp"), jwt.WithIssuer("https://gw.example")).ParseWithClaims(tok, claims, func(t *jwt.Token) (any, error) {
		kid, _ = t.Header["kid"].(string)
		if k, ok := keys[kid]; ok {
			return k, nil
		}
		return nil, errors.New("unknown kid")
	})
	return claims, kid, err
}

// TestAssertionClaims: the assertion names the caller, for the server's
// url by default, for ttl_seconds, in the configured header.
func TestAssertionClaims(t *testing.T) {
	c := clocktest.New(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	s := propagate.New(propagate.Options{Store: openStore(t), Keyring: keyring(t), Issuer: "https://gw.example", Clock: c.Now})
	srv := &config.Server{Name: "up", Transport: config.TransportHTTP, URL: "https://up.example/mcp",
		Identity: &config.ServerIdentity{Propagate: config.PropagateAssertion, Header: "x-who", TTLSeconds: 20}}
	header, tok, err := s.For(srv)(t.Context(), authz.Identity{ID: "key:k1", AgentID: "bot", Roles: []string{"dev"}, Workspace: "ws", Method: "key"})
	if err != nil || header != "X-Who" {
		t.Fatalf("For = %q, %v", header, err)
	}
	claims, _, err := verify(t, keySet(t, s), tok, c.Now())
	if err != nil {
		t.Fatal(err)
	}
	exp, _ := claims.GetExpirationTime()
	if claims["sub"] != "key:k1" || claims["agent_id"] != "bot" || claims["workspace"] != "ws" || claims["auth_method"] != "key" ||
		!exp.Equal(c.Now().Add(20*time.Second)) || claims["jti"] == "" {
		t.Errorf("claims = %v", claims)
	}
	if _, _, err := verify(t, keySet(t, s), tok, c.Now().Add(21*time.Second)); !errors.Is(err, jwt.ErrTokenExpired) {
		t.Errorf("after its ttl: %v, want expired", err)
	}
	_, tok2, _ := s.For(srv)(t.Context(), authz.Identity{ID: "key:k1"})
	if c2, _, _ := verify(t, keySet(t, s), tok2, c.Now()); c2["jti"] == claims["jti"] {
		t.Error("two assertions share a jti")
	}
	if s.For(&config.Server{Name: "plain", URL: "https://up.example/mcp"}) != nil {
		t.Error("a server without identity gets a header")
	}
}

// TestKeyRotationAcrossReplicas: two replicas on one store sign with the
// same key; the successor is published KeyLead before it signs, so an
// assertion from either key verifies with the key set served at any time
// in between; the retired key stays published past its last assertion.
func TestKeyRotationAcrossReplicas(t *testing.T) {
	db, kr := openStore(t), keyring(t)
	c := clocktest.New(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	a := propagate.New(propagate.Options{Store: db, Keyring: kr, Issuer: "https://gw.example", Clock: c.Now})
	b := propagate.New(propagate.Options{Store: db, Keyring: kr, Issuer: "https://gw.example", Clock: c.Now})
	id := authz.Identity{ID: "key:k1"}
	sign := func(s *propagate.Signer) string {
		tok, err := s.Assertion(t.Context(), id, "https://up.example/mcp", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := verify(t, keySet(t, a), tok, c.Now()); err != nil {
			t.Fatalf("a fresh assertion does not verify with the published keys: %v", err)
		}
		return tok
	}
	// kidOf is the key a token was signed with; each token is verified
	// when it is made (sign), at the time it was made.
	kidOf := func(tok string) string {
		parsed, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
		if err != nil {
			t.Fatal(err)
		}
		kid, _ := parsed.Header["kid"].(string)
		return kid
	}
	first := sign(a)
	if kidOf(sign(b)) != kidOf(first) {
		t.Fatal("two replicas sign with different keys")
	}
	// Within KeyLead of retirement: the successor is made and published,
	// the current key still signs.
	c.Advance(propagate.KeyRotation - propagate.KeyLead + time.Hour)
	old := sign(b)
	if kidOf(old) != kidOf(first) {
		t.Fatal("the successor signed before its time")
	}
	if n := len(keySet(t, a)); n != 2 {
		t.Fatalf("%d keys published before the rotation, want 2", n)
	}
	c.Advance(propagate.KeyLead - time.Hour + 31*time.Second) // past the retirement and the key cache
	next := sign(a)
	if kidOf(next) == kidOf(first) || kidOf(sign(b)) != kidOf(next) {
		t.Fatal("the successor does not sign on both replicas")
	}
	// The old key's assertion still verifies with what is published (at
	// the time it was signed).
	if _, _, err := verify(t, keySet(t, b), old, c.Now().Add(-propagate.KeyLead+time.Hour-31*time.Second)); err != nil {
		t.Errorf("an assertion of the retired key: %v", err)
	}
	rows, _ := db.UpstreamSigningKeys(t.Context())
	if len(rows) != 2 {
		t.Errorf("%d keys stored, want 2 (one successor for two replicas)", len(rows))
	}
}

// TestNoKeyring: without a secret key nothing is signed, and the error
// says what to set.
func TestNoKeyring(t *testing.T) {
	s := propagate.New(propagate.Options{Store: openStore(t), Issuer: "https://gw.example"})
	if _, err := s.Assertion(t.Context(), authz.Identity{ID: "x"}, "aud", time.Minute); !errors.Is(err, propagate.ErrNoKeyring) {
		t.Errorf("Assertion = %v, want ErrNoKeyring", err)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, propagate.JWKSPath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST JWKS = %d", rec.Code)
	}
}
