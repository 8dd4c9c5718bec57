package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

// The seed-000 surface under /api/v1/mcp. Here server_id is the server's
// name (what grants, breakers and audit rows name), and tool_name the
// server's own tool name.

// BreakerLister reports the circuit breakers the pipeline keeps.
type BreakerLister interface {
	Breakers(ctx context.Context) ([]BreakerView, error)
}

// BreakerView is one breaker's state (seed 000 CircuitBreakerMetrics).
type BreakerView struct {
	Key           string     `json:"circuit_key"`
	Server        string     `json:"server_id"`
	Tool          string     `json:"tool_name"`
	State         string     `json:"state"` // CLOSED, OPEN or HALF_OPEN
	Failures      int        `json:"failure_count"`
	Successes     int        `json:"success_count"`
	LastFailureAt *time.Time `json:"last_failure_time"`
	OpenedAt      *time.Time `json:"opened_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}

// StatsSource summarizes invocations per tool over a time range.
type StatsSource interface {
	Stats(ctx context.Context, f audit.Filter) ([]ToolStats, error)
}

// ToolStats is one tool's invocation summary.
type ToolStats struct {
	Server       string    `json:"server_id"`
	Tool         string    `json:"tool_name"`
	Calls        int64     `json:"calls"`
	Successes    int64     `json:"successes"`
	Failures     int64     `json:"failures"`
	Denied       int64     `json:"denied"`
	Retries      int64     `json:"retries"`
	SuccessRate  float64   `json:"success_rate"`
	AvgLatencyMS float64   `json:"avg_latency_ms"`
	MaxLatencyMS float64   `json:"max_latency_ms"`
	First        time.Time `json:"first_invoked_at"`
	Last         time.Time `json:"last_invoked_at"`
}

// MetricsTotals sums the tools of a metrics answer.
type MetricsTotals struct {
	Calls        int64   `json:"calls"`
	Successes    int64   `json:"successes"`
	Failures     int64   `json:"failures"`
	Denied       int64   `json:"denied"`
	Retries      int64   `json:"retries"`
	SuccessRate  float64 `json:"success_rate"`
	AvgLatencyMS float64 `json:"avg_latency_ms"`
	MaxLatencyMS float64 `json:"max_latency_ms"`
}

// TimeRange is the window a metrics answer covers; Range is the named
// range ("1h") when one was asked for.
type TimeRange struct {
	Range string     `json:"range,omitempty"`
	Since *time.Time `json:"since,omitempty"`
	Until *time.Time `json:"until,omitempty"`
}

// Registrar registers a server's tool manifest (seed 000 POST
// /api/v1/mcp/register): it registers the server first when the manifest
// defines a new one ([Manifest.Server]), then validates each tool against
// what the upstream exposes, its schema and its version.
type Registrar interface {
	RegisterManifest(ctx context.Context, m Manifest) (RegistrationResult, error)
}

// Manifest is seed 000's RegisterServerRequest. For a server the gateway
// does not know yet it also carries how to reach it, with the fields of
// POST /api/v1/aggregator/servers: transport_type and connection_config
// (and optionally description, auto_connect, health_check_url, prefix,
// default_access).
type Manifest struct {
	ServerID     string         `json:"server_id"`
	Version      string         `json:"version"`
	Capabilities []string       `json:"capabilities"`
	Tools        []ManifestTool `json:"tools"`

	Description      string            `json:"description,omitempty"`
	TransportType    string            `json:"transport_type,omitempty"`
	ConnectionConfig *ConnectionConfig `json:"connection_config,omitempty"`
	HealthCheckURL   string            `json:"health_check_url,omitempty"`
	Prefix           *string           `json:"prefix,omitempty"`
	DefaultAccess    string            `json:"default_access,omitempty"`

	// Server is the definition built from the fields above, nil when the
	// manifest has none (then server_id must name a registered server).
	// Set by the handler, never decoded.
	Server *config.Server `json:"-"`
}

// ManifestTool is one tool of a [Manifest].
type ManifestTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Version     string          `json:"version"`
}

// RegistrationResult says which tools of a manifest were registered
// (possibly disabled, with the reason) and which were rejected.
type RegistrationResult struct {
	ServerID        string                 `json:"server_id"`
	RegisteredCount int                    `json:"registered_count"`
	RejectedCount   int                    `json:"rejected_count"`
	RegisteredTools []RegisteredTool       `json:"registered_tools"`
	RejectedTools   []RejectedManifestTool `json:"rejected_tools"`
}

// RegisteredTool is a tool a manifest registered; an incompatible version
// registers it disabled.
type RegisteredTool struct {
	ServerID       string `json:"server_id"`
	Tool           string `json:"tool_name"`
	Version        string `json:"version"`
	Enabled        bool   `json:"enabled"`
	DisabledReason string `json:"disabled_reason,omitempty"`
}

// RejectedManifestTool is a manifest tool refused, and why.
type RejectedManifestTool struct {
	Name    string `json:"name"`
	Reason  string `json:"reason"`
	Version string `json:"version,omitempty"`
}

// ToolStatus is what the catalog does not know of a tool: its registered
// version and whether it is enabled.
type ToolStatus struct {
	Version        string
	Enabled        bool
	DisabledReason string
}

// defaultToolStatus: every catalog tool passed validation, so it is
// enabled; a version is whatever the upstream put in the tool's _meta.
func defaultToolStatus(t catalog.Tool) ToolStatus {
	st := ToolStatus{Enabled: true}
	if t.Def != nil {
		if v, ok := t.Def.Meta["version"].(string); ok {
			st.Version = v
		}
	}
	return st
}

// MCPTool is seed 000's MCPTool, plus the namespaced name clients call.
type MCPTool struct {
	ServerID       string `json:"server_id"`
	ToolName       string `json:"tool_name"`
	Name           string `json:"name"`
	Description    string `json:"description,omitempty"`
	Schema         any    `json:"schema"`
	Version        string `json:"version,omitempty"`
	Enabled        bool   `json:"enabled"`
	DisabledReason string `json:"disabled_reason,omitempty"`
	// Available reports whether the tool's server is connected now.
	Available bool `json:"available"`
}

// MCPInvocationRequest is the body of POST /api/v1/mcp/invoke (seed 000).
// IdempotencyKey and ApprovalToken may also come as the Idempotency-Key
// and X-Approval-Token headers.
type MCPInvocationRequest struct {
	CorrelationID string `json:"correlation_id"`
	// AgentID, if set, must be the caller's own unless the caller is an
	// admin, who may act for another agent.
	AgentID        string          `json:"agent_id"`
	ServerID       string          `json:"server_id"`
	ToolName       string          `json:"tool_name"`
	Params         json.RawMessage `json:"params"`
	IdempotencyKey string          `json:"idempotency_key"`
	TicketID       string          `json:"ticket_id"`
	TaskID         string          `json:"task_id"`
	ApprovalToken  string          `json:"approval_token"`
}

// MCPInvocationResult is the answer of POST /api/v1/mcp/invoke. A tool
// error (isError) is a result with Success false and ErrorCode
// "tool_error"; pipeline failures are errors in the API's one shape.
type MCPInvocationResult struct {
	CorrelationID  string          `json:"correlation_id"`
	Success        bool            `json:"success"`
	Result         json.RawMessage `json:"result"`
	Error          string          `json:"error,omitempty"`
	ErrorCode      string          `json:"error_code,omitempty"`
	Attempts       int             `json:"attempts"`
	LatencyMS      float64         `json:"latency_ms"`
	CompletedAt    time.Time       `json:"completed_at"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Replayed       bool            `json:"replayed,omitempty"`
	TicketID       string          `json:"ticket_id,omitempty"`
	TaskID         string          `json:"task_id,omitempty"`
	ServedBy       string          `json:"served_by,omitempty"`
	Policy         PolicyInfo      `json:"policy"`
}

// PolicyInfo is the authorization decision that let a call through.
type PolicyInfo struct {
	Decision string `json:"decision"` // ALLOW
	Rule     string `json:"rule,omitempty"`
	Revision uint64 `json:"revision"`
	Cached   bool   `json:"cached"`
}

func (h *handler) listBreakers(w http.ResponseWriter, r *http.Request) error {
	if h.breakers == nil {
		return notConfigured("circuit breakers")
	}
	all, err := h.breakers.Breakers(r.Context())
	if err != nil {
		return err
	}
	q := r.URL.Query()
	server, tool := q.Get("server_id"), q.Get("tool_name")
	out := []BreakerView{}
	for _, b := range all {
		if (server == "" || b.Server == server) && (tool == "" || b.Tool == tool) {
			out = append(out, b)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"circuit_breakers": out})
	return nil
}

// timeRanges are the named windows of GET /api/v1/mcp/metrics.
var timeRanges = map[string]time.Duration{
	"15m": 15 * time.Minute,
	"1h":  time.Hour,
	"24h": 24 * time.Hour,
	"7d":  7 * 24 * time.Hour,
}

func (h *handler) metrics(w http.ResponseWriter, r *http.Request) error {
	if h.stats == nil {
		return notConfigured("metrics")
	}
	q := r.URL.Query()
	f := audit.Filter{Server: q.Get("server_id"), Tool: q.Get("tool_name")}
	var tr TimeRange
	since, until, err := timeRange(q)
	if err != nil {
		return err
	}
	named := q.Get("time_range")
	switch {
	case named != "" && (!since.IsZero() || !until.IsZero()):
		return badParam("time_range", "give either time_range or since/until, not both")
	case named != "":
		d, ok := timeRanges[named]
		if !ok {
			return badParam("time_range", "must be one of 15m, 1h, 24h, 7d")
		}
		until = time.Now().UTC()
		since = until.Add(-d)
		tr.Range = named
	case since.IsZero() && until.IsZero():
		// Unbounded windows make the store scan the whole log; a day is
		// what a dashboard shows first.
		until = time.Now().UTC()
		since = until.Add(-24 * time.Hour)
		tr.Range = "24h"
	}
	f.Since, f.Until = since, until
	if !since.IsZero() {
		tr.Since = &since
	}
	if !until.IsZero() {
		tr.Until = &until
	}
	tools, err := h.stats.Stats(r.Context(), f)
	if err != nil {
		return err
	}
	if tools == nil {
		tools = []ToolStats{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"time_range": tr, "tools": tools, "totals": totals(tools)})
	return nil
}

func totals(tools []ToolStats) MetricsTotals {
	var t MetricsTotals
	var latency float64
	for _, s := range tools {
		t.Calls += s.Calls
		t.Successes += s.Successes
		t.Failures += s.Failures
		t.Denied += s.Denied
		t.Retries += s.Retries
		latency += s.AvgLatencyMS * float64(s.Calls)
		t.MaxLatencyMS = max(t.MaxLatencyMS, s.MaxLatencyMS)
	}
	if t.Calls > 0 {
		t.SuccessRate = float64(t.Successes) / float64(t.Calls)
		t.AvgLatencyMS = latency / float64(t.Calls)
	}
	return t
}

func (h *handler) registerManifest(w http.ResponseWriter, r *http.Request) error {
	if h.registrar == nil {
		return notConfigured("manifest registration")
	}
	var m Manifest
	if err := h.decode(w, r, &m); err != nil {
		return err
	}
	if strings.TrimSpace(m.ServerID) == "" {
		return badRequest("server_id is required")
	}
	if m.TransportType != "" || m.ConnectionConfig != nil {
		var cc ConnectionConfig
		if m.ConnectionConfig != nil {
			cc = *m.ConnectionConfig
		}
		m.Server = serverDef(registerRequest{Name: m.ServerID, Description: m.Description, TransportType: m.TransportType,
			ConnectionConfig: cc, HealthCheckURL: m.HealthCheckURL, Prefix: m.Prefix, DefaultAccess: m.DefaultAccess})
	}
	res, err := h.registrar.RegisterManifest(r.Context(), m)
	detail := "version " + quote(m.Version) + ", " + strconv.Itoa(len(m.Tools)) + " tools"
	if err == nil {
		detail += ": " + strconv.Itoa(res.RegisteredCount) + " registered, " + strconv.Itoa(res.RejectedCount) + " rejected"
	}
	if err := h.op(r.Context(), "mcp.register", m.ServerID, detail, err); err != nil {
		return err
	}
	if res.RegisteredTools == nil {
		res.RegisteredTools = []RegisteredTool{}
	}
	if res.RejectedTools == nil {
		res.RejectedTools = []RejectedManifestTool{}
	}
	writeJSON(w, http.StatusCreated, res)
	return nil
}

func (h *handler) listMCPTools(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	enabledOnly := false
	if v := q.Get("enabled_only"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badParam("enabled_only", "must be true or false")
		}
		enabledOnly = b
	}
	snap := h.cat.Snapshot()
	tools := snap.Tools()
	if v := q.Get("server_id"); v != "" {
		s, err := h.servers.Get(r.Context(), v)
		if err != nil {
			return err
		}
		tools = snap.ServerTools(s.Name)
	}
	id, _ := caller(r.Context())
	out := []MCPTool{}
	for _, t := range tools {
		if !h.visible(id, t) {
			continue
		}
		v := h.mcpTool(t)
		if enabledOnly && !v.Enabled {
			continue
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"tools": out, "total": len(out)})
	return nil
}

func (h *handler) getMCPTool(w http.ResponseWriter, r *http.Request) error {
	server, name := r.PathValue("server_id"), r.PathValue("tool_name")
	s, err := h.servers.Get(r.Context(), server)
	if err != nil {
		return err
	}
	id, _ := caller(r.Context())
	t, ok := h.cat.Snapshot().ToolByOriginal(s.Name, name)
	if !ok || !h.visible(id, t) {
		return &Error{Status: http.StatusNotFound, Code: string(invoke.CodeToolNotFound),
			Message: "unknown tool " + quote(name) + " on server " + quote(server)}
	}
	writeJSON(w, http.StatusOK, h.mcpTool(t))
	return nil
}

func (h *handler) mcpTool(t catalog.Tool) MCPTool {
	st := h.toolStatus(t)
	v := MCPTool{ServerID: t.Server, ToolName: t.OriginalName, Name: t.Name, Version: st.Version,
		Enabled: st.Enabled, DisabledReason: st.DisabledReason, Available: t.Available}
	if t.Def != nil {
		v.Description = t.Def.Description
		v.Schema = t.Def.InputSchema
	}
	return v
}

func (h *handler) invokeTool(w http.ResponseWriter, r *http.Request) error {
	var req MCPInvocationRequest
	if err := h.decode(w, r, &req); err != nil {
		return err
	}
	id, _ := caller(r.Context())
	if req.AgentID != "" && req.AgentID != id.AgentID {
		if !id.Admin {
			return forbidden("agent_id " + quote(req.AgentID) + " is not the caller's (" + quote(id.AgentID) + ")")
		}
		// An admin acting for an agent: the call is recorded under that
		// agent, the credential (ID) still says who made it.
		id.AgentID = req.AgentID
	}
	start := time.Now()
	call, res, err := h.call(r, req.ServerID, invoke.CallRequest{
		Name:           req.ToolName,
		Arguments:      req.Params,
		Identity:       id,
		CorrelationID:  req.CorrelationID,
		IdempotencyKey: req.IdempotencyKey,
		ApprovalToken:  req.ApprovalToken,
		TicketID:       req.TicketID,
		TaskID:         req.TaskID,
		NameField:      "tool_name",
		ArgumentsField: "params",
	})
	if err != nil {
		return err
	}
	out := MCPInvocationResult{
		CorrelationID:  res.CorrelationID,
		Success:        !res.IsError,
		Attempts:       res.Attempts,
		LatencyMS:      ms(time.Since(start).Seconds()),
		CompletedAt:    time.Now().UTC(),
		IdempotencyKey: call.IdempotencyKey,
		Replayed:       res.Replayed,
		TicketID:       req.TicketID,
		TaskID:         req.TaskID,
		ServedBy:       res.ServedBy,
		Policy: PolicyInfo{Decision: "ALLOW", Rule: res.Decision.Rule,
			Revision: res.Decision.Revision, Cached: res.Decision.Cached},
	}
	if out.CorrelationID == "" {
		out.CorrelationID = req.CorrelationID
	}
	if out.Attempts == 0 {
		out.Attempts = 1
	}
	if out.Result, err = resultJSON(res); err != nil {
		return err
	}
	if res.IsError {
		out.Error = invoke.ToolErrorText(res.CallToolResult)
		out.ErrorCode = "tool_error"
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// resultJSON is the upstream's CallToolResult as JSON, content never null.
func resultJSON(res *invoke.Result) (json.RawMessage, error) {
	if res.CallToolResult == nil {
		return json.RawMessage(`{"content":[]}`), nil
	}
	ctr := *res.CallToolResult
	if ctr.Content == nil {
		ctr.Content = []mcp.Content{}
	}
	return json.Marshal(&ctr)
}
