package api

import (
	"context"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

// The app authenticates every /api/v1 request before it reaches this
// handler and puts the caller in the request context; these wrappers only
// decide whether that caller may use the route. Routes wrapped with plain
// wrap (healthz, readyz) need no identity.

// authed serves fn to any authenticated caller.
func (h *handler) authed(fn apiFunc) http.Handler {
	return h.wrap(func(w http.ResponseWriter, r *http.Request) error {
		if _, err := caller(r.Context()); err != nil {
			return err
		}
		return fn(w, r)
	})
}

// admin serves fn to admins only.
func (h *handler) admin(fn apiFunc) http.Handler {
	return h.wrap(func(w http.ResponseWriter, r *http.Request) error {
		id, err := caller(r.Context())
		if err != nil {
			return err
		}
		if !id.Admin {
			return forbidden("this route is for administrators")
		}
		return fn(w, r)
	})
}

// caller returns the request's identity, or the 401 to answer.
func caller(ctx context.Context) (authz.Identity, error) {
	id, ok := authz.IdentityFrom(ctx)
	if !ok {
		return authz.Identity{}, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated,
			Message: "authentication required"}
	}
	return id, nil
}

// actor names the caller in granted_by/created_by fields.
func actor(id authz.Identity) string {
	if id.AgentID != "" {
		return id.AgentID
	}
	return id.ID
}

func forbidden(msg string) *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: msg}
}

// op tells Options.Operation of a mutating admin call and passes err on,
// so a handler can `return h.op(...)`-style record failures too.
func (h *handler) op(ctx context.Context, op, server, detail string, err error) error {
	h.operation(ctx, op, server, detail, err)
	return err
}
