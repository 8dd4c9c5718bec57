// Package signkeys keeps a set of ES256 signing keys shared by the
// replicas through the store, sealed at rest with the secret keyring, and
// rotated on a schedule: a key signs for Rotation, its successor is stored
// (and so published) Lead before it takes over, and a retired key stays
// published for Keep after it stops signing, until the last token it
// signed has expired. Two replicas that rotate at once make one successor:
// the store refuses a second key of the same generation.
//
// The built-in authorization server signs its access tokens with one ring
// (table oauth_signing_keys), the identity propagation its assertions with
// another (upstream_signing_keys), so that neither's tokens verify with
// the other's keys.
package signkeys

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
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// Alg is the one algorithm the keys sign with: ES256 keys are small, fast
// to make, and every verifier takes them.
const Alg = "ES256"

// CacheTTL is how long the keys read from the store are used before they
// are read again, so that a key another replica made is published here
// within it.
const CacheTTL = 30 * time.Second

// Sealer seals the private keys at rest; *secrets.Keyring is one.
type Sealer interface {
	Seal(plaintext string) (string, error)
	Open(value string) (plaintext string, sealed bool, err error)
}

// Options configure a [Ring].
type Options struct {
	// List and Create read and store the rows of the ring's table.
	List   func(ctx context.Context) ([]store.OAuthSigningKey, error)
	Create func(ctx context.Context, k store.OAuthSigningKey) error
	// Seal seals the private keys (required).
	Seal Sealer
	// Clock is the time; default time.Now.
	Clock func() time.Time
	// Rotation, Lead and Keep are the schedule (see the package doc).
	Rotation, Lead, Keep time.Duration
	// What names the keys in log lines ("OAuth signing key").
	What   string
	Logger *slog.Logger
}

// Key is a stored key with its private half opened; Priv is nil for a key
// sealed under a secret key this replica lacks (published, not used).
type Key struct {
	Row  store.OAuthSigningKey
	Priv *ecdsa.PrivateKey
}

// Ring holds the keys read from the store and rotates them on use.
type Ring struct {
	o Options

	mu     sync.Mutex
	keys   []Key
	loaded time.Time // by the ring's clock; zero = never
}

// New returns a ring; it reads nothing until it is used.
func New(o Options) *Ring {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Ring{o: o}
}

// Now is the ring's clock.
func (r *Ring) Now() time.Time { return r.o.Clock() }

// Load returns the keys, read from the store when the cached ones are
// older than CacheTTL, or always with force.
func (r *Ring) Load(ctx context.Context, force bool) ([]Key, error) {
	now := r.o.Clock()
	r.mu.Lock()
	if !force && !r.loaded.IsZero() && now.Sub(r.loaded) < CacheTTL {
		keys := r.keys
		r.mu.Unlock()
		return keys, nil
	}
	r.mu.Unlock()
	rows, err := r.o.List(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]Key, 0, len(rows))
	for _, row := range rows {
		priv, err := r.open(row)
		if err != nil {
			// A key sealed under a key this replica lacks: it cannot sign
			// with it, but must still publish it.
			r.o.Logger.Warn(r.o.What+" cannot be opened", "kid", row.ID, "err", err)
		}
		keys = append(keys, Key{Row: row, Priv: priv})
	}
	r.mu.Lock()
	r.keys, r.loaded = keys, now
	r.mu.Unlock()
	return keys, nil
}

func (r *Ring) open(row store.OAuthSigningKey) (*ecdsa.PrivateKey, error) {
	plain, _, err := r.o.Seal.Open(row.PrivateKey)
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
func active(keys []Key, now time.Time) (Key, bool) {
	var best Key
	found := false
	for _, k := range keys {
		if k.Priv == nil || now.Before(k.Row.ActiveFrom) || !now.Before(k.Row.RetireAt) {
			continue
		}
		if !found || k.Row.Generation > best.Row.Generation {
			best, found = k, true
		}
	}
	return best, found
}

// sealedElsewhere reports whether a key that should sign at now could not
// be opened here.
func sealedElsewhere(keys []Key, now time.Time) bool {
	for _, k := range keys {
		if k.Priv == nil && !now.Before(k.Row.ActiveFrom) && now.Before(k.Row.RetireAt) {
			return true
		}
	}
	return false
}

// Signer returns the key to sign with now, first creating one when none is
// active, and the successor of the active key when it retires within
// Lead: the successor is published from the moment it is stored, so that
// every verifier knows it before it signs anything.
func (r *Ring) Signer(ctx context.Context) (Key, error) {
	for attempt := 0; attempt < 3; attempt++ {
		keys, err := r.Load(ctx, attempt > 0)
		if err != nil {
			return Key{}, err
		}
		now := r.o.Clock()
		cur, ok := active(keys, now)
		var maxGen int64
		for _, k := range keys {
			maxGen = max(maxGen, k.Row.Generation)
		}
		switch {
		case !ok && sealedElsewhere(keys, now):
			// Making a new key would make the other replicas do the same in
			// turn, each unable to use the other's.
			return Key{}, errors.New("the active signing key is sealed with a secret key this replica lacks: replicas must share SWITCHBOARD_SECRET_KEY")
		case !ok:
			err = r.create(ctx, maxGen+1, now)
		case cur.Row.Generation == maxGen && cur.Row.RetireAt.Sub(now) <= r.o.Lead:
			err = r.create(ctx, maxGen+1, cur.Row.RetireAt)
			if err == nil || errors.Is(err, store.ErrConflict) {
				r.Load(ctx, true) //nolint:errcheck // the current key still signs; the next load retries
			}
			return cur, nil
		default:
			return cur, nil
		}
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return Key{}, err
		}
		// Created, or another replica did: read the keys again.
	}
	return Key{}, errors.New("no signing key after three attempts")
}

// create makes and stores the key of generation gen, signing from from.
// ErrConflict means another replica made that generation first.
func (r *Ring) create(ctx context.Context, gen int64, from time.Time) error {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("encoding signing key: %w", err)
	}
	sealed, err := r.o.Seal.Seal(base64.StdEncoding.EncodeToString(der))
	if err != nil {
		return fmt.Errorf("sealing signing key: %w", err)
	}
	kid := Thumbprint(&priv.PublicKey)
	jwk, err := json.Marshal(PublicJWK(kid, &priv.PublicKey))
	if err != nil {
		return err
	}
	retire := from.Add(r.o.Rotation)
	row := store.OAuthSigningKey{
		ID: kid, Generation: gen, Alg: Alg, PrivateKey: sealed, PublicJWK: jwk,
		CreatedAt: r.o.Clock(), ActiveFrom: from, RetireAt: retire, ExpiresAt: retire.Add(r.o.Keep),
	}
	if err := r.o.Create(ctx, row); err != nil {
		return err
	}
	r.o.Logger.Info(r.o.What+" created", "kid", kid, "generation", gen, "signs_from", from.UTC().Format(time.RFC3339))
	return nil
}

// Thumbprint is the RFC 7638 JWK thumbprint of pub: a key ID that is the
// same wherever it is computed.
func Thumbprint(pub *ecdsa.PublicKey) string {
	j := PublicJWK("", pub)
	canon := fmt.Sprintf(`{"crv":"P-256","kty":"EC","x":%q,"y":%q}`, j["x"], j["y"])
	sum := sha256.Sum256([]byte(canon))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// PublicJWK is the public JWK of pub, with kid when not "".
func PublicJWK(kid string, pub *ecdsa.PublicKey) map[string]string {
	raw, _ := pub.Bytes() // uncompressed point 04|X|Y; a P-256 key always encodes
	size := (len(raw) - 1) / 2
	j := map[string]string{
		"kty": "EC", "crv": "P-256", "use": "sig", "alg": Alg,
		"x": base64.RawURLEncoding.EncodeToString(raw[1 : 1+size]),
		"y": base64.RawURLEncoding.EncodeToString(raw[1+size:]),
	}
	if kid != "" {
		j["kid"] = kid
	}
	return j
}

// JWKS is the JSON Web Key Set of the keys published at now: every key
// until its ExpiresAt.
func JWKS(keys []Key, now time.Time) ([]byte, error) {
	doc := struct {
		Keys []json.RawMessage `json:"keys"`
	}{Keys: []json.RawMessage{}}
	for _, k := range keys {
		if now.Before(k.Row.ExpiresAt) {
			doc.Keys = append(doc.Keys, k.Row.PublicJWK)
		}
	}
	return json.Marshal(doc)
}
