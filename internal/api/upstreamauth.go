package api

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// UpstreamAuth runs the OAuth authorization of upstream servers
// (`servers.NAME.auth`) for an operator. *upstreamauth.Set implements it.
// Its answers never carry a token or a secret.
type UpstreamAuth interface {
	// StartAuth starts a new authorization of server (cancelling one in
	// progress) and returns once the flow has the URL a person must open,
	// or has ended (client credentials). A server without `auth` is an
	// error wrapping ErrNoUpstreamAuth.
	StartAuth(ctx context.Context, server string) (UpstreamAuthFlow, error)
	// AuthStatus is the last flow started for server and its stored grant.
	AuthStatus(ctx context.Context, server string) (UpstreamAuthFlow, error)
}

// The states of an UpstreamAuthFlow.
const (
	FlowNone    = "none"    // no flow was started on this replica
	FlowPending = "pending" // waiting for the person to approve
	FlowDone    = "done"    // the grant is stored
	FlowFailed  = "failed"  // see Error
)

// UpstreamAuthFlow is the answer of POST and GET
// /api/v1/aggregator/servers/{id}/auth.
type UpstreamAuthFlow struct {
	Server string `json:"server"`
	// State is none, pending, done or failed.
	State string `json:"state"`
	// AuthorizationURL is where the person must go to approve; "" for the
	// client_credentials grant, which needs nobody.
	AuthorizationURL string        `json:"authorization_url"`
	Started          *time.Time    `json:"started_at,omitempty"`
	Error            string        `json:"error,omitempty"`
	Grant            UpstreamGrant `json:"grant"`
}

// UpstreamGrant describes the stored grant of a server: never a token.
type UpstreamGrant struct {
	Authorized  bool       `json:"authorized"`
	Type        string     `json:"type,omitempty"` // authorization_code | client_credentials
	Issuer      string     `json:"issuer,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	Refreshable bool       `json:"refreshable"`
	Scopes      []string   `json:"scopes"`
	Problem     string     `json:"problem,omitempty"`
}

// CodeUpstreamAuthOff: the server has no `auth` (or the gateway runs no
// upstream OAuth client), so there is nothing to authorize.
const CodeUpstreamAuthOff = "upstream_auth_not_configured"

// ErrNoUpstreamAuth is wrapped by UpstreamAuth's errors for a server
// without `auth`.
var ErrNoUpstreamAuth = errors.New("no OAuth client configured")

// upstreamAuthOff is the answer for a server without `auth`: a 404, since
// there is nothing to authorize, with a code the CLI recognises.
func upstreamAuthOff(server string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeUpstreamAuthOff,
		Message: "server " + quote(server) + " has no OAuth client configured (servers.NAME.auth: {type: oauth, ...})"}
}

func (h *handler) upstreamAuth(start bool) apiFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		s, err := h.servers.Get(r.Context(), r.PathValue("id"))
		if err != nil {
			return err
		}
		if h.upAuth == nil {
			return upstreamAuthOff(s.Name)
		}
		var f UpstreamAuthFlow
		if start {
			f, err = h.upAuth.StartAuth(r.Context(), s.Name)
			h.operation(r.Context(), "server.auth", s.Name, "upstream OAuth authorization started", err)
		} else {
			f, err = h.upAuth.AuthStatus(r.Context(), s.Name)
		}
		if errors.Is(err, ErrNoUpstreamAuth) {
			return upstreamAuthOff(s.Name)
		}
		if err != nil {
			return err
		}
		if f.Grant.Scopes == nil {
			f.Grant.Scopes = []string{}
		}
		writeJSON(w, http.StatusOK, f)
		return nil
	}
}
