package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// AuthOAuth makes the gateway an OAuth 2.1 resource server (the MCP
// authorization spec): bearer access tokens from the authorization server
// of [Auth.OAuth], and API keys for machine callers.
const AuthOAuth = "oauth"

// maxIntrospectionCacheSeconds bounds auth.oauth.introspection.cache_seconds:
// a revoked token keeps working for as long as its answer is cached.
const maxIntrospectionCacheSeconds = 300

// OAuth is mode oauth's section (yaml auth.oauth): which authorization
// server issues the access tokens, how to check them, and the canonical URL
// they must be issued for.
type OAuth struct {
	// Resource is the gateway's canonical URL, scheme://host[:port] with no
	// path, as clients reach it: every token's audience must be it (or one
	// of its MCP endpoints). Required unless the gateway listens on
	// loopback, where it is taken from each request; always required
	// behind a proxy.
	Resource string `yaml:"resource"`
	// Issuer is the authorization server's issuer identifier: tokens' iss
	// must equal it, and the metadata names it in authorization_servers.
	Issuer string `yaml:"issuer"`
	// JWKSURL is the issuer's key set, for JWT access tokens (yaml jwks_url).
	JWKSURL string `yaml:"jwks_url"`
	// Introspection checks opaque access tokens (RFC 7662); nil when absent.
	Introspection *Introspection `yaml:"introspection,alloc"`
	// Scopes must all be granted to every token; a token without them gets
	// 403 insufficient_scope.
	Scopes []string `yaml:"scopes,omitempty,nonblank"`
	// ScopeRoles gives a token granted a scope (key) a role (value).
	ScopeRoles map[string]string `yaml:"scope_roles"`
	// Leeway is the clock skew tolerated on exp and nbf (default 30s).
	Leeway time.Duration `yaml:"leeway_seconds"`
	// Claims names the identity claims, as in mode jwt.
	Claims JWTClaims `yaml:"claims"`
	// Server configures the built-in authorization server, which runs when
	// no issuer is given (yaml server); nil means its defaults.
	Server *OAuthServer `yaml:"server,alloc"`
}

// BuiltIn reports whether the gateway runs its own authorization server:
// mode oauth with no external issuer.
func (o *OAuth) BuiltIn() bool { return o == nil || o.Issuer == "" }

// BuiltInServer is the built-in server's section; nil when there is none.
func (o *OAuth) BuiltInServer() *OAuthServer {
	if o == nil {
		return nil
	}
	return o.Server
}

// OAuthServer is the built-in authorization server's section (yaml
// auth.oauth.server). Zero values mean the defaults in parentheses.
type OAuthServer struct {
	// AccessTokenTTL is how long an access token is valid (3600 s).
	AccessTokenTTL time.Duration `yaml:"access_token_ttl_seconds"`
	// RefreshTokenTTL is how long a refresh token is valid from each
	// rotation (30 days).
	RefreshTokenTTL time.Duration `yaml:"refresh_token_ttl_seconds"`
	// KeyRotationDays is how long a signing key signs before its
	// successor takes over (30).
	KeyRotationDays int `yaml:"key_rotation_days"`
	// Registration is dynamic client registration: open, token (with
	// RegistrationToken) or off (open).
	Registration string `yaml:"registration"`
	// RegistrationToken is the initial access token registration needs in
	// mode token, normally a ${VAR} reference; kept unexpanded.
	RegistrationToken string `yaml:"registration_token"`
	// MaxClients caps the registered clients (10000).
	MaxClients int `yaml:"max_clients"`
	// ClientMetadataDocuments accepts client IDs that are URLs of client
	// ID metadata documents (true).
	ClientMetadataDocuments *bool `yaml:"client_metadata_documents"`
	// Upstream signs users in at the organisation's OpenID provider; nil
	// signs them in with an API key.
	Upstream *OAuthUpstream `yaml:"upstream,alloc"`
}

// OAuthUpstream is the OpenID provider users sign in with (yaml
// auth.oauth.server.upstream). ClientSecret is kept unexpanded.
type OAuthUpstream struct {
	Issuer       string   `yaml:"issuer"`
	ClientID     string   `yaml:"client_id"`
	ClientSecret string   `yaml:"client_secret"`
	Scopes       []string `yaml:"scopes,omitempty,nonblank"`
	// Claims names the ID token's claims carried into access tokens.
	Claims JWTClaims `yaml:"claims"`
}

// Registration modes of the built-in authorization server.
const (
	RegistrationOpen  = "open"
	RegistrationToken = "token"
	RegistrationOff   = "off"
)

// maxTokenTTLSeconds bounds the built-in server's token lifetimes (a year).
const maxTokenTTLSeconds = 365 * 24 * 3600

func (o *OAuthServer) check(s scope) bool {
	ok := s.in("access_token_ttl_seconds").secondsUpTo(maxTokenTTLSeconds)
	ok = s.in("refresh_token_ttl_seconds").secondsUpTo(maxTokenTTLSeconds) && ok
	ok = s.in("registration").oneOf(o.Registration, RegistrationOpen, RegistrationToken, RegistrationOff) && ok
	ok = s.in("max_clients").between(o.MaxClients, 1, 10_000_000) && ok
	ok = s.in("key_rotation_days").between(o.KeyRotationDays, 1, 3650) && ok
	if o.Registration == RegistrationToken && o.RegistrationToken == "" && !s.in("registration").broken() {
		s.in("registration").atVal("registration: token needs registration_token (an initial access token, e.g. \"${OAUTH_REGISTRATION_TOKEN}\")")
		ok = false
	}
	return ok
}

// ExpandRegistrationToken resolves the registration token's ${VAR}
// references; "" when none is configured.
func (o *OAuthServer) ExpandRegistrationToken(getenv func(string) string) (string, error) {
	return expandField("auth.oauth.server.registration_token", o.RegistrationToken, getenv)
}

// ExpandClientSecret resolves the upstream client secret's ${VAR}
// references; "" when none is configured.
func (u *OAuthUpstream) ExpandClientSecret(getenv func(string) string) (string, error) {
	return expandField("auth.oauth.server.upstream.client_secret", u.ClientSecret, getenv)
}

func (u *OAuthUpstream) setDefaults() { u.Claims = DefaultJWT().Claims }

// expandField resolves the ${VAR} references of a secret field's value.
func expandField(field, value string, getenv func(string) string) (string, error) {
	if value == "" {
		return "", nil
	}
	v, msgs := expandVars(value, orOSGetenv(getenv))
	if len(msgs) > 0 {
		errs := make(Errors, len(msgs))
		for i, m := range msgs {
			errs[i] = &Error{Field: field, Msg: m}
		}
		return "", asError(errs)
	}
	return v, nil
}

// Introspection is an RFC 7662 endpoint and the gateway's client
// credentials for it. ClientSecret is kept unexpanded (normally a ${VAR}
// reference); the formatting methods never show a literal secret.
type Introspection struct {
	URL          string `yaml:"url"`
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// Cache is how long an active answer is reused (yaml cache_seconds,
	// default 30, 0 to 300; never beyond the token's exp).
	Cache time.Duration `yaml:"cache_seconds"`
}

// ExpandSecret returns the client secret with its ${VAR} references
// resolved by getenv (nil = os.Getenv); "" when none is configured.
func (in *Introspection) ExpandSecret(getenv func(string) string) (string, error) {
	return expandField("auth.oauth.introspection.client_secret", in.ClientSecret, getenv)
}

// Redacted returns a copy safe to log or serve.
func (in *Introspection) Redacted() *Introspection {
	c := *in
	c.ClientSecret = redactSecret(c.ClientSecret)
	c.URL = redactURL(c.URL)
	return &c
}

type plainIntrospection Introspection

// String formats the redacted section.
func (in Introspection) String() string {
	return fmt.Sprintf("%+v", plainIntrospection(*in.Redacted()))
}

// GoString formats the redacted section for %#v.
func (in Introspection) GoString() string {
	return "config.Introspection" + strings.TrimPrefix(fmt.Sprintf("%#v", plainIntrospection(*in.Redacted())), "config.plainIntrospection")
}

// MarshalJSON writes the redacted section with the file's key names.
func (in Introspection) MarshalJSON() ([]byte, error) {
	r := in.Redacted()
	return json.Marshal(struct {
		URL          string  `json:"url"`
		ClientID     string  `json:"client_id,omitempty"`
		ClientSecret string  `json:"client_secret,omitempty"`
		Cache        Seconds `json:"cache_seconds"`
	}{r.URL, r.ClientID, r.ClientSecret, Seconds(r.Cache)})
}

func (o *OAuth) setDefaults() { o.Leeway, o.Claims = DefaultJWT().Leeway, DefaultJWT().Claims }

// check rejects scopes with spaces, scope_roles without a role and an
// out-of-range leeway.
func (o *OAuth) check(s scope) bool {
	ok := true
	for i, sc := range o.Scopes {
		if it := s.in("scopes").item(i); !it.broken() && strings.ContainsFunc(sc, isSpaceOrControl) {
			it.atKey("scope %q must not contain spaces", sc)
			ok = false
		}
	}
	for _, sc := range keysOf(s.in("scope_roles"), o.ScopeRoles) {
		if role, r := o.ScopeRoles[sc], s.in("scope_roles").in(sc); !r.broken() && (role == "" || strings.ContainsFunc(sc, isSpaceOrControl)) {
			r.atKey("needs a scope without spaces and a role name, e.g. mcp:admin: admin")
			ok = false
		}
	}
	return s.in("leeway_seconds").secondsUpTo(maxLeewaySeconds) && ok
}

func (in *Introspection) setDefaults() { in.Cache = 30 * time.Second }

func (in *Introspection) check(s scope) bool {
	return s.in("cache_seconds").secondsUpTo(maxIntrospectionCacheSeconds)
}

// validateOAuth checks mode oauth's section once decoded.
func validateOAuth(c *checker, a *Auth, modeAt place, getenv func(string) string) {
	o := a.OAuth
	if o == nil {
		return // the built-in authorization server, with its defaults
	}
	if c.broken("auth.oauth") {
		return
	}
	at := func(f string) place { return place{field: "auth.oauth." + f} }
	if o.Resource != "" && !c.broken("auth.oauth.resource") {
		if msg := checkHTTPURL(o.Resource); msg != "" {
			c.add(at("resource"), "%s", msg)
		} else if u, _ := url.Parse(o.Resource); (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			c.add(at("resource"), "must be the gateway's origin as clients reach it (scheme://host[:port]), without a path: "+
				"the MCP endpoints' resources are derived from it")
		}
	}
	external := o.JWKSURL != "" || o.Introspection != nil
	switch {
	case c.broken("auth.oauth.issuer"):
	case o.Issuer == "" && external:
		c.add(place{field: "auth.oauth"}, "needs issuer: the authorization server's issuer URL (tokens' iss must equal it); "+
			"leave out issuer, jwks_url and introspection to run the built-in authorization server")
	case o.Issuer == "":
		validateOAuthServer(c, o, getenv)
		return
	default:
		if msg := checkHTTPURL(o.Issuer); msg != "" {
			c.add(at("issuer"), "%s", msg)
		}
		if o.Server != nil {
			c.add(at("server"), "configures the built-in authorization server, which runs only without an issuer")
		}
	}
	if !external && !c.broken("auth.oauth.jwks_url") && !c.broken("auth.oauth.introspection") {
		c.add(place{field: "auth.oauth"}, "needs jwks_url (JWT access tokens) or introspection (opaque access tokens), or both")
	}
	if o.JWKSURL != "" && !c.broken("auth.oauth.jwks_url") {
		if msg := checkHTTPURL(o.JWKSURL); msg != "" {
			c.add(at("jwks_url"), "%s", msg)
		}
	}
	if in := o.Introspection; in != nil && !c.broken("auth.oauth.introspection") {
		switch {
		case in.URL == "":
			c.add(at("introspection"), "needs url: the RFC 7662 introspection endpoint")
		default:
			if msg := checkHTTPURL(in.URL); msg != "" {
				c.add(at("introspection.url"), "%s", msg)
			}
		}
		if in.ClientSecret != "" {
			if in.ClientID == "" {
				c.add(at("introspection"), "client_secret needs client_id")
			}
			_, msgs := expandVars(in.ClientSecret, getenv)
			for _, m := range msgs {
				c.add(at("introspection.client_secret"), "%s", m)
			}
		}
	}
}

// validateOAuthServer checks the built-in authorization server's secret
// references once decoded.
func validateOAuthServer(c *checker, o *OAuth, getenv func(string) string) {
	srv := o.Server
	if srv == nil || c.broken("auth.oauth.server") {
		return
	}
	for _, f := range []struct{ field, value string }{
		{"auth.oauth.server.registration_token", srv.RegistrationToken},
		{"auth.oauth.server.upstream.client_secret", func() string {
			if srv.Upstream == nil {
				return ""
			}
			return srv.Upstream.ClientSecret
		}()},
	} {
		if f.value == "" {
			continue
		}
		_, msgs := expandVars(f.value, getenv)
		for _, m := range msgs {
			c.add(place{field: f.field}, "%s", m)
		}
	}
	if u := srv.Upstream; u != nil && !c.broken("auth.oauth.server.upstream") {
		switch {
		case u.Issuer == "":
			c.add(place{field: "auth.oauth.server.upstream"}, "needs issuer: the OpenID provider users sign in with")
		default:
			if msg := checkHTTPURL(u.Issuer); msg != "" {
				c.add(place{field: "auth.oauth.server.upstream.issuer"}, "%s", msg)
			}
		}
		if u.ClientID == "" {
			c.add(place{field: "auth.oauth.server.upstream"}, "needs client_id: the gateway's client at the OpenID provider")
		}
	}
}
