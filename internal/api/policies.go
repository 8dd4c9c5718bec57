package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

// Policies manages grants and high-risk approval tokens. The app adapts
// internal/authz to it; these request types are the API's, so the wire
// format does not move when authz does.
type Policies interface {
	Grant(ctx context.Context, req GrantRequest, grantedBy string) (GrantResult, error)
	Revoke(ctx context.Context, grantID string) error
	// Grants lists an agent's grants; agentID "" lists everyone's.
	Grants(ctx context.Context, agentID string) ([]authz.Grant, error)
	IssueToken(ctx context.Context, req TokenRequest) (TokenResult, error)
	RevokeToken(ctx context.Context, id string) error
}

// GrantRequest is the body of POST /api/v1/mcp/policies/grant (seed 000
// PolicyGrant). It grants to an agent (AgentID) or to every identity of a
// workspace (Workspace), one of the two. Tool is either a namespaced name or
// pattern ("github.*") with Server empty, or the server's own tool name (or
// pattern) with Server set.
type GrantRequest struct {
	AgentID   string     `json:"agent_id"`
	Workspace string     `json:"workspace"`
	Tool      string     `json:"tool_name"`
	Server    string     `json:"server_id"`
	Actions   []string   `json:"actions"`
	ExpiresAt *time.Time `json:"expires_at"`
	// IssueToken also issues a high-risk approval token for the grant; the
	// token fields below apply to it.
	IssueToken      bool            `json:"issue_token"`
	TokenTTLMinutes int             `json:"token_ttl_minutes"`
	BindArguments   json.RawMessage `json:"bind_arguments"`
	SingleUse       bool            `json:"single_use"`
}

// GrantResult is the grant made and, when asked for, its token: the secret
// is in Token and shown this once.
type GrantResult struct {
	Grant     authz.Grant  `json:"grant"`
	Token     string       `json:"token,omitempty"`
	TokenInfo *authz.Token `json:"token_info,omitempty"`
}

// TokenRequest is the body of POST /api/v1/mcp/tokens: an approval for one
// high-risk tool, optionally bound to exact arguments and single-use, so it
// cannot be replayed for another call.
type TokenRequest struct {
	AgentID       string          `json:"agent_id"`
	Server        string          `json:"server_id"`
	Tool          string          `json:"tool_name"`
	TTLMinutes    int             `json:"ttl_minutes"`
	BindArguments json.RawMessage `json:"bind_arguments"`
	SingleUse     bool            `json:"single_use"`
}

// TokenResult is an issued token; the secret is in Token and shown this once.
type TokenResult struct {
	Token     string      `json:"token"`
	TokenInfo authz.Token `json:"token_info"`
}

func (h *handler) grant(w http.ResponseWriter, r *http.Request) error {
	if h.policies == nil {
		return notConfigured("policies")
	}
	var req GrantRequest
	if err := h.decode(w, r, &req); err != nil {
		return err
	}
	agent, workspace := strings.TrimSpace(req.AgentID), strings.TrimSpace(req.Workspace)
	switch {
	case agent == "" && workspace == "":
		return badRequest("agent_id is required (or workspace, to grant to every identity of a workspace)")
	case agent != "" && workspace != "":
		return badRequest("agent_id and workspace are both set: a grant is to an agent or to a workspace")
	case workspace != "" && req.IssueToken:
		return badRequest("issue_token needs an agent: approval tokens are issued to agents, not to workspaces")
	case strings.TrimSpace(req.Tool) == "":
		return badRequest("tool_name is required (\"server.tool\", \"server.*\", or a tool name with server_id)")
	case req.TokenTTLMinutes < 0:
		return badRequest("token_ttl_minutes must not be negative")
	case !req.IssueToken && (req.TokenTTLMinutes != 0 || req.SingleUse || !isNull(req.BindArguments)):
		return badRequest("token_ttl_minutes, bind_arguments and single_use apply to the token: set issue_token")
	}
	var err error
	if req.BindArguments, err = objectOrNil("bind_arguments", CodeBadRequest, req.BindArguments); err != nil {
		return err
	}
	id, _ := caller(r.Context())
	res, err := h.policies.Grant(r.Context(), req, actor(id))
	detail := "agent " + quote(req.AgentID) + " tool " + quote(req.Tool)
	if workspace != "" {
		detail = "workspace " + quote(req.Workspace) + " tool " + quote(req.Tool)
	}
	if err == nil {
		detail += " grant " + quote(res.Grant.ID)
		if res.TokenInfo != nil {
			detail += " with token " + quote(res.TokenInfo.ID)
		}
	}
	if err := h.op(r.Context(), "policy.grant", req.Server, detail, err); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, res)
	return nil
}

func (h *handler) revokeGrant(w http.ResponseWriter, r *http.Request) error {
	if h.policies == nil {
		return notConfigured("policies")
	}
	id := r.PathValue("id")
	if err := h.op(r.Context(), "policy.revoke", "", "grant "+quote(id), h.policies.Revoke(r.Context(), id)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// agentGrants lists one agent's grants: an agent may read its own, an
// admin anyone's.
func (h *handler) agentGrants(w http.ResponseWriter, r *http.Request) error {
	agent := r.PathValue("agent_id")
	id, _ := caller(r.Context())
	if !id.Admin && id.AgentID != agent {
		return forbidden("an agent may list only its own grants")
	}
	if h.policies == nil {
		return notConfigured("policies")
	}
	grants, err := h.policies.Grants(r.Context(), agent)
	if err != nil {
		return err
	}
	if grants == nil {
		grants = []authz.Grant{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"agent_id": agent, "grants": grants})
	return nil
}

func (h *handler) allGrants(w http.ResponseWriter, r *http.Request) error {
	if h.policies == nil {
		return notConfigured("policies")
	}
	grants, err := h.policies.Grants(r.Context(), "")
	if err != nil {
		return err
	}
	if grants == nil {
		grants = []authz.Grant{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": grants})
	return nil
}

func (h *handler) issueToken(w http.ResponseWriter, r *http.Request) error {
	if h.policies == nil {
		return notConfigured("policies")
	}
	var req TokenRequest
	if err := h.decode(w, r, &req); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(req.AgentID) == "":
		return badRequest("agent_id is required")
	case strings.TrimSpace(req.Tool) == "":
		return badRequest("tool_name is required")
	case req.TTLMinutes < 0:
		return badRequest("ttl_minutes must not be negative")
	}
	var err error
	if req.BindArguments, err = objectOrNil("bind_arguments", CodeBadRequest, req.BindArguments); err != nil {
		return err
	}
	res, err := h.policies.IssueToken(r.Context(), req)
	detail := "agent " + quote(req.AgentID) + " tool " + quote(req.Tool)
	if err == nil {
		detail += " token " + quote(res.TokenInfo.ID) // the hash, never the secret
	}
	if err := h.op(r.Context(), "token.issue", req.Server, detail, err); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, res)
	return nil
}

func (h *handler) revokeToken(w http.ResponseWriter, r *http.Request) error {
	if h.policies == nil {
		return notConfigured("policies")
	}
	id := r.PathValue("id")
	// The id may be the secret itself: only its hash goes into the audit log.
	ref := id
	if strings.HasPrefix(id, "sbt_") {
		ref = authz.HashSecret(id)
	}
	if err := h.op(r.Context(), "token.revoke", "", "token "+quote(ref), h.policies.RevokeToken(r.Context(), id)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// objectOrNil accepts a JSON object, or null/absent (nil); field names the
// body field for the error, code is its code.
func objectOrNil(field, code string, raw json.RawMessage) (json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	if bytes.TrimSpace(raw)[0] != '{' {
		return nil, &Error{Status: http.StatusBadRequest, Code: code, Message: field + " must be a JSON object"}
	}
	return raw, nil
}
