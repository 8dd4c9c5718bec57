// Package identity authenticates callers: it turns the credential on a
// request (an API key, a JWT bearer token, or nothing at all from loopback
// in local mode) into an [authz.Identity], or into an [*Error] that the front
// door answers with 401.
//
// Secrets never leave this package: API keys are looked up by their SHA-256,
// and neither keys nor tokens appear in logs or error messages.
package identity

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

// Values of [Config.Mode] (auth.mode).
const (
	// ModeKeys accepts API keys (and the admin key) only.
	ModeKeys = "keys"
	// ModeJWT accepts JWT bearer tokens, and API keys too: a bearer that is
	// not JWT-shaped (two dots) is looked up as a key.
	ModeJWT = "jwt"
	// ModeOAuth makes the gateway an OAuth 2.1 resource server: bearer
	// access tokens from an authorization server, bound to this gateway's
	// URL, and API keys (sbk_...) for machine callers.
	ModeOAuth = "oauth"
	// ModeLocal treats credential-less loopback callers as the local admin;
	// credentials that are presented are still checked as keys.
	ModeLocal = "local"
)

// Codes of [Error], stable so that clients can branch on them.
const (
	CodeMissing = "missing_credentials"
	CodeInvalid = "invalid_credentials"
	CodeExpired = "expired_credentials"
	// CodeInsufficientScope: a valid access token without a scope this
	// gateway requires (403, RFC 6750 §3.1).
	CodeInsufficientScope = "insufficient_scope"
)

// Defaults of the zero values in [JWTConfig] and [Options].
const (
	DefaultLeeway      = 30 * time.Second
	DefaultJWKSRefresh = time.Hour
	DefaultJWKSTimeout = 10 * time.Second
	DefaultCacheTTL    = 30 * time.Second
)

// minSecretLen is RFC 7518 §3.2: an HS256 key must be at least as long as
// the hash output.
const minSecretLen = 32

// maxCacheEntries bounds the key cache; beyond it, expired entries are
// dropped first and then arbitrary ones.
const maxCacheEntries = 4096

// JWTConfig configures JWT verification. Exactly one of Secret, JWKSURL and
// KeySet is set: a shared HS256 secret, an identity provider's published
// keys, or the built-in authorization server's keys in process.
type JWTConfig struct {
	Secret   string        // HS256 shared secret (value, not env name), at least 32 bytes; or
	JWKSURL  string        // RS256/RS384/RS512/ES256/ES384/PS256 keys fetched from a JWKS URL
	Issuer   string        // required "iss" when set
	Audience string        // required in "aud" when set
	Leeway   time.Duration // clock skew, 0 = 30s

	// Claim names (defaults in parentheses): AgentClaim ("sub"), RolesClaim
	// ("roles"), WorkspaceClaim ("workspace"), AllowClaim
	// ("mcpServerAllowIds"), DenyClaim ("mcpServerDenyIds"), AdminClaim
	// ("isAdmin"). Identity providers name things differently, so each is
	// configurable.
	AgentClaim, RolesClaim, WorkspaceClaim, AllowClaim, DenyClaim, AdminClaim string

	HTTPClient  *http.Client  // for JWKS; nil = 10s timeout
	JWKSRefresh time.Duration // 0 = 1h; an unknown kid also refetches, at most once per 30s

	// KeySet, instead of JWKSURL, returns the JWKS document in process: the
	// built-in authorization server's keys, which the gateway would
	// otherwise fetch from itself through whatever proxy, name and
	// certificate its clients use. It is called as a fetch would be.
	KeySet func(ctx context.Context) ([]byte, error)
}

// Config is the auth section of the gateway configuration.
type Config struct {
	// Mode is ModeKeys, ModeJWT or ModeLocal; "" means ModeKeys, the one
	// that trusts nothing without a credential.
	Mode string
	// JWT is required in jwt mode and ignored otherwise.
	JWT *JWTConfig
	// OAuth is required in oauth mode and ignored otherwise.
	OAuth *OAuthConfig
	// ClientCerts accepts a TLS client certificate that the listener
	// verified against its client CA (mutual TLS) as the credential of a
	// request that carries no other: see [CertIdentity].
	ClientCerts bool
	// AdminKey is the SWITCHBOARD_ADMIN_KEY value: a bearer equal to it is
	// the admin (ID "admin-key"), in every mode. "" disables it.
	AdminKey string
}

// Options are the optional dependencies of [New]; nil means all defaults.
type Options struct {
	Logger *slog.Logger     // nil = discard
	Clock  func() time.Time // nil = time.Now; used for key expiry, token validity and the JWKS rate limit
	// CacheTTL is how long a key lookup is cached, sparing the store a query
	// per request; 0 = 30s, negative disables. Call Forget after a revoke.
	CacheTTL time.Duration
}

// Error is an authentication failure: the front door answers it with 401.
// Reason is safe to show the caller; it never contains the credential.
type Error struct {
	Code   string // CodeMissing, CodeInvalid, CodeExpired or CodeInsufficientScope
	Reason string
}

// Error returns Reason, so that the message a client sees is the one we
// wrote, never a library's.
func (e *Error) Error() string { return e.Reason }

func authErr(code, reason string) *Error { return &Error{Code: code, Reason: reason} }

// Authenticator checks credentials. It is safe for concurrent use; Close it
// to stop its JWKS refresher.
type Authenticator struct {
	mode     string
	certs    bool              // Config.ClientCerts
	adminSum [sha256.Size]byte // SHA-256 of AdminKey, so the compare is constant-time and length-blind
	hasAdmin bool
	keys     KeyStore
	jwt      *jwtVerifier   // nil unless jwt mode
	oauth    *oauthVerifier // nil unless oauth mode
	log      *slog.Logger
	clock    func() time.Time
	ttl      time.Duration // <= 0: no cache

	mu    sync.Mutex
	cache map[string]cacheEntry // by key hash

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

type cacheEntry struct {
	key   Key
	until time.Time
}

func (e cacheEntry) expiry() time.Time { return e.until }

// makeRoom readies a cache bounded by maxCacheEntries to take one more
// entry: when it is full, the entries expired by now go first, then
// arbitrary others until there is room.
func makeRoom[K comparable, E interface{ expiry() time.Time }](cache map[K]E, now time.Time) {
	if len(cache) < maxCacheEntries {
		return
	}
	for k, e := range cache {
		if !now.Before(e.expiry()) {
			delete(cache, k)
		}
	}
	for k := range cache {
		if len(cache) < maxCacheEntries {
			break
		}
		delete(cache, k)
	}
}

// New validates cfg and returns an Authenticator. keys may be nil outside
// keys mode (then only JWTs, the admin key and local callers get in). In
// jwt mode with a JWKSURL, the key set is fetched on first use and then
// refreshed in the background until Close.
func New(cfg Config, keys KeyStore, opts *Options) (*Authenticator, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = DefaultCacheTTL
	}
	a := &Authenticator{
		mode:  cfg.Mode,
		certs: cfg.ClientCerts,
		keys:  keys,
		log:   o.Logger,
		clock: o.Clock,
		ttl:   o.CacheTTL,
		cache: make(map[string]cacheEntry),
	}
	if a.mode == "" {
		a.mode = ModeKeys
	}
	switch a.mode {
	case ModeKeys:
		if keys == nil {
			return nil, errors.New("identity config: Mode keys needs a KeyStore")
		}
	case ModeLocal:
	case ModeJWT:
		if cfg.JWT == nil {
			return nil, errors.New("identity config: Mode jwt needs JWT settings")
		}
	case ModeOAuth:
		if cfg.OAuth == nil {
			return nil, errors.New("identity config: Mode oauth needs OAuth settings")
		}
		if keys == nil {
			return nil, errors.New("identity config: Mode oauth needs a KeyStore")
		}
	default:
		return nil, fmt.Errorf("identity config: Mode %q is not one of %q, %q, %q, %q", cfg.Mode, ModeKeys, ModeJWT, ModeOAuth, ModeLocal)
	}
	if cfg.AdminKey != "" {
		a.adminSum = sha256.Sum256([]byte(cfg.AdminKey))
		a.hasAdmin = true
	}
	var v *jwtVerifier
	switch a.mode {
	case ModeJWT:
		jc := *cfg.JWT
		if err := validateJWT(&jc); err != nil {
			return nil, err
		}
		a.jwt = newJWTVerifier(jc, a.clock)
		v = a.jwt
	case ModeOAuth:
		oc := *cfg.OAuth
		if oc.Introspection != nil {
			in := *oc.Introspection
			oc.Introspection = &in
		}
		if err := validateOAuth(&oc); err != nil {
			return nil, err
		}
		a.oauth = newOAuthVerifier(oc, a.clock)
		v = a.oauth.jwt
	default:
		return a, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	if jc := v.cfg; jc.JWKSURL != "" || jc.KeySet != nil {
		v.jwks = &jwksCache{
			url:    jc.JWKSURL,
			source: jc.KeySet,
			client: jc.HTTPClient,
			log:    a.log,
			clock:  a.clock,
			ctx:    ctx,
			wg:     &a.wg,
		}
		a.wg.Go(func() { v.jwks.run(jc.JWKSRefresh) })
	}
	return a, nil
}

// validateJWT checks jc and fills its defaults in place.
func validateJWT(jc *JWTConfig) error {
	switch {
	case jc.Secret == "" && jc.JWKSURL == "" && jc.KeySet == nil:
		return errors.New("identity config: JWT needs Secret or JWKSURL")
	case jc.Secret != "" && jc.JWKSURL != "":
		return errors.New("identity config: JWT.Secret and JWT.JWKSURL are both set; choose one")
	case jc.KeySet != nil && (jc.Secret != "" || jc.JWKSURL != ""):
		return errors.New("identity config: JWT.KeySet excludes Secret and JWKSURL")
	case jc.Secret != "" && len(jc.Secret) < minSecretLen:
		return fmt.Errorf("identity config: JWT.Secret is shorter than %d bytes", minSecretLen)
	}
	if jc.JWKSURL != "" {
		u, err := url.Parse(jc.JWKSURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("identity config: JWT.JWKSURL %q is not an http(s) URL", jc.JWKSURL)
		}
	}
	if jc.Leeway < 0 {
		return fmt.Errorf("identity config: JWT.Leeway %v is negative", jc.Leeway)
	}
	if jc.JWKSRefresh < 0 {
		return fmt.Errorf("identity config: JWT.JWKSRefresh %v is negative", jc.JWKSRefresh)
	}
	if jc.Leeway == 0 {
		jc.Leeway = DefaultLeeway
	}
	if jc.JWKSRefresh == 0 {
		jc.JWKSRefresh = DefaultJWKSRefresh
	}
	if jc.HTTPClient == nil {
		jc.HTTPClient = &http.Client{Timeout: DefaultJWKSTimeout}
	}
	fillClaimDefaults(jc)
	return nil
}

// fillClaimDefaults names seed 003's claims where jc names none.
func fillClaimDefaults(jc *JWTConfig) {
	for _, c := range []struct {
		p   *string
		def string
	}{
		{&jc.AgentClaim, "sub"},
		{&jc.RolesClaim, "roles"},
		{&jc.WorkspaceClaim, "workspace"},
		{&jc.AllowClaim, "mcpServerAllowIds"},
		{&jc.DenyClaim, "mcpServerDenyIds"},
		{&jc.AdminClaim, "isAdmin"},
	} {
		if *c.p == "" {
			*c.p = c.def
		}
	}
}

// Close stops the JWKS refresher, if any, and waits for it. It is safe to
// call more than once.
func (a *Authenticator) Close() {
	a.closeOnce.Do(func() {
		if a.jwt != nil && a.jwt.jwks != nil {
			a.jwt.jwks.close()
		}
		if a.oauth != nil && a.oauth.jwt.jwks != nil {
			a.oauth.jwt.jwks.close()
		}
		if a.cancel != nil {
			a.cancel()
		}
		a.wg.Wait()
	})
}

// Authenticate authenticates an HTTP request from its Authorization: Bearer
// header or, for clients that cannot set that, its X-API-Key header. An
// *Error means 401; any other error (wrapping ErrUnavailable) means the
// gateway could not check the credential.
func (a *Authenticator) Authenticate(r *http.Request) (authz.Identity, error) {
	bearer, present, err := credential(r)
	if err != nil {
		a.fail("header", err)
		return authz.Identity{}, err
	}
	if !present {
		// A bearer, when sent, wins: a caller behind a client certificate
		// (a proxy, a sidecar) may act for several agents.
		if a.certs && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			id, err := CertIdentity(r.TLS.VerifiedChains[0][0])
			if err != nil {
				a.fail("mtls", err)
				return authz.Identity{}, err
			}
			a.log.Debug("authenticated", "method", "mtls", "identity", id.ID)
			return id, nil
		}
		if a.mode == ModeLocal && IsLoopback(r) {
			return authz.LocalAdmin(), nil
		}
		err := authErr(CodeMissing, "no credentials: send Authorization: Bearer <key or token>")
		a.fail("none", err)
		return authz.Identity{}, err
	}
	var t target
	if a.oauth != nil {
		t = a.target(r)
	}
	return a.authenticateBearer(r.Context(), bearer, t)
}

// credential extracts the bearer. present is false only when the request
// carries no credential at all.
func credential(r *http.Request) (bearer string, present bool, err error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
		if strings.EqualFold(scheme, "Bearer") {
			tok := strings.TrimSpace(rest)
			if tok == "" {
				return "", true, authErr(CodeInvalid, "empty bearer token")
			}
			return tok, true, nil
		}
		if r.Header.Get("X-API-Key") == "" {
			return "", true, authErr(CodeInvalid, "unsupported authorization scheme: use Bearer")
		}
	}
	if h := r.Header.Get("X-API-Key"); h != "" {
		tok := strings.TrimSpace(h)
		if tok == "" {
			return "", true, authErr(CodeInvalid, "empty X-API-Key")
		}
		return tok, true, nil
	}
	return "", false, nil
}

// AuthenticateToken authenticates a bearer credential for callers that are
// not HTTP requests. An empty bearer is missing_credentials; there is no
// local-mode shortcut here because there is no remote address to check.
//
// In oauth mode the token's audience must be the gateway as a whole (the
// configured resource), as there is no request path to name a resource.
func (a *Authenticator) AuthenticateToken(ctx context.Context, bearer string) (authz.Identity, error) {
	var t target
	if a.oauth != nil {
		t.base = a.oauth.resource
	}
	return a.authenticateBearer(ctx, bearer, t)
}

func (a *Authenticator) authenticateBearer(ctx context.Context, bearer string, t target) (authz.Identity, error) {
	if bearer == "" {
		err := authErr(CodeMissing, "no credentials")
		a.fail("none", err)
		return authz.Identity{}, err
	}
	if a.hasAdmin {
		sum := sha256.Sum256([]byte(bearer))
		if subtle.ConstantTimeCompare(sum[:], a.adminSum[:]) == 1 {
			id := authz.Identity{ID: "admin-key", AgentID: "admin", Admin: true, Method: "key"}
			a.log.Debug("authenticated", "method", "admin-key", "identity", id.ID)
			return id, nil
		}
	}
	if a.oauth != nil && !strings.HasPrefix(bearer, SecretPrefix) {
		// API keys keep working for machine callers; everything else is an
		// access token.
		id, err := a.oauth.verify(ctx, bearer, t)
		if err != nil {
			a.fail("oauth", err)
			return authz.Identity{}, err
		}
		a.log.Debug("authenticated", "method", "oauth", "identity", id.ID, "agent", id.AgentID)
		return id, nil
	}
	if a.jwt != nil && strings.Count(bearer, ".") == 2 {
		id, err := a.jwt.verify(ctx, bearer)
		if err != nil {
			a.fail("jwt", err)
			return authz.Identity{}, err
		}
		a.log.Debug("authenticated", "method", "jwt", "identity", id.ID, "agent", id.AgentID)
		return id, nil
	}
	id, err := a.authenticateKey(ctx, bearer)
	if err != nil {
		a.fail("key", err)
		return authz.Identity{}, err
	}
	a.log.Debug("authenticated", "method", "key", "identity", id.ID, "agent", id.AgentID)
	return id, nil
}

func (a *Authenticator) authenticateKey(ctx context.Context, secret string) (authz.Identity, error) {
	hash := HashSecret(secret)
	k, ok, err := a.cachedKey(ctx, hash)
	if err != nil {
		return authz.Identity{}, err
	}
	if !ok {
		return authz.Identity{}, authErr(CodeInvalid, "unknown API key")
	}
	if k.RevokedAt != nil {
		return authz.Identity{}, authErr(CodeInvalid, "API key "+k.ID+" is revoked")
	}
	if k.ExpiresAt != nil && !a.clock().Before(*k.ExpiresAt) {
		return authz.Identity{}, authErr(CodeExpired, "API key "+k.ID+" has expired")
	}
	return k.Identity(), nil
}

// cachedKey looks hash up in the cache, then in the store. Only found keys
// are cached: an unknown hash is almost always a typo or a guess, and caching
// those would let garbage evict good entries.
func (a *Authenticator) cachedKey(ctx context.Context, hash string) (Key, bool, error) {
	if a.ttl > 0 {
		a.mu.Lock()
		e, ok := a.cache[hash]
		a.mu.Unlock()
		if ok && a.clock().Before(e.until) {
			return e.key, true, nil
		}
	}
	k, ok, err := lookupKey(ctx, a.keys, hash)
	if err != nil || !ok || a.ttl <= 0 {
		return k, ok, err
	}
	now := a.clock()
	a.mu.Lock()
	defer a.mu.Unlock()
	makeRoom(a.cache, now)
	a.cache[hash] = cacheEntry{key: k, until: now.Add(a.ttl)}
	return k, true, nil
}

// Forget drops a cached key, so that a revoke takes effect at once instead
// of after the cache TTL.
func (a *Authenticator) Forget(hash string) {
	a.mu.Lock()
	delete(a.cache, hash)
	a.mu.Unlock()
}

// ForgetAll drops every cached key, so the next use of each is checked
// against the store again (after changes this process may have missed).
func (a *Authenticator) ForgetAll() {
	a.mu.Lock()
	clear(a.cache)
	a.mu.Unlock()
}

// fail logs a failed attempt at debug level: the code and reason, never
// the credential.
func (a *Authenticator) fail(method string, err error) {
	var ae *Error
	if errors.As(err, &ae) {
		a.log.Debug("authentication failed", "method", method, "code", ae.Code, "reason", ae.Reason)
		return
	}
	a.log.Warn("authentication could not be checked", "method", method, "err", err)
}

// IsLoopback reports whether the request's direct peer is on this machine
// (127.0.0.0/8 or ::1). X-Forwarded-For is ignored on purpose: it is
// whatever the client says.
func IsLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return addr.Unmap().IsLoopback()
}
