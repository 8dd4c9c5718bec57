package identity

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzAuthenticateToken: no bearer string panics, succeeds, or fails with
// anything but a 401-class *Error that leaves the bearer out of its reason.
func FuzzAuthenticateToken(f *testing.F) {
	secret := []byte(strings.Repeat("f", 32))
	clock := newClock()
	k, keySecret := mustKey(f, "alice", nil)
	a := mustNew(f, Config{Mode: ModeJWT, AdminKey: "fuzz-admin-key-0123456789", JWT: &JWTConfig{Secret: string(secret), Issuer: testIssuer}},
		newStore(k), &Options{Clock: clock.Now})

	// Near misses of every accepted shape, none of them valid.
	f.Add("")
	f.Add("a.b.c")
	f.Add("..")
	f.Add(keySecret[:len(keySecret)-1])
	f.Add(keySecret + " ")
	f.Add("fuzz-admin-key-012345678")
	f.Add(sign(f, jwtHS256, secret, "", claimsAt(t0.Add(-2*time.Hour), nil)))                    // expired
	f.Add(sign(f, jwtHS256, []byte(strings.Repeat("g", 32)), "", claimsAt(t0, nil)))             // wrong secret
	f.Add(sign(f, jwtHS256, secret, "", claimsAt(t0, func(c jwt.MapClaims) { c["iss"] = "x" }))) // wrong issuer
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claimsAt(t0, nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	f.Add(none)

	f.Fuzz(func(t *testing.T, bearer string) {
		id, err := a.AuthenticateToken(t.Context(), bearer)
		if err == nil {
			t.Fatalf("bearer %q authenticated as %+v", bearer, id)
		}
		var ae *Error
		if !errors.As(err, &ae) {
			t.Fatalf("bearer %q: err %v is not an *Error", bearer, err)
		}
		switch ae.Code {
		case CodeMissing, CodeInvalid, CodeExpired:
		default:
			t.Fatalf("bearer %q: unknown code %q", bearer, ae.Code)
		}
		if len(bearer) >= 12 && strings.Contains(ae.Reason, bearer) {
			t.Fatalf("reason %q contains the bearer", ae.Reason)
		}
	})
}
