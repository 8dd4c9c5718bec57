package api

import (
	"errors"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Error is the one error shape of the REST API:
//
//	{"error": {"code": "tool_not_found", "message": "...", "details": {...}}}
//
// Code is stable; clients switch on it. Handlers return errors; [writeError]
// maps them to a status and this shape in one place.
type Error struct {
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Stable error codes of the REST API, beyond those of [invoke.Code].
const (
	CodeBadRequest       = "bad_request"
	CodeValidation       = "validation_failed"
	CodeServerNotFound   = "server_not_found"
	CodeConflict         = "conflict"
	CodeNotFound         = "not_found"
	CodeInternal         = "internal"
	CodeMethodNotAllowed = "method_not_allowed"
)

// statusOf maps the shared call vocabulary to HTTP (seed 000's table).
var statusOf = map[invoke.Code]int{
	invoke.CodeInvalidArgument:   http.StatusBadRequest,
	invoke.CodeToolNotFound:      http.StatusNotFound,
	invoke.CodeServerUnavailable: http.StatusServiceUnavailable,
	invoke.CodeTimeout:           http.StatusGatewayTimeout,
	invoke.CodeUpstream:          http.StatusInternalServerError,
	invoke.CodeCanceled:          499, // client closed request (nginx convention)
}

// toError classifies any error returned by a handler's dependencies.
func toError(err error) *Error {
	var ae *Error
	var ie *invoke.Error
	var cerrs config.Errors
	var cerr *config.Error
	var unavail *upstream.UnavailableError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &ie):
		e := &Error{Status: statusOf[ie.Code], Code: string(ie.Code), Message: ie.Message}
		if e.Status == 0 {
			e.Status = http.StatusInternalServerError
		}
		if ie.Server != "" {
			e.Details = map[string]any{"server": ie.Server}
			if ie.Status != "" {
				e.Details["status"] = ie.Status
			}
		}
		return e
	case errors.As(err, &unavail):
		return &Error{Status: http.StatusServiceUnavailable, Code: string(invoke.CodeServerUnavailable),
			Message: unavail.Error(), Details: map[string]any{"server": unavail.Server, "status": string(unavail.State)}}
	case errors.As(err, &cerrs):
		return validationError(cerrs)
	case errors.As(err, &cerr):
		return validationError(config.Errors{cerr})
	case errors.Is(err, store.ErrNotFound), errors.Is(err, upstream.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: CodeServerNotFound, Message: err.Error()}
	case errors.Is(err, store.ErrConflict), errors.Is(err, upstream.ErrExists):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: err.Error()}
	default:
		return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
	}
}

func validationError(errs config.Errors) *Error {
	fields := make([]map[string]string, 0, len(errs))
	for _, e := range errs {
		fields = append(fields, map[string]string{"field": e.Field, "message": e.Msg})
	}
	return &Error{Status: http.StatusUnprocessableEntity, Code: CodeValidation,
		Message: errs.Error(), Details: map[string]any{"fields": fields}}
}
