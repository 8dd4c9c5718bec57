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
	const field = "auth.oauth.introspection.client_secret"
	if in.ClientSecret == "" {
		return "", nil
	}
	v, msgs := expandVars(in.ClientSecret, orOSGetenv(getenv))
	if len(msgs) > 0 {
		errs := make(Errors, len(msgs))
		for i, m := range msgs {
			errs[i] = &Error{Field: field, Msg: m}
		}
		return "", asError(errs)
	}
	return v, nil
}

// Redacted returns a copy safe to log or serve.
func (in *Introspection) Redacted() *Introspection {
	c := *in
	if c.ClientSecret != "" && !secretRefRE.MatchString(c.ClientSecret) {
		c.ClientSecret = redactedValue
	}
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
		c.add(modeAt, "mode oauth needs an oauth: section with issuer and jwks_url or introspection "+
			"(the built-in authorization server is not available yet)")
		return
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
	switch {
	case c.broken("auth.oauth.issuer"):
	case o.Issuer == "":
		c.add(place{field: "auth.oauth"}, "needs issuer: the authorization server's issuer URL (tokens' iss must equal it)")
	default:
		if msg := checkHTTPURL(o.Issuer); msg != "" {
			c.add(at("issuer"), "%s", msg)
		}
	}
	if o.JWKSURL == "" && o.Introspection == nil && !c.broken("auth.oauth.jwks_url") && !c.broken("auth.oauth.introspection") {
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
