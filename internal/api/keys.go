package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

// Keys manages API keys. The app's identity store implements it; keys are
// kept hashed, so the secret exists only in the [KeyCreated] answer.
type Keys interface {
	Create(ctx context.Context, req KeyRequest, createdBy string) (KeyCreated, error)
	List(ctx context.Context) ([]KeyView, error)
	// Revoke fails with an error wrapping store.ErrNotFound for an unknown id (404).
	Revoke(ctx context.Context, id string) error
}

// KeyRequest is the body of POST /api/v1/keys: who the key speaks for.
type KeyRequest struct {
	AgentID      string   `json:"agent_id"`
	Roles        []string `json:"roles"`
	Workspace    string   `json:"workspace"`
	Admin        bool     `json:"admin"`
	AllowServers []string `json:"allow_servers"`
	DenyServers  []string `json:"deny_servers"`
	// WorkspacePolicy makes Admin, AllowServers and DenyServers the key's
	// workspace policy (seed 003): the servers' default_access and these
	// lists decide what it may use, with no grant needed. Without it the
	// key needs grants, and the lists only restrict.
	WorkspacePolicy bool       `json:"workspace_policy"`
	ExpiresAt       *time.Time `json:"expires_at"`
	// DeclaredTools are the tools the agent declares when it is registered
	// (seed 000 REQ-MCP-AUTH-002, capability binding): "server:tool" as in
	// the seed, or a namespaced name ("server.tool"); "server:*" for every
	// tool of a server. Each becomes an invoke grant to AgentID, stored in
	// the same transaction as the key: both or neither.
	DeclaredTools []string `json:"declared_tools"`
}

// KeyView is an API key without its secret: what listings may show.
type KeyView struct {
	ID           string   `json:"id"`
	Prefix       string   `json:"prefix"`
	AgentID      string   `json:"agent_id"`
	Roles        []string `json:"roles"`
	Workspace    string   `json:"workspace,omitempty"`
	Admin        bool     `json:"admin"`
	AllowServers []string `json:"allow_servers,omitempty"`
	DenyServers  []string `json:"deny_servers,omitempty"`
	// WorkspacePolicy: see [KeyRequest].
	WorkspacePolicy bool       `json:"workspace_policy"`
	CreatedAt       time.Time  `json:"created_at"`
	CreatedBy       string     `json:"created_by,omitempty"`
	ExpiresAt       *time.Time `json:"expires_at,omitempty"`
	RevokedAt       *time.Time `json:"revoked_at,omitempty"`
}

// KeyCreated is a new key with its secret, which is shown this once, and
// the grants made from its declared tools.
type KeyCreated struct {
	KeyView
	Key    string        `json:"key"`
	Grants []authz.Grant `json:"grants,omitempty"`
}

func (h *handler) createKey(w http.ResponseWriter, r *http.Request) error {
	if h.keys == nil {
		return notConfigured("API keys")
	}
	var req KeyRequest
	if err := h.decode(w, r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.AgentID) == "" {
		return badRequest("agent_id is required")
	}
	id, _ := caller(r.Context())
	k, err := h.keys.Create(r.Context(), req, actor(id))
	// The detail names the key, never its secret.
	detail := "agent " + quote(req.AgentID)
	if req.Admin {
		detail += " (admin)"
	}
	if req.WorkspacePolicy {
		detail += " with workspace policy"
	}
	if n := len(req.DeclaredTools); n > 0 {
		detail += ", declaring " + strconv.Itoa(n) + " tools"
	}
	if err == nil {
		detail += " key " + quote(k.ID)
	}
	if err := h.op(r.Context(), "key.create", "", detail, err); err != nil {
		return err
	}
	if k.Roles == nil {
		k.Roles = []string{}
	}
	writeJSON(w, http.StatusCreated, k)
	return nil
}

func (h *handler) listKeys(w http.ResponseWriter, r *http.Request) error {
	if h.keys == nil {
		return notConfigured("API keys")
	}
	keys, err := h.keys.List(r.Context())
	if err != nil {
		return err
	}
	if keys == nil {
		keys = []KeyView{}
	}
	for i := range keys {
		if keys[i].Roles == nil {
			keys[i].Roles = []string{}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
	return nil
}

func (h *handler) revokeKey(w http.ResponseWriter, r *http.Request) error {
	if h.keys == nil {
		return notConfigured("API keys")
	}
	id := r.PathValue("id")
	if err := h.op(r.Context(), "key.revoke", "", "key "+quote(id), h.keys.Revoke(r.Context(), id)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
