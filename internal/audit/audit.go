// Package audit records what the gateway did: one Record per tool
// invocation (denied ones included) and per server or policy operation.
// Arguments and results are redacted before they are hashed or summarized,
// and records are written through a bounded queue that never blocks a call.
package audit

import "time"

// Kinds of Record.
const (
	KindInvocation = "invocation"
	KindOperation  = "operation"
)

// Record is one audit row, shaped like seed 000's mcp_invocations plus the
// fields the gateway adds (rule, revision, fallback, replica, operation).
type Record struct {
	ID            string `json:"id"`
	Kind          string `json:"kind"`
	CorrelationID string `json:"correlation_id"`
	AgentID       string `json:"agent_id"`
	Server        string `json:"server_id"`
	Tool          string `json:"tool_name"`
	// ParamsHash is the hex SHA-256 of the redacted canonical JSON arguments.
	ParamsHash string `json:"params_hash,omitempty"`
	Success    bool   `json:"success"`
	// ResultSummary is at most 500 characters of the redacted result.
	ResultSummary string  `json:"result_summary,omitempty"`
	Error         string  `json:"error_message,omitempty"`
	ErrorCode     string  `json:"error_code,omitempty"`
	Attempts      int     `json:"attempts"`
	LatencyMS     float64 `json:"latency_ms"`
	// PolicyDecision is "ALLOW" or "DENY".
	PolicyDecision string `json:"policy_decision"`
	PolicyRule     string `json:"policy_rule,omitempty"`
	PolicyRevision uint64 `json:"policy_revision"`
	CachedDecision bool   `json:"cached_decision"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	TicketID       string `json:"ticket_id,omitempty"`
	TaskID         string `json:"task_id,omitempty"`
	// ServedBy is the namespaced tool that produced the result when a
	// fallback served the call.
	ServedBy string `json:"served_by,omitempty"`
	// Operation names a KindOperation record: "server.register",
	// "server.connect", "server.disconnect", "server.remove", "policy.grant",
	// "policy.revoke", "key.create", "key.revoke", ...
	Operation string `json:"operation,omitempty"`
	// Replica is the gateway replica that wrote the row.
	Replica   string    `json:"replica,omitempty"`
	InvokedAt time.Time `json:"invoked_at"`
}

// Filter selects records for queries. Zero fields do not filter.
type Filter struct {
	Kind     string
	AgentID  string
	Server   string
	Tool     string
	Decision string // ALLOW or DENY
	Success  *bool
	Since    time.Time
	Until    time.Time
	// Limit bounds the page (default 100, max 1000). Cursor is the
	// NextCursor of the previous page (newest first); "" starts at the newest.
	Limit  int
	Cursor string
}
