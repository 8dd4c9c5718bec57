// Package httperr is the gateway's one JSON error response:
//
//	{"error": {"code": "tool_not_found", "message": "...", "details": {...}}}
//
// The REST API writes its handlers' failures with it, and so does every
// route outside the API that refuses a request (authentication, the browser
// guard, the per-server endpoints), so that a client parses one shape
// whoever refused it. It imports nothing of the gateway's, so that packages
// the API depends on (httpguard, through config) can write it too.
package httperr

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Error is one error response. Code is stable, for clients to switch on;
// Message is for humans; Details, when present, says more (the server
// involved, the offending parameter, ...).
type Error struct {
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// RetryAfter, when positive, is sent as the Retry-After header (whole
	// seconds, rounded up) so clients back off as long as the gateway asks.
	RetryAfter time.Duration `json:"-"`
}

func (e *Error) Error() string { return e.Message }

// CodeInternal is the code of a response written for a nil *Error.
const CodeInternal = "internal"

// Write writes e with its status (500 when unset) and Retry-After. Headers
// set on w before the call are kept.
func Write(w http.ResponseWriter, e *Error) {
	if e == nil {
		e = &Error{Code: CodeInternal, Message: "internal error"}
	}
	if e.RetryAfter > 0 {
		// Whole seconds, rounded up: a client waiting the floor would be
		// refused again.
		w.Header().Set("Retry-After", strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10))
	}
	status := e.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	// Messages quote what the caller sent; "<" stays "<" rather than
	// "\u003c", as in every other answer of the API.
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]*Error{"error": e}) // the client went away; nothing left to tell it
}
