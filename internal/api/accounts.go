package api

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// UserAccounts links callers' own accounts and personal credentials to
// the servers with `credentials: per_user` (docs/auth.md, "Per-user
// credentials"). *upstreamauth.Set implements it beside [UpstreamAuth].
// Nothing it returns carries a token or a secret; a personal credential is
// sealed before it is stored and is never read back through it.
type UserAccounts interface {
	// StartUserAuth starts the OAuth authorization of subject's own
	// account on server and returns once the flow has the URL subject must
	// open. A server without per_user credentials is an error wrapping
	// ErrNotPerUser.
	StartUserAuth(ctx context.Context, server, subject string) (UpstreamAuthFlow, error)
	// UserAuthStatus is subject's last flow on server and what is linked.
	UserAuthStatus(ctx context.Context, server, subject string) (UpstreamAuthFlow, error)
	// PutPersonalCredential stores subject's static credential for server,
	// replacing whatever subject had linked.
	PutPersonalCredential(ctx context.Context, server, subject string, c PersonalCredential) error
	// Unlink forgets what subject linked for server; nothing linked is
	// not an error.
	Unlink(ctx context.Context, server, subject string) error
	// LinkedAccounts lists what is linked, newest first: for server ("" =
	// every server) and subject ("" = every caller).
	LinkedAccounts(ctx context.Context, server, subject string) ([]LinkedAccount, error)
}

// ErrNotPerUser is wrapped by UserAccounts' errors for a server without
// `credentials: per_user`.
var ErrNotPerUser = errors.New("the server does not use per-user credentials")

// CodeNotPerUser: the server uses shared credentials; there is no account
// of one's own to link to it.
const CodeNotPerUser = "not_per_user"

// The types of a PersonalCredential.
const (
	CredentialBearer = "bearer" // Authorization: Bearer <token>
	CredentialBasic  = "basic"  // Authorization: Basic <username:password>
	CredentialHeader = "header" // <header>: <value>, an API key
)

// PersonalCredential is the body of PUT /api/v1/me/accounts/{server}: a
// caller's own static credential for a per_user server. It is write-only.
type PersonalCredential struct {
	Type     string `json:"type"` // bearer | basic | header
	Token    string `json:"token,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Header   string `json:"header,omitempty"`
	Value    string `json:"value,omitempty"`
}

// LinkedAccount describes what a caller linked for a server: never the
// credential.
type LinkedAccount struct {
	Server  string `json:"server"`
	Subject string `json:"subject"`
	// Kind is oauth, or the PersonalCredential type.
	Kind      string     `json:"kind"`
	Issuer    string     `json:"issuer,omitempty"`
	Header    string     `json:"header,omitempty"` // of a header credential
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Problem   string     `json:"problem,omitempty"`
	UpdatedAt time.Time  `json:"updated_at"`
}

func notPerUser(server string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotPerUser,
		Message: "server " + quote(server) + " does not use per-user credentials (credentials: per_user)"}
}

func (h *handler) userAccounts() (UserAccounts, error) {
	if ua, ok := h.upAuth.(UserAccounts); ok && ua != nil {
		return ua, nil
	}
	return nil, &Error{Status: http.StatusNotImplemented, Code: CodeNotConfigured, Message: "this gateway links no per-user accounts"}
}

// accountErr maps ErrNotPerUser to its answer.
func accountErr(server string, err error) error {
	if errors.Is(err, ErrNotPerUser) {
		return notPerUser(server)
	}
	return err
}

// myAccounts is GET /api/v1/me/accounts: what the caller linked.
func (h *handler) myAccounts(w http.ResponseWriter, r *http.Request) error {
	id, err := caller(r.Context())
	if err != nil {
		return err
	}
	ua, err := h.userAccounts()
	if err != nil {
		return err
	}
	list, err := ua.LinkedAccounts(r.Context(), "", actor(id))
	if err != nil {
		return err
	}
	if list == nil {
		list = []LinkedAccount{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"accounts": list})
	return nil
}

// myAccount serves /api/v1/me/accounts/{server}: POST .../connect starts
// the OAuth flow of the caller's account, GET shows it, PUT stores a
// personal credential, DELETE unlinks.
func (h *handler) myAccount(op string) apiFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, err := caller(r.Context())
		if err != nil {
			return err
		}
		ua, err := h.userAccounts()
		if err != nil {
			return err
		}
		s, err := h.servers.Get(r.Context(), r.PathValue("server"))
		if err != nil {
			return err
		}
		if !id.Admin && !h.srvVisible(id, s.Name) {
			return forbidden("agent " + quote(actor(id)) + " may not use server " + quote(s.Name))
		}
		subject := actor(id)
		var f UpstreamAuthFlow
		switch op {
		case "connect":
			f, err = ua.StartUserAuth(r.Context(), s.Name, subject)
			h.operation(r.Context(), "account.connect", s.Name, "linking the account of "+subject+" started", err)
		case "status":
			f, err = ua.UserAuthStatus(r.Context(), s.Name, subject)
		case "put":
			var c PersonalCredential
			if err := h.decode(w, r, &c); err != nil {
				return err
			}
			err = ua.PutPersonalCredential(r.Context(), s.Name, subject, c)
			h.operation(r.Context(), "account.credential", s.Name, "personal credential of "+subject+" stored", err)
			if err == nil {
				w.WriteHeader(http.StatusNoContent)
				return nil
			}
		case "delete":
			err = ua.Unlink(r.Context(), s.Name, subject)
			h.operation(r.Context(), "account.unlink", s.Name, "account of "+subject+" unlinked", err)
			if err == nil {
				w.WriteHeader(http.StatusNoContent)
				return nil
			}
		}
		if err != nil {
			return accountErr(s.Name, err)
		}
		if f.Grant.Scopes == nil {
			f.Grant.Scopes = []string{}
		}
		writeJSON(w, http.StatusOK, f)
		return nil
	}
}

// serverAccounts is GET /api/v1/aggregator/servers/{id}/accounts (admins):
// who linked what, never the credentials.
func (h *handler) serverAccounts(w http.ResponseWriter, r *http.Request) error {
	ua, err := h.userAccounts()
	if err != nil {
		return err
	}
	s, err := h.servers.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	list, err := ua.LinkedAccounts(r.Context(), s.Name, "")
	if err != nil {
		return err
	}
	if list == nil {
		list = []LinkedAccount{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"accounts": list})
	return nil
}

// deleteServerAccount is DELETE
// /api/v1/aggregator/servers/{id}/accounts/{subject} (admins): the one
// thing an administrator may do with another caller's credential.
func (h *handler) deleteServerAccount(w http.ResponseWriter, r *http.Request) error {
	ua, err := h.userAccounts()
	if err != nil {
		return err
	}
	s, err := h.servers.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	subject := r.PathValue("subject")
	err = ua.Unlink(r.Context(), s.Name, subject)
	h.operation(r.Context(), "account.unlink", s.Name, "account of "+subject+" deleted by an administrator", err)
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
