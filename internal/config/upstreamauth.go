package config

import (
	"fmt"
	"net/url"
	"strings"
)

// AuthTypeOAuth is the only ServerAuth.Type: the gateway is the server's
// OAuth 2.1 client (package upstreamauth).
const AuthTypeOAuth = "oauth"

// The grants and token endpoint authentication methods of ServerAuth; the
// same strings as upstreamauth's.
const (
	GrantAuthorizationCode  = "authorization_code"
	GrantClientCredentials  = "client_credentials"
	tokenAuthBasic          = "client_secret_basic"
	tokenAuthPost           = "client_secret_post"
	tokenAuthNone           = "none"
	maxUpstreamAuthStepUps  = 10
	maxRefreshMarginSeconds = 24 * 60 * 60
)

// ServerAuth is `servers.NAME.auth`: how the gateway authenticates to an
// http or sse server protected by OAuth (docs/auth.md, "Upstream
// servers"). It holds the NAME of the variable with the client secret,
// never the secret: a definition is stored as JSON as it is.
type ServerAuth struct {
	Type                    string   `json:"type" yaml:"type"`
	Grant                   string   `json:"grant,omitempty" yaml:"grant"` // "" = authorization_code
	ClientID                string   `json:"client_id,omitempty" yaml:"client_id"`
	ClientSecretEnv         string   `json:"client_secret_env,omitempty" yaml:"client_secret_env"`
	ClientMetadataURL       string   `json:"client_metadata_url,omitempty" yaml:"client_metadata_url"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty" yaml:"token_endpoint_auth_method"`
	Scopes                  []string `json:"scopes,omitempty" yaml:"scopes,omitempty"`
	Issuer                  string   `json:"issuer,omitempty" yaml:"issuer"`
	RefreshMarginSeconds    int      `json:"refresh_margin_seconds,omitempty" yaml:"refresh_margin_seconds"` // 0 = 60
	MaxStepUps              int      `json:"max_step_ups,omitempty" yaml:"max_step_ups"`                     // 0 = 2
}

// AuthClientSecret is the value of Auth.ClientSecretEnv, read by
// [Server.Expand]; "" before Expand or without one. SECRET.
func (s *Server) AuthClientSecret() string { return s.authSecret }

// validateServerAuth checks `auth` of a server; the rules that need the
// environment are in expand.
func validateServerAuth(s *Server) []problem {
	a := s.Auth
	if a == nil {
		return nil
	}
	var probs []problem
	add := func(sub, format string, args ...any) {
		probs = append(probs, problem{"auth." + sub, fmt.Sprintf(format, args...)})
	}
	if a.Type != AuthTypeOAuth {
		if a.Type == "" {
			add("type", "type is required (\"oauth\")")
		} else {
			add("type", "unknown type %q: must be \"oauth\"", a.Type)
		}
	}
	if s.Transport == TransportStdio {
		probs = append(probs, problem{"auth", "not allowed for a stdio server (only for sse and http servers)"})
	}
	probs = append(probs, ownAuthorization(s, "auth", "oauth sends its own Authorization header: remove ")...)
	switch a.Grant {
	case "", GrantAuthorizationCode:
	case GrantClientCredentials:
		if a.ClientID == "" {
			add("client_id", "the client_credentials grant needs a registered client")
		}
		if a.ClientSecretEnv == "" {
			add("client_secret_env", "the client_credentials grant needs the client's secret")
		}
		if a.ClientMetadataURL != "" {
			add("client_metadata_url", "only for the authorization_code grant")
		}
	default:
		add("grant", "%q is not authorization_code or client_credentials", a.Grant)
	}
	if a.ClientSecretEnv != "" {
		if !envNameRE.MatchString(a.ClientSecretEnv) {
			add("client_secret_env", "%s", badRefMsg)
		}
		if a.ClientID == "" {
			add("client_secret_env", "a secret without client_id")
		}
	}
	switch a.TokenEndpointAuthMethod {
	case "", tokenAuthBasic, tokenAuthPost:
	case tokenAuthNone:
		if a.ClientSecretEnv != "" {
			add("token_endpoint_auth_method", "none sends no secret, but client_secret_env is set")
		}
	default:
		add("token_endpoint_auth_method", "%q is not client_secret_basic, client_secret_post or none", a.TokenEndpointAuthMethod)
	}
	if a.ClientMetadataURL != "" {
		if u, err := url.Parse(a.ClientMetadataURL); err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			add("client_metadata_url", "must be an https URL with a path")
		}
	}
	if a.Issuer != "" {
		if msg := checkHTTPURL(a.Issuer); msg != "" {
			add("issuer", "%s", msg)
		}
	}
	for i, sc := range a.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\r\n\"\\") {
			add(fmt.Sprintf("scopes[%d]", i), "%q is not a scope token", sc)
		}
	}
	if msg := between(a.RefreshMarginSeconds, 0, maxRefreshMarginSeconds); msg != "" {
		add("refresh_margin_seconds", "%s", msg)
	}
	if msg := between(a.MaxStepUps, 0, maxUpstreamAuthStepUps); msg != "" {
		add("max_step_ups", "%s", msg)
	}
	return probs
}
