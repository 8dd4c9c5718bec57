package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
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

var (
	authModes   = []string{AuthKeys, AuthJWT, AuthOAuth, AuthLocal}
	authFields  = []string{"mode", "jwt", "oauth"}
	jwtFields   = []string{"secret", "jwks_url", "issuer", "audience", "leeway_seconds", "claims"}
	claimFields = []string{"agent_id", "roles", "workspace", "allow_servers", "deny_servers", "admin"}
	authzFields = []string{"role_restrictions", "high_risk_tools", "admin_needs_token", "approval"}
	roleFields  = []string{"allowed_tools"}
)

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
	Mode string
	// JWT is set exactly when Mode is "jwt": a jwt section under another
	// mode is an error ("only used with mode: jwt").
	JWT *JWT
	// OAuth is set exactly when Mode is "oauth" (yaml oauth:); under
	// another mode it is an error.
	OAuth *OAuth
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
	Secret string
	// JWKSURL is the http(s) URL of the JSON Web Key Set (yaml jwks_url).
	JWKSURL string
	// Issuer and Audience, when set, must match the iss and aud claims.
	Issuer, Audience string
	// Leeway is the clock skew tolerated on exp, nbf and iat (yaml
	// leeway_seconds, default 30s, 0 to 3600).
	Leeway time.Duration
	// Claims names the claims that carry the identity (yaml claims:).
	Claims JWTClaims
}

// JWTClaims names the token claims the identity is read from, so the gateway
// fits an existing identity provider instead of dictating claim names. The
// defaults are seed 003's: sub, roles, workspace, mcpServerAllowIds,
// mcpServerDenyIds and isAdmin.
type JWTClaims struct {
	AgentID      string `json:"agent_id"`
	Roles        string `json:"roles"`
	Workspace    string `json:"workspace"`
	AllowServers string `json:"allow_servers"`
	DenyServers  string `json:"deny_servers"`
	Admin        string `json:"admin"`
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
	v, msgs := expandVars(j.Secret, orOSGetenv(getenv))
	if len(msgs) > 0 {
		errs := make(Errors, len(msgs))
		for i, m := range msgs {
			errs[i] = &Error{Field: field, Msg: m}
		}
		return "", asError(errs)
	}
	return v, nil
}

// secretRefRE matches a Secret that is only a reference to a conventionally
// named variable, which is safe to show.
var secretRefRE = regexp.MustCompile(`^\$\{[A-Z_][A-Z0-9_]*\}$`)

// Redacted returns a copy safe to log or serve: Secret replaced by "***"
// unless it is a single ${VAR} reference, and any password in JWKSURL masked.
func (j *JWT) Redacted() *JWT {
	c := *j
	if c.Secret != "" && !secretRefRE.MatchString(c.Secret) {
		c.Secret = redactedValue
	}
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
	RoleRestrictions map[string][]string
	// HighRiskTools are words or patterns that make a tool high-risk (it
	// then needs an approval token). nil = [DefaultHighRiskTools]; [] = none
	// by name (a tool's destructiveHint still counts). yaml high_risk_tools.
	HighRiskTools []string
	// AdminNeedsToken makes admins present approval tokens for high-risk
	// tools too (yaml admin_needs_token, default false).
	AdminNeedsToken bool
	// Approval is what a high-risk call without a token gets:
	// [ApprovalToken] ("token", the default) refuses it; [ApprovalRequest]
	// ("request") also files an approval request an admin approves or
	// denies, after which the caller's retry with the same arguments passes
	// once. yaml approval.
	Approval string
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

// sections holds what decoding the auth, authz and fallbacks sections learned
// besides their values: key positions by field path (Config.Pos), and the
// paths that failed to decode, whose further checks are skipped so one
// mistake is reported once.
type sections struct {
	pos map[string]Pos
	bad map[string]bool
	// index maps a list's field path to the file index of each item kept,
	// for lists that dropped items which failed to decode, so later checks
	// point at the right item. Lazily created.
	index map[string][]int
}

// decodeAuth reads the auth: mapping. Null reads as an empty section: writing
// "auth:" asks for authentication, so it must not mean "none".
func (d *decoder) decodeAuth(n ast.Node, keyPos Pos, st *sections) *Auth {
	a := &Auth{Pos: keyPos}
	entries, ok := d.mapping(n, "auth")
	if !ok {
		st.bad["auth"] = true
	}
	for _, e := range entries {
		f := join("auth", e.key)
		ok := true
		switch e.key {
		case "mode":
			a.Mode, _, ok = d.str(e.value, f)
		case "jwt":
			a.JWT = d.decodeJWT(e.value, f, st)
		case "oauth":
			a.OAuth = d.decodeOAuth(e.value, f, st)
		default:
			d.errorf(e.pos, f, "unknown field %q%s", e.key, suggest(e.key, authFields))
			continue
		}
		st.pos[f] = e.pos
		if !ok {
			st.bad[f] = true
		}
	}
	return a
}

// decodeJWT reads auth.jwt. A section that fails to decode is still returned
// (marked bad) so that "mode jwt needs a jwt section" is not reported too.
func (d *decoder) decodeJWT(n ast.Node, field string, st *sections) *JWT {
	j := DefaultJWT()
	entries, ok := d.mapping(n, field)
	if !ok {
		st.bad[field] = true
	}
	for _, e := range entries {
		f := join(field, e.key)
		ok := true
		switch e.key {
		case "secret":
			j.Secret, _, ok = d.str(e.value, f)
		case "jwks_url":
			j.JWKSURL, _, ok = d.str(e.value, f)
		case "issuer":
			j.Issuer, _, ok = d.str(e.value, f)
		case "audience":
			j.Audience, _, ok = d.str(e.value, f)
		case "leeway_seconds":
			var v float64
			var set bool
			if v, _, _, set, ok = d.number(e.value, f); ok && set {
				if !(v >= 0 && v <= maxLeewaySeconds) {
					d.errorf(posOf(e.value), f, "must be a number of seconds from 0 to %d", maxLeewaySeconds)
					ok = false
				} else {
					j.Leeway = time.Duration(v * float64(time.Second))
				}
			}
		case "claims":
			ok = d.decodeClaims(e.value, f, &j.Claims, st)
		default:
			d.errorf(e.pos, f, "unknown field %q%s", e.key, suggest(e.key, jwtFields))
			continue
		}
		st.pos[f] = e.pos
		if !ok {
			st.bad[f] = true
		}
	}
	return &j
}

// decodeClaims reads auth.jwt.claims over the defaults already in c.
func (d *decoder) decodeClaims(n ast.Node, field string, c *JWTClaims, st *sections) bool {
	ptrs := map[string]*string{
		"agent_id": &c.AgentID, "roles": &c.Roles, "workspace": &c.Workspace,
		"allow_servers": &c.AllowServers, "deny_servers": &c.DenyServers, "admin": &c.Admin,
	}
	entries, ok := d.mapping(n, field)
	for _, e := range entries {
		f := join(field, e.key)
		p, known := ptrs[e.key]
		if !known {
			d.errorf(e.pos, f, "unknown claim %q%s", e.key, suggest(e.key, claimFields))
			ok = false
			continue
		}
		st.pos[f] = e.pos
		v, set, itemOK := d.str(e.value, f)
		switch {
		case !itemOK:
		case !set || v == "":
			d.errorf(e.pos, f, "must name a claim (remove the key to use the default %q)", *p)
			itemOK = false
		default:
			*p = v
		}
		if !itemOK {
			ok = false
			st.bad[f] = true
		}
	}
	return ok
}

// decodeAuthz reads the authz: mapping.
func (d *decoder) decodeAuthz(n ast.Node, st *sections) Authz {
	var a Authz
	entries, _ := d.mapping(n, "authz")
	for _, e := range entries {
		f := join("authz", e.key)
		switch e.key {
		case "role_restrictions":
			a.RoleRestrictions = d.decodeRoles(e.value, f, st)
		case "high_risk_tools":
			a.HighRiskTools = d.decodeHighRisk(e.value, f, st)
		case "admin_needs_token":
			a.AdminNeedsToken, _, _ = d.boolean(e.value, f)
		case "approval":
			v, set, ok := d.str(e.value, f)
			if ok && set {
				if msg := oneOf(v, ApprovalToken, ApprovalRequest); msg != "" {
					d.errorf(posOf(e.value), f, "%s", msg)
				} else {
					a.Approval = v
				}
			}
		default:
			d.errorf(e.pos, f, "unknown field %q%s", e.key, suggest(e.key, authzFields))
			continue
		}
		st.pos[f] = e.pos
	}
	return a
}

// decodeRoles reads authz.role_restrictions: role -> {allowed_tools: [...]}.
// An empty list is kept: the role may call nothing.
func (d *decoder) decodeRoles(n ast.Node, field string, st *sections) map[string][]string {
	return d.roleMap(n, field, st,
		"allowed_tools is required: the tools this role may call, e.g. allowed_tools: [fs.read_*, git.log]", true,
		func(v ast.Node, f string, _ Pos) []string { return d.patterns(v, f, st) })
}

// roleMap reads role -> {allowed_tools: [...]}, the shape shared by
// authz.role_restrictions and a client's role_restrictions; tools decodes
// a role's list, missing names what to say when it is absent, and keepEmpty
// keeps roles whose list came out empty.
func (d *decoder) roleMap(n ast.Node, field string, st *sections, missing string, keepEmpty bool,
	tools func(v ast.Node, f string, keyPos Pos) []string) map[string][]string {
	entries, _ := d.mapping(n, field)
	if len(entries) == 0 {
		return nil
	}
	out := make(map[string][]string, len(entries))
	for _, e := range entries {
		rf := join(field, e.key)
		st.pos[rf] = e.pos
		if strings.TrimSpace(e.key) == "" {
			d.errorf(e.pos, rf, "role name must not be empty")
		}
		sub, ok := d.mapping(e.value, rf)
		found := false
		var list []string
		if keepEmpty {
			list = []string{}
		}
		for _, se := range sub {
			sf := join(rf, se.key)
			if se.key != "allowed_tools" {
				d.errorf(se.pos, sf, "unknown field %q%s", se.key, suggest(se.key, roleFields))
				continue
			}
			st.pos[sf] = se.pos
			found = true
			list = tools(se.value, sf, se.pos)
		}
		if ok && !found {
			d.errorf(e.pos, rf, "%s", missing)
		}
		if keepEmpty || len(list) > 0 {
			out[e.key] = list
		}
	}
	return out
}

// patterns reads a list of tool patterns; [] is an empty, non-nil list.
func (d *decoder) patterns(n ast.Node, field string, st *sections) []string {
	items, _ := d.sequence(n, field)
	out := make([]string, 0, len(items))
	for i, item := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		st.pos[f] = posOf(item)
		v, ok := d.listString(item, f)
		if !ok {
			continue
		}
		if strings.ContainsFunc(v, isSpaceOrControl) {
			d.errorf(posOf(item), f, "tool pattern %s is invalid: use a namespaced tool name with * wildcards, without spaces", strconv.Quote(v))
			continue
		}
		out = append(out, v)
	}
	return out
}

// decodeHighRisk reads authz.high_risk_tools, keeping null (nil, the
// default) distinct from [] (none).
func (d *decoder) decodeHighRisk(n ast.Node, field string, st *sections) []string {
	if r, ok := d.resolve(n, field); !ok || isNull(r) {
		return nil
	}
	items, ok := d.sequence(n, field)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(items))
	for i, item := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		st.pos[f] = posOf(item)
		if v, ok := d.listString(item, f); ok {
			out = append(out, v)
		}
	}
	return out
}

// listString decodes a non-empty string item of a list.
func (d *decoder) listString(n ast.Node, field string) (string, bool) {
	v, set, ok := d.str(n, field)
	switch {
	case !ok:
		return "", false
	case !set:
		d.errorf(posOf(n), field, "must be a string, got null")
		return "", false
	case v == "":
		d.errorf(posOf(n), field, "must not be empty")
		return "", false
	}
	return v, true
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
// from: a field of the file (by its recorded position) or an env var.
type checker struct {
	file string
	pos  map[string]Pos
	errs Errors
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
	pos := c.pos[p.field]
	c.errs = append(c.errs, &Error{File: c.file, Line: pos.Line, Column: pos.Column, Field: p.field, Msg: msg})
}

// validateAuth checks the auth section once the environment is applied, and
// the JWT secret's references against getenv.
func validateAuth(c *checker, cfg *Config, st *sections, src authSources, getenv func(string) string) {
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
	} else if st.bad["auth.mode"] || st.bad["auth"] {
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
		validateOAuth(c, a, st, modeAt, getenv)
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
	if st.bad["auth.jwt"] || st.bad["auth.jwt.secret"] || st.bad["auth.jwt.jwks_url"] {
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
