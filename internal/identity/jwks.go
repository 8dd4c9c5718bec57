package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"
)

// jwksMinRefetch rate-limits refetches on an unknown kid, so a flood of
// tokens with made-up kids cannot turn the gateway into a JWKS hammer.
const jwksMinRefetch = 30 * time.Second

// jwksMaxBytes bounds a JWKS response; real key sets are a few kilobytes.
const jwksMaxBytes = 1 << 20

// minRSABits rejects RSA keys too short to be trusted.
const minRSABits = 2048

var (
	errUnknownKid   = errors.New("unknown signing key id")
	errAmbiguousKey = errors.New("token has no kid and the key set has several keys")
	errAlgMismatch  = errors.New("token algorithm does not match the signing key")
)

// jwk is the subset of RFC 7517 that signature verification needs.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// verifyKey is one parsed public key.
type verifyKey struct {
	kid string
	alg string // the JWK's alg, "" if it did not say
	pub any    // *rsa.PublicKey or *ecdsa.PublicKey
}

// jwksCache fetches, caches and refreshes a JWKS. Concurrent fetches are
// shared and run under the owner's context, not a request's, so one
// impatient caller cannot cancel a fetch others are waiting for; the owner's
// WaitGroup tracks them so that Close leaves no goroutine behind.
type jwksCache struct {
	url    string
	source func(ctx context.Context) ([]byte, error) // instead of url: the set in process
	client *http.Client
	log    *slog.Logger
	clock  func() time.Time
	ctx    context.Context // cancelled by Authenticator.Close
	wg     *sync.WaitGroup // the Authenticator's

	mu          sync.Mutex
	keys        []verifyKey
	fetched     bool      // a fetch has succeeded at least once
	lastAttempt time.Time // by clock; zero = never
	inflight    *fetchCall
	closed      bool
}

// fetchCall is one fetch that several callers may wait for.
type fetchCall struct {
	done chan struct{}
	err  error // set before done is closed
}

var errClosed = errors.New("authenticator is closed")

// key returns the public key a token with this kid and alg must verify
// under, fetching the set when it is not loaded yet and refetching
// (rate-limited) when kid is unknown.
func (c *jwksCache) key(ctx context.Context, kid, alg string) (any, error) {
	k, err := c.pick(kid)
	if err == nil {
		return checkAlg(k, alg)
	}
	if !errors.Is(err, errUnknownKid) && !errors.Is(err, errNotLoaded) {
		return nil, err
	}
	if !c.mayFetch() {
		if errors.Is(err, errNotLoaded) {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return nil, err
	}
	if ferr := c.refresh(ctx); ferr != nil {
		c.mu.Lock()
		loaded := c.fetched
		c.mu.Unlock()
		if !loaded {
			return nil, ferr
		}
		// Keep verifying with the keys we have; this kid is simply unknown.
	}
	k, err = c.pick(kid)
	if err != nil {
		return nil, err
	}
	return checkAlg(k, alg)
}

var errNotLoaded = errors.New("signing keys not loaded yet")

// pick selects the key by kid, or the only key when kid is empty.
func (c *jwksCache) pick(kid string) (verifyKey, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fetched {
		return verifyKey{}, errNotLoaded
	}
	if kid == "" {
		if len(c.keys) == 1 {
			return c.keys[0], nil
		}
		return verifyKey{}, errAmbiguousKey
	}
	for _, k := range c.keys {
		if k.kid == kid {
			return k, nil
		}
	}
	return verifyKey{}, errUnknownKid
}

// mayFetch reports whether an on-demand fetch is allowed now, and if so
// claims the slot.
func (c *jwksCache) mayFetch() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	if !c.lastAttempt.IsZero() && now.Sub(c.lastAttempt) < jwksMinRefetch {
		return false
	}
	c.lastAttempt = now
	return true
}

// refresh fetches the set once for all concurrent callers; ctx only bounds
// how long this caller waits.
func (c *jwksCache) refresh(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrUnavailable, errClosed)
	}
	call := c.inflight
	if call == nil {
		call = &fetchCall{done: make(chan struct{})}
		c.inflight = call
		c.wg.Add(1) // under mu, before close() can start Wait
		go func() {
			defer c.wg.Done()
			err := c.fetch(c.ctx)
			c.mu.Lock()
			c.inflight = nil
			c.mu.Unlock()
			call.err = err
			close(call.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-call.done:
		return call.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close refuses new fetches; the owner then cancels ctx and waits.
func (c *jwksCache) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// fetch downloads and parses the set, replacing the cached keys on success.
func (c *jwksCache) fetch(ctx context.Context) error {
	keys, err := c.download(ctx)
	if err != nil {
		c.log.Warn("JWKS fetch failed", "url", c.url, "err", err)
		return fmt.Errorf("%w: fetch JWKS: %w", ErrUnavailable, err)
	}
	c.mu.Lock()
	c.keys = keys
	c.fetched = true
	c.mu.Unlock()
	c.log.Debug("JWKS fetched", "url", c.url, "keys", len(keys))
	return nil
}

func (c *jwksCache) download(ctx context.Context) ([]verifyKey, error) {
	if c.source != nil {
		body, err := c.source(ctx)
		if err != nil {
			return nil, err
		}
		return c.parse(body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, jwksMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if len(body) > jwksMaxBytes {
		return nil, fmt.Errorf("body larger than %d bytes", jwksMaxBytes)
	}
	return c.parse(body)
}

// parse turns a JWKS document into keys, skipping (with a debug log) keys
// that are not for signatures or are of a kind we do not verify, so that one
// exotic key does not disable the whole set.
func (c *jwksCache) parse(body []byte) ([]verifyKey, error) {
	var doc struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("decode JWKS: %w", err)
	}
	var keys []verifyKey
	for i, j := range doc.Keys {
		if j.Use != "" && j.Use != "sig" {
			continue
		}
		pub, err := parseJWK(j)
		if err != nil {
			c.log.Debug("JWKS key skipped", "index", i, "kid", j.Kid, "err", err)
			continue
		}
		keys = append(keys, verifyKey{kid: j.Kid, alg: j.Alg, pub: pub})
	}
	if len(keys) == 0 {
		return nil, errors.New("JWKS has no usable signing keys")
	}
	return keys, nil
}

func parseJWK(j jwk) (any, error) {
	switch j.Kty {
	case "RSA":
		n, err := b64BigInt(j.N)
		if err != nil {
			return nil, fmt.Errorf("n: %w", err)
		}
		e, err := b64BigInt(j.E)
		if err != nil {
			return nil, fmt.Errorf("e: %w", err)
		}
		if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || e.Bit(0) == 0 {
			return nil, errors.New("bad RSA exponent")
		}
		if n.BitLen() < minRSABits {
			return nil, fmt.Errorf("RSA key of %d bits is shorter than %d", n.BitLen(), minRSABits)
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	case "EC":
		var curve elliptic.Curve
		var size int
		switch j.Crv {
		case "P-256":
			curve, size = elliptic.P256(), 32
		case "P-384":
			curve, size = elliptic.P384(), 48
		default:
			return nil, fmt.Errorf("unsupported curve %q", j.Crv)
		}
		x, err := b64Bytes(j.X)
		if err != nil {
			return nil, fmt.Errorf("x: %w", err)
		}
		y, err := b64Bytes(j.Y)
		if err != nil {
			return nil, fmt.Errorf("y: %w", err)
		}
		if len(x) != size || len(y) != size {
			return nil, fmt.Errorf("coordinates must be %d bytes", size)
		}
		point := append(append([]byte{4}, x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return nil, err
		}
		return pub, nil
	default:
		return nil, fmt.Errorf("unsupported key type %q", j.Kty)
	}
}

func b64Bytes(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("missing")
	}
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

func b64BigInt(s string) (*big.Int, error) {
	b, err := b64Bytes(s)
	if err != nil {
		return nil, err
	}
	return new(big.Int).SetBytes(b), nil
}

// checkAlg refuses a key for an algorithm of another family (or curve), and
// a key whose JWK pins a different alg: the library checks the key type, but
// an explicit check keeps alg confusion impossible by construction.
func checkAlg(k verifyKey, alg string) (any, error) {
	if k.alg != "" && k.alg != alg {
		return nil, errAlgMismatch
	}
	switch pub := k.pub.(type) {
	case *rsa.PublicKey:
		if strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS") {
			return pub, nil
		}
	case *ecdsa.PublicKey:
		if (alg == "ES256" && pub.Curve == elliptic.P256()) || (alg == "ES384" && pub.Curve == elliptic.P384()) {
			return pub, nil
		}
	}
	return nil, errAlgMismatch
}

// run refreshes the set every interval until ctx is done. Failures keep the
// old keys: an IdP blip must not log everyone out.
func (c *jwksCache) run(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			c.mu.Lock()
			c.lastAttempt = c.clock()
			c.mu.Unlock()
			_ = c.refresh(c.ctx) // logged by fetch
		}
	}
}
