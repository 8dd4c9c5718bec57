package config

import (
	"fmt"
	"net/http"
	"strings"
)

// PropagateAssertion is the one ServerIdentity.Propagate mode: a JWT the
// gateway signs per request, naming the caller (package propagate).
const PropagateAssertion = "assertion"

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
}

// IdentityHeader is the header the assertion goes in.
func (i *ServerIdentity) IdentityHeader() string {
	if i.Header == "" {
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
	switch id.Propagate {
	case PropagateAssertion:
	case "":
		add("propagate", "propagate is required (%q)", PropagateAssertion)
	default:
		add("propagate", "unknown mode %q: must be %q (token exchange is not available in this version)", id.Propagate, PropagateAssertion)
	}
	if s.Transport != TransportHTTP {
		probs = append(probs, problem{"identity", "only for http (Streamable HTTP) servers: the caller changes per request, and only that transport sends one HTTP request per call"})
	}
	if id.Header != "" {
		switch {
		case !validHeaderName(id.Header):
			add("header", "%q is not a valid header name", id.Header)
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
