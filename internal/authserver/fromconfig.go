package authserver

import (
	"slices"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// FromConfig is the server's Config for the gateway's auth.oauth section o
// (nil: none) with issuer as its canonical URL: the scopes and scope roles
// of the resource server (every scope the resource server knows is
// grantable; the ones it requires are granted by default), and the
// built-in server's own settings (auth.oauth.server), secret references
// resolved with getenv.
func FromConfig(o *config.OAuth, issuer string, getenv func(string) string) (Config, error) {
	c := Config{Issuer: issuer}
	if o == nil {
		return c, nil
	}
	c.DefaultScopes, c.ScopeRoles = o.Scopes, o.ScopeRoles
	c.Scopes = slices.Clone(o.Scopes)
	for sc := range o.ScopeRoles {
		if !slices.Contains(c.Scopes, sc) {
			c.Scopes = append(c.Scopes, sc)
		}
	}
	slices.Sort(c.Scopes)
	if len(c.Scopes) == 0 {
		c.Scopes = nil // the default, ["mcp"]
	}
	s := o.BuiltInServer()
	if s == nil {
		return c, nil
	}
	c.AccessTokenTTL, c.RefreshTokenTTL = s.AccessTokenTTL, s.RefreshTokenTTL
	c.KeyRotation = time.Duration(s.KeyRotationDays) * 24 * time.Hour
	c.Registration = RegistrationConfig{Mode: s.Registration, MaxClients: s.MaxClients}
	tok, err := s.ExpandRegistrationToken(getenv)
	if err != nil {
		return c, err
	}
	c.Registration.InitialAccessToken = tok
	c.DisableMetadataDocuments = s.ClientMetadataDocuments != nil && !*s.ClientMetadataDocuments
	if u := s.Upstream; u != nil {
		secret, err := u.ExpandClientSecret(getenv)
		if err != nil {
			return c, err
		}
		c.Upstream = &UpstreamConfig{Issuer: u.Issuer, ClientID: u.ClientID, ClientSecret: secret, Scopes: u.Scopes,
			SubjectClaim: u.Claims.AgentID, RolesClaim: u.Claims.Roles, WorkspaceClaim: u.Claims.Workspace,
			AllowClaim: u.Claims.AllowServers, DenyClaim: u.Claims.DenyServers, AdminClaim: u.Claims.Admin}
	}
	return c, nil
}
