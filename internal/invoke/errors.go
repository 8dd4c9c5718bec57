package invoke

import "errors"

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
)

// Error is a failed call, classified. It wraps the underlying cause so that
// callers can still reach, for example, an upstream *jsonrpc.Error.
type Error struct {
	Code    Code
	Message string
	// Server and Status name the upstream involved, when there is one.
	Server string
	Status string
	Err    error
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
