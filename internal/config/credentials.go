package config

import (
	"fmt"
	"strings"
)

// The values of Server.Credentials.
const (
	// CredentialsShared: every caller's calls go with the server's own
	// credentials (headers, bearer_token_env_var, auth). The default.
	CredentialsShared = "shared"
	// CredentialsPerUser: each caller's calls go with that caller's own
	// credential for the server, an account linked by OAuth (the server's
	// auth section configures the client) or a personal static credential;
	// a caller without one is refused with upstream_auth_required.
	CredentialsPerUser = "per_user"
)

// userSessionIdleRange bounds user_session_idle_seconds: a second to a day.
var userSessionIdleRange = secondsRange{1, 24 * 60 * 60}

// PerUser reports whether the server uses each caller's own credentials
// (credentials: per_user).
func (s *Server) PerUser() bool { return s.Credentials == CredentialsPerUser }

// validateCredentials checks `credentials` of a server.
func validateCredentials(s *Server) []problem {
	var idle []problem
	if v := s.UserSessionIdle; v != 0 {
		if !s.PerUser() {
			idle = append(idle, problem{"user_session_idle_seconds", "only with credentials: per_user"})
		} else if msg := userSessionIdleRange.check(v.Duration()); msg != "" {
			idle = append(idle, problem{"user_session_idle_seconds", msg})
		}
	}
	switch s.Credentials {
	case "", CredentialsShared:
		return idle
	case CredentialsPerUser:
	default:
		return []problem{{"credentials", fmt.Sprintf("unknown value %q: must be \"shared\" or \"per_user\"", s.Credentials)}}
	}
	probs := idle
	if s.Transport == TransportStdio {
		probs = append(probs, problem{"credentials", "per_user is not allowed for a stdio server (only for sse and http servers)"})
	}
	// A caller's credential goes in the Authorization header: a shared one
	// there would be sent in its place or beside it.
	probs = append(probs, ownAuthorization(s, "credentials", "per_user sends each caller's own Authorization header: remove ")...)
	if s.Auth != nil && s.Auth.Grant == GrantClientCredentials {
		probs = append(probs, problem{"credentials", "per_user needs a person per account: the client_credentials grant authenticates the gateway itself"})
	}
	return probs
}

// ownAuthorization returns a problem at sub for each Authorization header
// the server's definition sets itself (bearer_token_env_var, or an
// Authorization header in headers or headers_from_env) where sub's
// setting sends one of its own; msg says so and is followed by what to
// remove.
func ownAuthorization(s *Server, sub, msg string) []problem {
	var probs []problem
	if s.BearerTokenEnvVar != "" {
		probs = append(probs, problem{sub, msg + "bearer_token_env_var"})
	}
	for _, h := range sortedKeys(s.Headers) {
		if strings.EqualFold(h, "Authorization") {
			probs = append(probs, problem{sub, msg + "headers." + h})
		}
	}
	for _, h := range sortedKeys(s.HeadersFromEnv) {
		if strings.EqualFold(h, "Authorization") {
			probs = append(probs, problem{sub, msg + "headers_from_env." + h})
		}
	}
	return probs
}
