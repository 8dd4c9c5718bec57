// Package propagate forwards who the caller of a tool is to the upstream
// servers that ask for it (`servers.NAME.identity`, docs/auth.md "Identity
// propagation"): the gateway signs a short-lived JWT per request to the
// server, naming the caller, and publishes the keys that verify it at
// [JWKSPath]. The caller's own credential never leaves the gateway.
//
// The signing keys are ES256, sealed at rest with the secret keyring and
// shared by the replicas through the store (table
// upstream_signing_keys), rotated every [KeyRotation] with the successor
// published [KeyLead] before it signs: the schedule of the built-in
// authorization server's keys, on keys of their own so that an assertion
// can never pass for one of its access tokens.
package propagate

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/signkeys"
)

// JWKSPath is where the gateway publishes the keys its assertions are
// signed with (a JSON Web Key Set). Upstream servers fetch it without
// credentials, so it is outside the browser guard like the other OAuth
// routes.
const JWKSPath = "/oauth/upstream/jwks"

// AssertionType is the assertions' typ header: a verifier that checks it
// cannot take an assertion for another kind of token.
const AssertionType = "switchboard-identity+jwt"

// Options configure a [Signer].
type Options struct {
	// Store keeps the signing keys (required).
	Store Store
	// Keyring seals the private keys; nil makes every assertion fail with
	// an error saying that SWITCHBOARD_SECRET_KEY is needed.
	Keyring Sealer
	// Issuer is the assertions' iss: the gateway's public URL.
	Issuer string
	// Clock is the time; default time.Now.
	Clock func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
	// HTTPClient reaches the authorization servers of token_exchange
	// servers; default one with a 30 s timeout.
	HTTPClient *http.Client
}

// Signer signs identity assertions and serves their keys.
type Signer struct {
	ring   *signkeys.Ring
	clock  func() time.Time
	log    *slog.Logger
	issuer string
	sealed bool
	httpc  *http.Client

	exMu       sync.Mutex
	exchangers map[string]keyedExchanger // by server name
}

// New returns a Signer; it reads or creates no key until the first
// assertion or JWKS request.
func New(o Options) *Signer {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	log := o.Logger.With("component", "propagate")
	s := &Signer{issuer: o.Issuer, sealed: o.Keyring != nil, httpc: o.HTTPClient, exchangers: map[string]keyedExchanger{},
		clock: o.Clock, log: log}
	if s.sealed {
		s.ring = signkeys.New(signkeys.Options{List: o.Store.UpstreamSigningKeys, Create: o.Store.CreateUpstreamSigningKey,
			Seal: o.Keyring, Clock: o.Clock, Rotation: KeyRotation, Lead: KeyLead, Keep: maxAssertionTTL + keyLeeway,
			What: "identity signing key", Logger: log})
	}
	return s
}

// ErrNoKeyring is the error of an assertion on a gateway without a secret
// key: the private key could not be kept sealed.
var ErrNoKeyring = errors.New("identity propagation needs a secret key to seal its signing key: set SWITCHBOARD_SECRET_KEY")

// Assertion signs the assertion of id for audience, valid for ttl:
// iss the gateway, sub the caller's identity id, aud the audience, iat,
// nbf, exp, a unique jti, and the caller's agent_id, roles, workspace and
// auth_method when it has them.
func (s *Signer) Assertion(ctx context.Context, id authz.Identity, audience string, ttl time.Duration) (string, error) {
	if !s.sealed {
		return "", ErrNoKeyring
	}
	if id.ID == "" {
		return "", errors.New("no caller identity to assert")
	}
	k, err := s.ring.Signer(ctx)
	if err != nil {
		return "", err
	}
	now := s.clock()
	claims := jwt.MapClaims{
		"iss": s.issuer, "sub": id.ID, "aud": audience,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(ttl).Unix(),
		"jti": rand.Text(),
	}
	if id.AgentID != "" {
		claims["agent_id"] = id.AgentID
	}
	if len(id.Roles) > 0 {
		claims["roles"] = id.Roles
	}
	if id.Workspace != "" {
		claims["workspace"] = id.Workspace
	}
	if id.Method != "" {
		claims["auth_method"] = id.Method
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = k.Row.ID
	tok.Header["typ"] = AssertionType
	return tok.SignedString(k.Priv)
}

// For returns what adds the caller's identity to the requests of a server
// with an `identity` section (upstream.Options.Identity): the header and
// its value, an assertion or a token exchanged for one. nil for a server
// without one.
func (s *Signer) For(srv *config.Server) func(ctx context.Context, id authz.Identity) (string, string, error) {
	if srv == nil || srv.Identity == nil {
		return nil
	}
	switch srv.Identity.Propagate {
	case config.PropagateTokenExchange:
		return s.exchangerFor(srv).headerFor
	case config.PropagateAssertion:
	default:
		return nil
	}
	header := srv.Identity.IdentityHeader()
	aud := srv.Identity.Audience
	if aud == "" {
		aud = srv.URL
	}
	ttl := time.Duration(srv.Identity.TTLSeconds) * time.Second
	if ttl <= 0 {
		ttl = config.DefaultIdentityTTLSeconds * time.Second
	}
	return func(ctx context.Context, id authz.Identity) (string, string, error) {
		if id.ID == "" {
			return "", "", nil // the gateway's own request: nobody to assert
		}
		v, err := s.Assertion(ctx, id, aud, ttl)
		return header, v, err
	}
}

// KeySet returns the JWKS document published now, creating the first key
// if there is none (so that a verifier that fetches the keys before the
// first call finds one).
func (s *Signer) KeySet(ctx context.Context) ([]byte, error) {
	if !s.sealed {
		return signkeys.JWKS(nil, s.clock()) // no key can be kept: none is published
	}
	keys, err := s.ring.Load(ctx, false)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		if _, err := s.ring.Signer(ctx); err != nil {
			return nil, err
		}
		if keys, err = s.ring.Load(ctx, false); err != nil {
			return nil, err
		}
	}
	return signkeys.JWKS(keys, s.clock())
}

// ServeHTTP serves the JWKS document at [JWKSPath].
func (s *Signer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, `{"error":"use GET"}`, http.StatusMethodNotAllowed)
		return
	}
	doc, err := s.KeySet(r.Context())
	if err != nil {
		s.log.Warn("identity key set unavailable", "err", err)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":"temporarily_unavailable"}`)) //nolint:errcheck // the client went away
		return
	}
	// Short: a successor key must reach caches well within KeyLead.
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("Content-Type", "application/json")
	w.Write(doc) //nolint:errcheck // the client went away
}
