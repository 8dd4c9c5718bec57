package authserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// signingAlg is the one algorithm the server signs with: ES256 keys are
// small, fast to make, and every resource server verifies them.
const signingAlg = "ES256"

// keyCacheTTL is how long the keys read from the store are used before
// they are read again, so that a key another replica made is published
// here within it.
const keyCacheTTL = 30 * time.Second

// keyLeeway keeps a retired key published this much past the expiry of
// the last token it signed, for resource servers whose clocks run late.
const keyLeeway = 5 * time.Minute

// signingKey is a stored key with its private half opened.
type signingKey struct {
	row  store.OAuthSigningKey
	priv *ecdsa.PrivateKey
}

// keyCache holds the signing keys read from the store.
type keyCache struct {
	s *Server

	mu     sync.Mutex
	keys   []signingKey
	loaded time.Time // by the server's clock; zero = never
}

// load reads the keys from the store when the cached ones are older than
// keyCacheTTL, or always with force.
func (c *keyCache) load(ctx context.Context, force bool) ([]signingKey, error) {
	now := c.s.clock()
	c.mu.Lock()
	if !force && !c.loaded.IsZero() && now.Sub(c.loaded) < keyCacheTTL {
		keys := c.keys
		c.mu.Unlock()
		return keys, nil
	}
	c.mu.Unlock()
	rows, err := c.s.db.OAuthSigningKeys(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]signingKey, 0, len(rows))
	for _, row := range rows {
		priv, err := c.open(row)
		if err != nil {
			// A key sealed under a key this replica lacks: it cannot sign
			// with it, but must still publish it.
			c.s.log.Warn("OAuth signing key cannot be opened", "kid", row.ID, "err", err)
		}
		keys = append(keys, signingKey{row: row, priv: priv})
	}
	c.mu.Lock()
	c.keys, c.loaded = keys, now
	c.mu.Unlock()
	return keys, nil
}

func (c *keyCache) open(row store.OAuthSigningKey) (*ecdsa.PrivateKey, error) {
	plain, _, err := c.s.seal.Open(row.PrivateKey)
	if err != nil {
		return nil, err
	}
	der, err := base64.StdEncoding.DecodeString(plain)
	if err != nil {
		return nil, fmt.Errorf("decoding key %s: %w", row.ID, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parsing key %s: %w", row.ID, err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("key %s is not an ECDSA key", row.ID)
	}
	return ec, nil
}

// active returns the key that signs at now: of those whose window holds
// now, the newest generation.
func active(keys []signingKey, now time.Time) (signingKey, bool) {
	var best signingKey
	found := false
	for _, k := range keys {
		if k.priv == nil || now.Before(k.row.ActiveFrom) || !now.Before(k.row.RetireAt) {
			continue
		}
		if !found || k.row.Generation > best.row.Generation {
			best, found = k, true
		}
	}
	return best, found
}

// sealedElsewhere reports whether a key that should sign at now could not
// be opened here.
func sealedElsewhere(keys []signingKey, now time.Time) bool {
	for _, k := range keys {
		if k.priv == nil && !now.Before(k.row.ActiveFrom) && now.Before(k.row.RetireAt) {
			return true
		}
	}
	return false
}

// signer returns the key to sign with now, first creating one when none is
// active, and the successor of the active key when it retires within
// KeyLead: the successor is published from the moment it is stored, so
// that every resource server knows it before it signs anything.
func (c *keyCache) signer(ctx context.Context) (signingKey, error) {
	for attempt := 0; attempt < 3; attempt++ {
		keys, err := c.load(ctx, attempt > 0)
		if err != nil {
			return signingKey{}, err
		}
		now := c.s.clock()
		cur, ok := active(keys, now)
		var maxGen int64
		for _, k := range keys {
			maxGen = max(maxGen, k.row.Generation)
		}
		switch {
		case !ok && sealedElsewhere(keys, now):
			// Making a new key would make the other replicas do the same in
			// turn, each unable to use the other's.
			return signingKey{}, errors.New("the active signing key is sealed with a secret key this replica lacks: replicas must share SWITCHBOARD_SECRET_KEY")
		case !ok:
			err = c.create(ctx, maxGen+1, now)
		case cur.row.Generation == maxGen && cur.row.RetireAt.Sub(now) <= c.s.cfg.KeyLead:
			err = c.create(ctx, maxGen+1, cur.row.RetireAt)
			if err == nil || errors.Is(err, store.ErrConflict) {
				c.load(ctx, true) //nolint:errcheck // the current key still signs; the next load retries
			}
			return cur, nil
		default:
			return cur, nil
		}
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return signingKey{}, err
		}
		// Created, or another replica did: read the keys again.
	}
	return signingKey{}, errors.New("no signing key after three attempts")
}

// create makes and stores the key of generation gen, signing from from.
// ErrConflict means another replica made that generation first.
func (c *keyCache) create(ctx context.Context, gen int64, from time.Time) error {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("encoding signing key: %w", err)
	}
	sealed, err := c.s.seal.Seal(base64.StdEncoding.EncodeToString(der))
	if err != nil {
		return fmt.Errorf("sealing signing key: %w", err)
	}
	kid := thumbprint(&priv.PublicKey)
	jwk, err := json.Marshal(publicJWK(kid, &priv.PublicKey))
	if err != nil {
		return err
	}
	cfg := c.s.cfg
	retire := from.Add(cfg.KeyRotation)
	row := store.OAuthSigningKey{
		ID: kid, Generation: gen, Alg: signingAlg, PrivateKey: sealed, PublicJWK: jwk,
		CreatedAt: c.s.clock(), ActiveFrom: from, RetireAt: retire,
		ExpiresAt: retire.Add(cfg.AccessTokenTTL + keyLeeway),
	}
	if err := c.s.db.CreateOAuthSigningKey(ctx, row); err != nil {
		return err
	}
	c.s.log.Info("OAuth signing key created", "kid", kid, "generation", gen, "signs_from", from.UTC().Format(time.RFC3339))
	return nil
}

// thumbprint is the RFC 7638 JWK thumbprint of pub: a key ID that is the
// same wherever it is computed.
func thumbprint(pub *ecdsa.PublicKey) string {
	j := publicJWK("", pub)
	canon := fmt.Sprintf(`{"crv":"P-256","kty":"EC","x":%q,"y":%q}`, j["x"], j["y"])
	sum := sha256.Sum256([]byte(canon))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func publicJWK(kid string, pub *ecdsa.PublicKey) map[string]string {
	raw, _ := pub.Bytes() // uncompressed point 04|X|Y; a P-256 key always encodes
	size := (len(raw) - 1) / 2
	j := map[string]string{
		"kty": "EC", "crv": "P-256", "use": "sig", "alg": signingAlg,
		"x": base64.RawURLEncoding.EncodeToString(raw[1 : 1+size]),
		"y": base64.RawURLEncoding.EncodeToString(raw[1+size:]),
	}
	if kid != "" {
		j["kid"] = kid
	}
	return j
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
	return jwksDocument(keys, s.clock())
}

func jwksDocument(keys []signingKey, now time.Time) ([]byte, error) {
	doc := struct {
		Keys []json.RawMessage `json:"keys"`
	}{Keys: []json.RawMessage{}}
	for _, k := range keys {
		if now.Before(k.row.ExpiresAt) {
			doc.Keys = append(doc.Keys, k.row.PublicJWK)
		}
	}
	return json.Marshal(doc)
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
	doc, err := jwksDocument(keys, s.clock())
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
	tok.Header["kid"] = k.row.ID
	tok.Header["typ"] = "at+jwt" // RFC 9068
	return tok.SignedString(k.priv)
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
		i := slices.IndexFunc(keys, func(k signingKey) bool { return k.row.ID == kid })
		if i < 0 || keys[i].priv == nil {
			return nil, errors.New("unknown key")
		}
		return &keys[i].priv.PublicKey, nil
	})
	if err != nil {
		return nil, err
	}
	if iss, _ := claims["iss"].(string); iss != s.cfg.Issuer {
		return nil, errors.New("issued elsewhere")
	}
	return claims, nil
}
