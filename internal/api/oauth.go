package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/switchboard-mcp/switchboard/internal/authserver"
)

// OAuthAdmin is the admin side of the built-in OAuth authorization server:
// the clients that registered and the grants users gave them.
// *authserver.Server implements it. Its answers carry no secret (a client
// secret is shown once, at registration; only hashes are stored).
type OAuthAdmin interface {
	Clients(ctx context.Context) ([]authserver.Client, error)
	// DeleteClient removes a client and revokes its grants; an unknown id
	// is an error wrapping authserver.ErrNotFound.
	DeleteClient(ctx context.Context, id, by string) error
	Grants(ctx context.Context, f authserver.GrantFilter) ([]authserver.Grant, error)
	// RevokeGrant ends a grant: its refresh tokens at once, its access
	// tokens on their next request. An unknown id is an error wrapping
	// authserver.ErrNotFound; an already revoked grant is not an error.
	RevokeGrant(ctx context.Context, id, by string) error
}

// The app passes the authorization server itself as Options.OAuth.
var _ OAuthAdmin = (*authserver.Server)(nil)

// OAuthClient is a client of the built-in authorization server as GET
// /api/v1/oauth/clients lists it.
type OAuthClient = authserver.Client

// OAuthGrant is a user's consent to a client as GET /api/v1/oauth/grants
// lists it.
type OAuthGrant = authserver.Grant

// OAuthClientList is the answer of GET /api/v1/oauth/clients.
type OAuthClientList struct {
	Clients []OAuthClient `json:"clients"`
	Total   int           `json:"total"`
}

// OAuthGrantList is the answer of GET /api/v1/oauth/grants.
type OAuthGrantList struct {
	Grants []OAuthGrant `json:"grants"`
	Total  int          `json:"total"`
}

// CodeOAuthServerOff: the gateway does not run the built-in authorization
// server, so it has no OAuth clients or grants to show.
const CodeOAuthServerOff = "oauth_server_off"

// maxOAuthGrants bounds GET /api/v1/oauth/grants (the store's own cap).
const maxOAuthGrants = 1000

// oauthOff is the answer of every /api/v1/oauth route on a gateway that
// does not run the authorization server: a 404, since there is nothing
// there, with a code the CLI and the dashboard recognise.
func oauthOff() *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeOAuthServerOff,
		Message: "the built-in OAuth authorization server is not running on this gateway (auth.mode: oauth without an external issuer runs it)"}
}

func (h *handler) listOAuthClients(w http.ResponseWriter, r *http.Request) error {
	if h.oauth == nil {
		return oauthOff()
	}
	clients, err := h.oauth.Clients(r.Context())
	if err != nil {
		return err
	}
	if clients == nil {
		clients = []OAuthClient{}
	}
	for i := range clients {
		if clients[i].RedirectURIs == nil {
			clients[i].RedirectURIs = []string{}
		}
		if clients[i].GrantTypes == nil {
			clients[i].GrantTypes = []string{}
		}
	}
	writeJSON(w, http.StatusOK, OAuthClientList{Clients: clients, Total: len(clients)})
	return nil
}

func (h *handler) deleteOAuthClient(w http.ResponseWriter, r *http.Request) error {
	if h.oauth == nil {
		return oauthOff()
	}
	id := r.PathValue("id")
	who, _ := caller(r.Context())
	err := h.oauth.DeleteClient(r.Context(), id, actor(who))
	if err := h.op(r.Context(), "oauth.client.delete", "", "OAuth client "+quote(id)+" and its grants", err); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *handler) listOAuthGrants(w http.ResponseWriter, r *http.Request) error {
	if h.oauth == nil {
		return oauthOff()
	}
	q := r.URL.Query()
	f := authserver.GrantFilter{Subject: q.Get("subject"), ClientID: q.Get("client_id"), Limit: maxOAuthGrants}
	if v := q.Get("active"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badParam("active", "want true or false")
		}
		f.ActiveOnly = b
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxOAuthGrants {
			return badParam("limit", "want a number from 1 to "+strconv.Itoa(maxOAuthGrants))
		}
		f.Limit = n
	}
	grants, err := h.oauth.Grants(r.Context(), f)
	if err != nil {
		return err
	}
	if grants == nil {
		grants = []OAuthGrant{}
	}
	writeJSON(w, http.StatusOK, OAuthGrantList{Grants: grants, Total: len(grants)})
	return nil
}

func (h *handler) revokeOAuthGrant(w http.ResponseWriter, r *http.Request) error {
	if h.oauth == nil {
		return oauthOff()
	}
	id := r.PathValue("id")
	who, _ := caller(r.Context())
	err := h.oauth.RevokeGrant(r.Context(), id, actor(who))
	if err := h.op(r.Context(), "oauth.grant.revoke", "", "OAuth grant "+quote(id), err); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
