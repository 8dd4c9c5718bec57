package identity

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

var jwtHS256 = jwt.SigningMethodHS256

const (
	testIssuer   = "https://idp.example"
	testAudience = "switchboard"
)

// claimsAt returns valid claims for a token issued at now, edited by edit.
func claimsAt(now time.Time, edit func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{
		"iss": testIssuer,
		"aud": []string{"other", testAudience},
		"sub": "user-1",
		"iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
	if edit != nil {
		edit(c)
	}
	return c
}

// tamper replaces the payload of tok with edit's version, keeping the
// header and signature.
func tamper(t *testing.T, tok string, edit func(map[string]any)) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	raw, _ = json.Marshal(m)
	parts[1] = base64.RawURLEncoding.EncodeToString(raw)
	return strings.Join(parts, ".")
}

func TestJWTHS256(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	clock := newClock()
	now := clock.Now()
	hs := func(edit func(jwt.MapClaims)) string { return sign(t, jwtHS256, secret, "", claimsAt(now, edit)) }
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claimsAt(now, nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	valid := hs(nil)
	k, keySecret := mustKey(t, "keyed", nil)
	base := authz.Identity{ID: "jwt:" + testIssuer + "|user-1", AgentID: "user-1", Method: "jwt"}
	with := func(edit func(*authz.Identity)) authz.Identity { id := base; edit(&id); return id }

	tests := []struct {
		name  string
		token string
		want  authz.Identity
		code  string
	}{
		{"valid, minimal", valid, base, ""},
		{"seed 003 claims", hs(func(c jwt.MapClaims) {
			c["roles"] = []string{"dev", "ops"}
			c["workspace"] = "ws1"
			c["mcpServerAllowIds"] = []string{"research_fs"}
			c["mcpServerDenyIds"] = []string{"internal_admin_fs"}
			c["isAdmin"] = true
		}), with(func(id *authz.Identity) {
			id.Roles, id.Workspace, id.Admin = []string{"dev", "ops"}, "ws1", true
			id.AllowServers, id.DenyServers = []string{"research_fs"}, []string{"internal_admin_fs"}
			id.WorkspacePolicy = true
		}), ""},
		// Seed 003's payload always carries its claims: present, even empty
		// or false, they are the workspace's policy.
		{"seed 003 payload of an ordinary workspace", hs(func(c jwt.MapClaims) {
			c["mcpServerAllowIds"] = []string{}
			c["mcpServerDenyIds"] = []string{}
			c["isAdmin"] = false
		}), with(func(id *authz.Identity) { id.WorkspacePolicy = true }), ""},
		{"only a deny list", hs(func(c jwt.MapClaims) { c["mcpServerDenyIds"] = []string{"x"} }),
			with(func(id *authz.Identity) { id.DenyServers, id.WorkspacePolicy = []string{"x"}, true }), ""},
		{"only an allow list", hs(func(c jwt.MapClaims) { c["mcpServerAllowIds"] = "x" }),
			with(func(id *authz.Identity) { id.AllowServers, id.WorkspacePolicy = []string{"x"}, true }), ""},
		{"roles and workspace are no policy", hs(func(c jwt.MapClaims) { c["roles"], c["workspace"] = "dev", "ws1" }),
			with(func(id *authz.Identity) { id.Roles, id.Workspace = []string{"dev"}, "ws1" }), ""},
		{"roles as a separated string, isAdmin as a string", hs(func(c jwt.MapClaims) {
			c["roles"] = "dev ops,admin , "
			c["mcpServerDenyIds"] = "a,b"
			c["isAdmin"] = "true"
		}), with(func(id *authz.Identity) {
			id.Roles, id.DenyServers, id.Admin = []string{"dev", "ops", "admin"}, []string{"a", "b"}, true
			id.WorkspacePolicy = true
		}), ""},
		{"isAdmin false string", hs(func(c jwt.MapClaims) { c["isAdmin"] = "false" }), with(func(id *authz.Identity) { id.WorkspacePolicy = true }), ""},
		{"aud as a plain string", hs(func(c jwt.MapClaims) { c["aud"] = testAudience }), base, ""},
		{"expired within leeway", hs(func(c jwt.MapClaims) { c["exp"] = now.Add(-10 * time.Second).Unix() }), base, ""},
		{"API keys are accepted too", keySecret, k.Identity(), ""},

		{"unsigned", valid[:strings.LastIndex(valid, ".")+1], authz.Identity{}, CodeInvalid},
		{"alg none", none, authz.Identity{}, CodeInvalid},
		{"tampered payload", tamper(t, valid, func(m map[string]any) { m["isAdmin"] = true }), authz.Identity{}, CodeInvalid},
		{"wrong secret", sign(t, jwtHS256, []byte(strings.Repeat("z", 32)), "", claimsAt(now, nil)), authz.Identity{}, CodeInvalid},
		{"expired", hs(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }), authz.Identity{}, CodeExpired},
		{"no exp", hs(func(c jwt.MapClaims) { delete(c, "exp") }), authz.Identity{}, CodeInvalid},
		{"nbf in the future", hs(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() }), authz.Identity{}, CodeInvalid},
		{"wrong issuer", hs(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), authz.Identity{}, CodeInvalid},
		{"no issuer", hs(func(c jwt.MapClaims) { delete(c, "iss") }), authz.Identity{}, CodeInvalid},
		{"wrong audience", hs(func(c jwt.MapClaims) { c["aud"] = []string{"other"} }), authz.Identity{}, CodeInvalid},
		{"no audience", hs(func(c jwt.MapClaims) { delete(c, "aud") }), authz.Identity{}, CodeInvalid},
		{"missing sub", hs(func(c jwt.MapClaims) { delete(c, "sub") }), authz.Identity{}, CodeInvalid},
		{"roles of the wrong type", hs(func(c jwt.MapClaims) { c["roles"] = 7 }), authz.Identity{}, CodeInvalid},
		{"isAdmin of the wrong type", hs(func(c jwt.MapClaims) { c["isAdmin"] = "yes" }), authz.Identity{}, CodeInvalid},
		{"HS512 is fine", sign(t, jwt.SigningMethodHS512, secret, "", claimsAt(now, nil)), base, ""},
		{"garbage with two dots", "not.a.jwt", authz.Identity{}, CodeInvalid},
	}
	a := mustNew(t, Config{Mode: ModeJWT, JWT: &JWTConfig{Secret: string(secret), Issuer: testIssuer, Audience: testAudience}},
		newStore(k), &Options{Clock: clock.Now})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.AuthenticateToken(t.Context(), tt.token)
			if c := codeOf(err); c != tt.code {
				t.Fatalf("code = %q (%v), want %q", c, err, tt.code)
			}
			if err != nil && strings.Contains(err.Error(), tt.token) {
				t.Errorf("error message contains the token")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("identity mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJWTCustomClaims(t *testing.T) {
	secret := strings.Repeat("k", 32)
	clock := newClock()
	a := mustNew(t, Config{Mode: ModeJWT, JWT: &JWTConfig{
		Secret:     secret,
		AgentClaim: "agent", RolesClaim: "groups", WorkspaceClaim: "tenant",
		AllowClaim: "allow", DenyClaim: "deny", AdminClaim: "admin",
	}}, nil, &Options{Clock: clock.Now})

	tests := []struct {
		name   string
		claims jwt.MapClaims
		want   authz.Identity
		code   string
	}{
		{"every claim mapped", claimsAt(clock.Now(), func(c jwt.MapClaims) {
			c["agent"] = "bot-7"
			c["groups"] = []string{"readers"}
			c["tenant"] = "acme"
			c["allow"] = []string{"github"}
			c["deny"] = []string{"files"}
			c["admin"] = "TRUE"
			// Default names are ignored once renamed.
			c["roles"] = []string{"ignored"}
			c["isAdmin"] = false
		}), authz.Identity{ID: "jwt:" + testIssuer + "|user-1", AgentID: "bot-7", Roles: []string{"readers"},
			Workspace: "acme", Admin: true, AllowServers: []string{"github"}, DenyServers: []string{"files"}, Method: "jwt",
			WorkspacePolicy: true}, ""},
		{"default claim names do not count once renamed", claimsAt(clock.Now(), func(c jwt.MapClaims) {
			c["agent"] = "bot-7"
			c["isAdmin"], c["mcpServerDenyIds"] = false, []string{"x"}
		}), authz.Identity{ID: "jwt:" + testIssuer + "|user-1", AgentID: "bot-7", Method: "jwt"}, ""},
		{"no sub: the agent names the identity", claimsAt(clock.Now(), func(c jwt.MapClaims) {
			delete(c, "sub")
			c["agent"] = "bot-7"
		}), authz.Identity{ID: "jwt:" + testIssuer + "|bot-7", AgentID: "bot-7", Method: "jwt"}, ""},
		{"no agent claim", claimsAt(clock.Now(), nil), authz.Identity{}, CodeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.AuthenticateToken(t.Context(), sign(t, jwtHS256, []byte(secret), "", tt.claims))
			if c := codeOf(err); c != tt.code {
				t.Fatalf("code = %q (%v), want %q", c, err, tt.code)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("identity mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("the reason names the missing claim", func(t *testing.T) {
		_, err := a.AuthenticateToken(t.Context(), sign(t, jwtHS256, []byte(secret), "", claimsAt(clock.Now(), nil)))
		if err == nil || err.Error() != "token has no agent claim" {
			t.Fatalf("err = %v, want %q", err, "token has no agent claim")
		}
	})
}

// testKeys are generated once: RSA generation is slow.
var testKeys = sync.OnceValue(func() (k struct {
	rsa1, rsa2 *rsa.PrivateKey
	ec256      *ecdsa.PrivateKey
	ec384      *ecdsa.PrivateKey
}) {
	var err error
	if k.rsa1, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if k.rsa2, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if k.ec256, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
	if k.ec384, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader); err != nil {
		panic(err)
	}
	return k
})

func TestJWKS(t *testing.T) {
	keys := testKeys()
	srv := newJWKSServer(t,
		rsaJWK("rsa-1", &keys.rsa1.PublicKey),
		ecJWK(t, "ec-256", "P-256", &keys.ec256.PublicKey),
		ecJWK(t, "ec-384", "P-384", &keys.ec384.PublicKey),
		map[string]any{"kty": "oct", "kid": "sym", "k": b64([]byte("ignored"))}, // skipped, not fatal
		map[string]any{"kty": "RSA", "kid": "enc", "use": "enc", "n": "AQAB", "e": "AQAB"},
	)
	clock := newClock()
	a := mustNew(t, Config{Mode: ModeJWT, JWT: &JWTConfig{JWKSURL: srv.URL, Issuer: testIssuer}}, nil, &Options{Clock: clock.Now})
	claims := claimsAt(clock.Now(), nil)
	pemPub, err := x509.MarshalPKIXPublicKey(&keys.rsa1.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	want := authz.Identity{ID: "jwt:" + testIssuer + "|user-1", AgentID: "user-1", Method: "jwt"}

	tests := []struct {
		name  string
		token string
		code  string
	}{
		{"RS256", sign(t, jwt.SigningMethodRS256, keys.rsa1, "rsa-1", claims), ""},
		{"RS512", sign(t, jwt.SigningMethodRS512, keys.rsa1, "rsa-1", claims), ""},
		{"PS256", sign(t, jwt.SigningMethodPS256, keys.rsa1, "rsa-1", claims), ""},
		{"ES256", sign(t, jwt.SigningMethodES256, keys.ec256, "ec-256", claims), ""},
		{"ES384", sign(t, jwt.SigningMethodES384, keys.ec384, "ec-384", claims), ""},
		{"RS256 by another key", sign(t, jwt.SigningMethodRS256, keys.rsa2, "rsa-1", claims), CodeInvalid},
		{"ES256 naming the P-384 key", sign(t, jwt.SigningMethodES256, keys.ec256, "ec-384", claims), CodeInvalid},
		{"ES256 naming the RSA key", sign(t, jwt.SigningMethodES256, keys.ec256, "rsa-1", claims), CodeInvalid},
		{"HS256 signed with the public key (alg confusion)", sign(t, jwtHS256, pemPub, "rsa-1", claims), CodeInvalid},
		{"HS256 signed with the modulus", sign(t, jwtHS256, keys.rsa1.N.Bytes(), "rsa-1", claims), CodeInvalid},
		{"alg none", func() string {
			s, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
			return s
		}(), CodeInvalid},
		{"no kid, several keys", sign(t, jwt.SigningMethodRS256, keys.rsa1, "", claims), CodeInvalid},
		{"expired", sign(t, jwt.SigningMethodRS256, keys.rsa1, "rsa-1", claimsAt(clock.Now().Add(-2*time.Hour), nil)), CodeExpired},
		{"kid of a skipped key", sign(t, jwt.SigningMethodRS256, keys.rsa1, "sym", claims), CodeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.AuthenticateToken(t.Context(), tt.token)
			if c := codeOf(err); c != tt.code {
				t.Fatalf("code = %q (%v), want %q", c, err, tt.code)
			}
			if tt.code == "" {
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("identity mismatch (-want +got):\n%s", diff)
				}
			}
		})
	}
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("JWKS fetched %d times, want 1 (unknown kids are rate-limited)", n)
	}

	t.Run("no kid, one key", func(t *testing.T) {
		srv := newJWKSServer(t, ecJWK(t, "only", "P-256", &keys.ec256.PublicKey))
		a := mustNew(t, Config{Mode: ModeJWT, JWT: &JWTConfig{JWKSURL: srv.URL}}, nil, &Options{Clock: clock.Now})
		if _, err := a.AuthenticateToken(t.Context(), sign(t, jwt.SigningMethodES256, keys.ec256, "", claims)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a JWK's alg pins the algorithm", func(t *testing.T) {
		jwk := rsaJWK("pinned", &keys.rsa1.PublicKey)
		jwk["alg"] = "PS256"
		srv := newJWKSServer(t, jwk)
		a := mustNew(t, Config{Mode: ModeJWT, JWT: &JWTConfig{JWKSURL: srv.URL}}, nil, &Options{Clock: clock.Now})
		if _, err := a.AuthenticateToken(t.Context(), sign(t, jwt.SigningMethodPS256, keys.rsa1, "pinned", claims)); err != nil {
			t.Fatalf("PS256: %v", err)
		}
		if _, err := a.AuthenticateToken(t.Context(), sign(t, jwt.SigningMethodRS256, keys.rsa1, "pinned", claims)); codeOf(err) != CodeInvalid {
			t.Fatalf("RS256 with a PS256 key: code %q, want %q", codeOf(err), CodeInvalid)
		}
	})
}

func TestJWTSecretVerifierRejectsAsymmetric(t *testing.T) {
	keys := testKeys()
	clock := newClock()
	a := mustNew(t, Config{Mode: ModeJWT, JWT: &JWTConfig{Secret: strings.Repeat("s", 32)}}, nil, &Options{Clock: clock.Now})
	tok := sign(t, jwt.SigningMethodRS256, keys.rsa1, "", claimsAt(clock.Now(), nil))
	if _, err := a.AuthenticateToken(t.Context(), tok); codeOf(err) != CodeInvalid {
		t.Fatalf("RS256 token to an HS256 verifier: code %q, want %q", codeOf(err), CodeInvalid)
	}
}
