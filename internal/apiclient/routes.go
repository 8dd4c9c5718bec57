package apiclient

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/config"
)

const (
	serversPath = "/api/v1/aggregator/servers"
)

// ServerList is the answer of GET /api/v1/aggregator/servers.
type ServerList struct {
	Servers []api.Server `json:"servers"`
}

// Servers lists every upstream server with its live status.
func (c *Client) Servers(ctx context.Context) (ServerList, error) {
	var out ServerList
	err := c.do(ctx, "GET", serversPath, nil, nil, &out)
	return out, err
}

// Server returns one server by name or id.
func (c *Client) Server(ctx context.Context, idOrName string) (api.Server, error) {
	var out api.Server
	err := c.do(ctx, "GET", serversPath+"/"+esc(idOrName), nil, nil, &out)
	return out, err
}

// RegisterRequest is the body of POST /api/v1/aggregator/servers. The API
// keeps its own type unexported; this mirrors it field for field.
type RegisterRequest struct {
	Name             string           `json:"name"`
	Description      string           `json:"description,omitempty"`
	TransportType    string           `json:"transport_type"` // stdio, http or sse
	ConnectionConfig ConnectionConfig `json:"connection_config"`
	// AutoConnect nil means the API's default (connect now).
	AutoConnect    *bool   `json:"auto_connect,omitempty"`
	HealthCheckURL string  `json:"health_check_url,omitempty"`
	Prefix         *string `json:"prefix,omitempty"`
	DefaultAccess  string  `json:"default_access,omitempty"`
	// PinDefinitions false turns tool-definition pinning off for the
	// server; nil means the default (on).
	PinDefinitions *bool `json:"pin_definitions,omitempty"`
	// Auth makes the gateway the server's OAuth client (http, sse); nil
	// for none. It names the variable with the client secret, never the
	// secret.
	Auth *config.ServerAuth `json:"auth,omitempty"`
}

// ConnectionConfig says how to reach a server registered at runtime.
type ConnectionConfig struct {
	Command           string            `json:"command,omitempty"`
	Args              []string          `json:"args,omitempty"`
	Env               map[string]string `json:"env,omitempty"`       // secrets: sealed by the gateway
	PlainEnv          map[string]string `json:"plain_env,omitempty"` // settings: stored as they are
	EnvPassthrough    []string          `json:"env_passthrough,omitempty"`
	Cwd               string            `json:"cwd,omitempty"`
	URL               string            `json:"url,omitempty"`
	Headers           map[string]string `json:"headers,omitempty"`
	HeadersFromEnv    map[string]string `json:"headers_from_env,omitempty"`
	BearerTokenEnvVar string            `json:"bearer_token_env_var,omitempty"`
}

// RegisterServer adds a server at runtime.
func (c *Client) RegisterServer(ctx context.Context, req RegisterRequest) (api.Server, error) {
	var out api.Server
	err := c.do(ctx, "POST", serversPath, nil, req, &out)
	return out, err
}

// RemoveServer disconnects and forgets a server registered at runtime.
func (c *Client) RemoveServer(ctx context.Context, idOrName string) error {
	return c.do(ctx, "DELETE", serversPath+"/"+esc(idOrName), nil, nil, nil)
}

// ConnectResult is the answer of POST …/servers/{id}/connect.
type ConnectResult struct {
	Status  string     `json:"status"`
	Message string     `json:"message"`
	Server  api.Server `json:"server"`
}

// ConnectServer starts connecting a server; with wait it returns once the
// server is connected or has failed, else at once (status CONNECTING).
func (c *Client) ConnectServer(ctx context.Context, idOrName string, wait bool) (ConnectResult, error) {
	var q url.Values
	if wait {
		q = url.Values{"wait": {"true"}}
	}
	var out ConnectResult
	err := c.do(ctx, "POST", serversPath+"/"+esc(idOrName)+"/connect", q, nil, &out)
	return out, err
}

// DisconnectResult is the answer of POST …/servers/{id}/disconnect.
type DisconnectResult struct {
	Status          string     `json:"status"`
	PendingRequests int        `json:"pending_requests"`
	Server          api.Server `json:"server"`
}

// DisconnectServer drains and disconnects a server.
func (c *Client) DisconnectServer(ctx context.Context, idOrName string) (DisconnectResult, error) {
	var out DisconnectResult
	err := c.do(ctx, "POST", serversPath+"/"+esc(idOrName)+"/disconnect", nil, nil, &out)
	return out, err
}

// DiscoverServer re-lists a server's tools, resources and prompts now.
func (c *Client) DiscoverServer(ctx context.Context, idOrName string) (api.Server, error) {
	var out api.Server
	err := c.do(ctx, "POST", serversPath+"/"+esc(idOrName)+"/discover", nil, nil, &out)
	return out, err
}

// StartServerAuth starts the OAuth authorization of a server with `auth`
// (POST …/servers/{id}/auth): the answer holds the URL a person must open,
// "" for the client_credentials grant.
func (c *Client) StartServerAuth(ctx context.Context, idOrName string) (api.UpstreamAuthFlow, error) {
	var out api.UpstreamAuthFlow
	err := c.do(ctx, "POST", serversPath+"/"+esc(idOrName)+"/auth", nil, nil, &out)
	return out, err
}

// ServerAuth is the state of a server's last authorization flow and its
// stored grant (GET …/servers/{id}/auth); never a token.
func (c *Client) ServerAuth(ctx context.Context, idOrName string) (api.UpstreamAuthFlow, error) {
	var out api.UpstreamAuthFlow
	err := c.do(ctx, "GET", serversPath+"/"+esc(idOrName)+"/auth", nil, nil, &out)
	return out, err
}

// HistoryList is the answer of GET …/servers/{id}/history.
type HistoryList struct {
	History []api.ConnectionEvent `json:"history"`
}

// ServerHistory returns a server's status transitions, newest first; limit
// 0 is the API's default.
func (c *Client) ServerHistory(ctx context.Context, idOrName string, limit int) (HistoryList, error) {
	var q url.Values
	if limit > 0 {
		q = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	var out HistoryList
	err := c.do(ctx, "GET", serversPath+"/"+esc(idOrName)+"/history", q, nil, &out)
	return out, err
}

// ServerLogs is the answer of GET …/servers/{id}/logs: the last lines a
// server wrote to stderr (stdio) or the gateway logged about it.
type ServerLogs struct {
	Server string   `json:"server"`
	Lines  []string `json:"lines"`
}

// ServerLogs returns the last lines of a server's log; lines 0 is the API's
// default. An older gateway answers an *Error whose Unsupported is true.
func (c *Client) ServerLogs(ctx context.Context, idOrName string, lines int) (ServerLogs, error) {
	var q url.Values
	if lines > 0 {
		q = url.Values{"lines": {strconv.Itoa(lines)}}
	}
	var out ServerLogs
	err := c.do(ctx, "GET", serversPath+"/"+esc(idOrName)+"/logs", q, nil, &out)
	return out, err
}

// ToolList is the answer of GET /api/v1/tools.
type ToolList struct {
	Tools   []api.Tool        `json:"tools"`
	Servers []api.ServerGroup `json:"servers"`
	Total   int               `json:"total"`
}

// Tools lists the tools the caller may see; server "" lists every server's.
func (c *Client) Tools(ctx context.Context, server string) (ToolList, error) {
	var q url.Values
	if server != "" {
		q = url.Values{"server_id": {server}}
	}
	var out ToolList
	err := c.do(ctx, "GET", "/api/v1/tools", q, nil, &out)
	return out, err
}

// Tool returns one tool by its namespaced name.
func (c *Client) Tool(ctx context.Context, name string) (api.Tool, error) {
	var out api.Tool
	err := c.do(ctx, "GET", "/api/v1/tools/"+esc(name), nil, nil, &out)
	return out, err
}

// QuarantinedList is the answer of GET /api/v1/tools/quarantined.
type QuarantinedList struct {
	Tools []api.QuarantinedTool `json:"tools"`
	Total int                   `json:"total"`
}

// QuarantinedTools lists the tools held back because their upstream
// changed their definition since it was pinned (admin).
func (c *Client) QuarantinedTools(ctx context.Context) (QuarantinedList, error) {
	var out QuarantinedList
	err := c.do(ctx, "GET", "/api/v1/tools/quarantined", nil, nil, &out)
	return out, err
}

// ApproveTool pins a quarantined tool's current definition, so that it is
// served again (admin). hash, if set, must be the current definition's
// hash (as listed by QuarantinedTools): the gateway then refuses (409) to
// approve a definition that changed again since.
func (c *Client) ApproveTool(ctx context.Context, name, hash string) (api.ApprovedTool, error) {
	var out api.ApprovedTool
	var body any
	if hash != "" {
		body = map[string]string{"hash": hash}
	}
	err := c.do(ctx, "POST", "/api/v1/tools/"+esc(name)+"/approve", nil, body, &out)
	return out, err
}

// CallRequest is the body of POST /api/v1/tools/call.
type CallRequest struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments,omitempty"`
	ServerID       string          `json:"server_id,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	ApprovalToken  string          `json:"approval_token,omitempty"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	TicketID       string          `json:"ticket_id,omitempty"`
	TaskID         string          `json:"task_id,omitempty"`
}

// CallResult is the upstream's result with the gateway's routing metadata.
// Content items stay raw JSON: they are MCP content of several kinds.
type CallResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent any               `json:"structuredContent,omitempty"`
	IsError           bool              `json:"isError"`
	Meta              map[string]any    `json:"_meta,omitempty"`
	Metadata          CallMetadata      `json:"metadata"`
}

// CallMetadata says where a call went and how long it took.
type CallMetadata struct {
	RoutedTo        string  `json:"routed_to"`
	Tool            string  `json:"tool"`
	OriginalName    string  `json:"original_name"`
	RoutingTimeMS   float64 `json:"routing_time_ms"`
	ExecutionTimeMS float64 `json:"execution_time_ms"`
	CorrelationID   string  `json:"correlation_id,omitempty"`
	Attempts        int     `json:"attempts,omitempty"`
	ServedBy        string  `json:"served_by,omitempty"`
	Replayed        bool    `json:"replayed,omitempty"`
}

// Text joins the text content of the result; other content kinds are
// named in brackets ("[image image/png]") so nothing vanishes silently.
func (r CallResult) Text() string {
	var parts []string
	for _, raw := range r.Content {
		var c struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			MIMEType string `json:"mimeType"`
			URI      string `json:"uri"`
			Resource *struct {
				URI  string `json:"uri"`
				Text string `json:"text"`
			} `json:"resource"`
		}
		if json.Unmarshal(raw, &c) != nil {
			continue
		}
		switch {
		case c.Type == "text":
			parts = append(parts, c.Text)
		case c.Type == "resource" && c.Resource != nil && c.Resource.Text != "":
			parts = append(parts, c.Resource.Text)
		case c.Type == "resource" && c.Resource != nil:
			parts = append(parts, "[resource "+c.Resource.URI+"]")
		case c.Type == "resource_link":
			parts = append(parts, "[resource link "+c.URI+"]")
		default:
			parts = append(parts, strings.TrimSpace("["+c.Type+" "+c.MIMEType)+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// CallTool calls a tool through the gateway's pipeline. A tool's own
// failure is a result with IsError; pipeline failures are *Error.
func (c *Client) CallTool(ctx context.Context, req CallRequest) (CallResult, error) {
	var out CallResult
	err := c.do(ctx, "POST", "/api/v1/tools/call", nil, req, &out)
	return out, err
}

// SearchRequest is the body of POST /api/v1/search (seed 004 AG-US2).
type SearchRequest struct {
	Query        string   `json:"query"`
	ServerFilter []string `json:"server_filter,omitempty"`
	SkillFilter  []string `json:"skill_filter,omitempty"`
	Limit        int      `json:"limit,omitempty"`
}

// The answer of POST /api/v1/search is the API's own types.
type (
	SearchResponse = api.SearchResponse
	SearchTool     = api.SearchTool
	SourceServer   = api.SourceServer
	SearchMetadata = api.SearchMetadata
)

// Search finds tools by meaning. A gateway without the search feature
// answers an *Error whose Unsupported is true.
func (c *Client) Search(ctx context.Context, req SearchRequest) (SearchResponse, error) {
	var out SearchResponse
	err := c.do(ctx, "POST", "/api/v1/search", nil, req, &out)
	return out, err
}

// KeyList is the answer of GET /api/v1/keys.
type KeyList struct {
	Keys []api.KeyView `json:"keys"`
}

// CreateKey makes an API key; the secret is in the answer only.
func (c *Client) CreateKey(ctx context.Context, req api.KeyRequest) (api.KeyCreated, error) {
	var out api.KeyCreated
	err := c.do(ctx, "POST", "/api/v1/keys", nil, req, &out)
	return out, err
}

// Keys lists API keys without their secrets.
func (c *Client) Keys(ctx context.Context) (KeyList, error) {
	var out KeyList
	err := c.do(ctx, "GET", "/api/v1/keys", nil, nil, &out)
	return out, err
}

// RevokeKey revokes an API key by id.
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/api/v1/keys/"+esc(id), nil, nil, nil)
}

// Grant lets an agent call a tool or pattern, optionally with a high-risk
// approval token (its secret is in the answer only).
func (c *Client) Grant(ctx context.Context, req api.GrantRequest) (api.GrantResult, error) {
	var out api.GrantResult
	err := c.do(ctx, "POST", "/api/v1/mcp/policies/grant", nil, req, &out)
	return out, err
}

// RevokeGrant removes a grant by id.
func (c *Client) RevokeGrant(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/api/v1/mcp/policies/grant/"+esc(id), nil, nil, nil)
}

// PolicyList is the answer of GET /api/v1/mcp/policies[/{agent_id}];
// AgentID is set only for one agent's listing.
type PolicyList struct {
	AgentID string        `json:"agent_id,omitempty"`
	Grants  []authz.Grant `json:"grants"`
}

// Policies lists one agent's grants, or everyone's when agent is "".
func (c *Client) Policies(ctx context.Context, agent string) (PolicyList, error) {
	path := "/api/v1/mcp/policies"
	if agent != "" {
		path += "/" + esc(agent)
	}
	var out PolicyList
	err := c.do(ctx, "GET", path, nil, nil, &out)
	return out, err
}

// IssueToken issues a high-risk approval token on its own.
func (c *Client) IssueToken(ctx context.Context, req api.TokenRequest) (api.TokenResult, error) {
	var out api.TokenResult
	err := c.do(ctx, "POST", "/api/v1/mcp/tokens", nil, req, &out)
	return out, err
}

// RevokeToken revokes an approval token by id (or by its secret).
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/api/v1/mcp/tokens/"+esc(id), nil, nil, nil)
}

// AuditQuery filters GET /api/v1/audit; zero fields do not filter.
type AuditQuery struct {
	Kind     string // invocation or operation
	AgentID  string
	Server   string
	Tool     string
	Decision string // ALLOW or DENY
	Success  *bool
	Since    time.Time
	Until    time.Time
	Limit    int
	Cursor   string
}

func (q AuditQuery) values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("kind", q.Kind)
	set("agent_id", q.AgentID)
	set("server_id", q.Server)
	set("tool_name", q.Tool)
	set("decision", q.Decision)
	set("cursor", q.Cursor)
	if q.Success != nil {
		v.Set("success", strconv.FormatBool(*q.Success))
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// AuditPage is one page of audit records, newest first; NextCursor fetches
// the older page ("" at the end).
type AuditPage struct {
	Records    []audit.Record `json:"records"`
	NextCursor string         `json:"next_cursor"`
}

// Audit queries the audit log.
func (c *Client) Audit(ctx context.Context, q AuditQuery) (AuditPage, error) {
	var out AuditPage
	err := c.do(ctx, "GET", "/api/v1/audit", q.values(), nil, &out)
	return out, err
}

// BreakerList is the answer of GET /api/v1/mcp/circuit-breakers.
type BreakerList struct {
	Breakers []api.BreakerView `json:"circuit_breakers"`
}

// Breakers lists the circuit breakers the pipeline keeps.
func (c *Client) Breakers(ctx context.Context) (BreakerList, error) {
	var out BreakerList
	err := c.do(ctx, "GET", "/api/v1/mcp/circuit-breakers", nil, nil, &out)
	return out, err
}

// MetricsQuery selects GET /api/v1/mcp/metrics: a named TimeRange ("15m",
// "1h", "24h", "7d") or Since/Until; all zero is the last 24 hours.
type MetricsQuery struct {
	Server, Tool string
	TimeRange    string
	Since, Until time.Time
}

// Metrics is the answer of GET /api/v1/mcp/metrics.
type Metrics struct {
	TimeRange api.TimeRange     `json:"time_range"`
	Tools     []api.ToolStats   `json:"tools"`
	Totals    api.MetricsTotals `json:"totals"`
}

// Metrics summarizes invocations per tool.
func (c *Client) Metrics(ctx context.Context, q MetricsQuery) (Metrics, error) {
	v := url.Values{}
	if q.Server != "" {
		v.Set("server_id", q.Server)
	}
	if q.Tool != "" {
		v.Set("tool_name", q.Tool)
	}
	if q.TimeRange != "" {
		v.Set("time_range", q.TimeRange)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	var out Metrics
	err := c.do(ctx, "GET", "/api/v1/mcp/metrics", v, nil, &out)
	return out, err
}

// EscalationList is the answer of GET /api/v1/escalations.
type EscalationList struct {
	Escalations []api.EscalationView `json:"escalations"`
	Total       int                  `json:"total"`
}

// Escalations lists the escalations, newest first; unacked keeps those no
// operator acknowledged yet (admin).
func (c *Client) Escalations(ctx context.Context, unacked bool) (EscalationList, error) {
	var q url.Values
	if unacked {
		q = url.Values{"unacked": {"true"}}
	}
	var out EscalationList
	err := c.do(ctx, "GET", "/api/v1/escalations", q, nil, &out)
	return out, err
}

// AckEscalation acknowledges an escalation (admin).
func (c *Client) AckEscalation(ctx context.Context, id string) (api.EscalationView, error) {
	var out api.EscalationView
	err := c.do(ctx, "POST", "/api/v1/escalations/"+esc(id)+"/ack", nil, nil, &out)
	return out, err
}

// ApprovalList is the answer of GET /api/v1/approvals.
type ApprovalList struct {
	Approvals []api.ApprovalView `json:"approvals"`
	Total     int                `json:"total"`
}

// Approvals lists approval requests, newest first; status "" lists every
// state (admin).
func (c *Client) Approvals(ctx context.Context, status string) (ApprovalList, error) {
	var q url.Values
	if status != "" {
		q = url.Values{"status": {status}}
	}
	var out ApprovalList
	err := c.do(ctx, "GET", "/api/v1/approvals", q, nil, &out)
	return out, err
}

// DecideApproval approves (approve true) or denies a pending approval
// request, with an optional reason (admin).
func (c *Client) DecideApproval(ctx context.Context, id string, approve bool, reason string) (api.ApprovalView, error) {
	verb := "deny"
	if approve {
		verb = "approve"
	}
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	var out api.ApprovalView
	err := c.do(ctx, "POST", "/api/v1/approvals/"+esc(id)+"/"+verb, nil, body, &out)
	return out, err
}

// OAuthGrantQuery selects the grants GET /api/v1/oauth/grants lists; zero
// fields select all.
type OAuthGrantQuery struct {
	Subject  string
	ClientID string
	// ActiveOnly keeps the grants neither revoked nor expired.
	ActiveOnly bool
	// Limit is 1..1000; 0 means the API's default (1000).
	Limit int
}

// OAuthClients lists the clients of the built-in authorization server,
// oldest first, without their secrets (admin). A gateway that does not
// run that server answers 404 with code api.CodeOAuthServerOff.
func (c *Client) OAuthClients(ctx context.Context) (api.OAuthClientList, error) {
	var out api.OAuthClientList
	err := c.do(ctx, "GET", "/api/v1/oauth/clients", nil, nil, &out)
	return out, err
}

// DeleteOAuthClient deletes a client of the built-in authorization server
// and revokes its grants (admin).
func (c *Client) DeleteOAuthClient(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/api/v1/oauth/clients/"+esc(id), nil, nil, nil)
}

// OAuthGrants lists the grants users gave clients of the built-in
// authorization server, newest first (admin).
func (c *Client) OAuthGrants(ctx context.Context, q OAuthGrantQuery) (api.OAuthGrantList, error) {
	v := url.Values{}
	if q.Subject != "" {
		v.Set("subject", q.Subject)
	}
	if q.ClientID != "" {
		v.Set("client_id", q.ClientID)
	}
	if q.ActiveOnly {
		v.Set("active", "true")
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out api.OAuthGrantList
	err := c.do(ctx, "GET", "/api/v1/oauth/grants", v, nil, &out)
	return out, err
}

// RevokeOAuthGrant revokes a grant of the built-in authorization server:
// its tokens stop working (admin). Revoking it again is not an error.
func (c *Client) RevokeOAuthGrant(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/api/v1/oauth/grants/"+esc(id), nil, nil, nil)
}

// StartAccountLink starts the OAuth linking of the caller's own account on
// a per_user server (POST /api/v1/me/accounts/{server}/connect).
func (c *Client) StartAccountLink(ctx context.Context, server string) (api.UpstreamAuthFlow, error) {
	var out api.UpstreamAuthFlow
	err := c.do(ctx, "POST", "/api/v1/me/accounts/"+esc(server)+"/connect", nil, nil, &out)
	return out, err
}

// AccountLink is the caller's last linking flow on server and what is
// linked (GET /api/v1/me/accounts/{server}); never a credential.
func (c *Client) AccountLink(ctx context.Context, server string) (api.UpstreamAuthFlow, error) {
	var out api.UpstreamAuthFlow
	err := c.do(ctx, "GET", "/api/v1/me/accounts/"+esc(server), nil, nil, &out)
	return out, err
}

// PutPersonalCredential stores the caller's own static credential for a
// per_user server (PUT /api/v1/me/accounts/{server}).
func (c *Client) PutPersonalCredential(ctx context.Context, server string, cred api.PersonalCredential) error {
	return c.do(ctx, "PUT", "/api/v1/me/accounts/"+esc(server), nil, cred, nil)
}

// UnlinkAccount forgets what the caller linked for server (DELETE
// /api/v1/me/accounts/{server}).
func (c *Client) UnlinkAccount(ctx context.Context, server string) error {
	return c.do(ctx, "DELETE", "/api/v1/me/accounts/"+esc(server), nil, nil, nil)
}
