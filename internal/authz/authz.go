// Package authz makes the gateway's authorization decisions: who may call
// which tool. It is pure policy — identities, grants, role restrictions,
// per-server workspace access, high-risk approval tokens and a decision cache —
// with no HTTP and no SQL; persistence goes through the small Store interface
// it declares.
//
// Two kinds of identities reach the same layers (docs/access.md has the
// table). An identity whose credential carries a workspace policy (seed 003:
// a JWT with mcpServerAllowIds, mcpServerDenyIds or isAdmin, or an API key
// created with workspace_policy) is authorized per server by seed 003's rule:
// admin → every server; a deny id → never; a server with default_access deny
// → only with an allow id; otherwise allowed, with no grant needed. Any other
// identity keeps seed 000's default deny: it needs a grant, made to its agent
// or to its workspace. Role restrictions and high-risk approval tokens apply
// to both.
//
// Default deny: a call is allowed only when every layer allows it, and every
// Decision names the rule that made it and the policy revision it was made
// under, so the audit log can explain it later.
package authz

import (
	"context"
	"encoding/json"
	"time"
)

// Identity is an authenticated caller. Identities come from API keys, JWT
// bearer tokens or the loopback-only local mode (package identity).
type Identity struct {
	// ID is stable per credential ("key:<id>", "jwt:<issuer>|<subject>",
	// "local", "admin-key"); it binds MCP sessions to their creator.
	ID string `json:"id"`
	// AgentID is who grants are made to and audit rows name.
	AgentID   string   `json:"agent_id"`
	Roles     []string `json:"roles,omitempty"`
	Workspace string   `json:"workspace,omitempty"`
	// Admin sees and may call everything (seed 003 isAdmin) and may manage
	// keys, grants and servers.
	Admin bool `json:"admin"`
	// AllowServers and DenyServers are seed 003's mcpServerAllowIds and
	// mcpServerDenyIds: server names. An explicit deny wins.
	AllowServers []string `json:"allow_servers,omitempty"`
	DenyServers  []string `json:"deny_servers,omitempty"`
	// WorkspacePolicy reports that the credential carries a workspace
	// policy (seed 003): the servers it may use follow from Admin,
	// AllowServers, DenyServers and each server's default_access alone, and
	// it needs no grant. Without it, the identity needs grants (seed 000).
	WorkspacePolicy bool `json:"workspace_policy"`
	// Method is how the caller authenticated: "key", "jwt", "oauth", "mtls" or "local".
	Method string `json:"method"`
}

type identityKey struct{}

// WithIdentity returns ctx carrying id. The HTTP front door puts the caller
// there; MCP sessions inherit it from the request that created them.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity in ctx, if any.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// LocalAdmin is the identity of credential-less loopback callers in local
// mode, and of the stdio front (whoever can start it can read the config).
func LocalAdmin() Identity {
	return Identity{ID: "local", AgentID: "local", Admin: true, Method: "local"}
}

// Grant allows an agent, or every identity of a workspace, to call tools
// (seed 000 mcp_policies). Exactly one of AgentID and Workspace is set.
// Server and Tool are names or glob patterns ("*" matches any run of
// characters), so {Server: "github", Tool: "*"} is the pattern "github.*".
// (agent, workspace, server, tool) is unique: granting again replaces the
// previous grant.
type Grant struct {
	ID      string `json:"id"`
	AgentID string `json:"agent_id"`
	// Workspace, when set, grants to every identity whose Workspace it is
	// (AgentID is then empty).
	Workspace string `json:"workspace,omitempty"`
	Server    string `json:"server_id"`
	// Tool is the server's own (original) tool name or a pattern.
	Tool string `json:"tool_name"`
	// Actions defaults to ["invoke"].
	Actions   []string   `json:"actions"`
	GrantedAt time.Time  `json:"granted_at"`
	GrantedBy string     `json:"granted_by,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Token is an approval for a high-risk tool, issued with a grant or on its
// own. The caller presents the secret; only its SHA-256 (ID) is kept.
type Token struct {
	// ID is the hex SHA-256 of the secret the caller presents.
	ID      string `json:"token_id"`
	AgentID string `json:"agent_id"`
	Server  string `json:"server_id"`
	Tool    string `json:"tool_name"`
	// ArgsDigest, if set, binds the token to one exact argument object
	// (ArgsDigest of its canonical JSON).
	ArgsDigest string     `json:"args_digest,omitempty"`
	SingleUse  bool       `json:"single_use"`
	GrantID    string     `json:"grant_id,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	UsedAt     *time.Time `json:"used_at,omitempty"`
	Revoked    bool       `json:"revoked"`
}

// Request is one authorization question: may Identity do Action on the tool
// Server/Tool (namespaced as Name)?
type Request struct {
	Identity Identity
	Server   string
	// Tool is the server's own tool name; Name its namespaced name, which
	// role restrictions match.
	Tool string
	Name string
	// Action defaults to "invoke".
	Action string
	// Destructive is the tool's destructiveHint annotation: such tools are
	// high-risk whatever their name.
	Destructive bool
	// Arguments are checked against a token bound to an argument digest.
	Arguments json.RawMessage
	// Token is the approval secret the caller presented, if any.
	Token string
}

// Decision is the answer to a Request.
type Decision struct {
	Allow bool `json:"allow"`
	// Rule names what decided: "admin", "grant:<id>", "default-deny",
	// "grant-expired:<id>", "role:<role>", "workspace:deny-id",
	// "server:default-deny", "workspace:allow-id", "workspace:default-allow",
	// "high-risk:token-missing", ... An allow that an
	// approval token completed appends "+token:<first 8 of the token ID>"
	// ("grant:<id>+token:1a2b3c4d").
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
	// Revision is the policy revision the decision was made under.
	Revision uint64 `json:"revision"`
	// Cached reports that the policy part came from the decision cache.
	Cached bool `json:"cached"`
	// TokenRequired reports that the call needs an approval token: the tool
	// is high-risk and the caller is not an admin exempt from tokens
	// (Policy.AdminNeedsToken). It is set on denials too, so a client can
	// tell it to ask for a token.
	TokenRequired bool `json:"token_required"`
}
