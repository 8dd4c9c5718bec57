package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Modes of [Auth.Mode].
const (
	// AuthKeys authenticates callers with API keys issued by the gateway.
	AuthKeys = "keys"
	// AuthJWT authenticates callers with bearer JWTs signed by an identity
	// provider, configured by [Auth.JWT].
	AuthJWT = "jwt"
	// AuthLocal trusts every caller as the local admin; meant for a loopback
	// listener on a developer's machine.
	AuthLocal = "local"
)

// Environment variables of the auth: section. Each overrides the file (env >
// file); see [Auth] and [JWT].
const (
	EnvAuthMode  = "SWITCHBOARD_AUTH_MODE"
	EnvJWTSecret = "SWITCHBOARD_JWT_SECRET"
	EnvJWKSURL   = "SWITCHBOARD_JWKS_URL"
)

// maxLeewaySeconds bounds auth.jwt.leeway_seconds: clock skew beyond an hour
// is a broken clock, and a larger leeway would quietly extend every token.
const maxLeewaySeconds = 3600

var authModes = []string{AuthKeys, AuthJWT, AuthOAuth, AuthLocal}

// Auth is how callers of the gateway prove who they are. The section is
// optional because a gateway on a loopback listener can run without
// credentials; once it exists, API keys are the default so that adding
// "auth:" never weakens a deployment.
//
// SWITCHBOARD_AUTH_MODE overrides mode (and creates the section when the
// file has none). When it switches the mode away from jwt, the file's jwt
// section is dropped rather than reported, since the override is the point.
type Auth struct {
	// Mode is "keys" (the default when the section exists), "jwt",
	// "oauth" or "local".
	Mode string `yaml:"mode"`
	// JWT is set exactly when Mode is "jwt": a jwt section under another
	// mode is an error ("only used with mode: jwt").
	JWT *JWT `yaml:"jwt,alloc"`
	// OAuth is set exactly when Mode is "oauth" (yaml oauth:); under
	// another mode it is an error.
	OAuth *OAuth `yaml:"oauth,alloc"`
	// Pos is the position of the auth: key; zero when the section came
	// from SWITCHBOARD_AUTH_MODE.
	Pos Pos
}

// JWT is how bearer tokens are verified in mode jwt. Exactly one key source
// is set: Secret (HS256) or JWKSURL (the provider's published keys).
//
// SWITCHBOARD_JWT_SECRET and SWITCHBOARD_JWKS_URL override the file's key
// source (env > file): either replaces both secret and jwks_url, and
// setting both variables is an error. The secret variable is stored as the
// reference "${SWITCHBOARD_JWT_SECRET}", so a Config never holds a secret
// read from the environment; String, GoString, MarshalJSON and Redacted
// never show a secret value.
type JWT struct {
	// Secret is the HS256 key, normally a reference such as
	// "${JWT_SECRET}" (write $$ for a literal $). It is kept unexpanded;
	// call [JWT.ExpandSecret] where the key is needed. SECRET when it is
	// not a reference.
	Secret string `yaml:"secret"`
	// JWKSURL is the http(s) URL of the JSON Web Key Set (yaml jwks_url).
	JWKSURL string `yaml:"jwks_url"`
	// Issuer and Audience, when set, must match the iss and aud claims.
	Issuer   string `yaml:"issuer"`
	Audience string `yaml:"audience"`
	// Leeway is the clock skew tolerated on exp, nbf and iat (yaml
	// leeway_seconds, default 30s, 0 to 3600).
	Leeway time.Duration `yaml:"leeway_seconds"`
	// Claims names the claims that carry the identity (yaml claims:).
	Claims JWTClaims `yaml:"claims"`
}

// JWTClaims names the token claims the identity is read from, so the gateway
// fits an existing identity provider instead of dictating claim names. The
// defaults are seed 003's: sub, roles, workspace, mcpServerAllowIds,
// mcpServerDenyIds and isAdmin.
type JWTClaims struct {
	AgentID      string `json:"agent_id" yaml:"agent_id"`
	Roles        string `json:"roles" yaml:"roles"`
	Workspace    string `json:"workspace" yaml:"workspace"`
	AllowServers string `json:"allow_servers" yaml:"allow_servers"`
	DenyServers  string `json:"deny_servers" yaml:"deny_servers"`
	Admin        string `json:"admin" yaml:"admin"`
}

// ExpandSecret returns the HS256 key: Secret with its ${VAR} references
// resolved by getenv (nil = os.Getenv) and $$ read as $. An unset or empty
// variable is an error that names the variable, never a value; [Load] has
// already checked this once, but the environment can change after loading.
func (j *JWT) ExpandSecret(getenv func(string) string) (string, error) {
	const field = "auth.jwt.secret"
	if j.Secret == "" {
		return "", asError(Errors{{Field: field, Msg: "no secret is configured (this jwt section uses jwks_url)"}})
	}
	return expandField(field, j.Secret, getenv)
}

// secretRefRE matches a Secret that is only a reference to a conventionally
// named variable, which is safe to show.
var secretRefRE = regexp.MustCompile(`^\$\{[A-Z_][A-Z0-9_]*\}$`)

// redactSecret returns a secret field's value as it may be shown: a single
// ${VAR} reference (or nothing) as it is, anything else as "***".
func redactSecret(v string) string {
	if v != "" && !secretRefRE.MatchString(v) {
		return redactedValue
	}
	return v
}

// Redacted returns a copy safe to log or serve: Secret replaced by "***"
// unless it is a single ${VAR} reference, and any password in JWKSURL masked.
func (j *JWT) Redacted() *JWT {
	c := *j
	c.Secret = redactSecret(c.Secret)
	c.JWKSURL = redactURL(c.JWKSURL)
	return &c
}

// plainJWT has JWT's fields and none of its methods, so the formatting
// methods can print a redacted copy without calling themselves.
type plainJWT JWT

// String formats the redacted JWT, so %v and %+v (and slog's text handler)
// never print the secret.
func (j JWT) String() string {
	return fmt.Sprintf("%+v", plainJWT(*j.Redacted()))
}

// GoString formats the redacted JWT for %#v.
func (j JWT) GoString() string {
	return "config.JWT" + strings.TrimPrefix(fmt.Sprintf("%#v", plainJWT(*j.Redacted())), "config.plainJWT")
}

// MarshalJSON writes the redacted JWT with the file's key names, so a config
// served by the API or logged as JSON never carries the secret.
func (j JWT) MarshalJSON() ([]byte, error) {
	r := j.Redacted()
	return json.Marshal(struct {
		Secret   string    `json:"secret,omitempty"`
		JWKSURL  string    `json:"jwks_url,omitempty"`
		Issuer   string    `json:"issuer,omitempty"`
		Audience string    `json:"audience,omitempty"`
		Leeway   Seconds   `json:"leeway_seconds"`
		Claims   JWTClaims `json:"claims"`
	}{r.Secret, r.JWKSURL, r.Issuer, r.Audience, Seconds(r.Leeway), r.Claims})
}

// Authz is the static part of authorization policy; grants and tokens live
// in the store. The zero value is the default.
type Authz struct {
	// RoleRestrictions maps a role to the tool patterns it may call
	// (namespaced names with "*" globs), seed 002; a caller with a
	// restricted role is limited to the union of its roles' lists. yaml:
	// role_restrictions: {review: {allowed_tools: [fs.read_*, git.log]}}.
	// An empty list allows the role nothing.
	RoleRestrictions map[string][]string `yaml:"role_restrictions,roles=authz"`
	// HighRiskTools are words or patterns that make a tool high-risk (it
	// then needs an approval token). nil = [DefaultHighRiskTools]; [] = none
	// by name (a tool's destructiveHint still counts). yaml high_risk_tools.
	HighRiskTools []string `yaml:"high_risk_tools,nonempty"`
	// AdminNeedsToken makes admins present approval tokens for high-risk
	// tools too (yaml admin_needs_token, default false).
	AdminNeedsToken bool `yaml:"admin_needs_token"`
	// Approval is what a high-risk call without a token gets:
	// [ApprovalToken] ("token", the default) refuses it; [ApprovalRequest]
	// ("request") also files an approval request an admin approves or
	// denies, after which the caller's retry with the same arguments passes
	// once. yaml approval.
	Approval string `yaml:"approval"`
}

// Values of [Authz.Approval].
const (
	ApprovalToken   = "token"
	ApprovalRequest = "request"
)

// HighRiskToolsOrDefault returns HighRiskTools, or [DefaultHighRiskTools]
// when the file does not set them, so callers apply the default in one place.
func (a *Authz) HighRiskToolsOrDefault() []string {
	if a.HighRiskTools == nil {
		return DefaultHighRiskTools()
	}
	return a.HighRiskTools
}

func (c *JWTClaims) unknownKey(key string, known []string) string {
	return fmt.Sprintf("unknown claim %q%s", key, suggest(key, known))
}

// check rejects a claim named null or "", which would read no claim.
func (c *JWTClaims) check(s scope) bool {
	def := DefaultJWT().Claims
	ok := true
	for _, f := range []struct{ key, v, def string }{
		{"agent_id", c.AgentID, def.AgentID}, {"roles", c.Roles, def.Roles}, {"workspace", c.Workspace, def.Workspace},
		{"allow_servers", c.AllowServers, def.AllowServers}, {"deny_servers", c.DenyServers, def.DenyServers}, {"admin", c.Admin, def.Admin},
	} {
		if k := s.in(f.key); k.has() && !k.broken() && (!k.set() || f.v == "") {
			k.atKey("must name a claim (remove the key to use the default %q)", f.def)
			k.fail()
			ok = false
		}
	}
	return ok
}

func (j *JWT) setDefaults() { *j = DefaultJWT() }

func (j *JWT) check(s scope) bool { return s.in("leeway_seconds").secondsUpTo(maxLeewaySeconds) }

func (a *Authz) check(s scope) bool {
	return s.in("approval").oneOf(a.Approval, ApprovalToken, ApprovalRequest)
}

// authzRole is a role of authz.role_restrictions as the file writes it.
type authzRole struct {
	AllowedTools []string `yaml:"allowed_tools,nonempty"`
}

func (r *authzRole) setKey(s scope, name string) { checkRoleName(s, name) }

// check requires allowed_tools, tool patterns without spaces. An empty list
// is kept: the role may call nothing.
func (r *authzRole) check(s scope) bool {
	ok := requireAllowedTools(s, "allowed_tools is required: the tools this role may call, e.g. allowed_tools: [fs.read_*, git.log]")
	for i, v := range r.AllowedTools {
		if it := s.in("allowed_tools").item(i); !it.broken() && strings.ContainsFunc(v, isSpaceOrControl) {
			it.atKey("tool pattern %s is invalid: use a namespaced tool name with * wildcards, without spaces", strconv.Quote(v))
			ok = false
		}
	}
	return ok
}

func (r *authzRole) tools() []string {
	if r.AllowedTools == nil {
		return []string{}
	}
	return r.AllowedTools
}

// checkRoleName and requireAllowedTools check what the roles of
// authz.role_restrictions and of a client share: a name, and allowed_tools.
func checkRoleName(s scope, name string) {
	if strings.TrimSpace(name) == "" {
		s.atKey("role name must not be empty")
	}
}

func requireAllowedTools(s scope, missing string) bool {
	if !s.broken() && !s.in("allowed_tools").has() {
		s.atKey("%s", missing)
		return false
	}
	return true
}

func isSpaceOrControl(r rune) bool {
	return r <= ' ' || r == 0x7f
}

// authSources records which auth values came from the environment, to point
// problems at the variable rather than the file.
type authSources struct {
	modeEnv    bool // SWITCHBOARD_AUTH_MODE set the mode
	jwtCreated bool // the jwt section exists only because of an env var
	jwtEnv     string
}

// applyAuthEnv overrides the auth: section from the environment (env > file).
// An empty variable counts as unset, as for settings.
func applyAuthEnv(cfg *Config, getenv func(string) string) (authSources, Errors) {
	var src authSources
	var errs Errors
	if mode := getenv(EnvAuthMode); mode != "" {
		if cfg.Auth == nil {
			cfg.Auth = &Auth{}
		}
		cfg.Auth.Mode = mode
		src.modeEnv = true
	}
	secret, jwks := getenv(EnvJWTSecret), getenv(EnvJWKSURL)
	if secret != "" && jwks != "" {
		errs = append(errs, &Error{File: EnvironmentFile, Field: EnvJWKSURL, Msg: EnvJWTSecret + " is set too: set only one of them"})
		jwks = ""
	}
	switch {
	case secret == "" && jwks == "":
		return src, errs
	case secret != "":
		src.jwtEnv = EnvJWTSecret
	default:
		src.jwtEnv = EnvJWKSURL
	}
	if cfg.Auth == nil {
		errs = append(errs, &Error{File: EnvironmentFile, Field: src.jwtEnv,
			Msg: fmt.Sprintf("only used with auth mode jwt, and there is no auth: section (set auth.mode: jwt or %s=jwt)", EnvAuthMode)})
		return src, errs
	}
	if cfg.Auth.JWT == nil {
		j := DefaultJWT()
		cfg.Auth.JWT = &j
		src.jwtCreated = true
	}
	if secret != "" {
		cfg.Auth.JWT.Secret, cfg.Auth.JWT.JWKSURL = "${"+EnvJWTSecret+"}", ""
	} else {
		cfg.Auth.JWT.Secret, cfg.Auth.JWT.JWKSURL = "", jwks
	}
	return src, errs
}

// checker reports problems found after decoding at the place each value came
// from: a field of the file (by its position in the spots) or an env var.
type checker struct {
	file  string
	spots map[string]*spot // by dotted path
	errs  Errors
}

func newChecker(file string, root *spot) *checker {
	c := &checker{file: file, spots: map[string]*spot{}}
	root.walk("", func(path string, s *spot) { c.spots[path] = s })
	return c
}

// place is where a value came from: env, when set, names the variable;
// otherwise field is its path in the file.
type place struct{ env, field string }

func (c *checker) add(p place, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if p.env != "" {
		c.errs = append(c.errs, &Error{File: EnvironmentFile, Field: p.env, Msg: msg})
		return
	}
	pos := c.spot(p.field).key
	c.errs = append(c.errs, &Error{File: c.file, Line: pos.Line, Column: pos.Column, Field: p.field, Msg: msg})
}

func (c *checker) spot(field string) *spot {
	if s := c.spots[field]; s != nil {
		return s
	}
	return none
}

// broken reports whether the value at field could not be decoded.
func (c *checker) broken(field string) bool { return c.spot(field).broken }

// validateAuth checks the auth section once the environment is applied, and
// the JWT secret's references against getenv.
func validateAuth(c *checker, cfg *Config, src authSources, getenv func(string) string) {
	a := cfg.Auth
	if a == nil {
		return
	}
	if a.Mode == "" {
		a.Mode = AuthKeys
	}
	modeAt := place{field: "auth.mode"}
	if src.modeEnv {
		modeAt = place{env: EnvAuthMode}
	} else if c.broken("auth.mode") || c.broken("auth") {
		return
	}
	jwtAt := func(field, env string) place {
		if src.jwtEnv == env {
			return place{env: env}
		}
		return place{field: field}
	}

	if a.OAuth != nil && a.Mode != AuthOAuth {
		if !src.modeEnv {
			c.add(place{field: "auth.oauth"}, "only used with mode: oauth (the mode is %q)", a.Mode)
		}
		a.OAuth = nil // an env override of the mode drops the file's oauth section
	}
	switch a.Mode {
	case AuthOAuth:
		if a.JWT != nil && !src.jwtCreated {
			c.add(place{field: "auth.jwt"}, "only used with mode: jwt (mode oauth takes its issuer and keys from auth.oauth)")
		}
		if src.jwtEnv != "" {
			c.add(place{env: src.jwtEnv}, "only used with auth mode jwt (the mode is %q)", a.Mode)
		}
		a.JWT = nil
		validateOAuth(c, a, modeAt, getenv)
		return
	case AuthKeys, AuthLocal:
		if a.JWT == nil {
			return
		}
		if src.jwtEnv != "" {
			c.add(place{env: src.jwtEnv}, "only used with auth mode jwt (the mode is %q)", a.Mode)
		}
		if !src.modeEnv && !src.jwtCreated {
			c.add(place{field: "auth.jwt"}, "only used with mode: jwt (the mode is %q)", a.Mode)
		}
		a.JWT = nil // an env override of the mode drops the file's jwt section
		return
	case AuthJWT:
	default:
		quoted := make([]string, len(authModes))
		for i, m := range authModes {
			quoted[i] = strconv.Quote(m)
		}
		c.add(modeAt, "unknown mode %q: must be %s", a.Mode, joinOr(quoted))
		return
	}

	j := a.JWT
	if j == nil {
		c.add(modeAt, "mode jwt needs a jwt: section with secret or jwks_url (or the environment variable %s or %s)", EnvJWTSecret, EnvJWKSURL)
		return
	}
	if c.broken("auth.jwt") || c.broken("auth.jwt.secret") || c.broken("auth.jwt.jwks_url") {
		return
	}
	switch {
	case j.Secret != "" && j.JWKSURL != "":
		c.add(place{field: "auth.jwt.jwks_url"}, "set either secret (an HS256 key) or jwks_url, not both")
		return
	case j.Secret == "" && j.JWKSURL == "":
		c.add(place{field: "auth.jwt"}, "needs secret (an HS256 key, e.g. \"${JWT_SECRET}\") or jwks_url")
		return
	case j.JWKSURL != "":
		if msg := checkHTTPURL(j.JWKSURL); msg != "" {
			c.add(jwtAt("auth.jwt.jwks_url", EnvJWKSURL), "%s", msg)
		}
	default:
		_, msgs := expandVars(j.Secret, getenv)
		for _, m := range msgs {
			c.add(jwtAt("auth.jwt.secret", EnvJWTSecret), "%s", m)
		}
	}
}
