package httperr

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name       string
		err        *Error
		status     int
		retryAfter string
		body       string
	}{
		{"status and shape", &Error{Status: 404, Code: "tool_not_found", Message: `unknown tool "a.b"`}, 404, "",
			`{"error":{"code":"tool_not_found","message":"unknown tool \"a.b\""}}` + "\n"},
		{"no status is a 500", &Error{Code: "internal", Message: "boom"}, 500, "",
			`{"error":{"code":"internal","message":"boom"}}` + "\n"},
		{"details", &Error{Status: 503, Code: "server_unavailable", Message: "down", Details: map[string]any{"server": "s", "status": "ERROR"}}, 503, "",
			`{"error":{"code":"server_unavailable","message":"down","details":{"server":"s","status":"ERROR"}}}` + "\n"},
		{"empty details omitted", &Error{Status: 400, Code: "bad_request", Message: "x", Details: map[string]any{}}, 400, "",
			`{"error":{"code":"bad_request","message":"x"}}` + "\n"},
		{"retry after rounded up", &Error{Status: 429, Code: "rate_limited", Message: "slow down", RetryAfter: 1500 * time.Millisecond}, 429, "2",
			`{"error":{"code":"rate_limited","message":"slow down"}}` + "\n"},
		{"whole seconds kept", &Error{Status: 503, Code: "circuit_open", Message: "open", RetryAfter: 10 * time.Second}, 503, "10",
			`{"error":{"code":"circuit_open","message":"open"}}` + "\n"},
		{"no html escaping", &Error{Status: 415, Code: "unsupported_media_type", Message: `got "text/html; a=<b>&c"`}, 415, "",
			`{"error":{"code":"unsupported_media_type","message":"got \"text/html; a=<b>&c\""}}` + "\n"},
		{"nil error", nil, 500, "", `{"error":{"code":"internal","message":"internal error"}}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			rec.Header().Set("X-Content-Type-Options", "nosniff")
			Write(rec, tt.err)
			if rec.Code != tt.status {
				t.Errorf("status = %d, want %d", rec.Code, tt.status)
			}
			if got := rec.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.retryAfter)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Error("a header set before Write was lost")
			}
			if d := cmp.Diff(tt.body, rec.Body.String()); d != "" {
				t.Errorf("body (-want +got):\n%s", d)
			}
		})
	}
}

// TestWriteAnyMessage: whatever a message holds (the caller's own bytes,
// quoted back), the body is JSON that gives the code and message back.
func TestWriteAnyMessage(t *testing.T) {
	for _, msg := range []string{"", "\x00\x01\n\t", "\xff\xfe not UTF-8", `"}]}`, "\u2028\u2029", "日本語 ✓"} {
		rec := httptest.NewRecorder()
		Write(rec, &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: msg})
		var out struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Error.Code != "bad_request" {
			t.Errorf("message %q: body %q: %v", msg, rec.Body, err)
		}
	}
}
