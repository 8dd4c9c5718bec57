package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// AuthOAuth makes the gateway an OAuth 2.1 resource server (the MCP
// authorization spec): bearer access tokens from the authorization server
// of [Auth.OAuth], and API keys for machine callers.
const AuthOAuth = "oauth"

// maxIntrospectionCacheSeconds bounds auth.oauth.introspection.cache_seconds:
// a revoked token keeps working for as long as its answer is cached.
const maxIntrospectionCacheSeconds = 300

var (
	oauthFields = []string{"resource", "issuer", "jwks_url", "introspection", "scopes", "scope_roles", "leeway_seconds", "claims"}
	introFields = []string{"url", "client_id", "client_secret", "cache_seconds"}
)

// OAuth is mode oauth's section (yaml auth.oauth): which authorization
// server issues the access tokens, how to check them, and the canonical URL
// they must be issued for.
type OAuth struct {
	// Resource is the gateway's canonical URL, scheme://host[:port] with no
	// path, as clients reach it: every token's audience must be it (or one
	// of its MCP endpoints). Required unless the gateway listens on
	// loopback, where it is taken from each request; always required
	// behind a proxy.
	Resource string
	// Issuer is the authorization server's issuer identifier: tokens' iss
	// must equal it, and the metadata names it in authorization_servers.
	Issuer string
	// JWKSURL is the issuer's key set, for JWT access tokens (yaml jwks_url).
	JWKSURL string
	// Introspection checks opaque access tokens (RFC 7662); nil when absent.
	Introspection *Introspection
	// Scopes must all be granted to every token; a token without them gets
	// 403 insufficient_scope.
	Scopes []string
	// ScopeRoles gives a token granted a scope (key) a role (value).
	ScopeRoles map[string]string
	// Leeway is the clock skew tolerated on exp and nbf (default 30s).
	Leeway time.Duration
	// Claims names the identity claims, as in mode jwt.
	Claims JWTClaims
}

// Introspection is an RFC 7662 endpoint and the gateway's client
// credentials for it. ClientSecret is kept unexpanded (normally a ${VAR}
// reference); the formatting methods never show a literal secret.
type Introspection struct {
	URL          string
	ClientID     string
	ClientSecret string
	// Cache is how long an active answer is reused (yaml cache_seconds,
	// default 30, 0 to 300; never beyond the token's exp).
	Cache time.Duration
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

// decodeOAuth reads auth.oauth.
func (d *decoder) decodeOAuth(n ast.Node, field string, st *sections) *OAuth {
	o := &OAuth{Leeway: DefaultJWT().Leeway, Claims: DefaultJWT().Claims}
	entries, ok := d.mapping(n, field)
	if !ok {
		st.bad[field] = true
	}
	for _, e := range entries {
		f := join(field, e.key)
		ok := true
		switch e.key {
		case "resource":
			o.Resource, _, ok = d.str(e.value, f)
		case "issuer":
			o.Issuer, _, ok = d.str(e.value, f)
		case "jwks_url":
			o.JWKSURL, _, ok = d.str(e.value, f)
		case "introspection":
			o.Introspection = d.decodeIntrospection(e.value, f, st)
		case "scopes":
			o.Scopes, ok = d.stringList(e.value, f, st)
			for i, s := range o.Scopes {
				if strings.ContainsFunc(s, isSpaceOrControl) {
					d.errorf(st.pos[fmt.Sprintf("%s[%d]", f, i)], fmt.Sprintf("%s[%d]", f, i), "scope %q must not contain spaces", s)
					ok = false
				}
			}
		case "scope_roles":
			o.ScopeRoles, ok = d.strMap(e.value, f, st.pos, f)
			for s, role := range o.ScopeRoles {
				if role == "" || strings.ContainsFunc(s, isSpaceOrControl) {
					d.errorf(st.pos[f+"."+s], f+"."+s, "needs a scope without spaces and a role name, e.g. mcp:admin: admin")
					ok = false
				}
			}
		case "leeway_seconds":
			var v float64
			var set bool
			if v, _, _, set, ok = d.number(e.value, f); ok && set {
				if !(v >= 0 && v <= maxLeewaySeconds) {
					d.errorf(posOf(e.value), f, "must be a number of seconds from 0 to %d", maxLeewaySeconds)
					ok = false
				} else {
					o.Leeway = time.Duration(v * float64(time.Second))
				}
			}
		case "claims":
			ok = d.decodeClaims(e.value, f, &o.Claims, st)
		default:
			d.errorf(e.pos, f, "unknown field %q%s", e.key, suggest(e.key, oauthFields))
			continue
		}
		st.pos[f] = e.pos
		if !ok {
			st.bad[f] = true
		}
	}
	return o
}

// decodeIntrospection reads auth.oauth.introspection.
func (d *decoder) decodeIntrospection(n ast.Node, field string, st *sections) *Introspection {
	in := &Introspection{Cache: 30 * time.Second}
	entries, ok := d.mapping(n, field)
	if !ok {
		st.bad[field] = true
	}
	for _, e := range entries {
		f := join(field, e.key)
		ok := true
		switch e.key {
		case "url":
			in.URL, _, ok = d.str(e.value, f)
		case "client_id":
			in.ClientID, _, ok = d.str(e.value, f)
		case "client_secret":
			in.ClientSecret, _, ok = d.str(e.value, f)
		case "cache_seconds":
			var v float64
			var set bool
			if v, _, _, set, ok = d.number(e.value, f); ok && set {
				if !(v >= 0 && v <= maxIntrospectionCacheSeconds) {
					d.errorf(posOf(e.value), f, "must be a number of seconds from 0 to %d", maxIntrospectionCacheSeconds)
					ok = false
				} else {
					in.Cache = time.Duration(v * float64(time.Second))
				}
			}
		default:
			d.errorf(e.pos, f, "unknown field %q%s", e.key, suggest(e.key, introFields))
			continue
		}
		st.pos[f] = e.pos
		if !ok {
			st.bad[f] = true
		}
	}
	return in
}

// validateOAuth checks mode oauth's section once decoded.
func validateOAuth(c *checker, a *Auth, st *sections, modeAt place, getenv func(string) string) {
	o := a.OAuth
	if o == nil {
		c.add(modeAt, "mode oauth needs an oauth: section with issuer and jwks_url or introspection "+
			"(the built-in authorization server is not available yet)")
		return
	}
	if st.bad["auth.oauth"] {
		return
	}
	at := func(f string) place { return place{field: "auth.oauth." + f} }
	if o.Resource != "" && !st.bad["auth.oauth.resource"] {
		if msg := checkHTTPURL(o.Resource); msg != "" {
			c.add(at("resource"), "%s", msg)
		} else if u, _ := url.Parse(o.Resource); (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			c.add(at("resource"), "must be the gateway's origin as clients reach it (scheme://host[:port]), without a path: "+
				"the MCP endpoints' resources are derived from it")
		}
	}
	switch {
	case st.bad["auth.oauth.issuer"]:
	case o.Issuer == "":
		c.add(place{field: "auth.oauth"}, "needs issuer: the authorization server's issuer URL (tokens' iss must equal it)")
	default:
		if msg := checkHTTPURL(o.Issuer); msg != "" {
			c.add(at("issuer"), "%s", msg)
		}
	}
	if o.JWKSURL == "" && o.Introspection == nil && !st.bad["auth.oauth.jwks_url"] && !st.bad["auth.oauth.introspection"] {
		c.add(place{field: "auth.oauth"}, "needs jwks_url (JWT access tokens) or introspection (opaque access tokens), or both")
	}
	if o.JWKSURL != "" && !st.bad["auth.oauth.jwks_url"] {
		if msg := checkHTTPURL(o.JWKSURL); msg != "" {
			c.add(at("jwks_url"), "%s", msg)
		}
	}
	if in := o.Introspection; in != nil && !st.bad["auth.oauth.introspection"] {
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
