package identity

import (
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
)

// AdminKeyEnv names the environment variable whose value, when set, is an
// admin API key from the start: how an operator bootstraps the first keys.
const AdminKeyEnv = "SWITCHBOARD_ADMIN_KEY"

// FromConfig decides how callers authenticate, from the config and the
// listen address ("" when there is no network listener): with no auth
// section, credential-less loopback callers are the local admin (the
// returned warning says so), and any other listener is refused, because it
// would hand every tool to the network.
func FromConfig(cfg *config.Config, listen string, getenv func(string) string) (Config, string, error) {
	ic := Config{AdminKey: getenv(AdminKeyEnv)}
	if cfg.Auth == nil {
		if listen != "" && !netguard.LoopbackAddr(listen) {
			where := "the config file"
			if cfg.File != "" {
				where = cfg.File
			}
			return ic, "", config.Errors{{File: cfg.File, Field: "settings.listen", Msg: fmt.Sprintf(
				"refusing to listen on %s without authentication: anyone who can reach it could call every tool. "+
					"Add an auth: section to %s (mode: keys, then create keys with %s set; or mode: jwt), or listen on 127.0.0.1",
				listen, where, AdminKeyEnv)}}
		}
		ic.Mode = ModeLocal
		return ic, "no auth section: local mode, requests without credentials from this machine (loopback) act as the local admin; " +
			"add an auth: section before exposing the gateway", nil
	}
	ic.Mode = cfg.Auth.Mode
	if j := cfg.Auth.JWT; j != nil {
		var secret string
		if j.Secret != "" { // else jwks_url: there is no key to expand
			var err error
			if secret, err = j.ExpandSecret(getenv); err != nil {
				return ic, "", err // names auth.jwt.secret and the variable
			}
		}
		ic.JWT = &JWTConfig{
			Secret: secret, JWKSURL: j.JWKSURL, Issuer: j.Issuer, Audience: j.Audience, Leeway: leeway(j.Leeway),
			AgentClaim: j.Claims.AgentID, RolesClaim: j.Claims.Roles, WorkspaceClaim: j.Claims.Workspace,
			AllowClaim: j.Claims.AllowServers, DenyClaim: j.Claims.DenyServers, AdminClaim: j.Claims.Admin,
		}
	}
	if o := cfg.Auth.OAuth; o != nil || cfg.Auth.Mode == config.AuthOAuth {
		if o == nil {
			// No section: the built-in authorization server, with the
			// default claims; the app fills in its issuer and keys.
			o = &config.OAuth{Leeway: config.DefaultJWT().Leeway, Claims: config.DefaultJWT().Claims}
		}
		if o.Resource == "" && listen != "" && !netguard.LoopbackAddr(listen) {
			// Behind a proxy or on a public name, the Host header is whatever
			// the client (or the proxy) says: audiences must come from config.
			return ic, "", config.Errors{{File: cfg.File, Line: cfg.Auth.Pos.Line, Column: cfg.Auth.Pos.Column, Field: "auth.oauth.resource",
				Msg: fmt.Sprintf("is required when listening on %s: set it to the gateway's URL as clients reach it (e.g. https://gateway.example.com); "+
					"tokens must be issued for it", listen)}}
		}
		oc := &OAuthConfig{
			Resource: o.Resource, Scopes: o.Scopes, ScopeRoles: o.ScopeRoles,
			Token: JWTConfig{Issuer: o.Issuer, JWKSURL: o.JWKSURL, Leeway: leeway(o.Leeway),
				AgentClaim: o.Claims.AgentID, RolesClaim: o.Claims.Roles, WorkspaceClaim: o.Claims.Workspace,
				AllowClaim: o.Claims.AllowServers, DenyClaim: o.Claims.DenyServers, AdminClaim: o.Claims.Admin},
		}
		if in := o.Introspection; in != nil {
			secret, err := in.ExpandSecret(getenv)
			if err != nil {
				return ic, "", err // names the field and the variable
			}
			oc.Introspection = &IntrospectionConfig{URL: in.URL, ClientID: in.ClientID, ClientSecret: secret, CacheTTL: in.Cache}
			if in.Cache == 0 {
				oc.Introspection.CacheTTL = -1 // the setting's 0 means no cache
			}
		}
		ic.OAuth = oc
	}
	return ic, "", nil
}

// leeway is a configured leeway as JWTConfig takes it: the config has
// applied its default already, so its 0 means none, while JWTConfig's 0
// means the default; a nanosecond is none in all but name.
func leeway(d time.Duration) time.Duration {
	if d == 0 {
		return time.Nanosecond
	}
	return d
}
