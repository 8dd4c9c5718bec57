package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/authserver"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/httperr"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Error is the one error shape of the REST API (and of every route outside
// it that refuses a request; see package httperr):
//
//	{"error": {"code": "tool_not_found", "message": "...", "details": {...}}}
//
// Code is stable; clients switch on it. Handlers return errors; [writeError]
// maps them to a status and this shape in one place.
type Error = httperr.Error

// Stable error codes of the REST API, beyond those of [invoke.Code].
const (
	CodeBadRequest       = "bad_request"
	CodeValidation       = "validation_failed"
	CodeServerNotFound   = "server_not_found"
	CodeConflict         = "conflict"
	CodeNotFound         = "not_found"
	CodeInternal         = httperr.CodeInternal
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeUnauthenticated: the request reached the API without an identity.
	CodeUnauthenticated = string(invoke.CodeUnauthenticated)
	// CodeForbidden: the caller is authenticated but the route is not theirs
	// (admin-only, or another agent's data).
	CodeForbidden = "forbidden"
	// CodeInvalid: a key, grant or token request the policy layer refused
	// as malformed.
	CodeInvalid = "invalid"
	// CodeNotConfigured: the gateway runs without the component the route
	// needs (no store for keys, no audit log, ...).
	CodeNotConfigured = "not_configured"
	// CodeSSRFBlocked: a URL given to the gateway to fetch (a server's url
	// or health_check_url) points where the outbound policy forbids, such as
	// a cloud metadata endpoint. The message names the setting that would
	// allow it; details carry host, address and reason.
	CodeSSRFBlocked = "ssrf_blocked"
)

// statusOf maps the shared call vocabulary to HTTP (seed 000's table): the
// one place a code gets its status.
var statusOf = map[invoke.Code]int{
	invoke.CodeInvalidArgument:       http.StatusBadRequest,
	invoke.CodeToolNotFound:          http.StatusNotFound,
	invoke.CodeServerUnavailable:     http.StatusServiceUnavailable,
	invoke.CodeTimeout:               http.StatusGatewayTimeout,
	invoke.CodeUpstream:              http.StatusInternalServerError,
	invoke.CodeCanceled:              499, // client closed request (nginx convention)
	invoke.CodeUnauthenticated:       http.StatusUnauthorized,
	invoke.CodeDenied:                http.StatusForbidden,
	invoke.CodeRateLimited:           http.StatusTooManyRequests,
	invoke.CodeCircuitOpen:           http.StatusServiceUnavailable,
	invoke.CodeServerBusy:            http.StatusServiceUnavailable,
	invoke.CodeToolDisabled:          http.StatusConflict,
	invoke.CodeIdempotencyConflict:   http.StatusConflict,
	invoke.CodeToolDefinitionChanged: http.StatusConflict,
	invoke.CodeOutcomeUnknown:        http.StatusBadGateway,
	invoke.CodeResultTooLarge:        http.StatusBadGateway,
	invoke.CodeApprovalRequired:      http.StatusForbidden,
	invoke.CodeUpstreamAuthRequired:  http.StatusForbidden,
}

// sentinels maps the dependencies' sentinel errors (matched with errors.Is,
// in order) to a status and code.
var sentinels = []struct {
	err    error
	status int
	code   string
}{
	{upstream.ErrNotFound, http.StatusNotFound, CodeServerNotFound},
	{store.ErrNotFound, http.StatusNotFound, CodeNotFound},
	{authz.ErrNotFound, http.StatusNotFound, CodeNotFound},
	{authserver.ErrNotFound, http.StatusNotFound, CodeNotFound},
	{authz.ErrInvalid, http.StatusBadRequest, CodeInvalid},
	{store.ErrConflict, http.StatusConflict, CodeConflict},
	{upstream.ErrExists, http.StatusConflict, CodeConflict},
}

// toError classifies any error returned by a handler's dependencies.
func toError(err error) *Error {
	var ae *Error
	var ie *invoke.Error
	var cerrs config.Errors
	var cerr *config.Error
	var unavail *upstream.UnavailableError
	var blocked *netguard.BlockedError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &ie):
		return invokeError(ie)
	case errors.As(err, &unavail):
		return &Error{Status: http.StatusServiceUnavailable, Code: string(invoke.CodeServerUnavailable),
			Message: unavail.Error(), Details: map[string]any{"server": unavail.Server, "status": string(unavail.State)}}
	case errors.As(err, &blocked):
		return blockedError(err, blocked)
	case errors.As(err, &cerrs):
		return validationError(cerrs)
	case errors.As(err, &cerr):
		return validationError(config.Errors{cerr})
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return &Error{Status: s.status, Code: s.code, Message: err.Error()}
		}
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
}

func invokeError(ie *invoke.Error) *Error {
	e := &Error{Status: statusOf[ie.Code], Code: string(ie.Code), Message: ie.Message}
	if e.Status == 0 {
		e.Status = http.StatusInternalServerError
	}
	if ie.Code == invoke.CodeOutcomeUnknown && !strings.Contains(ie.Message, "may have run") {
		// The one failure a client must not blindly retry: say so even if
		// the pipeline's message does not.
		e.Message += " (the call may have run on the upstream; it was not retried)"
	}
	if ie.Code == invoke.CodeRateLimited || ie.Code == invoke.CodeCircuitOpen {
		e.RetryAfter = ie.RetryAfter
	}
	if ie.Server != "" {
		e.Details = map[string]any{"server": ie.Server}
		if ie.Status != "" {
			e.Details["status"] = ie.Status
		}
	}
	if ie.Attempts > 0 {
		if e.Details == nil {
			e.Details = map[string]any{}
		}
		e.Details["attempts"] = ie.Attempts
	}
	if ie.ApprovalID != "" {
		if e.Details == nil {
			e.Details = map[string]any{}
		}
		e.Details["approval_id"] = ie.ApprovalID
	}
	return e
}

// blockedError is a 400: the caller asked for a destination the outbound
// policy refuses, which only the request (or the operator's settings) can
// change.
func blockedError(err error, b *netguard.BlockedError) *Error {
	d := map[string]any{"reason": string(b.Reason)}
	if b.Host != "" {
		d["host"] = b.Host
	}
	if b.Addr.IsValid() {
		d["address"] = b.Addr.String()
	}
	return &Error{Status: http.StatusBadRequest, Code: CodeSSRFBlocked, Message: err.Error(), Details: d}
}

func validationError(errs config.Errors) *Error {
	fields := make([]map[string]string, 0, len(errs))
	for _, e := range errs {
		fields = append(fields, map[string]string{"field": e.Field, "message": e.Msg})
	}
	return &Error{Status: http.StatusUnprocessableEntity, Code: CodeValidation,
		Message: errs.Error(), Details: map[string]any{"fields": fields}}
}

// badParam is a 400 naming the query parameter at fault, so a client can
// tell which of several filters it got wrong.
func badParam(name, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: string(invoke.CodeInvalidArgument), Message: name + ": " + msg,
		Details: map[string]any{"parameter": name}}
}

// badRequest is a 400 about the request body.
func badRequest(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: msg}
}

func notConfigured(what string) *Error {
	return &Error{Status: http.StatusNotImplemented, Code: CodeNotConfigured, Message: what + " are not configured on this gateway"}
}
