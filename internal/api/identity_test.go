package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

var (
	adminID = authz.Identity{ID: "admin-key", AgentID: "root", Admin: true, Method: "key"}
	agentA  = authz.Identity{ID: "key:a", AgentID: "agent-a", Method: "key"}
)

// as stands in for the app's authentication: it puts id (nil: none) in
// every request's context.
func as(h http.Handler, id *authz.Identity) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id != nil {
			r = r.WithContext(authz.WithIdentity(r.Context(), *id))
		}
		h.ServeHTTP(w, r)
	})
}

type fakeKeys struct {
	createdBy string
	req       KeyRequest
}

func (f *fakeKeys) Create(_ context.Context, req KeyRequest, createdBy string) (KeyCreated, error) {
	f.req, f.createdBy = req, createdBy
	return KeyCreated{KeyView: KeyView{ID: "k1", Prefix: "sb_ab", AgentID: req.AgentID, CreatedBy: createdBy}, Key: "sb_absecret"}, nil
}
func (f *fakeKeys) List(context.Context) ([]KeyView, error) {
	return []KeyView{{ID: "k1", AgentID: "agent-a"}}, nil
}
func (f *fakeKeys) Revoke(_ context.Context, id string) error {
	if id != "k1" {
		return fmt.Errorf("revoking key %q: %w", id, store.ErrNotFound)
	}
	return nil
}

type fakePolicies struct {
	grantedBy string
	grant     GrantRequest
	token     TokenRequest
	listed    []string
}

func (f *fakePolicies) Grant(_ context.Context, req GrantRequest, grantedBy string) (GrantResult, error) {
	f.grant, f.grantedBy = req, grantedBy
	res := GrantResult{Grant: authz.Grant{ID: "g1", AgentID: req.AgentID, Server: "demo", Tool: "*", GrantedBy: grantedBy}}
	if req.IssueToken {
		res.Token = "tok-secret"
		res.TokenInfo = &authz.Token{ID: "tokhash", AgentID: req.AgentID}
	}
	return res, nil
}
func (f *fakePolicies) Revoke(_ context.Context, id string) error {
	if id != "g1" {
		return fmt.Errorf("revoking grant %q: %w", id, store.ErrNotFound)
	}
	return nil
}
func (f *fakePolicies) Grants(_ context.Context, agent string) ([]authz.Grant, error) {
	f.listed = append(f.listed, agent)
	return []authz.Grant{{ID: "g1", AgentID: "agent-a", Server: "demo", Tool: "*"}}, nil
}
func (f *fakePolicies) IssueToken(_ context.Context, req TokenRequest) (TokenResult, error) {
	f.token = req
	return TokenResult{Token: "tok-secret", TokenInfo: authz.Token{ID: "tokhash", AgentID: req.AgentID}}, nil
}
func (f *fakePolicies) RevokeToken(_ context.Context, id string) error {
	switch id {
	case "bad":
		return fmt.Errorf("revoking token: %w: id must be hex", authz.ErrInvalid)
	case "gone":
		return fmt.Errorf("revoking token: %w", authz.ErrNotFound)
	}
	return nil
}

type fakeAudit struct{ got audit.Filter }

func (f *fakeAudit) Query(_ context.Context, fl audit.Filter) ([]audit.Record, string, error) {
	f.got = fl
	return []audit.Record{{ID: "r1", Kind: audit.KindInvocation, AgentID: "agent-a"}}, "c2", nil
}

type fakeBreakers struct{}

func (fakeBreakers) Breakers(context.Context) ([]BreakerView, error) {
	return []BreakerView{
		{Key: "demo:echo", Server: "demo", Tool: "echo", State: "OPEN", Failures: 5},
		{Key: "demo:add", Server: "demo", Tool: "add", State: "CLOSED"},
		{Key: "other:echo", Server: "other", Tool: "echo", State: "CLOSED"},
	}, nil
}

type fakeStats struct{ got audit.Filter }

func (f *fakeStats) Stats(_ context.Context, fl audit.Filter) ([]ToolStats, error) {
	f.got = fl
	return []ToolStats{
		{Server: "demo", Tool: "echo", Calls: 3, Successes: 3, AvgLatencyMS: 10, MaxLatencyMS: 20},
		{Server: "demo", Tool: "add", Calls: 1, Failures: 1, AvgLatencyMS: 50, MaxLatencyMS: 50},
	}, nil
}

type fakeRegistrar struct{ got Manifest }

func (f *fakeRegistrar) RegisterManifest(_ context.Context, m Manifest) (RegistrationResult, error) {
	f.got = m
	return RegistrationResult{ServerID: m.ServerID, RegisteredCount: 1,
		RegisteredTools: []RegisteredTool{{ServerID: m.ServerID, Tool: "search", Version: "1.0.0", Enabled: true}}}, nil
}

// opLog records Options.Operation calls.
type opLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *opLog) record(ctx context.Context, op, server, detail string, err error) {
	id, _ := authz.IdentityFrom(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, fmt.Sprintf("%s server=%s by=%s err=%v: %s", op, server, id.AgentID, err != nil, detail))
}

// env is a fully configured API with fakes and two tools: demo.echo
// (visible to everyone) and demo.secret (admins only).
type env struct {
	api      http.Handler
	caller   *fakeCaller
	keys     *fakeKeys
	policies *fakePolicies
	audit    *fakeAudit
	stats    *fakeStats
	reg      *fakeRegistrar
	search   *fakeSearch
	ops      *opLog
}

func newEnv(t testing.TB) *env {
	t.Helper()
	cat := catalog.New(nil)
	schema := map[string]any{"type": "object"}
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Tools: []*mcp.Tool{
		{Name: "echo", Description: "echoes", InputSchema: schema, Meta: mcp.Meta{"version": "1.2.0"}},
		{Name: "secret", InputSchema: schema},
	}}); err != nil {
		t.Fatal(err)
	}
	e := &env{caller: &fakeCaller{}, keys: &fakeKeys{}, policies: &fakePolicies{}, audit: &fakeAudit{},
		stats: &fakeStats{}, reg: &fakeRegistrar{}, search: &fakeSearch{}, ops: &opLog{}}
	e.api = New(&fakeServers{}, cat, e.caller, &Options{
		Keys: e.keys, Policies: e.policies, Audit: e.audit, Breakers: fakeBreakers{}, Stats: e.stats, Registrar: e.reg, Search: e.search,
		Visible: func(id authz.Identity, t catalog.Tool) bool {
			return id.Admin || t.OriginalName != "secret"
		},
		Operation: e.ops.record,
	})
	return e
}

// do sends one request as id (nil: unauthenticated) and returns the
// status and the decoded JSON body (nil when empty).
func (e *env) do(t *testing.T, id *authz.Identity, method, path, body string, header ...string) (int, map[string]any, http.Header) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	as(e.api, id).ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, path, rec.Body, err)
		}
	}
	return rec.Code, out, rec.Header()
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// TestAccess checks every route's gate: 401 without an identity, 403 for
// an agent on admin routes, and the happy status for an admin.
func TestAccess(t *testing.T) {
	tests := []struct {
		method, path, body string
		admin              int // status for the admin
		agent              int // status for agent-a
	}{
		{"GET", "/api/v1/aggregator/servers", "", 200, 200},
		{"GET", "/api/v1/aggregator/servers/demo", "", 200, 200},
		{"GET", "/api/v1/aggregator/servers/demo/history", "", 200, 200},
		{"GET", "/api/v1/aggregator/servers/demo/capabilities", "", 200, 200},
		{"POST", "/api/v1/aggregator/servers", `{"name":"gh","transport_type":"HTTP","connection_config":{"url":"https://example.com/mcp"}}`, 201, 403},
		{"DELETE", "/api/v1/aggregator/servers/demo", "", 204, 403},
		{"PATCH", "/api/v1/aggregator/servers/demo", `{"name":"d2"}`, 200, 403},
		{"DELETE", "/api/v1/aggregator/servers/demo/default_access", "", 200, 403},
		{"POST", "/api/v1/aggregator/servers/demo/connect", "", 202, 403},
		{"POST", "/api/v1/aggregator/servers/demo/disconnect", "", 200, 403},
		{"POST", "/api/v1/aggregator/servers/demo/discover", "", 200, 403},
		{"GET", "/api/v1/tools", "", 200, 200},
		{"GET", "/api/v1/tools/demo.echo", "", 200, 200},
		{"POST", "/api/v1/tools/call", `{"name":"demo.echo"}`, 200, 200},
		{"POST", "/api/v1/keys", `{"agent_id":"agent-b"}`, 201, 403},
		{"GET", "/api/v1/keys", "", 200, 403},
		{"DELETE", "/api/v1/keys/k1", "", 204, 403},
		{"POST", "/api/v1/mcp/register", `{"server_id":"ctx7","version":"1.0.0","tools":[{"name":"search","schema":{"type":"object"}}]}`, 201, 403},
		{"GET", "/api/v1/mcp/tools", "", 200, 200},
		{"GET", "/api/v1/mcp/tools/demo/echo", "", 200, 200},
		{"POST", "/api/v1/mcp/invoke", `{"server_id":"demo","tool_name":"echo"}`, 200, 200},
		{"POST", "/api/v1/mcp/policies/grant", `{"agent_id":"agent-a","tool_name":"demo.*"}`, 201, 403},
		{"DELETE", "/api/v1/mcp/policies/grant/g1", "", 204, 403},
		{"GET", "/api/v1/mcp/policies", "", 200, 403},
		{"GET", "/api/v1/mcp/policies/agent-a", "", 200, 200},
		{"GET", "/api/v1/mcp/policies/agent-b", "", 200, 403},
		{"POST", "/api/v1/mcp/tokens", `{"agent_id":"agent-a","server_id":"demo","tool_name":"delete"}`, 201, 403},
		{"DELETE", "/api/v1/mcp/tokens/t1", "", 204, 403},
		{"GET", "/api/v1/mcp/circuit-breakers", "", 200, 403},
		{"GET", "/api/v1/mcp/metrics", "", 200, 403},
		{"GET", "/api/v1/audit", "", 200, 403},
		{"GET", "/api/v1/events", "", 0, 403}, // a stream: the admin case is not run here
		{"POST", "/api/v1/search", `{"query":"echo"}`, 200, 200},
		{"GET", "/api/v1/skills", "", 200, 200},
		{"GET", "/api/v1/skills/issue_tracking/tools", "", 200, 200},
		{"GET", "/api/v1/skills/suggestions", "", 200, 403},
		// No authorization server in this env: 404 oauth_server_off
		// (TestOAuthAdmin runs them against one).
		{"GET", "/api/v1/oauth/clients", "", 404, 403},
		{"DELETE", "/api/v1/oauth/clients/c1", "", 404, 403},
		{"GET", "/api/v1/oauth/grants", "", 404, 403},
		{"DELETE", "/api/v1/oauth/grants/g1", "", 404, 403},
	}
	e := newEnv(t)
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			if st, body, _ := e.do(t, nil, tc.method, tc.path, tc.body); st != 401 || errCode(body) != CodeUnauthenticated {
				t.Errorf("unauthenticated: status %d code %q, want 401 %q", st, errCode(body), CodeUnauthenticated)
			}
			st, body, _ := e.do(t, &agentA, tc.method, tc.path, tc.body)
			if st != tc.agent {
				t.Errorf("agent: status %d, want %d; body %v", st, tc.agent, body)
			}
			if st == 403 && errCode(body) != CodeForbidden {
				t.Errorf("agent: code %q, want %q", errCode(body), CodeForbidden)
			}
			if tc.admin == 0 {
				return
			}
			if st, body, _ := e.do(t, &adminID, tc.method, tc.path, tc.body); st != tc.admin {
				t.Errorf("admin: status %d, want %d; body %v", st, tc.admin, body)
			}
		})
	}
}

func TestHealthNeedsNoIdentity(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		if st, _, _ := e.do(t, nil, "GET", path, ""); st != 200 {
			t.Errorf("%s: status %d, want 200", path, st)
		}
	}
}

func TestNotConfigured(t *testing.T) {
	h := New(&fakeServers{}, catalog.New(nil), &fakeCaller{}, nil)
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/api/v1/keys", ""},
		{"POST", "/api/v1/mcp/policies/grant", `{"agent_id":"a","tool_name":"x.*"}`},
		{"GET", "/api/v1/mcp/policies/root", ""},
		{"GET", "/api/v1/audit", ""},
		{"GET", "/api/v1/mcp/circuit-breakers", ""},
		{"GET", "/api/v1/mcp/metrics", ""},
		{"POST", "/api/v1/mcp/register", `{"server_id":"x"}`},
		{"POST", "/api/v1/search", `{"query":"q"}`},
		{"GET", "/api/v1/skills", ""},
		{"GET", "/api/v1/skills/x/tools", ""},
		{"GET", "/api/v1/skills/suggestions", ""},
	} {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			as(h, &adminID).ServeHTTP(rec, httptest.NewRequest(rt.method, rt.path, strings.NewReader(rt.body)))
			var body map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != http.StatusNotImplemented || errCode(body) != CodeNotConfigured {
				t.Errorf("status %d code %q, want 501 %q", rec.Code, errCode(body), CodeNotConfigured)
			}
		})
	}
}

func TestKeys(t *testing.T) {
	e := newEnv(t)
	st, body, _ := e.do(t, &adminID, "POST", "/api/v1/keys", `{"agent_id":"agent-b","roles":["reader"],"admin":false}`)
	if st != 201 || body["key"] != "sb_absecret" || body["id"] != "k1" {
		t.Fatalf("create: %d %v", st, body)
	}
	if diff := cmp.Diff(KeyRequest{AgentID: "agent-b", Roles: []string{"reader"}}, e.keys.req); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if e.keys.createdBy != "root" {
		t.Errorf("createdBy = %q, want root", e.keys.createdBy)
	}
	if st, body, _ := e.do(t, &adminID, "POST", "/api/v1/keys", `{"roles":["x"]}`); st != 400 {
		t.Errorf("missing agent_id: %d %v", st, body)
	}
	st, body, _ = e.do(t, &adminID, "GET", "/api/v1/keys", "")
	if keys, _ := body["keys"].([]any); st != 200 || len(keys) != 1 {
		t.Errorf("list: %d %v", st, body)
	}
	if st, _, _ := e.do(t, &adminID, "DELETE", "/api/v1/keys/k1", ""); st != 204 {
		t.Errorf("revoke: %d", st)
	}
	if st, body, _ := e.do(t, &adminID, "DELETE", "/api/v1/keys/nope", ""); st != 404 || errCode(body) != CodeNotFound {
		t.Errorf("revoke unknown: %d %v", st, body)
	}
	want := []string{
		`key.create server= by=root err=false: agent "agent-b" key "k1"`,
		`key.revoke server= by=root err=false: key "k1"`,
		`key.revoke server= by=root err=true: key "nope"`,
	}
	if diff := cmp.Diff(want, e.ops.ops); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
	for _, op := range e.ops.ops {
		if strings.Contains(op, "sb_absecret") {
			t.Errorf("operation detail leaks the key: %s", op)
		}
	}
}

func TestPolicies(t *testing.T) {
	e := newEnv(t)
	st, body, _ := e.do(t, &adminID, "POST", "/api/v1/mcp/policies/grant",
		`{"agent_id":"agent-a","tool_name":"write","server_id":"demo","actions":["invoke"],"issue_token":true,"token_ttl_minutes":5,"bind_arguments":{"path":"/tmp/x"},"single_use":true}`)
	if st != 201 || body["token"] != "tok-secret" {
		t.Fatalf("grant: %d %v", st, body)
	}
	want := GrantRequest{AgentID: "agent-a", Tool: "write", Server: "demo", Actions: []string{"invoke"}, IssueToken: true,
		TokenTTLMinutes: 5, BindArguments: json.RawMessage(`{"path":"/tmp/x"}`), SingleUse: true}
	if diff := cmp.Diff(want, e.policies.grant); diff != "" {
		t.Errorf("grant request (-want +got):\n%s", diff)
	}
	if e.policies.grantedBy != "root" {
		t.Errorf("grantedBy = %q", e.policies.grantedBy)
	}

	bad := []struct{ name, body string }{
		{"no agent", `{"tool_name":"demo.*"}`},
		{"no tool", `{"agent_id":"a"}`},
		{"token fields without issue_token", `{"agent_id":"a","tool_name":"demo.*","single_use":true}`},
		{"negative ttl", `{"agent_id":"a","tool_name":"demo.*","issue_token":true,"token_ttl_minutes":-1}`},
		{"bound arguments not an object", `{"agent_id":"a","tool_name":"demo.*","issue_token":true,"bind_arguments":[1]}`},
		{"unknown field", `{"agent_id":"a","tool":"demo.*"}`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if st, body, _ := e.do(t, &adminID, "POST", "/api/v1/mcp/policies/grant", tc.body); st != 400 {
				t.Errorf("status %d, want 400; %v", st, body)
			}
		})
	}

	if st, body, _ := e.do(t, &agentA, "GET", "/api/v1/mcp/policies/agent-a", ""); st != 200 || body["agent_id"] != "agent-a" {
		t.Errorf("own grants: %d %v", st, body)
	}
	if st, _, _ := e.do(t, &adminID, "GET", "/api/v1/mcp/policies", ""); st != 200 {
		t.Errorf("all grants: %d", st)
	}
	if diff := cmp.Diff([]string{"agent-a", ""}, e.policies.listed); diff != "" {
		t.Errorf("Grants called with (-want +got):\n%s", diff)
	}
	if st, body, _ := e.do(t, &adminID, "DELETE", "/api/v1/mcp/policies/grant/g9", ""); st != 404 || errCode(body) != CodeNotFound {
		t.Errorf("revoke unknown grant: %d %v", st, body)
	}

	if st, body, _ := e.do(t, &adminID, "DELETE", "/api/v1/mcp/tokens/bad", ""); st != 400 || errCode(body) != CodeInvalid {
		t.Errorf("revoke malformed token id: %d %v", st, body)
	}
	if st, body, _ := e.do(t, &adminID, "DELETE", "/api/v1/mcp/tokens/gone", ""); st != 404 || errCode(body) != CodeNotFound {
		t.Errorf("revoke unknown token: %d %v", st, body)
	}

	st, body, _ = e.do(t, &adminID, "POST", "/api/v1/mcp/tokens",
		`{"agent_id":"agent-a","server_id":"demo","tool_name":"delete","ttl_minutes":10,"bind_arguments":null,"single_use":true}`)
	if st != 201 || body["token"] != "tok-secret" {
		t.Fatalf("token: %d %v", st, body)
	}
	if diff := cmp.Diff(TokenRequest{AgentID: "agent-a", Server: "demo", Tool: "delete", TTLMinutes: 10, SingleUse: true}, e.policies.token); diff != "" {
		t.Errorf("token request (-want +got):\n%s", diff)
	}
	for _, op := range e.ops.ops {
		if strings.Contains(op, "tok-secret") {
			t.Errorf("operation detail leaks the token: %s", op)
		}
	}
}

func TestAuditQuery(t *testing.T) {
	e := newEnv(t)
	st, body, _ := e.do(t, &adminID, "GET",
		"/api/v1/audit?agent_id=agent-a&server_id=demo&tool_name=echo&decision=deny&kind=invocation&success=false"+
			"&since=2025-01-16T10:00:00Z&until=2025-01-16T11:00:00Z&limit=50&cursor=abc", "")
	if st != 200 || body["next_cursor"] != "c2" {
		t.Fatalf("query: %d %v", st, body)
	}
	if recs, _ := body["records"].([]any); len(recs) != 1 {
		t.Errorf("records = %v", body["records"])
	}
	no := false
	want := audit.Filter{Kind: "invocation", AgentID: "agent-a", Server: "demo", Tool: "echo", Decision: "DENY", Success: &no,
		Since: time.Date(2025, 1, 16, 10, 0, 0, 0, time.UTC), Until: time.Date(2025, 1, 16, 11, 0, 0, 0, time.UTC), Limit: 50, Cursor: "abc"}
	if diff := cmp.Diff(want, e.audit.got); diff != "" {
		t.Errorf("filter (-want +got):\n%s", diff)
	}

	bad := []struct{ query, param string }{
		{"decision=MAYBE", "decision"},
		{"kind=everything", "kind"},
		{"success=perhaps", "success"},
		{"since=yesterday", "since"},
		{"until=2025-13-01T00:00:00Z", "until"},
		{"since=2025-01-02T00:00:00Z&until=2025-01-01T00:00:00Z", "until"},
		{"limit=0", "limit"},
		{"limit=5000", "limit"},
		{"limit=ten", "limit"},
	}
	for _, tc := range bad {
		t.Run(tc.query, func(t *testing.T) {
			st, body, _ := e.do(t, &adminID, "GET", "/api/v1/audit?"+tc.query, "")
			e, _ := body["error"].(map[string]any)
			d, _ := e["details"].(map[string]any)
			if st != 400 || errCode(body) != string(invoke.CodeInvalidArgument) || d["parameter"] != tc.param {
				t.Errorf("status %d body %v, want 400 naming %q", st, body, tc.param)
			}
		})
	}
}

func TestBreakersFilter(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		query string
		keys  []string
	}{
		{"", []string{"demo:echo", "demo:add", "other:echo"}},
		{"?server_id=demo", []string{"demo:echo", "demo:add"}},
		{"?tool_name=echo", []string{"demo:echo", "other:echo"}},
		{"?server_id=demo&tool_name=echo", []string{"demo:echo"}},
		{"?server_id=none", []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			st, body, _ := e.do(t, &adminID, "GET", "/api/v1/mcp/circuit-breakers"+tc.query, "")
			if st != 200 {
				t.Fatalf("status %d: %v", st, body)
			}
			keys := []string{}
			for _, b := range body["circuit_breakers"].([]any) {
				keys = append(keys, b.(map[string]any)["circuit_key"].(string))
			}
			if diff := cmp.Diff(tc.keys, keys); diff != "" {
				t.Errorf("breakers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	st, body, _ := e.do(t, &adminID, "GET", "/api/v1/mcp/metrics?server_id=demo&time_range=1h", "")
	if st != 200 {
		t.Fatalf("status %d: %v", st, body)
	}
	if got := e.stats.got; got.Server != "demo" || got.Until.Sub(got.Since) != time.Hour {
		t.Errorf("filter = %+v, want server demo over one hour", got)
	}
	wantTotals := map[string]any{"calls": 4.0, "successes": 3.0, "failures": 1.0, "denied": 0.0, "retries": 0.0,
		"success_rate": 0.75, "avg_latency_ms": 20.0, "max_latency_ms": 50.0}
	if diff := cmp.Diff(wantTotals, body["totals"]); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
	if tr, _ := body["time_range"].(map[string]any); tr["range"] != "1h" {
		t.Errorf("time_range = %v", body["time_range"])
	}

	st, _, _ = e.do(t, &adminID, "GET", "/api/v1/mcp/metrics?since=2025-01-16T10:00:00Z", "")
	if want := time.Date(2025, 1, 16, 10, 0, 0, 0, time.UTC); st != 200 || !e.stats.got.Since.Equal(want) || !e.stats.got.Until.IsZero() {
		t.Errorf("since only: %d, filter %+v", st, e.stats.got)
	}

	for _, q := range []string{"time_range=2w", "time_range=1h&since=2025-01-16T10:00:00Z"} {
		if st, body, _ := e.do(t, &adminID, "GET", "/api/v1/mcp/metrics?"+q, ""); st != 400 {
			t.Errorf("%s: %d %v, want 400", q, st, body)
		}
	}
}

func TestRegisterManifest(t *testing.T) {
	e := newEnv(t)
	st, body, _ := e.do(t, &adminID, "POST", "/api/v1/mcp/register",
		`{"server_id":"context7","version":"1.0.0","capabilities":["search"],"tools":[{"name":"search","schema":{"type":"object"},"version":"1.0.0"}]}`)
	if st != 201 || body["registered_count"] != 1.0 {
		t.Fatalf("register: %d %v", st, body)
	}
	if rj, ok := body["rejected_tools"].([]any); !ok || len(rj) != 0 {
		t.Errorf("rejected_tools = %v, want []", body["rejected_tools"])
	}
	if e.reg.got.ServerID != "context7" || len(e.reg.got.Tools) != 1 || string(e.reg.got.Tools[0].Schema) != `{"type":"object"}` {
		t.Errorf("manifest = %+v", e.reg.got)
	}
	if st, _, _ := e.do(t, &adminID, "POST", "/api/v1/mcp/register", `{"version":"1"}`); st != 400 {
		t.Errorf("no server_id: %d", st)
	}
	if len(e.ops.ops) != 1 || !strings.HasPrefix(e.ops.ops[0], "mcp.register server=context7 by=root err=false") {
		t.Errorf("operations = %q", e.ops.ops)
	}
}

// TestToolListingsFilteredByVisible: a hidden tool is absent from every
// listing and answers 404 like an unknown one.
func TestToolListingsFilteredByVisible(t *testing.T) {
	e := newEnv(t)
	names := func(body map[string]any, field string) []string {
		out := []string{}
		for _, t := range body["tools"].([]any) {
			out = append(out, t.(map[string]any)[field].(string))
		}
		return out
	}
	tests := []struct {
		name string
		id   *authz.Identity
		path string
		want []string
	}{
		{"tools admin", &adminID, "/api/v1/tools", []string{"demo.echo", "demo.secret"}},
		{"tools agent", &agentA, "/api/v1/tools", []string{"demo.echo"}},
		{"mcp tools admin", &adminID, "/api/v1/mcp/tools", []string{"demo.echo", "demo.secret"}},
		{"mcp tools agent", &agentA, "/api/v1/mcp/tools?server_id=demo&enabled_only=true", []string{"demo.echo"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, body, _ := e.do(t, tc.id, "GET", tc.path, "")
			if st != 200 {
				t.Fatalf("status %d: %v", st, body)
			}
			if diff := cmp.Diff(tc.want, names(body, "name")); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
		})
	}
	for _, path := range []string{"/api/v1/tools/demo.secret", "/api/v1/mcp/tools/demo/secret", "/api/v1/tools/demo.nope"} {
		if st, body, _ := e.do(t, &agentA, "GET", path, ""); st != 404 || errCode(body) != "tool_not_found" {
			t.Errorf("%s: %d %v, want 404 tool_not_found", path, st, body)
		}
	}
	st, body, _ := e.do(t, &agentA, "GET", "/api/v1/mcp/tools/demo/echo", "")
	want := map[string]any{"server_id": "demo", "tool_name": "echo", "name": "demo.echo", "description": "echoes",
		"schema": map[string]any{"type": "object"}, "version": "1.2.0", "enabled": true, "available": true}
	if diff := cmp.Diff(want, body); st != 200 || diff != "" {
		t.Errorf("get: %d (-want +got):\n%s", st, diff)
	}
	if st, _, _ := e.do(t, &agentA, "GET", "/api/v1/mcp/tools?enabled_only=maybe", ""); st != 400 {
		t.Errorf("bad enabled_only: %d", st)
	}
}

func TestInvoke(t *testing.T) {
	e := newEnv(t)
	st, body, _ := e.do(t, &agentA, "POST", "/api/v1/mcp/invoke",
		`{"correlation_id":"req-1","agent_id":"agent-a","server_id":"id-1","tool_name":"echo","params":{"q":1},"ticket_id":"T1","task_id":"K1"}`,
		"Idempotency-Key", "idem-9", "X-Approval-Token", "appr")
	if st != 200 {
		t.Fatalf("status %d: %v", st, body)
	}
	got := e.caller.got
	if got.Server != "demo" || got.Name != "echo" || string(got.Arguments) != `{"q":1}` || got.Identity.AgentID != "agent-a" ||
		got.CorrelationID != "req-1" || got.IdempotencyKey != "idem-9" || got.ApprovalToken != "appr" || got.TicketID != "T1" || got.TaskID != "K1" {
		t.Errorf("call = %+v", got)
	}
	for k, v := range map[string]any{"correlation_id": "req-1", "success": true, "attempts": 2.0, "idempotency_key": "idem-9",
		"ticket_id": "T1", "task_id": "K1", "served_by": "backup.echo"} {
		if body[k] != v {
			t.Errorf("%s = %v, want %v", k, body[k], v)
		}
	}
	if diff := cmp.Diff(map[string]any{"decision": "ALLOW", "rule": "grant:g1", "revision": 7.0, "cached": false}, body["policy"]); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
	if res, _ := body["result"].(map[string]any); res == nil || res["content"] == nil {
		t.Errorf("result = %v", body["result"])
	}

	// A tool error is a result, not an HTTP error.
	st, body, _ = e.do(t, &agentA, "POST", "/api/v1/mcp/invoke", `{"tool_name":"demo.fails"}`)
	if st != 200 || body["success"] != false || body["error"] != "no such file" || body["error_code"] != "tool_error" || body["correlation_id"] != "gen-1" {
		t.Errorf("tool error: %d %v", st, body)
	}

	// An admin may act for an agent; the credential stays the admin's.
	if st, body, _ := e.do(t, &adminID, "POST", "/api/v1/mcp/invoke", `{"agent_id":"agent-b","tool_name":"demo.echo"}`); st != 200 {
		t.Errorf("admin for agent-b: %d %v", st, body)
	}
	if id := e.caller.got.Identity; id.AgentID != "agent-b" || id.ID != "admin-key" {
		t.Errorf("identity = %+v", id)
	}

	bad := []struct {
		name, body string
		header     []string
		status     int
		code       string
	}{
		{"other agent", `{"agent_id":"agent-b","tool_name":"demo.echo"}`, nil, 403, CodeForbidden},
		{"no tool", `{"server_id":"demo"}`, nil, 400, CodeBadRequest},
		{"params not an object", `{"tool_name":"demo.echo","params":"x"}`, nil, 400, "invalid_argument"},
		{"unknown server", `{"server_id":"zz","tool_name":"echo"}`, nil, 404, CodeServerNotFound},
		{"header disagrees", `{"tool_name":"demo.echo","idempotency_key":"a"}`, []string{"Idempotency-Key", "b"}, 400, CodeBadRequest},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			st, body, _ := e.do(t, &agentA, "POST", "/api/v1/mcp/invoke", tc.body, tc.header...)
			if st != tc.status || errCode(body) != tc.code {
				t.Errorf("%d %v, want %d %s", st, body, tc.status, tc.code)
			}
		})
	}
}

// TestPipelineErrors checks the status, code and Retry-After of each
// pipeline failure, on both call routes.
func TestPipelineErrors(t *testing.T) {
	tests := []struct {
		tool       string
		status     int
		retryAfter string
	}{
		{"demo.limited", 429, "2"},
		{"demo.denied", 403, ""},
		{"demo.anon", 401, ""},
		{"demo.open", 503, "10"},
		{"demo.busy", 503, ""},
		{"demo.disabled", 409, ""},
		{"demo.changed", 409, ""},
		{"demo.dup", 409, ""},
		{"demo.lost", 502, ""},
		{"demo.slow", 504, ""},
	}
	e := newEnv(t)
	for _, tc := range tests {
		for _, path := range []string{"/api/v1/mcp/invoke", "/api/v1/tools/call"} {
			t.Run(tc.tool+" "+path, func(t *testing.T) {
				body := `{"tool_name":"` + tc.tool + `","correlation_id":"c-1"}`
				if path == "/api/v1/tools/call" {
					body = `{"name":"` + tc.tool + `"}`
				}
				st, out, hdr := e.do(t, &agentA, "POST", path, body)
				if st != tc.status {
					t.Errorf("status %d, want %d; %v", st, tc.status, out)
				}
				if got := hdr.Get("Retry-After"); got != tc.retryAfter {
					t.Errorf("Retry-After = %q, want %q", got, tc.retryAfter)
				}
				if path == "/api/v1/mcp/invoke" {
					d, _ := out["error"].(map[string]any)["details"].(map[string]any)
					if d["correlation_id"] != "c-1" {
						t.Errorf("details = %v, want the correlation id", d)
					}
				}
			})
		}
	}
	_, out, _ := e.do(t, &agentA, "POST", "/api/v1/tools/call", `{"name":"demo.lost"}`)
	if msg := out["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "may have run") {
		t.Errorf("outcome_unknown message %q does not warn that the call may have run", msg)
	}
}

func TestToolsCallForwardsIdentityAndKeys(t *testing.T) {
	e := newEnv(t)
	st, body, _ := e.do(t, &agentA, "POST", "/api/v1/tools/call",
		`{"name":"demo.echo","approval_token":"appr","ticket_id":"T"}`, "Idempotency-Key", "idem-1")
	if st != 200 {
		t.Fatalf("status %d: %v", st, body)
	}
	got := e.caller.got
	if got.Identity.ID != "key:a" || got.IdempotencyKey != "idem-1" || got.ApprovalToken != "appr" || got.TicketID != "T" {
		t.Errorf("call = %+v", got)
	}
	if md := body["metadata"].(map[string]any); md["attempts"] != 2.0 || md["served_by"] != "backup.echo" {
		t.Errorf("metadata = %v", md)
	}
}

func TestServerOperationsReported(t *testing.T) {
	e := newEnv(t)
	for _, rt := range []struct{ method, path, body string }{
		{"POST", "/api/v1/aggregator/servers", `{"name":"gh","transport_type":"HTTP","connection_config":{"url":"https://example.com/mcp"}}`},
		{"POST", "/api/v1/aggregator/servers", `{"name":"a.b","transport_type":"HTTP"}`}, // invalid: reported as failed
		{"POST", "/api/v1/aggregator/servers/demo/connect", ""},
		{"POST", "/api/v1/aggregator/servers/demo/disconnect", ""},
		{"POST", "/api/v1/aggregator/servers/demo/discover", ""},
		{"PATCH", "/api/v1/aggregator/servers/demo", `{"name":"d2"}`},
		{"DELETE", "/api/v1/aggregator/servers/demo", ""},
	} {
		e.do(t, &adminID, rt.method, rt.path, rt.body)
	}
	want := []string{
		"server.register server=gh by=root err=false: transport http",
		"server.register server=a.b by=root err=true: transport http",
		"server.connect server=demo by=root err=false: ",
		"server.disconnect server=demo by=root err=false: ",
		"server.discover server=demo by=root err=false: ",
		`server.rename server=demo by=root err=false: new name "d2"`,
		"server.remove server=demo by=root err=false: ",
	}
	if diff := cmp.Diff(want, e.ops.ops); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
}
