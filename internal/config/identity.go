package config

import (
	"fmt"
	"net/http"
	"strings"
)

// The ServerIdentity.Propagate modes (package propagate).
const (
	// PropagateAssertion sends a JWT the gateway signs per request,
	// naming the caller.
	PropagateAssertion = "assertion"
	// PropagateTokenExchange sends a token the organisation's
	// authorization server issued for the caller in exchange (RFC 8693)
	// for such an assertion.
	PropagateTokenExchange = "token_exchange"
)

// DefaultIdentityHeader is the header an assertion travels in when
// ServerIdentity.Header is empty.
const DefaultIdentityHeader = "X-Switchboard-Identity"

// The bounds of ServerIdentity.TTLSeconds; 0 means the default, 60.
const (
	DefaultIdentityTTLSeconds = 60
	maxIdentityTTLSeconds     = 300
)

// ServerIdentity is `servers.NAME.identity`: forward who the caller is to an
// http server (docs/auth.md, "Identity propagation"). Opt-in; never the
// caller's own credential.
type ServerIdentity struct {
	// Propagate is how: "assertion" (a short-lived JWT signed by the
	// gateway, verifiable with the JWKS it publishes).
	Propagate string `json:"propagate" yaml:"propagate"`
	// Header carries the assertion; default X-Switchboard-Identity.
	Header string `json:"header,omitempty" yaml:"header"`
	// Audience is the assertion's aud; default the server's url.
	Audience string `json:"audience,omitempty" yaml:"audience"`
	// TTLSeconds is the assertion's lifetime, 1..300; default 60.
	TTLSeconds int `json:"ttl_seconds,omitempty" yaml:"ttl_seconds"`

	// token_exchange: the authorization server's token endpoint, the
	// gateway's client there (the NAME of the variable with its secret,
	// read by Expand), and what is asked for: resource (RFC 8707; default
	// the server's url) and scopes. Audience, if set, is sent as the
	// audience parameter.
	TokenEndpoint   string   `json:"token_endpoint,omitempty" yaml:"token_endpoint"`
	ClientID        string   `json:"client_id,omitempty" yaml:"client_id"`
	ClientSecretEnv string   `json:"client_secret_env,omitempty" yaml:"client_secret_env"`
	Resource        string   `json:"resource,omitempty" yaml:"resource"`
	Scopes          []string `json:"scopes,omitempty" yaml:"scopes,omitempty"`
}

// IdentityClientSecret is the value of Identity.ClientSecretEnv, read by
// [Server.Expand]; "" before Expand or without one. SECRET.
func (s *Server) IdentityClientSecret() string { return s.identitySecret }

// IdentityHeader is the header the assertion or exchanged token goes in:
// by default X-Switchboard-Identity for an assertion, Authorization (as a
// bearer token) for an exchanged token.
func (i *ServerIdentity) IdentityHeader() string {
	if i.Header == "" {
		if i.Propagate == PropagateTokenExchange {
			return "Authorization"
		}
		return DefaultIdentityHeader
	}
	return http.CanonicalHeaderKey(i.Header)
}

// headersNotOverridable are the headers an assertion may not replace: the
// transport's own, and the credential of the server.
var headersNotOverridable = []string{"Authorization", "Content-Type", "Accept", "Host", "Content-Length",
	"Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Last-Event-Id", "Cookie", "Traceparent"}

// validateServerIdentity checks `identity` of a server.
func validateServerIdentity(s *Server) []problem {
	id := s.Identity
	if id == nil {
		return nil
	}
	var probs []problem
	add := func(sub, format string, args ...any) {
		probs = append(probs, problem{"identity." + sub, fmt.Sprintf(format, args...)})
	}
	exchange := id.Propagate == PropagateTokenExchange
	switch id.Propagate {
	case PropagateAssertion:
		for _, f := range []struct{ name, v string }{{"token_endpoint", id.TokenEndpoint}, {"client_id", id.ClientID},
			{"client_secret_env", id.ClientSecretEnv}, {"resource", id.Resource}} {
			if f.v != "" {
				add(f.name, "only for propagate: token_exchange")
			}
		}
		if len(id.Scopes) > 0 {
			add("scopes", "only for propagate: token_exchange")
		}
	case PropagateTokenExchange:
		if id.TokenEndpoint == "" {
			add("token_endpoint", "token_exchange needs the authorization server's token endpoint")
		} else if msg := checkHTTPURL(id.TokenEndpoint); msg != "" {
			add("token_endpoint", "%s", msg)
		}
		if id.ClientID == "" {
			add("client_id", "token_exchange needs the gateway's client at the authorization server")
		}
		if id.ClientSecretEnv == "" {
			add("client_secret_env", "token_exchange needs the client's secret")
		} else if !envNameRE.MatchString(id.ClientSecretEnv) {
			add("client_secret_env", "%s", badRefMsg)
		}
		if id.Resource != "" {
			if msg := checkHTTPURL(id.Resource); msg != "" {
				add("resource", "%s", msg)
			}
		}
		for i, sc := range id.Scopes {
			if sc == "" || strings.ContainsAny(sc, " \t\r\n\"\\") {
				add(fmt.Sprintf("scopes[%d]", i), "%q is not a scope token", sc)
			}
		}
		if id.TTLSeconds != 0 {
			add("ttl_seconds", "only for propagate: assertion (an exchanged token lives as long as the authorization server says)")
		}
		if id.Header == "" || strings.EqualFold(id.Header, "Authorization") {
			const own = "the exchanged token is sent as the Authorization header: remove "
			if s.Auth != nil {
				probs = append(probs, problem{"identity", own + "auth (or set identity.header)"})
			}
			if s.BearerTokenEnvVar != "" {
				probs = append(probs, problem{"identity", own + "bearer_token_env_var (or set identity.header)"})
			}
		}
	case "":
		add("propagate", "propagate is required (%q or %q)", PropagateAssertion, PropagateTokenExchange)
	default:
		add("propagate", "unknown mode %q: must be %q or %q", id.Propagate, PropagateAssertion, PropagateTokenExchange)
	}
	if s.Transport != TransportHTTP {
		probs = append(probs, problem{"identity", "only for http (Streamable HTTP) servers: the caller changes per request, and only that transport sends one HTTP request per call"})
	}
	if id.Header != "" {
		switch {
		case !validHeaderName(id.Header):
			add("header", "%q is not a valid header name", id.Header)
		case exchange && strings.EqualFold(id.Header, "Authorization"):
			// The default of token_exchange, checked above.
		default:
			for _, h := range headersNotOverridable {
				if strings.EqualFold(h, id.Header) {
					add("header", "%q is a header the transport or the server's credential uses: pick another", id.Header)
				}
			}
		}
	}
	h := id.IdentityHeader()
	for _, k := range sortedKeys(s.Headers) {
		if strings.EqualFold(k, h) {
			add("header", "headers.%s is the same header: the assertion would replace it", k)
		}
	}
	for _, k := range sortedKeys(s.HeadersFromEnv) {
		if strings.EqualFold(k, h) {
			add("header", "headers_from_env.%s is the same header: the assertion would replace it", k)
		}
	}
	if id.Audience != "" && strings.ContainsAny(id.Audience, "\r\n\x00") {
		add("audience", "must not contain control characters")
	}
	if msg := between(id.TTLSeconds, 0, maxIdentityTTLSeconds); msg != "" {
		add("ttl_seconds", "%s", msg)
	}
	return probs
}
