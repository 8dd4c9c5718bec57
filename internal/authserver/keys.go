package authserver

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/internal/signkeys"
)

// signingAlg is the one algorithm the server signs with (package
// signkeys keeps the keys: ES256).
const signingAlg = signkeys.Alg

// keyCacheTTL is how long the keys read from the store are used before
// they are read again.
const keyCacheTTL = signkeys.CacheTTL

// keyLeeway keeps a retired key published this much past the expiry of
// the last token it signed, for resource servers whose clocks run late.
const keyLeeway = 5 * time.Minute

// keyCache is the server's signing keys (table oauth_signing_keys).
type keyCache struct{ ring *signkeys.Ring }

func newKeyCache(s *Server) *keyCache {
	return &keyCache{ring: signkeys.New(signkeys.Options{
		List: s.db.OAuthSigningKeys, Create: s.db.CreateOAuthSigningKey, Seal: s.seal, Clock: s.clock,
		Rotation: s.cfg.KeyRotation, Lead: s.cfg.KeyLead, Keep: s.cfg.AccessTokenTTL + keyLeeway,
		What: "OAuth signing key", Logger: s.log,
	})}
}

func (c *keyCache) load(ctx context.Context, force bool) ([]signkeys.Key, error) {
	return c.ring.Load(ctx, force)
}

// signer returns the key to sign with now (see signkeys.Ring.Signer).
func (c *keyCache) signer(ctx context.Context) (signkeys.Key, error) {
	return c.ring.Signer(ctx)
}

// KeySet returns the JWKS document of the keys published now: the active
// key, its successor, and retired keys whose tokens may still be valid.
// The resource server (identity.JWTConfig.KeySet) calls it in process; an
// unknown kid makes it call again, so the store is read afresh then.
func (s *Server) KeySet(ctx context.Context) ([]byte, error) {
	keys, err := s.keys.load(ctx, true)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		// First start: make the first key rather than publish nothing.
		if _, err := s.keys.signer(ctx); err != nil {
			return nil, err
		}
		if keys, err = s.keys.load(ctx, false); err != nil {
			return nil, err
		}
	}
	return signkeys.JWKS(keys, s.clock())
}

func (s *Server) serveJWKS(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, newError(http.StatusMethodNotAllowed, errInvalidRequest, "use GET"))
		return
	}
	keys, err := s.keys.load(r.Context(), false)
	if err == nil && len(keys) == 0 {
		var doc []byte
		if doc, err = s.KeySet(r.Context()); err == nil {
			w.Header().Set("Content-Type", "application/json")
			w.Write(doc) //nolint:errcheck // the client went away
			return
		}
	}
	if err != nil {
		s.log.Warn("OAuth key set unavailable", "err", err)
		writeError(w, unavailable())
		return
	}
	doc, err := signkeys.JWKS(keys, s.clock())
	if err != nil {
		writeError(w, unavailable())
		return
	}
	// Short: a successor key must reach caches well within KeyLead.
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("Content-Type", "application/json")
	w.Write(doc) //nolint:errcheck // the client went away
}

// sign signs claims with the active key.
func (s *Server) sign(ctx context.Context, claims jwt.MapClaims) (string, error) {
	k, err := s.keys.signer(ctx)
	if err != nil {
		return "", err
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = k.Row.ID
	tok.Header["typ"] = "at+jwt" // RFC 9068
	return tok.SignedString(k.Priv)
}

// parseOwn verifies a token this server signed (any published key, expiry
// ignored: a revocation of an expired token is still honoured) and returns
// its claims.
func (s *Server) parseOwn(ctx context.Context, token string) (jwt.MapClaims, error) {
	keys, err := s.keys.load(ctx, false)
	if err != nil {
		return nil, err
	}
	claims := jwt.MapClaims{}
	p := jwt.NewParser(jwt.WithValidMethods([]string{signingAlg}), jwt.WithIssuer(s.cfg.Issuer), jwt.WithoutClaimsValidation())
	_, err = p.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		i := slices.IndexFunc(keys, func(k signkeys.Key) bool { return k.Row.ID == kid })
		if i < 0 || keys[i].Priv == nil {
			return nil, errors.New("unknown key")
		}
		return &keys[i].Priv.PublicKey, nil
	})
	if err != nil {
		return nil, err
	}
	if iss, _ := claims["iss"].(string); iss != s.cfg.Issuer {
		return nil, errors.New("issued elsewhere")
	}
	return claims, nil
}
