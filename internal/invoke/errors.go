package invoke

import (
	"errors"
	"time"
)

// Code is a stable, machine-readable error code shared by the REST API and the
// MCP front. Clients may switch on it; the message is for humans.
type Code string

// The error vocabulary of a call. The API maps each code to an HTTP status in
// one place (internal/api); the MCP front turns them into JSON-RPC errors or
// isError results carrying the same message.
const (
	CodeInvalidArgument   Code = "invalid_argument"
	CodeToolNotFound      Code = "tool_not_found"
	CodeServerUnavailable Code = "server_unavailable"
	CodeTimeout           Code = "timeout"
	CodeUpstream          Code = "upstream_error"
	CodeCanceled          Code = "canceled"
	// CodeUnauthenticated: no identity reached the pipeline (401).
	CodeUnauthenticated Code = "unauthenticated"
	// CodeDenied: authorization refused the call (403); the message names
	// the rule.
	CodeDenied Code = "denied"
	// CodeRateLimited: the agent's rate limit is spent (429, RetryAfter).
	CodeRateLimited Code = "rate_limited"
	// CodeCircuitOpen: the tool's breaker is open and no fallback served
	// the call (503).
	CodeCircuitOpen Code = "circuit_open"
	// CodeServerBusy: the server's bulkhead queue is full (503).
	CodeServerBusy Code = "server_busy"
	// CodeToolDisabled: the tool exists but is disabled (409).
	CodeToolDisabled Code = "tool_disabled"
	// CodeIdempotencyConflict: the idempotency key was used with other
	// arguments (409).
	CodeIdempotencyConflict Code = "idempotency_conflict"
	// CodeToolDefinitionChanged: the upstream changed the tool's definition
	// since it was pinned; the tool is quarantined until an admin approves
	// the new definition (409).
	CodeToolDefinitionChanged Code = "tool_definition_changed"
	// CodeOutcomeUnknown: the request reached the upstream and the
	// connection failed before the answer; the call may have run and was
	// not retried (502).
	CodeOutcomeUnknown Code = "outcome_unknown"
	// CodeResultTooLarge: the upstream's reply was over max_result_bytes.
	// The call ran; its answer was dropped unread. Not retried, not held
	// against the server's health or the tool's breaker (502).
	CodeResultTooLarge Code = "result_too_large"
	// CodeApprovalRequired: the tool is high-risk, the call carried no
	// approval token, and an approval request was filed (authz.approval:
	// request); Error.ApprovalID names it. The caller retries with the same
	// arguments once an admin approved it (403).
	CodeApprovalRequired Code = "approval_required"
	// CodeUpstreamAuthRequired: the server uses each caller's own
	// credentials (credentials: per_user) and the caller has linked none
	// that works; the message says how to link one. The call did not reach
	// the server (403).
	CodeUpstreamAuthRequired Code = "upstream_auth_required"
)

// Error is a failed call, classified. It wraps the underlying cause so that
// callers can still reach, for example, an upstream *jsonrpc.Error.
type Error struct {
	Code    Code
	Message string
	// Server and Status name the upstream involved, when there is one.
	Server string
	Status string
	// RetryAfter is set with CodeRateLimited (and CodeCircuitOpen when the
	// cooldown end is known).
	RetryAfter time.Duration
	// Attempts is how many times the upstream was tried before the error.
	Attempts int
	// ApprovalID names the approval request a high-risk call is waiting
	// for (CodeApprovalRequired) or was denied by.
	ApprovalID string
	Err        error

	// exhausted marks a transient failure that retries could not fix, which
	// fallbacks may then cover.
	exhausted bool
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// CodeOf returns the code of err, or CodeUpstream for an unclassified error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeUpstream
}
