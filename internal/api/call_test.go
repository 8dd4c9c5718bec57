package api

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

// toolErrorCaller answers every call with an isError result carrying text.
type toolErrorCaller struct{ text string }

func (c toolErrorCaller) CallTool(_ context.Context, call invoke.Call) (*invoke.Result, error) {
	return &invoke.Result{CallToolResult: &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: c.text}}},
		Tool: catalog.Tool{Name: call.Name, Server: "demo"}}, nil
}

// TestCallRoutesAgree: the two REST call routes build their calls in one
// place, so they refuse the same requests with the same codes, naming each
// route's own fields, and echo the caller's correlation id on a failure.
func TestCallRoutesAgree(t *testing.T) {
	tests := []struct {
		name       string
		path, body string
		status     int
		code, msg  string
		corr       string // details.correlation_id, "" = none
	}{
		{"tools/call without name", "/api/v1/tools/call", `{"arguments":{}}`, 400, CodeBadRequest, "name is required", ""},
		{"mcp/invoke without tool_name", "/api/v1/mcp/invoke", `{"params":{}}`, 400, CodeBadRequest, "tool_name is required", ""},
		{"tools/call blank name", "/api/v1/tools/call", `{"name":"  "}`, 400, CodeBadRequest, "name is required", ""},
		{"mcp/invoke blank tool_name", "/api/v1/mcp/invoke", `{"tool_name":"  "}`, 400, CodeBadRequest, "tool_name is required", ""},
		{"tools/call arguments not an object", "/api/v1/tools/call", `{"name":"demo.echo","arguments":"x"}`, 400, "invalid_argument", "arguments must be a JSON object", ""},
		{"mcp/invoke params not an object", "/api/v1/mcp/invoke", `{"tool_name":"demo.echo","params":[1]}`, 400, "invalid_argument", "params must be a JSON object", ""},
		{"tools/call failure echoes correlation_id", "/api/v1/tools/call", `{"name":"demo.slow","correlation_id":"c-7"}`, 504, "timeout", "timed out", "c-7"},
		{"tools/call failure echoes a _meta correlation id", "/api/v1/tools/call",
			`{"name":"demo.slow","_meta":{"switchboard/correlation-id":"c-8"}}`, 504, "timeout", "timed out", "c-8"},
		{"mcp/invoke failure echoes correlation_id", "/api/v1/mcp/invoke", `{"tool_name":"demo.slow","correlation_id":"c-9"}`, 504, "timeout", "timed out", "c-9"},
		{"no correlation id, none echoed", "/api/v1/tools/call", `{"name":"demo.slow"}`, 504, "timeout", "timed out", ""},
	}
	e := newEnv(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, body, _ := e.do(t, &agentA, "POST", tt.path, tt.body)
			er, _ := body["error"].(map[string]any)
			if st != tt.status || er["code"] != tt.code || er["message"] != tt.msg {
				t.Fatalf("%d %v, want %d %s %q", st, body, tt.status, tt.code, tt.msg)
			}
			d, _ := er["details"].(map[string]any)
			if got, _ := d["correlation_id"].(string); got != tt.corr {
				t.Errorf("details.correlation_id = %q, want %q (details %v)", got, tt.corr, d)
			}
		})
	}
}

// TestInvokeToolErrorBounded: mcp/invoke's error is the one bounded tool
// error text the audit log keeps; the whole result is still in result.
func TestInvokeToolErrorBounded(t *testing.T) {
	long := strings.Repeat("y", invoke.ToolErrorMax*3)
	h := as(New(&fakeServers{}, catalog.New(nil), toolErrorCaller{long}, nil), &agentA)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/mcp/invoke", strings.NewReader(`{"tool_name":"demo.fails"}`)))
	var out struct {
		Success   bool
		Error     string
		ErrorCode string `json:"error_code"`
		Result    mcp.CallToolResult
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != 200 {
		t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
	}
	if out.Success || out.ErrorCode != "tool_error" || out.Error != long[:invoke.ToolErrorMax] {
		t.Errorf("success %v, error_code %q, error %d bytes; want a tool_error of %d bytes", out.Success, out.ErrorCode, len(out.Error), invoke.ToolErrorMax)
	}
	if len(out.Result.Content) != 1 || out.Result.Content[0].(*mcp.TextContent).Text != long {
		t.Errorf("result content = %v, want the whole text", out.Result.Content)
	}
}
