// Package upstreamauth is the gateway's OAuth client for upstream MCP
// servers protected as the MCP authorization specification describes.
//
// One [Authorizer] serves one upstream server. It is the
// [auth.OAuthHandler] of the server's Streamable HTTP transport: the go-sdk
// asks it for a token before every request and calls its Authorize when
// the server answers 401 or 403. Everything the go-sdk provides is used as
// it is: WWW-Authenticate parsing, protected-resource and
// authorization-server metadata (oauthex), the authorization-code flow with
// PKCE S256, RFC 8707 resource, RFC 9207 iss checks, scope selection and
// step-up union, client ID metadata documents, pre-registered clients and
// dynamic registration ([auth.AuthorizationCodeHandler]). What it leaves to
// us is here:
//
//   - discovery that fails loudly: a metadata document that is malformed,
//     larger than 1 MiB, redirected to another host or names the wrong
//     resource or issuer is an error naming the document, not a silent
//     fall back to guessed endpoints;
//   - grants that outlive the process: sealed with the secret keyring in a
//     [TokenStore] shared by the replicas, refreshed before they expire
//     (Spec.RefreshMargin) by one replica at a time (a lease on the grant's
//     version), with the resource parameter on the refresh too;
//   - the client credentials grant, with the resource parameter;
//   - who runs the authorization-code flow: in the gateway nobody is at a
//     browser when an upstream answers 401, so Authorize reports a
//     [NeedsAuthError] (the upstream supervisor shows NEEDS_AUTH with its
//     reason, without a crash loop) and an operator starts the flow
//     ([Flows], [Callbacks] at [CallbackPath]); the probe command runs it
//     at once with a fetcher of its own ([Options.Fetcher]);
//   - a bound on step-up authorizations for one scope.
//
// No token, refresh token or client secret ever reaches a log line, an
// error or a progress message.
package upstreamauth

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Grant is the OAuth grant a server is authorized with.
type Grant string

// The grants an [Authorizer] can obtain.
const (
	// GrantAuthorizationCode has a person approve the gateway's access in
	// a browser (PKCE S256); the grant is then refreshed without them.
	GrantAuthorizationCode Grant = "authorization_code"
	// GrantClientCredentials authenticates the gateway itself, for
	// machine-to-machine servers; a new token is fetched when one expires.
	GrantClientCredentials Grant = "client_credentials"
)

// The token endpoint authentication methods of RFC 7591.
const (
	AuthMethodBasic = "client_secret_basic"
	AuthMethodPost  = "client_secret_post"
	AuthMethodNone  = "none"
)

// DefaultRefreshMargin is how long before its expiry an access token is
// refreshed when Spec.RefreshMargin is zero.
const DefaultRefreshMargin = time.Minute

// DefaultMaxStepUps is how many times in a row the gateway asks for more
// scope when a server answers insufficient_scope, when Spec.MaxStepUps is
// zero.
const DefaultMaxStepUps = 2

// CallbackPath is where the gateway receives an upstream authorization
// server's redirect at the end of the authorization-code flow. (The
// gateway's own authorization server has /oauth/callback, for the return
// from its sign-in provider.)
const CallbackPath = "/oauth/upstream/callback"

// ClientMetadataPath is where the gateway serves its client ID metadata
// document for upstream authorization servers (see
// [ClientMetadataHandler]).
const ClientMetadataPath = "/oauth/upstream/client-metadata.json"

// Spec is the OAuth configuration of one upstream server: config's
// `servers.NAME.auth: {type: oauth, ...}` once resolved (secrets read from
// the environment). The zero value is an authorization-code grant with
// dynamic client registration and discovered scopes.
type Spec struct {
	// Grant is GrantAuthorizationCode (default) or GrantClientCredentials.
	Grant Grant
	// ClientID is a client registered with the authorization server
	// beforehand; "" registers one dynamically (authorization code only).
	ClientID string
	// ClientSecret is ClientID's secret (config: client_secret_env); ""
	// for a public client.
	ClientSecret string
	// ClientMetadataURL is the HTTPS URL of the gateway's client ID
	// metadata document, used as the client id by authorization servers
	// that support it (client_id_metadata_document_supported).
	ClientMetadataURL string
	// TokenEndpointAuthMethod is client_secret_basic, client_secret_post
	// or none; "" picks what the authorization server supports (post,
	// then basic). It is what a dynamic registration asks for and how the
	// client credentials grant authenticates.
	TokenEndpointAuthMethod string
	// Scopes, if set, are requested instead of the server's
	// scopes_supported; a step-up challenge adds the scopes it names.
	Scopes []string
	// Issuer, if set, is the only authorization server the credentials
	// may be used with: a server that points elsewhere is refused.
	Issuer string
	// RefreshMargin is how long before expiry a token is refreshed;
	// default [DefaultRefreshMargin].
	RefreshMargin time.Duration
	// MaxStepUps bounds the authorizations in a row for a scope the server
	// keeps answering insufficient_scope to; default [DefaultMaxStepUps].
	MaxStepUps int
}

// Validate reports every problem with s, each naming its field as the
// config does.
func (s *Spec) Validate() error {
	var errs []error
	switch s.Grant {
	case "", GrantAuthorizationCode:
	case GrantClientCredentials:
		if s.ClientID == "" {
			errs = append(errs, errors.New("client_id: the client_credentials grant needs a registered client"))
		}
		if s.ClientSecret == "" {
			errs = append(errs, errors.New("client_secret_env: the client_credentials grant needs the client's secret"))
		}
		if s.ClientMetadataURL != "" {
			errs = append(errs, errors.New("client_metadata_url: only for the authorization_code grant"))
		}
	default:
		errs = append(errs, fmt.Errorf("grant: %q is not authorization_code or client_credentials", s.Grant))
	}
	switch s.TokenEndpointAuthMethod {
	case "", AuthMethodBasic, AuthMethodPost:
	case AuthMethodNone:
		if s.ClientSecret != "" {
			errs = append(errs, errors.New("token_endpoint_auth_method: none sends no secret, but client_secret_env is set"))
		}
	default:
		errs = append(errs, fmt.Errorf("token_endpoint_auth_method: %q is not client_secret_basic, client_secret_post or none", s.TokenEndpointAuthMethod))
	}
	if s.ClientSecret != "" && s.ClientID == "" {
		errs = append(errs, errors.New("client_secret_env: a secret without client_id"))
	}
	if s.ClientMetadataURL != "" {
		if u, err := url.Parse(s.ClientMetadataURL); err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			errs = append(errs, errors.New("client_metadata_url: must be an https URL with a path"))
		}
	}
	if s.Issuer != "" {
		if u, err := url.Parse(s.Issuer); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			errs = append(errs, errors.New("issuer: must be an http(s) URL"))
		}
	}
	for _, sc := range s.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\"\\") {
			errs = append(errs, fmt.Errorf("scopes: %q is not a scope token", sc))
		}
	}
	if s.RefreshMargin < 0 {
		errs = append(errs, errors.New("refresh_margin: must not be negative"))
	}
	if s.MaxStepUps < 0 {
		errs = append(errs, errors.New("max_step_ups: must not be negative"))
	}
	return errors.Join(errs...)
}

func (s *Spec) grant() Grant {
	if s.Grant == "" {
		return GrantAuthorizationCode
	}
	return s.Grant
}

func (s *Spec) margin() time.Duration {
	if s.RefreshMargin == 0 {
		return DefaultRefreshMargin
	}
	return s.RefreshMargin
}

func (s *Spec) maxStepUps() int {
	if s.MaxStepUps == 0 {
		return DefaultMaxStepUps
	}
	return s.MaxStepUps
}

// NeedsAuthError says that the gateway holds no usable grant for a server
// and cannot get one without an operator: it was never authorized, the
// authorization server refused a refresh (the grant was revoked, or
// expired), the server asks for scope the grant lacks, or discovery found
// the server's or authorization server's metadata unusable. Reason says
// which, and how to fix it; it never contains a secret.
//
// The upstream supervisor recognizes it by its AuthReason method
// (upstream.AuthRequired) and shows the server as NEEDS_AUTH with Reason,
// without restarting it.
type NeedsAuthError struct {
	Server string
	Reason string
}

func (e *NeedsAuthError) Error() string {
	return fmt.Sprintf("server %q needs authorization: %s", e.Server, e.Reason)
}

// AuthReason is Reason, for the upstream supervisor.
func (e *NeedsAuthError) AuthReason() string { return e.Reason }

// IsNeedsAuth reports whether err is or wraps a [NeedsAuthError].
func IsNeedsAuth(err error) bool {
	var n *NeedsAuthError
	return errors.As(err, &n)
}

// unionScopes returns a's scopes followed by those of b it lacks.
func unionScopes(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
