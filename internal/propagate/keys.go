package propagate

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
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// The key schedule. A key signs for KeyRotation, its successor is stored
// (and so published) KeyLead before it signs, and a retired key stays
// published past the expiry of the last assertion it signed.
const (
	KeyRotation = 7 * 24 * time.Hour
	KeyLead     = 24 * time.Hour
	keyLeeway   = 5 * time.Minute
	// keyCacheTTL is how long the keys read from the store are used
	// before they are read again, so that a key another replica made is
	// published here within it.
	keyCacheTTL = 30 * time.Second
	// maxAssertionTTL bounds what a published key must outlive.
	maxAssertionTTL = 5 * time.Minute
)

// Store keeps the signing keys; *store.DB is one. Every replica reads and
// writes the same rows, so that they sign with, and publish, the same keys.
type Store interface {
	UpstreamSigningKeys(ctx context.Context) ([]store.OAuthSigningKey, error)
	CreateUpstreamSigningKey(ctx context.Context, k store.OAuthSigningKey) error
}

// Sealer seals the private keys at rest; *secrets.Keyring is one.
type Sealer interface {
	Seal(plaintext string) (string, error)
	Open(value string) (plaintext string, sealed bool, err error)
}

// signingKey is a stored key with its private half opened (nil when this
// replica cannot open it).
type signingKey struct {
	row  store.OAuthSigningKey
	priv *ecdsa.PrivateKey
}

// ring holds the keys read from the store, rotating them on use: the same
// schedule as the built-in authorization server's (package authserver),
// on a table of its own.
type ring struct {
	db    Store
	seal  Sealer
	clock func() time.Time
	log   logger

	mu     sync.Mutex
	keys   []signingKey
	loaded time.Time // zero = never
}

type logger interface {
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
}

func (r *ring) load(ctx context.Context, force bool) ([]signingKey, error) {
	now := r.clock()
	r.mu.Lock()
	if !force && !r.loaded.IsZero() && now.Sub(r.loaded) < keyCacheTTL && now.Sub(r.loaded) >= 0 {
		keys := r.keys
		r.mu.Unlock()
		return keys, nil
	}
	r.mu.Unlock()
	rows, err := r.db.UpstreamSigningKeys(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]signingKey, 0, len(rows))
	for _, row := range rows {
		priv, err := r.open(row)
		if err != nil {
			// Sealed under a key this replica lacks: published, not used.
			r.log.Warn("identity signing key cannot be opened", "kid", row.ID, "err", err)
		}
		keys = append(keys, signingKey{row: row, priv: priv})
	}
	r.mu.Lock()
	r.keys, r.loaded = keys, now
	r.mu.Unlock()
	return keys, nil
}

func (r *ring) open(row store.OAuthSigningKey) (*ecdsa.PrivateKey, error) {
	plain, _, err := r.seal.Open(row.PrivateKey)
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

// active is the key that signs at now: the newest generation whose window
// holds now.
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

// signer returns the key to sign with now, creating the first key, or the
// successor of one that retires within KeyLead. Two replicas that rotate
// at once create one successor: the generation is unique in the store.
func (r *ring) signer(ctx context.Context) (signingKey, error) {
	for attempt := range 3 {
		keys, err := r.load(ctx, attempt > 0)
		if err != nil {
			return signingKey{}, err
		}
		now := r.clock()
		cur, ok := active(keys, now)
		var maxGen int64
		sealedElsewhere := false
		for _, k := range keys {
			maxGen = max(maxGen, k.row.Generation)
			if k.priv == nil && !now.Before(k.row.ActiveFrom) && now.Before(k.row.RetireAt) {
				sealedElsewhere = true
			}
		}
		switch {
		case !ok && sealedElsewhere:
			return signingKey{}, errors.New("the active identity signing key is sealed with a secret key this replica lacks: replicas must share SWITCHBOARD_SECRET_KEY")
		case !ok:
			err = r.create(ctx, maxGen+1, now)
		case cur.row.Generation == maxGen && cur.row.RetireAt.Sub(now) <= KeyLead:
			if err := r.create(ctx, maxGen+1, cur.row.RetireAt); err == nil || errors.Is(err, store.ErrConflict) {
				r.load(ctx, true) //nolint:errcheck // the current key still signs; the next load retries
			}
			return cur, nil
		default:
			return cur, nil
		}
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return signingKey{}, err
		}
	}
	return signingKey{}, errors.New("no identity signing key after three attempts")
}

func (r *ring) create(ctx context.Context, gen int64, from time.Time) error {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating identity signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("encoding identity signing key: %w", err)
	}
	sealed, err := r.seal.Seal(base64.StdEncoding.EncodeToString(der))
	if err != nil {
		return fmt.Errorf("sealing identity signing key: %w", err)
	}
	kid := thumbprint(&priv.PublicKey)
	jwk, err := json.Marshal(publicJWK(kid, &priv.PublicKey))
	if err != nil {
		return err
	}
	retire := from.Add(KeyRotation)
	row := store.OAuthSigningKey{ID: kid, Generation: gen, Alg: alg, PrivateKey: sealed, PublicJWK: jwk,
		CreatedAt: r.clock(), ActiveFrom: from, RetireAt: retire, ExpiresAt: retire.Add(maxAssertionTTL + keyLeeway)}
	if err := r.db.CreateUpstreamSigningKey(ctx, row); err != nil {
		return err
	}
	r.log.Info("identity signing key created", "kid", kid, "generation", gen, "signs_from", from.UTC().Format(time.RFC3339))
	return nil
}

// thumbprint is the RFC 7638 JWK thumbprint of pub.
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
		"kty": "EC", "crv": "P-256", "use": "sig", "alg": alg,
		"x": base64.RawURLEncoding.EncodeToString(raw[1 : 1+size]),
		"y": base64.RawURLEncoding.EncodeToString(raw[1+size:]),
	}
	if kid != "" {
		j["kid"] = kid
	}
	return j
}

// jwks is the document of the keys published at now.
func jwks(keys []signingKey, now time.Time) ([]byte, error) {
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
