package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// fakeServers knows one server, "demo".
type fakeServers struct{ registered *config.Server }

var demo = Server{ID: "id-1", Name: "demo", Status: "CONNECTED", TransportType: "STDIO"}

func (f *fakeServers) List(context.Context) ([]Server, error) { return []Server{demo}, nil }
func (f *fakeServers) Get(_ context.Context, id string) (Server, error) {
	if id == "demo" || id == "id-1" {
		return demo, nil
	}
	return Server{}, &Error{Status: 404, Code: CodeServerNotFound, Message: "server " + quote(id) + " not found"}
}
func (f *fakeServers) Register(_ context.Context, def *config.Server, _ bool) (Server, error) {
	if err := config.ValidateServer(def); err != nil {
		return Server{}, err
	}
	f.registered = def
	return Server{Name: def.Name}, nil
}
func (f *fakeServers) Remove(context.Context, string) error { return nil }
func (f *fakeServers) Connect(context.Context, string, bool) (Server, error) {
	return demo, nil
}
func (f *fakeServers) Disconnect(context.Context, string) (Server, int, error) { return demo, 0, nil }
func (f *fakeServers) Discover(context.Context, string) (Server, error)        { return demo, nil }
func (f *fakeServers) Rename(_ context.Context, _, name string) (Server, error) {
	return Server{Name: name}, nil
}
func (f *fakeServers) History(context.Context, string, int) ([]ConnectionEvent, error) {
	return nil, nil
}
func (f *fakeServers) Capabilities(context.Context, string) (Capabilities, error) {
	return Capabilities{Server: "demo"}, nil
}

func (f *fakeServers) Logs(_ context.Context, _ string, n int) ([]string, error) {
	lines := []string{"one", "two", "three"}
	return lines[max(0, len(lines)-n):], nil
}

func (f *fakeServers) SetDefaultAccess(_ context.Context, idOrName, access string) (Server, error) {
	return Server{Name: idOrName, DefaultAccess: access}, nil
}

func (f *fakeServers) ResetDefaultAccess(_ context.Context, idOrName string) (Server, error) {
	return Server{Name: idOrName, DefaultAccess: "allow", DefaultAccessSource: "config"}, nil
}

// fakeCaller answers by tool name.
type fakeCaller struct{ got invoke.Call }

func (f *fakeCaller) CallTool(_ context.Context, c invoke.Call) (*invoke.Result, error) {
	f.got = c
	switch c.Name {
	case "demo.echo", "echo":
		return &invoke.Result{CallToolResult: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}},
			Tool: catalog.Tool{Name: "demo.echo", OriginalName: "echo", Server: "demo"}, CorrelationID: c.CorrelationID,
			Attempts: 2, ServedBy: "backup.echo", Decision: authz.Decision{Allow: true, Rule: "grant:g1", Revision: 7}}, nil
	case "demo.down":
		return nil, &invoke.Error{Code: invoke.CodeServerUnavailable, Server: "demo", Status: "ERROR",
			Message: `server "demo" is ERROR: gone`, Err: &upstream.UnavailableError{Server: "demo", State: upstream.StateError}}
	case "demo.slow":
		return nil, &invoke.Error{Code: invoke.CodeTimeout, Server: "demo", Message: "timed out"}
	case "demo.broken":
		return nil, &invoke.Error{Code: invoke.CodeUpstream, Server: "demo", Message: "upstream said no", Err: errors.New("x")}
	case "demo.fails":
		return &invoke.Result{CallToolResult: &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such file"}}},
			Tool: catalog.Tool{Name: "demo.fails", OriginalName: "fails", Server: "demo"}, Attempts: 1, CorrelationID: "gen-1"}, nil
	case "demo.limited":
		return nil, &invoke.Error{Code: invoke.CodeRateLimited, Message: "rate limit spent", RetryAfter: 1500 * time.Millisecond}
	case "demo.denied":
		return nil, &invoke.Error{Code: invoke.CodeDenied, Message: "denied by default-deny"}
	case "demo.open":
		return nil, &invoke.Error{Code: invoke.CodeCircuitOpen, Server: "demo", Message: "circuit open", RetryAfter: 10 * time.Second}
	case "demo.busy":
		return nil, &invoke.Error{Code: invoke.CodeServerBusy, Server: "demo", Message: "server busy"}
	case "demo.disabled":
		return nil, &invoke.Error{Code: invoke.CodeToolDisabled, Message: "tool disabled"}
	case "demo.changed":
		return nil, &invoke.Error{Code: invoke.CodeToolDefinitionChanged, Server: "demo", Message: "tool quarantined"}
	case "demo.dup":
		return nil, &invoke.Error{Code: invoke.CodeIdempotencyConflict, Message: "key used with other arguments"}
	case "demo.lost":
		return nil, &invoke.Error{Code: invoke.CodeOutcomeUnknown, Server: "demo", Message: "connection lost", Attempts: 1}
	case "demo.huge":
		return nil, &invoke.Error{Code: invoke.CodeResultTooLarge, Server: "demo",
			Message: `calling tool "demo.huge" on server "demo": result too large: upstream reply of 20971520 bytes exceeds max_result_bytes (16777216)`}
	case "demo.anon":
		return nil, &invoke.Error{Code: invoke.CodeUnauthenticated, Message: "no identity"}
	}
	return nil, &invoke.Error{Code: invoke.CodeToolNotFound, Message: "unknown tool " + quote(c.Name)}
}

func TestErrors(t *testing.T) {
	servers := &fakeServers{}
	caller := &fakeCaller{}
	h := as(New(servers, catalog.New(nil), caller, &Options{MaxBodyBytes: 1024}), &adminID)
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"call ok", "POST", "/api/v1/tools/call", `{"name":"demo.echo","arguments":{"text":"x"}}`, 200, ""},
		{"call by original name and server", "POST", "/api/v1/tools/call", `{"name":"echo","server_id":"id-1"}`, 200, ""},
		{"unknown tool", "POST", "/api/v1/tools/call", `{"name":"demo.nope"}`, 404, "tool_not_found"},
		{"unknown server_id", "POST", "/api/v1/tools/call", `{"name":"echo","server_id":"zz"}`, 404, CodeServerNotFound},
		{"server down", "POST", "/api/v1/tools/call", `{"name":"demo.down"}`, 503, "server_unavailable"},
		{"timeout", "POST", "/api/v1/tools/call", `{"name":"demo.slow"}`, 504, "timeout"},
		{"upstream failure", "POST", "/api/v1/tools/call", `{"name":"demo.broken"}`, 500, "upstream_error"},
		{"reply too large", "POST", "/api/v1/tools/call", `{"name":"demo.huge"}`, 502, "result_too_large"},
		{"missing name", "POST", "/api/v1/tools/call", `{}`, 400, CodeBadRequest},
		{"arguments not an object", "POST", "/api/v1/tools/call", `{"name":"demo.echo","arguments":[1]}`, 400, "invalid_argument"},
		{"bad json", "POST", "/api/v1/tools/call", `{"name":`, 400, CodeBadRequest},
		{"unknown field", "POST", "/api/v1/tools/call", `{"nam":"x"}`, 400, CodeBadRequest},
		{"empty body", "POST", "/api/v1/tools/call", ``, 400, CodeBadRequest},
		{"body too large", "POST", "/api/v1/tools/call", `{"name":"` + strings.Repeat("x", 2000) + `"}`, 413, CodeBadRequest},
		{"invalid server", "POST", "/api/v1/aggregator/servers", `{"name":"a.b","transport_type":"HTTP"}`, 422, CodeValidation},
		{"unknown server", "GET", "/api/v1/aggregator/servers/zz", ``, 404, CodeServerNotFound},
		{"unknown route", "GET", "/api/v1/nope", ``, 404, CodeNotFound},
		{"bad history limit", "GET", "/api/v1/aggregator/servers/demo/history?limit=x", ``, 400, string(invoke.CodeInvalidArgument)},
		{"bad wait", "POST", "/api/v1/aggregator/servers/demo/connect?wait=soon", ``, 400, string(invoke.CodeInvalidArgument)},
		{"bad log lines", "GET", "/api/v1/aggregator/servers/demo/logs?lines=0", ``, 400, string(invoke.CodeInvalidArgument)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tc.status, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if tc.code == "" {
				return
			}
			var body struct {
				Error Error `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %s: %v", rec.Body, err)
			}
			if body.Error.Code != tc.code || body.Error.Message == "" {
				t.Errorf("error = %+v, want code %q with a message", body.Error, tc.code)
			}
		})
	}
}

// TestCallPassesArgumentsThrough checks that arguments reach the pipeline
// byte for byte, and the routing metadata comes back.
func TestCallPassesArgumentsThrough(t *testing.T) {
	caller := &fakeCaller{}
	h := as(New(&fakeServers{}, catalog.New(nil), caller, nil), &adminID)
	args := `{"z": 1, "a": [true, null, "ü"], "nested": {"k": 1.50}}`
	req := httptest.NewRequest("POST", "/api/v1/tools/call", strings.NewReader(`{"name":"demo.echo","arguments":`+args+`}`))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if string(caller.got.Arguments) != args {
		t.Errorf("arguments = %s, want %s", caller.got.Arguments, args)
	}
	var res map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &res)
	md := res["metadata"].(map[string]any)
	if md["routed_to"] != "demo" || md["original_name"] != "echo" {
		t.Errorf("metadata = %v", md)
	}
}

func TestRegisterMapsBody(t *testing.T) {
	servers := &fakeServers{}
	h := as(New(servers, catalog.New(nil), &fakeCaller{}, nil), &adminID)
	body := `{"name":"gh","description":"d","transport_type":"SSE","auto_connect":false,
		"connection_config":{"url":"https://example.com/sse","headers":{"Authorization":"Bearer ${TOKEN}"}},
		"health_check_url":"https://example.com/health"}`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/aggregator/servers", strings.NewReader(body)))
	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	d := servers.registered
	if d.Transport != "sse" || d.URL != "https://example.com/sse" || d.Headers["Authorization"] != "Bearer ${TOKEN}" ||
		d.HealthCheckURL != "https://example.com/health" || d.AutoStart == nil || *d.AutoStart {
		t.Errorf("registered %+v", d)
	}
}

func TestLogsWhoamiDefaultAccess(t *testing.T) {
	h := New(&fakeServers{}, catalog.New(nil), &fakeCaller{}, nil)
	admin := authz.Identity{ID: "key:a", AgentID: "ops", Admin: true, Method: "key"}
	do := func(id authz.Identity, method, path, body string) (int, string) {
		req := httptest.NewRequest(method, path, strings.NewReader(body)).WithContext(authz.WithIdentity(context.Background(), id))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	if code, body := do(admin, "GET", "/api/v1/aggregator/servers/demo/logs?lines=2", ""); code != 200 || !strings.Contains(body, `"lines":["two","three"]`) {
		t.Errorf("logs: %d %s", code, body)
	}
	if code, _ := do(admin, "GET", "/api/v1/aggregator/servers/demo/logs?lines=0", ""); code != 400 {
		t.Errorf("logs lines=0: %d, want 400", code)
	}
	if code, _ := do(authz.Identity{ID: "key:b", AgentID: "b"}, "GET", "/api/v1/aggregator/servers/demo/logs", ""); code != 403 {
		t.Errorf("logs as non-admin: %d, want 403", code)
	}
	if code, body := do(admin, "GET", "/api/v1/whoami", ""); code != 200 || !strings.Contains(body, `"agent_id":"ops"`) || !strings.Contains(body, `"admin":true`) {
		t.Errorf("whoami: %d %s", code, body)
	}
	if code, body := do(admin, "PATCH", "/api/v1/aggregator/servers/demo", `{"default_access":"deny"}`); code != 200 || !strings.Contains(body, `"default_access":"deny"`) {
		t.Errorf("default_access: %d %s", code, body)
	}
	for _, bad := range []string{`{"default_access":"maybe"}`, `{"default_access":"deny","name":"x"}`, `{}`} {
		if code, _ := do(admin, "PATCH", "/api/v1/aggregator/servers/demo", bad); code != 400 {
			t.Errorf("PATCH %s: %d, want 400", bad, code)
		}
	}
}

// TestRegisterPlainEnv: plain_env values join env and are named as plain;
// a name also given in env stays a secret.
func TestRegisterPlainEnv(t *testing.T) {
	tests := []struct {
		name      string
		cc        string
		wantEnv   map[string]string
		wantPlain []string
	}{
		{"plain only", `{"command":"x","plain_env":{"B":"/tmp/b","A":"1"}}`, map[string]string{"A": "1", "B": "/tmp/b"}, []string{"A", "B"}},
		{"secret only", `{"command":"x","env":{"T":"tok"}}`, map[string]string{"T": "tok"}, nil},
		{"both", `{"command":"x","env":{"T":"tok"},"plain_env":{"T":"clear","P":"/p"}}`, map[string]string{"T": "tok", "P": "/p"}, []string{"P"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servers := &fakeServers{}
			h := as(New(servers, catalog.New(nil), &fakeCaller{}, nil), &adminID)
			body := `{"name":"s","transport_type":"stdio","connection_config":` + tt.cc + `}`
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/aggregator/servers", strings.NewReader(body)))
			if rec.Code != http.StatusCreated {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			d := servers.registered
			if diff := cmp.Diff(tt.wantEnv, d.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantPlain, d.PlainEnv); diff != "" {
				t.Errorf("plain_env (-want +got):\n%s", diff)
			}
		})
	}
}
