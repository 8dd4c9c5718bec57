// Package authserver is the gateway's built-in OAuth 2.1 authorization
// server, for organisations whose identity provider cannot register MCP
// clients: the clients see switchboard as their authorization server, and
// the user signs in through the organisation's OIDC provider (authorization
// code + PKCE to the provider) or, with no provider configured, with an API
// key as on the dashboard.
//
// It serves the metadata (RFC 8414 and OpenID discovery), the authorization
// endpoint with a consent page, the token endpoint (authorization_code with
// PKCE S256 only; refresh_token with rotation and reuse detection that
// revokes the whole grant), revocation (RFC 7009), dynamic client
// registration (RFC 7591) and client ID metadata documents. Access tokens
// are JWTs signed with keys that are generated, rotated with overlap and
// stored sealed; the resource server (package identity) verifies them with
// [Server.KeySet] and asks [Server.CheckToken] whether their grant still
// stands.
//
// All state lives in the store, so any replica serves any step of a flow.
// Client secrets, codes and refresh tokens are stored only as hashes, the
// signing keys sealed with the secrets keyring; none of them is logged.
package authserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// Paths the server answers. The metadata documents are at the issuer's
// well-known locations (the issuer has no path); everything else is under
// /oauth/.
const (
	PathMetadata      = "/.well-known/oauth-authorization-server"
	PathOpenIDConfig  = "/.well-known/openid-configuration"
	PathAuthorize     = "/oauth/authorize"
	PathSignIn        = "/oauth/signin"
	PathConsent       = "/oauth/consent"
	PathCallback      = "/oauth/callback"
	PathToken         = "/oauth/token"
	PathRevoke        = "/oauth/revoke"
	PathRegister      = "/oauth/register"
	PathJWKS          = "/oauth/jwks"
	notifyGrants      = "oauth_grants" // store channel: a revoked grant's ID
	defaultClientName = "an unnamed application"
)

// Registration modes of [RegistrationConfig].
const (
	// RegistrationOpen lets any client register (RFC 7591 open registration).
	RegistrationOpen = "open"
	// RegistrationToken requires the initial access token as a bearer.
	RegistrationToken = "token"
	// RegistrationOff disables dynamic registration; clients use client ID
	// metadata documents.
	RegistrationOff = "off"
)

// Defaults of the zero values in [Config].
const (
	DefaultAccessTokenTTL  = time.Hour
	DefaultRefreshTokenTTL = 30 * 24 * time.Hour
	DefaultCodeTTL         = 2 * time.Minute
	DefaultRequestTTL      = 10 * time.Minute
	DefaultKeyRotation     = 30 * 24 * time.Hour
	DefaultKeyLead         = time.Hour
	DefaultGrantKeep       = 30 * 24 * time.Hour
	DefaultMaxClients      = 10000
	DefaultDocumentTTL     = time.Hour
)

// Config is the authorization server's configuration: what the gateway's
// configuration file says about it. Zero values mean the defaults above.
type Config struct {
	// Issuer is the gateway's canonical URL, scheme://host[:port] without a
	// path (required): the issuer of every token, and the origin of every
	// resource a token may be for (the gateway, /mcp, /sse,
	// /servers/{name}/mcp|sse).
	Issuer string
	// Scopes are the scopes the server grants (scopes_supported); nil means
	// ["mcp"].
	Scopes []string
	// DefaultScopes are granted when a client asks for none; nil means
	// Scopes.
	DefaultScopes []string
	// ScopeRoles maps a scope to the role it gives on the resource server
	// (identity's ScopeRoles). Such a scope is granted only to a user who
	// has the role already, or is an admin: a consent must not raise a
	// user's privileges.
	ScopeRoles map[string]string

	AccessTokenTTL  time.Duration // 0 = 1h
	RefreshTokenTTL time.Duration // 0 = 30 days, from each rotation
	CodeTTL         time.Duration // 0 = 2 min
	RequestTTL      time.Duration // sign-in and consent must finish within it; 0 = 10 min
	// KeyRotation is how long a signing key signs; its successor is
	// published KeyLead before it takes over, and a retired key stays
	// published until its last token has expired.
	KeyRotation time.Duration // 0 = 30 days
	KeyLead     time.Duration // 0 = 1h
	// GrantKeep is how long revoked and expired grants stay listed.
	GrantKeep time.Duration // 0 = 30 days

	Registration RegistrationConfig
	// DisableMetadataDocuments refuses client IDs that are URLs of client
	// ID metadata documents.
	DisableMetadataDocuments bool
	// DocumentTTL bounds how long a fetched metadata document is used
	// before it is fetched again; 0 = 1h (less when its Cache-Control says).
	DocumentTTL time.Duration

	// Upstream signs users in at an OIDC provider; nil signs them in with
	// an API key ([Options.SignIn]).
	Upstream *UpstreamConfig
}

// RegistrationConfig configures dynamic client registration (RFC 7591).
type RegistrationConfig struct {
	// Mode is RegistrationOpen (""), RegistrationToken or RegistrationOff.
	Mode string
	// InitialAccessToken is the bearer RegistrationToken mode requires
	// (the value, not an environment variable's name).
	InitialAccessToken string
	// MaxClients caps the dynamically registered clients, so that open
	// registration cannot fill the store; 0 = 10000.
	MaxClients int
}

// Options are the optional dependencies of [New]; nil means all defaults.
type Options struct {
	Logger *slog.Logger     // nil = discard
	Clock  func() time.Time // nil = time.Now
	// HTTPClient fetches client ID metadata documents and talks to the
	// upstream OIDC provider. It must apply the gateway's SSRF rules: nil
	// means a client guarded by netguard's default policy, 10 s timeout.
	HTTPClient *http.Client
	// SignIn checks the API key a user signs in with when no upstream
	// provider is configured, and returns who it is (the app passes the
	// authenticator's AuthenticateToken). nil disables that sign-in.
	SignIn func(ctx context.Context, key string) (authz.Identity, error)
}

// Server is the authorization server. It is safe for concurrent use; its
// background work runs in [Server.Run].
type Server struct {
	db     *store.DB
	seal   *secrets.Keyring
	cfg    Config
	log    *slog.Logger
	clock  func() time.Time
	httpc  *http.Client
	signIn func(ctx context.Context, key string) (authz.Identity, error)
	origin *url.URL // parsed Issuer
	secure bool     // Issuer is https: cookies are Secure and __Host-

	keys     *keyCache
	grants   *grantCache
	upstream *upstream // nil without Config.Upstream

	mu       sync.Mutex
	docFetch map[string]*docCall // in-flight metadata document fetches

	listening     chan struct{} // closed once Run listens for revocations
	listeningOnce sync.Once
}

// New validates cfg and returns a server on db. seal seals the signing
// keys and the upstream sign-in's verifier; it is required, since a signing
// key stored in clear would let anyone with the database mint tokens.
func New(db *store.DB, seal *secrets.Keyring, cfg Config, opts *Options) (*Server, error) {
	if db == nil {
		return nil, errors.New("authserver: no store")
	}
	if seal == nil {
		return nil, fmt.Errorf("authserver: signing keys are stored sealed: %w", secrets.ErrNoKey)
	}
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
	if o.HTTPClient == nil {
		g, err := netguard.New(netguard.Policy{}, nil)
		if err != nil {
			return nil, fmt.Errorf("authserver: %w", err)
		}
		o.HTTPClient = g.Client(10 * time.Second)
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if cfg.Upstream == nil && o.SignIn == nil {
		return nil, errors.New("authserver config: users cannot sign in: configure an upstream OIDC provider or pass Options.SignIn")
	}
	origin, _ := url.Parse(cfg.Issuer) // checked by fill
	s := &Server{
		db: db, seal: seal, cfg: cfg, log: o.Logger, clock: o.Clock, httpc: o.HTTPClient, signIn: o.SignIn,
		origin: origin, secure: origin.Scheme == "https", docFetch: map[string]*docCall{},
		listening: make(chan struct{}),
	}
	s.keys = newKeyCache(s)
	s.grants = &grantCache{entries: map[string]grantEntry{}}
	if cfg.Upstream != nil {
		s.upstream = &upstream{cfg: *cfg.Upstream, s: s}
	}
	return s, nil
}

// fill checks c and fills its defaults in place.
func (c *Config) fill() error {
	u, err := url.Parse(c.Issuer)
	switch {
	case c.Issuer == "":
		return errors.New("authserver config: Issuer (the gateway's canonical URL) is required")
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		return fmt.Errorf("authserver config: Issuer %q is not an http(s) URL", c.Issuer)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("authserver config: Issuer %q must be an origin (scheme://host[:port])", c.Issuer)
	case u.Scheme == "http" && !isLoopbackHost(u.Hostname()):
		return fmt.Errorf("authserver config: Issuer %q must be https (plain http only on a loopback address)", c.Issuer)
	}
	c.Issuer = u.Scheme + "://" + u.Host
	if c.Scopes == nil {
		c.Scopes = []string{"mcp"}
	}
	for _, sc := range c.Scopes {
		if !validScopeToken(sc) {
			return fmt.Errorf("authserver config: scope %q is not a valid scope token", sc)
		}
	}
	if c.DefaultScopes == nil {
		c.DefaultScopes = c.Scopes
	}
	for _, sc := range c.DefaultScopes {
		if !slices.Contains(c.Scopes, sc) {
			return fmt.Errorf("authserver config: default scope %q is not among Scopes", sc)
		}
	}
	for _, d := range []struct {
		p    *time.Duration
		def  time.Duration
		name string
	}{
		{&c.AccessTokenTTL, DefaultAccessTokenTTL, "AccessTokenTTL"},
		{&c.RefreshTokenTTL, DefaultRefreshTokenTTL, "RefreshTokenTTL"},
		{&c.CodeTTL, DefaultCodeTTL, "CodeTTL"},
		{&c.RequestTTL, DefaultRequestTTL, "RequestTTL"},
		{&c.KeyRotation, DefaultKeyRotation, "KeyRotation"},
		{&c.KeyLead, DefaultKeyLead, "KeyLead"},
		{&c.GrantKeep, DefaultGrantKeep, "GrantKeep"},
		{&c.DocumentTTL, DefaultDocumentTTL, "DocumentTTL"},
	} {
		if *d.p < 0 {
			return fmt.Errorf("authserver config: %s %v is negative", d.name, *d.p)
		}
		if *d.p == 0 {
			*d.p = d.def
		}
	}
	if c.KeyLead >= c.KeyRotation {
		return fmt.Errorf("authserver config: KeyLead %v must be shorter than KeyRotation %v", c.KeyLead, c.KeyRotation)
	}
	r := &c.Registration
	switch r.Mode {
	case "":
		r.Mode = RegistrationOpen
	case RegistrationOpen, RegistrationOff:
	case RegistrationToken:
		if len(r.InitialAccessToken) < 16 {
			return errors.New("authserver config: registration mode token needs an InitialAccessToken of at least 16 characters")
		}
	default:
		return fmt.Errorf("authserver config: registration mode %q is not one of open, token, off", r.Mode)
	}
	if r.MaxClients <= 0 {
		r.MaxClients = DefaultMaxClients
	}
	if c.Upstream != nil {
		up := *c.Upstream
		if err := up.fill(); err != nil {
			return err
		}
		c.Upstream = &up
	}
	return nil
}

// Handler serves every path of the server (the Path constants). Mount it
// outside the gateway's browser guard: the metadata, token, revocation,
// registration and key set endpoints are called cross-origin by
// browser-based clients, and the browser pages protect themselves (a
// cookie bound to the request, a CSRF token, an Origin check).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.Register(mux)
	return mux
}

// Register adds the server's routes to mux.
func (s *Server) Register(mux *http.ServeMux) {
	cors := func(h http.HandlerFunc) http.Handler { return allowCORS(h) }
	mux.Handle(PathMetadata, cors(s.serveMetadata))
	mux.Handle(PathOpenIDConfig, cors(s.serveOpenIDConfig))
	mux.Handle(PathJWKS, cors(s.serveJWKS))
	mux.Handle(PathToken, cors(s.serveToken))
	mux.Handle(PathRevoke, cors(s.serveRevoke))
	mux.Handle(PathRegister, cors(s.serveRegister))
	mux.HandleFunc(PathAuthorize, s.serveAuthorize)
	mux.HandleFunc(PathSignIn, s.serveSignIn)
	mux.HandleFunc(PathConsent, s.serveConsent)
	mux.HandleFunc(PathCallback, s.serveCallback)
}

// Run does the server's background work until ctx ends: it keeps a
// signing key ready (and its successor published ahead of time), purges
// expired state, and forgets cached grants that another replica revoked.
func (s *Server) Run(ctx context.Context) error {
	notes, err := s.db.Listen(ctx, notifyGrants)
	if err != nil {
		return fmt.Errorf("authserver: listening for revoked grants: %w", err)
	}
	s.listeningOnce.Do(func() { close(s.listening) })
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	s.maintain(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case n, ok := <-notes:
			if !ok {
				return nil
			}
			if n.Resync {
				s.grants.clear()
			} else {
				s.grants.forget(n.Payload)
			}
		case <-tick.C:
			s.maintain(ctx)
		}
	}
}

// maintain rotates keys and purges; failures are logged and retried on
// the next tick.
func (s *Server) maintain(ctx context.Context) {
	if _, err := s.keys.signer(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("OAuth signing key rotation failed", "err", err)
	}
	n, err := s.db.PurgeOAuth(ctx, s.clock(), s.cfg.GrantKeep)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("purging expired OAuth state failed", "err", err)
	} else if n > 0 {
		s.log.Debug("purged expired OAuth state", "rows", n)
	}
}

// url returns the absolute URL of one of the server's paths.
func (s *Server) url(path string) string { return s.cfg.Issuer + path }

// isLoopbackHost reports whether host names this machine.
func isLoopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// validScopeToken is RFC 6749's scope-token: printable ASCII without space,
// double quote or backslash.
func validScopeToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < 0x21 || r > 0x7e || r == '"' || r == '\\' {
			return false
		}
	}
	return true
}
