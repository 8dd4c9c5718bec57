package identity

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

// MetadataPath is where the protected resource metadata (RFC 9728) of the
// gateway lives; the document of a resource with a path is at this path
// followed by the resource's path.
const MetadataPath = "/.well-known/oauth-protected-resource"

// DefaultIntrospectionCache is how long an active introspection answer is
// reused when [IntrospectionConfig.CacheTTL] is 0: short, because a revoked
// token keeps working until its entry expires.
const DefaultIntrospectionCache = 30 * time.Second

// introspectionMaxBytes bounds an introspection response.
const introspectionMaxBytes = 1 << 20

// OAuthConfig configures mode oauth: the gateway as an OAuth 2.1 resource
// server (MCP authorization, 2025-11-25) for access tokens an external
// authorization server issues.
type OAuthConfig struct {
	// Resource is the canonical URL of the gateway, scheme://host[:port]
	// without a path: the audience every accepted token must carry (RFC
	// 8707), and the base of the metadata documents. "" derives it from
	// each request (its Host, https when the connection is TLS), which only
	// a loopback listener may do: behind a proxy the gateway cannot know
	// the name its clients use.
	Resource string
	// Token carries the issuer (required: every token's iss must equal it),
	// the JWKS URL for JWT access tokens, the leeway and the claim names.
	// Its Secret and Audience must be empty: audiences are Resource's.
	Token JWTConfig
	// Introspection, when set, checks tokens that are not JWTs, or every
	// token when Token.JWKSURL is empty (RFC 7662).
	Introspection *IntrospectionConfig
	// Scopes must all be granted to every token (403 insufficient_scope
	// otherwise); they are also the scope of the 401 challenge.
	Scopes []string
	// ScopeRoles gives a token granted a scope (the key) a role (the value).
	ScopeRoles map[string]string
	// Check, when set, is asked about every token that passed the other
	// checks, with its claims: the built-in authorization server refuses
	// there the tokens of a grant it revoked. It returns nil to accept, an
	// *Error to refuse (401 with its reason), or an error wrapping
	// ErrUnavailable when it cannot tell.
	Check func(ctx context.Context, claims map[string]any) error
}

// IntrospectionConfig is an RFC 7662 token introspection endpoint.
type IntrospectionConfig struct {
	URL          string
	ClientID     string        // sent with ClientSecret as HTTP Basic credentials
	ClientSecret string        // the value, not an env name
	CacheTTL     time.Duration // 0 = 30s, negative disables; never beyond the token's exp
	HTTPClient   *http.Client  // nil = Token.HTTPClient
}

// oauthVerifier checks access tokens against this resource.
type oauthVerifier struct {
	resource   string
	issuer     string
	jwt        *jwtVerifier // claim mapping always; parse only with jwks set
	intro      *introspector
	scopes     []string
	scopeRoles map[string]string
	check      func(ctx context.Context, claims map[string]any) error
	clock      func() time.Time
	leeway     time.Duration
}

// validateOAuth checks oc and fills its defaults in place.
func validateOAuth(oc *OAuthConfig) error {
	if oc.Resource != "" {
		if err := checkResource(oc.Resource); err != nil {
			return fmt.Errorf("identity config: OAuth.Resource: %w", err)
		}
		oc.Resource = strings.TrimSuffix(oc.Resource, "/")
	}
	tc := &oc.Token
	switch {
	case tc.Issuer == "":
		return errors.New("identity config: OAuth.Token.Issuer is required")
	case tc.Secret != "" || tc.Audience != "":
		return errors.New("identity config: OAuth.Token takes no Secret or Audience (the audience is the resource)")
	case tc.JWKSURL == "" && tc.KeySet == nil && oc.Introspection == nil:
		return errors.New("identity config: OAuth needs Token.JWKSURL or Introspection")
	}
	if tc.JWKSURL != "" || tc.KeySet != nil {
		if err := validateJWT(tc); err != nil {
			return err
		}
	} else {
		// validateJWT insists on a key source; the rest of its defaults
		// still apply.
		tc.JWKSURL = "http://unused"
		err := validateJWT(tc)
		tc.JWKSURL = ""
		if err != nil {
			return err
		}
	}
	if in := oc.Introspection; in != nil {
		u, err := url.Parse(in.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("identity config: OAuth.Introspection.URL %q is not an http(s) URL", in.URL)
		}
		if in.CacheTTL == 0 {
			in.CacheTTL = DefaultIntrospectionCache
		}
		if in.HTTPClient == nil {
			in.HTTPClient = tc.HTTPClient
		}
	}
	return nil
}

// checkResource accepts an http(s) origin: a path would put the metadata
// where the gateway does not serve it.
func checkResource(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		return fmt.Errorf("%q is not an http(s) URL", s)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("%q must be an origin (scheme://host[:port]) without path, query or credentials", s)
	}
	return nil
}

func newOAuthVerifier(oc OAuthConfig, clock func() time.Time) *oauthVerifier {
	v := &oauthVerifier{
		resource:   oc.Resource,
		issuer:     oc.Token.Issuer,
		jwt:        newJWTVerifier(oc.Token, clock),
		scopes:     oc.Scopes,
		scopeRoles: oc.ScopeRoles,
		check:      oc.Check,
		clock:      clock,
		leeway:     oc.Token.Leeway,
	}
	if in := oc.Introspection; in != nil {
		v.intro = &introspector{cfg: *in, clock: clock, cache: map[[sha256.Size]byte]introEntry{}}
	}
	return v
}

// target is the resource a request is for.
type target struct {
	base string // the gateway's canonical URL for this request
	path string // the resource's path ("" for the gateway as a whole)
}

// audiences are the token audiences accepted at t: the gateway as a whole,
// and the resource itself. REST and metrics (no resource path) also accept
// tokens for /mcp, which covers the same catalog.
func (t target) audiences() []string {
	if t.path == "" {
		return []string{t.base, t.base + "/mcp"}
	}
	return []string{t.base, t.base + t.path}
}

// ResourcePath returns the path of the protected resource a request path
// belongs to: "/mcp", "/sse", "/servers/{name}/mcp", "/servers/{name}/sse",
// or "" for every other route (the REST API), whose resource is the gateway
// itself.
func ResourcePath(p string) string {
	switch {
	case p == "/mcp" || p == "/sse":
		return p
	case strings.HasPrefix(p, "/servers/") && (strings.HasSuffix(p, "/mcp") || strings.HasSuffix(p, "/sse")):
		name := p[len("/servers/") : len(p)-len("/mcp")]
		if name != "" && !strings.Contains(name, "/") {
			return p
		}
	}
	return ""
}

// target returns the resource r is for.
func (a *Authenticator) target(r *http.Request) target {
	return target{base: a.resourceBase(r), path: ResourcePath(r.URL.Path)}
}

// resourceBase is the configured canonical URL, or the one r was sent to.
func (a *Authenticator) resourceBase(r *http.Request) string {
	if a.oauth.resource != "" {
		return a.oauth.resource
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// verify checks an access token for t and maps it to an identity.
func (v *oauthVerifier) verify(ctx context.Context, token string, t target) (authz.Identity, error) {
	var claims jwt.MapClaims
	var err error
	switch {
	case v.jwt.jwks != nil && strings.Count(token, ".") == 2:
		claims, err = v.jwt.parse(ctx, token)
	case v.intro != nil:
		claims, err = v.intro.introspect(ctx, token)
		if err == nil {
			err = v.checkIntrospected(claims)
		}
	default:
		err = authErr(CodeInvalid, "token is not a JWT, and no introspection endpoint is configured for opaque tokens")
	}
	if err != nil {
		return authz.Identity{}, err
	}
	if t.base == "" {
		return authz.Identity{}, authErr(CodeInvalid, "no resource is known to check the token's audience against")
	}
	aud, err := claims.GetAudience()
	if err != nil {
		return authz.Identity{}, authErr(CodeInvalid, "token claim aud must be a string or a list of strings")
	}
	want := t.audiences()
	if !slices.ContainsFunc(want, func(w string) bool { return oauthex.MatchesResource(aud, w) }) {
		if len(aud) == 0 {
			return authz.Identity{}, authErr(CodeInvalid, "token has no aud claim: it must be issued for resource "+want[len(want)-1])
		}
		return authz.Identity{}, authErr(CodeInvalid, "token was issued for another resource, not "+want[len(want)-1])
	}
	id, err := v.jwt.identity(claims)
	if err != nil {
		return authz.Identity{}, err
	}
	id.Method = "oauth"
	granted, err := scopeClaim(claims)
	if err != nil {
		return authz.Identity{}, err
	}
	for _, s := range v.scopes {
		if !slices.Contains(granted, s) {
			return authz.Identity{}, authErr(CodeInsufficientScope, "token lacks the scope "+s)
		}
	}
	for _, s := range granted {
		if role, ok := v.scopeRoles[s]; ok && !slices.Contains(id.Roles, role) {
			id.Roles = append(id.Roles, role)
		}
	}
	if v.check != nil {
		if err := v.check(ctx, claims); err != nil {
			var ae *Error
			if errors.As(err, &ae) || errors.Is(err, ErrUnavailable) {
				return authz.Identity{}, err
			}
			return authz.Identity{}, fmt.Errorf("%w: check token: %w", ErrUnavailable, err)
		}
	}
	return id, nil
}

// checkIntrospected applies to an introspection answer the checks a JWT
// parser applies to a token: issuer and expiry. Both claims are optional in
// RFC 7662; an absent iss is the configured issuer's (it answered).
func (v *oauthVerifier) checkIntrospected(c jwt.MapClaims) error {
	switch iss := c["iss"].(type) {
	case nil:
	case string:
		if iss != v.issuer {
			return authErr(CodeInvalid, "token has the wrong issuer")
		}
	default:
		return wrongType("iss", "a string")
	}
	exp, err := c.GetExpirationTime()
	if err != nil {
		return wrongType("exp", "a number")
	}
	if exp != nil && !v.clock().Before(exp.Add(v.leeway)) {
		return authErr(CodeExpired, "token has expired")
	}
	return nil
}

// scopeClaim reads the granted scopes: "scope" (RFC 9068, space-separated)
// or "scp" (a list, as Entra ID and Okta issue it).
func scopeClaim(c jwt.MapClaims) ([]string, error) {
	if _, ok := c["scope"]; ok {
		return listClaim(c, "scope")
	}
	return listClaim(c, "scp")
}

// introspector asks the authorization server about opaque tokens and keeps
// active answers for a short time, keyed by the token's hash.
type introspector struct {
	cfg   IntrospectionConfig
	clock func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]introEntry
}

type introEntry struct {
	claims jwt.MapClaims // never modified once cached
	until  time.Time
}

func (e introEntry) expiry() time.Time { return e.until }

func (in *introspector) introspect(ctx context.Context, token string) (jwt.MapClaims, error) {
	sum := sha256.Sum256([]byte(token))
	now := in.clock()
	in.mu.Lock()
	e, ok := in.cache[sum]
	in.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.claims, nil
	}
	claims, err := in.ask(ctx, token)
	if err != nil {
		return nil, err
	}
	if active, _ := claims["active"].(bool); !active {
		// Not cached: an unknown token is usually a guess, and caching those
		// would let garbage evict good entries.
		return nil, authErr(CodeInvalid, "token is not active")
	}
	if in.cfg.CacheTTL < 0 {
		return claims, nil
	}
	until := now.Add(in.cfg.CacheTTL)
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil && exp.Before(until) {
		until = exp.Time
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	makeRoom(in.cache, now)
	in.cache[sum] = introEntry{claims: claims, until: until}
	return claims, nil
}

// ask posts the token to the endpoint. A failure of the endpoint is
// ErrUnavailable (503), not the caller's fault.
func (in *introspector) ask(ctx context.Context, token string) (jwt.MapClaims, error) {
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.cfg.URL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("%w: introspection request: %w", ErrUnavailable, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if in.cfg.ClientID != "" {
		// RFC 6749 §2.3.1: form-encode both before Basic encoding.
		req.SetBasicAuth(url.QueryEscape(in.cfg.ClientID), url.QueryEscape(in.cfg.ClientSecret))
	}
	resp, err := in.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: introspection: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: introspection: status %s", ErrUnavailable, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, introspectionMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: introspection: read body: %w", ErrUnavailable, err)
	}
	if len(body) > introspectionMaxBytes {
		return nil, fmt.Errorf("%w: introspection: body larger than %d bytes", ErrUnavailable, introspectionMaxBytes)
	}
	claims := jwt.MapClaims{}
	if err := json.Unmarshal(body, &claims); err != nil {
		return nil, fmt.Errorf("%w: introspection: decode: %w", ErrUnavailable, err)
	}
	return claims, nil
}

// OAuth reports whether the authenticator is an OAuth resource server, so
// the front door serves the metadata documents.
func (a *Authenticator) OAuth() bool { return a.oauth != nil }

// Status is the HTTP status for an authentication failure: 403 for a valid
// token without a required scope, 401 for the rest.
func Status(e *Error) int {
	if e.Code == CodeInsufficientScope {
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}

// Challenge returns the WWW-Authenticate value that answers a refusal of r
// with e. In oauth mode it points the client at the resource's metadata
// (RFC 9728 §5.1) and names the scopes it needs, so an MCP client can start
// the authorization flow by itself.
func (a *Authenticator) Challenge(r *http.Request, e *Error) string {
	if a.oauth == nil {
		return `Bearer realm="switchboard"`
	}
	t := a.target(r)
	params := []string{fmt.Sprintf("resource_metadata=%q", t.base+MetadataPath+t.path)}
	if len(a.oauth.scopes) > 0 {
		params = append(params, fmt.Sprintf("scope=%q", strings.Join(a.oauth.scopes, " ")))
	}
	switch e.Code {
	case CodeInvalid, CodeExpired:
		// RFC 6750 §3.1: no error code when the request had no credential.
		params = append(params, `error="invalid_token"`)
	case CodeInsufficientScope:
		params = append(params, `error="insufficient_scope"`)
	}
	return "Bearer " + strings.Join(params, ", ")
}

// MetadataHandler serves the protected resource metadata (RFC 9728) of the
// gateway at [MetadataPath], and of each MCP endpoint at [MetadataPath]
// followed by the endpoint's path. It is nil outside oauth mode. The
// documents are public: clients fetch them before they hold a token.
func (a *Authenticator) MetadataHandler() http.Handler {
	if a.oauth == nil {
		return nil
	}
	scopes := slices.Clone(a.oauth.scopes)
	for s := range a.oauth.scopeRoles {
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	sort.Strings(scopes[len(a.oauth.scopes):])
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, MetadataPath)
		if !ok || (rest != "" && ResourcePath(rest) != rest) {
			http.NotFound(w, r)
			return
		}
		base := a.resourceBase(r)
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               base + rest,
			AuthorizationServers:   []string{a.oauth.issuer},
			ScopesSupported:        scopes,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "switchboard MCP gateway",
		}).ServeHTTP(w, r)
	})
}
