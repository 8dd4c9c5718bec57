package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/front"
)

// faultyUpstream is the demo server over Streamable HTTP behind a fault
// injector that counts the tools/call requests reaching it, per tool.
type faultyUpstream struct {
	srv *httptest.Server

	mu    sync.Mutex
	calls map[string]int

	fail503 atomic.Int32 // answer the next N tools/call with 503
	failAll atomic.Bool  // answer every tools/call with 503
	drop    atomic.Value // string: tool whose requests are read, then the connection dropped
}

func newFaultyUpstream(t *testing.T) *faultyUpstream {
	t.Helper()
	f := &faultyUpstream{calls: map[string]int{}}
	f.drop.Store("")
	inner := demo.Handler(&demo.Options{Writable: true, ExtraTools: 1})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			inner.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" {
			inner.ServeHTTP(w, r)
			return
		}
		f.mu.Lock()
		f.calls[msg.Params.Name]++
		f.mu.Unlock()
		switch {
		case f.failAll.Load():
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		case f.fail503.Load() > 0:
			f.fail503.Add(-1)
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		case f.drop.Load().(string) == msg.Params.Name:
			// The request arrived; the connection dies before any answer.
			panic(http.ErrAbortHandler)
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *faultyUpstream) count(tool string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[tool]
}

func (f *faultyUpstream) yaml(name string) string {
	return fmt.Sprintf("\n  %s:\n    transport: http\n    url: %s/mcp\n    auto_start: true\n    health_check: {interval_seconds: 3600}\n", name, f.srv.URL)
}

// fastSettings make retries and breakers quick enough for tests.
const fastSettings = `settings:
  retry_base_ms: 1
  retry_max_delay_ms: 5
  circuit_failure_threshold: 3
  circuit_cooldown_seconds: 1
  circuit_half_open_max: 1
`

// invoke calls POST /api/v1/mcp/invoke.
func (g *gateway) invoke(t *testing.T, server, tool string, params map[string]any, extra map[string]any) (int, map[string]any) {
	t.Helper()
	body := map[string]any{"server_id": server, "tool_name": tool, "params": params}
	for k, v := range extra {
		body[k] = v
	}
	return g.rest(t, "POST", "/api/v1/mcp/invoke", body)
}

func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func TestRetryThroughGateway(t *testing.T) {
	up := newFaultyUpstream(t)
	g := startGateway(t, fastSettings+"servers:"+up.yaml("up"), nil)

	// A read-only tool failing transiently twice, then succeeding.
	up.fail503.Store(2)
	code, body := g.invoke(t, "up", "echo", map[string]any{"text": "hi"}, nil)
	if code != 200 || body["success"] != true || body["attempts"] != 3.0 {
		t.Fatalf("transient failures: %d %v, want success with attempts 3", code, body)
	}
	if n := up.count("echo"); n != 3 {
		t.Errorf("upstream saw %d echo calls, want 3", n)
	}

	// A tool error is an answer: returned at once.
	code, body = g.invoke(t, "up", "fail", map[string]any{"message": "nope"}, nil)
	if code != 200 || body["success"] != false || body["attempts"] != 1.0 {
		t.Fatalf("tool error: %d %v, want success=false attempts 1", code, body)
	}
	if n := up.count("fail"); n != 1 {
		t.Errorf("upstream saw %d fail calls, want 1", n)
	}

	// A side-effecting tool whose connection drops after the request was
	// sent is not retried: the outcome is unknown.
	up.drop.Store(demo.ToolWrite)
	code, body = g.invoke(t, "up", demo.ToolWrite, map[string]any{"text": "once"}, nil)
	if code != 502 || errorCode(body) != "outcome_unknown" {
		t.Fatalf("dropped write: %d %v, want 502 outcome_unknown", code, body)
	}
	if msg := fmt.Sprint(body["error"]); !strings.Contains(msg, "outcome is unknown") {
		t.Errorf("error does not say the outcome is unknown: %s", msg)
	}
	if n := up.count(demo.ToolWrite); n != 1 {
		t.Errorf("upstream saw %d write calls, want exactly 1", n)
	}
	// With an idempotency key the same failure is retried.
	up.drop.Store("")
	up.fail503.Store(1)
	code, body = g.invoke(t, "up", demo.ToolWrite, map[string]any{"text": "twice"}, map[string]any{"idempotency_key": "k-1"})
	if code != 200 || body["attempts"] != 2.0 {
		t.Fatalf("write with idempotency key: %d %v, want attempts 2", code, body)
	}
}

func TestBreakerThroughGateway(t *testing.T) {
	up := newFaultyUpstream(t)
	dbPath := filepath.Join(t.TempDir(), "switchboard.db")
	g := startGatewayStore(t, fastSettings+"servers:"+up.yaml("up"), nil, dbPath)

	up.failAll.Store(true)
	// Three failed attempts (one call, retried) reach the threshold.
	code, body := g.invoke(t, "up", "echo", map[string]any{"text": "x"}, nil)
	if code == 200 {
		t.Fatalf("failing upstream answered 200: %v", body)
	}
	reached := up.count("echo")
	for range 5 {
		code, body = g.invoke(t, "up", "echo", map[string]any{"text": "x"}, nil)
		if code != 503 || errorCode(body) != "circuit_open" {
			t.Fatalf("open breaker: %d %v, want 503 circuit_open", code, body)
		}
	}
	if n := up.count("echo"); n != reached {
		t.Errorf("the open breaker let %d calls through to the upstream", n-reached)
	}
	code, body = g.rest(t, "GET", "/api/v1/mcp/circuit-breakers", nil)
	if code != 200 || !strings.Contains(fmt.Sprint(body), "OPEN") {
		t.Errorf("circuit-breakers = %d %v, want an OPEN breaker", code, body)
	}

	// After the cooldown a half-open probe that succeeds closes it.
	up.failAll.Store(false)
	time.Sleep(1100 * time.Millisecond) // the configured 1 s cooldown, which no client can shorten
	code, body = g.invoke(t, "up", "echo", map[string]any{"text": "x"}, nil)
	if code != 200 || body["success"] != true {
		t.Fatalf("half-open probe: %d %v", code, body)
	}
	_, body = g.rest(t, "GET", "/api/v1/mcp/circuit-breakers", nil)
	if !strings.Contains(fmt.Sprint(body), "CLOSED") {
		t.Errorf("breaker after a good probe: %v, want CLOSED", body)
	}

	// Open it again, then restart the gateway on the same store: still open.
	up.failAll.Store(true)
	g.invoke(t, "up", "echo", map[string]any{"text": "x"}, nil)
	if code, body := g.invoke(t, "up", "echo", map[string]any{"text": "x"}, nil); errorCode(body) != "circuit_open" {
		t.Fatalf("re-opened breaker: %d %v", code, body)
	}
	g.http.Close()
	g.app.Close(t.Context())
	up.failAll.Store(false)
	g2 := startGatewayStore(t, strings.Replace(fastSettings, "circuit_cooldown_seconds: 1", "circuit_cooldown_seconds: 3600", 1)+
		"servers:"+up.yaml("up"), nil, dbPath)
	before := up.count("echo")
	code, body = g2.invoke(t, "up", "echo", map[string]any{"text": "x"}, nil)
	if code != 503 || errorCode(body) != "circuit_open" {
		t.Fatalf("after restart: %d %v, want the breaker still open", code, body)
	}
	if up.count("echo") != before {
		t.Error("after restart the open breaker let a call through")
	}
}

func TestFallbackThroughGateway(t *testing.T) {
	primary := newFaultyUpstream(t)
	backup := newFaultyUpstream(t)
	g := startGateway(t, fastSettings+"fallbacks:\n  primary.echo: [backup.echo]\nservers:"+primary.yaml("primary")+backup.yaml("backup"), nil)
	primary.failAll.Store(true)
	var body map[string]any
	for range 3 { // open primary's breaker; fallbacks may already serve
		_, body = g.invoke(t, "primary", "echo", map[string]any{"text": "x"}, nil)
	}
	_, cb := g.rest(t, "GET", "/api/v1/mcp/circuit-breakers", nil)
	if !strings.Contains(fmt.Sprint(cb), "OPEN") {
		t.Fatalf("primary breaker not open: %v", cb)
	}
	code, body := g.invoke(t, "primary", "echo", map[string]any{"text": "via backup"}, nil)
	if code != 200 || body["success"] != true || body["served_by"] != "backup.echo" {
		t.Fatalf("fallback: %d %v, want success served_by backup.echo", code, body)
	}
	if !strings.Contains(fmt.Sprint(body["result"]), "via backup") {
		t.Errorf("fallback result = %v", body["result"])
	}
	// MCP clients learn it from _meta.
	text, res := callText(t, g.connect(t, "/mcp"), "primary.echo", map[string]any{"text": "mcp via backup"})
	if res.IsError || text != "mcp via backup" || res.Meta["switchboard/served-by"] != "backup.echo" {
		t.Errorf("MCP fallback: %q, _meta %v", text, res.Meta)
	}
}

func TestIdempotencyThroughGateway(t *testing.T) {
	up := newFaultyUpstream(t)
	g := startGateway(t, fastSettings+"servers:"+up.yaml("up"), nil)
	var wg sync.WaitGroup
	results := make([]string, 10)
	for i := range 10 {
		wg.Go(func() {
			code, body := g.invoke(t, "up", demo.ToolWrite, map[string]any{"text": "one"}, map[string]any{"idempotency_key": "same-key"})
			if code != 200 {
				t.Errorf("call %d: %d %v", i, code, body)
				return
			}
			b, _ := json.Marshal(body["result"])
			results[i] = string(b)
		})
	}
	wg.Wait()
	if n := up.count(demo.ToolWrite); n != 1 {
		t.Errorf("10 calls with one key reached the upstream %d times, want 1", n)
	}
	for i := 1; i < 10; i++ {
		if results[i] != results[0] {
			t.Errorf("call %d got %s, call 0 got %s", i, results[i], results[0])
		}
	}
	code, body := g.invoke(t, "up", demo.ToolWrite, map[string]any{"text": "other"}, map[string]any{"idempotency_key": "same-key"})
	if code != 409 || errorCode(body) != "idempotency_conflict" {
		t.Errorf("same key, other arguments: %d %v, want 409", code, body)
	}
}

// bearer is an http.RoundTripper adding an Authorization header.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// restAs does a REST request with a bearer key.
func (g *gateway) restAs(t *testing.T, key, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, g.url()+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 && json.Unmarshal(raw, &out) != nil {
		t.Fatalf("%s %s: status %d, body not JSON: %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

func (g *gateway) connectAs(t *testing.T, key string) *mcp.ClientSession {
	t.Helper()
	return connectClient(t, &mcp.StreamableClientTransport{Endpoint: g.url() + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key}}})
}

func TestTwoAgentsThroughMCP(t *testing.T) {
	const admin = "admin-bootstrap-key"
	g := startGateway(t, "auth:\n  mode: keys\nservers:"+demoServer("demo"), map[string]string{"SWITCHBOARD_ADMIN_KEY": admin})

	// Without credentials: 401, on the API and on /mcp alike.
	if code, body := g.rest(t, "GET", "/api/v1/tools", nil); code != 401 || errorCode(body) != "missing_credentials" {
		t.Fatalf("no credentials: %d %v", code, body)
	}
	resp, err := http.Post(g.url()+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("/mcp without credentials: %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	keys := map[string]string{}
	for _, agent := range []string{"agent-a", "agent-b"} {
		code, body := g.restAs(t, admin, "POST", "/api/v1/keys", map[string]any{"agent_id": agent})
		if code != 201 && code != 200 {
			t.Fatalf("create key: %d %v", code, body)
		}
		keys[agent], _ = body["key"].(string)
	}
	if code, body := g.restAs(t, admin, "POST", "/api/v1/mcp/policies/grant", map[string]any{"agent_id": "agent-a", "tool_name": "demo.echo"}); code >= 300 {
		t.Fatalf("grant: %d %v", code, body)
	}
	// A non-admin cannot grant itself more.
	if code, _ := g.restAs(t, keys["agent-b"], "POST", "/api/v1/mcp/policies/grant", map[string]any{"agent_id": "agent-b", "tool_name": "demo.*"}); code != 403 {
		t.Errorf("agent-b granting itself: %d, want 403", code)
	}

	a := g.connectAs(t, keys["agent-a"])
	names := toolNames(t, a)
	if len(names) != 1 || names["demo.echo"] == nil {
		t.Errorf("agent-a lists %v, want only demo.echo", keys2(names))
	}
	if text, res := callText(t, a, "demo.echo", map[string]any{"text": "hello"}); res.IsError || !strings.Contains(text, "hello") {
		t.Errorf("agent-a echo: %q %+v", text, res)
	}
	if text, res := callText(t, a, "demo.add", map[string]any{"a": 1, "b": 2}); !res.IsError || !strings.Contains(text, "may not call") {
		t.Errorf("agent-a add (not granted): %q", text)
	}

	b := g.connectAs(t, keys["agent-b"])
	if names := toolNames(t, b); len(names) != 0 {
		t.Errorf("agent-b lists %v, want nothing", keys2(names))
	}
	text, res := callText(t, b, "demo.echo", map[string]any{"text": "hello"})
	if !res.IsError || !strings.Contains(text, "agent-b") || !strings.Contains(text, "default-deny") {
		t.Errorf("agent-b echo: %q, want an authorization error", text)
	}
	if meta, _ := res.Meta["switchboard/error"].(map[string]any); meta["code"] != "denied" {
		t.Errorf("agent-b echo _meta = %v, want code denied", res.Meta)
	}

	// Resources and prompts follow the grants: agent-b sees and reads none,
	// agent-a (a grant on a demo tool) sees and reads demo's.
	if res, err := b.ListResources(t.Context(), nil); err != nil || len(res.Resources) != 0 {
		t.Errorf("agent-b resources = %v, %v; want none", res, err)
	}
	if prompts, err := b.ListPrompts(t.Context(), nil); err != nil || len(prompts.Prompts) != 0 {
		t.Errorf("agent-b prompts = %v, %v; want none", prompts, err)
	}
	resA, err := a.ListResources(t.Context(), nil)
	if err != nil || len(resA.Resources) == 0 {
		t.Fatalf("agent-a resources = %v, %v; want demo's", resA, err)
	}
	if _, err := b.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: resA.Resources[0].URI}); err == nil || !strings.Contains(err.Error(), "may not use") {
		t.Errorf("agent-b reading %s: %v, want a denial", resA.Resources[0].URI, err)
	}
	if _, err := a.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: resA.Resources[0].URI}); err != nil {
		t.Errorf("agent-a reading %s: %v", resA.Resources[0].URI, err)
	}
	// A denial on a method without isError results is the same error as on
	// tools/call (message, code "denied" in data), never -32603.
	promptsA, err := a.ListPrompts(t.Context(), nil)
	if err != nil || len(promptsA.Prompts) == 0 {
		t.Fatalf("agent-a prompts = %v, %v; want demo's", promptsA, err)
	}
	for what, call := range map[string]func() error{
		"resources/read": func() error {
			_, err := b.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: resA.Resources[0].URI})
			return err
		},
		"prompts/get": func() error {
			_, err := b.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: promptsA.Prompts[0].Name})
			return err
		},
	} {
		var rpcErr *jsonrpc.Error
		if err := call(); !errors.As(err, &rpcErr) {
			t.Errorf("agent-b %s: %v, want a JSON-RPC error", what, err)
			continue
		}
		var data struct{ Code, Server string }
		_ = json.Unmarshal(rpcErr.Data, &data)
		if rpcErr.Code != front.RPCDenied || data.Code != "denied" || data.Server != "demo" || !strings.Contains(rpcErr.Message, "agent-b") {
			t.Errorf("agent-b %s: code %d data %s message %q; want %d with code denied", what, rpcErr.Code, rpcErr.Data, rpcErr.Message, front.RPCDenied)
		}
	}

	// The denial is in the audit log.
	waitFor(t, "the denial in the audit log", func() bool {
		_, body := g.restAs(t, admin, "GET", "/api/v1/audit?agent_id=agent-b&decision=DENY", nil)
		recs, _ := body["records"].([]any)
		for _, r := range recs {
			m := r.(map[string]any)
			if m["tool_name"] == "echo" && m["server_id"] == "demo" && m["policy_rule"] == "default-deny" {
				return true
			}
		}
		return false
	})
	// A non-admin cannot read the audit log.
	if code, _ := g.restAs(t, keys["agent-a"], "GET", "/api/v1/audit", nil); code != 403 {
		t.Errorf("agent-a reading the audit log: %d, want 403", code)
	}

	// Revoking agent-a's key cuts it off at once.
	_, body := g.restAs(t, admin, "GET", "/api/v1/keys", nil)
	for _, k := range body["keys"].([]any) {
		if m := k.(map[string]any); m["agent_id"] == "agent-a" {
			if code, _ := g.restAs(t, admin, "DELETE", "/api/v1/keys/"+m["id"].(string), nil); code >= 300 {
				t.Fatalf("revoke key: %d", code)
			}
		}
	}
	if code, _ := g.restAs(t, keys["agent-a"], "GET", "/api/v1/tools", nil); code != 401 {
		t.Errorf("revoked key: %d, want 401", code)
	}
}

func keys2(m map[string]*mcp.Tool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestNonLoopbackWithoutAuthRefuses(t *testing.T) {
	cfgYAML := "settings:\n  listen: 0.0.0.0:0\nservers: {}\n"
	_, err := newAppErr(t, cfgYAML)
	if err == nil || !strings.Contains(err.Error(), "without authentication") || !strings.Contains(err.Error(), "auth:") {
		t.Fatalf("non-loopback without auth: %v, want a refusal naming the auth section", err)
	}
}

func TestAuditMixedCalls(t *testing.T) {
	const admin = "admin-bootstrap-key"
	up := newFaultyUpstream(t)
	g := startGateway(t, "auth:\n  mode: keys\n"+fastSettings+"  invocation_timeout_ms: 400\nservers:"+up.yaml("up"),
		map[string]string{"SWITCHBOARD_ADMIN_KEY": admin})
	_, body := g.restAs(t, admin, "POST", "/api/v1/keys", map[string]any{"agent_id": "agent-x"})
	key, _ := body["key"].(string)
	for _, tool := range []string{"up.tool_0001", "up.echo", "up.fail", "up.sleep"} {
		if code, body := g.restAs(t, admin, "POST", "/api/v1/mcp/policies/grant", map[string]any{"agent_id": "agent-x", "tool_name": tool}); code >= 300 {
			t.Fatalf("grant %s: %d %v", tool, code, body)
		}
	}
	secret := map[string]any{"auth": map[string]any{"api_token": "s3cr3t"}}
	calls := []struct {
		tool   string
		params map[string]any
		status int
	}{
		// success: the tool echoes its arguments, so the secret is in the result too
		{"tool_0001", map[string]any{"input": "hello", "auth": secret["auth"]}, 200},
		{"add", map[string]any{"a": 1, "b": 2}, 403},                             // denied: not granted
		{"fail", map[string]any{"message": "bad"}, 200},                          // tool error
		{"sleep", map[string]any{"ms": 5000}, 504},                               // timeout
		{"echo", map[string]any{"text": `{"auth":{"api_token":"s3cr3t"}}`}, 200}, // the secret inside a JSON string
		{"add", map[string]any{"a": 2, "b": 2}, 403},
	}
	for _, c := range calls {
		code, body := g.restAs(t, key, "POST", "/api/v1/mcp/invoke", map[string]any{"server_id": "up", "tool_name": c.tool, "params": c.params})
		if code != c.status {
			t.Errorf("%s: %d %v, want %d", c.tool, code, body, c.status)
		}
	}
	var recs []any
	waitFor(t, "every call in the audit log", func() bool {
		_, body := g.restAs(t, admin, "GET", "/api/v1/audit?agent_id=agent-x&kind=invocation", nil)
		recs, _ = body["records"].([]any)
		return len(recs) >= len(calls)
	})
	time.Sleep(300 * time.Millisecond) // the recorder's flush interval: no late extra row may appear
	code, raw := g.rawAs(t, admin, "/api/v1/audit?agent_id=agent-x&kind=invocation")
	var page struct {
		Records []map[string]any `json:"records"`
	}
	if code != 200 || json.Unmarshal(raw, &page) != nil {
		t.Fatalf("audit: %d %s", code, raw)
	}
	if len(page.Records) != len(calls) {
		t.Fatalf("%d audit rows for %d calls", len(page.Records), len(calls))
	}
	count := map[string]int{}
	for _, r := range page.Records {
		switch {
		case r["policy_decision"] == "DENY":
			count["denied"]++
		case r["error_code"] == "timeout":
			count["timeout"]++
		case r["error_code"] == "tool_error":
			count["tool_error"]++
		case r["success"] == true:
			count["success"]++
		}
		if h, _ := r["params_hash"].(string); len(h) != 64 {
			t.Errorf("row without a SHA-256 params_hash: %v", r)
		}
	}
	if want := map[string]int{"success": 2, "denied": 2, "tool_error": 1, "timeout": 1}; fmt.Sprint(count) != fmt.Sprint(want) {
		t.Errorf("rows by outcome = %v, want %v", count, want)
	}
	// The secret is in no row, no log line and no metric.
	if strings.Contains(string(raw), "s3cr3t") {
		t.Errorf("the secret is in the audit log: %s", raw)
	}
	if strings.Contains(g.logs.String(), "s3cr3t") {
		t.Error("the secret is in the logs")
	}
	if _, metrics := g.rawAs(t, admin, "/metrics"); strings.Contains(string(metrics), "s3cr3t") || !strings.Contains(string(metrics), `mcp_invocations_total{agent_id="agent-x"`) {
		t.Errorf("metrics hold the secret or lack mcp_invocations_total")
	}
}

// rawAs GETs path with a bearer key and returns the raw body.
func (g *gateway) rawAs(t *testing.T, key, path string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url()+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestRegisterManifest(t *testing.T) {
	g := startGateway(t, "tool_versions:\n  demo:\n    echo: [\"1.0.0\"]\nservers:"+demoServer("demo"), nil)
	schema := map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}
	code, body := g.rest(t, "POST", "/api/v1/mcp/register", map[string]any{
		"server_id": "demo", "version": "1.0.0", "capabilities": []string{"echo"},
		"tools": []any{
			map[string]any{"name": "echo", "schema": schema, "version": "2.0.0"},
			map[string]any{"name": "add", "schema": schema, "version": "1.0.0"},
			map[string]any{"name": "broken", "schema": map[string]any{"type": "string"}},
		},
	})
	if code != 201 || body["registered_count"] != 2.0 || body["rejected_count"] != 1.0 {
		t.Fatalf("register: %d %v", code, body)
	}
	if !strings.Contains(fmt.Sprint(body["rejected_tools"]), "broken") {
		t.Errorf("rejected = %v", body["rejected_tools"])
	}
	// The incompatible echo is registered disabled: listed so, refused on call, hidden from MCP clients.
	_, body = g.rest(t, "GET", "/api/v1/mcp/tools/demo/echo", nil)
	if body["enabled"] != false || body["version"] != "2.0.0" {
		t.Errorf("echo after registration: %v", body)
	}
	code, body = g.invoke(t, "demo", "echo", map[string]any{"text": "x"}, nil)
	if code != 409 || errorCode(body) != "tool_disabled" || !strings.Contains(fmt.Sprint(body), "2.0.0") {
		t.Errorf("calling the disabled tool: %d %v", code, body)
	}
	if names := toolNames(t, g.connect(t, "/mcp")); names["demo.echo"] != nil || names["demo.add"] == nil {
		t.Errorf("MCP tools = %v, want demo.add but not demo.echo", keys2(names))
	}
	if code, body := g.invoke(t, "demo", "add", map[string]any{"a": 1, "b": 2}, nil); code != 200 {
		t.Errorf("compatible tool: %d %v", code, body)
	}
	// A tool the upstream does not have is rejected, with the reason.
	code, body = g.rest(t, "POST", "/api/v1/mcp/register", map[string]any{"server_id": "demo", "tools": []any{
		map[string]any{"name": "teleport", "schema": schema}}})
	if code != 201 || body["rejected_count"] != 1.0 || !strings.Contains(fmt.Sprint(body["rejected_tools"]), `does not expose a tool "teleport"`) {
		t.Errorf("unexposed tool: %d %v", code, body)
	}
	// An unknown server without a definition: the answer names the field it needs.
	code, body = g.rest(t, "POST", "/api/v1/mcp/register", map[string]any{"server_id": "nope", "tools": []any{}})
	if code != 422 || errorCode(body) != "validation_failed" || !strings.Contains(fmt.Sprint(body), "connection_config") ||
		!strings.Contains(fmt.Sprint(body), "transport_type") {
		t.Errorf("unknown server: %d %v, want 422 naming transport_type and connection_config", code, body)
	}
}

// TestRegisterManifestNewServer: POST /api/v1/mcp/register with a server
// the gateway does not know registers it from transport_type and
// connection_config, connects it, and checks the declared tools against
// what it exposes; re-sending the same registration is accepted, another
// definition under the same id is a conflict, and a definition missing a
// field names it.
func TestRegisterManifestNewServer(t *testing.T) {
	up := newFaultyUpstream(t)
	g := startGateway(t, "servers: {}\n", nil)
	schema := map[string]any{"type": "object"}
	reg := map[string]any{
		"server_id": "remote", "version": "1.0.0", "transport_type": "HTTP",
		"connection_config": map[string]any{"url": up.srv.URL + "/mcp"},
		"tools": []any{
			map[string]any{"name": "echo", "schema": schema, "version": "1.0.0"},
			map[string]any{"name": "teleport", "schema": schema},
		},
	}
	code, body := g.rest(t, "POST", "/api/v1/mcp/register", reg)
	if code != 201 || body["registered_count"] != 1.0 || body["rejected_count"] != 1.0 {
		t.Fatalf("register a new server: %d %v", code, body)
	}
	if got := fmt.Sprint(body["rejected_tools"]); !strings.Contains(got, "teleport") || !strings.Contains(got, `does not expose a tool "teleport"`) ||
		!strings.Contains(got, `"echo"`) {
		t.Errorf("rejected = %s, want teleport with the tools it does expose", got)
	}
	if s := g.serverByName(t, "remote"); s["status"] != "CONNECTED" || s["source"] != "api" {
		t.Errorf("server after registration: %v", s)
	}
	if code, body := g.invoke(t, "remote", "echo", map[string]any{"text": "hi"}, nil); code != 200 {
		t.Errorf("calling the registered tool: %d %v", code, body)
	}
	// The same registration again (an orchestrator after its restart).
	if code, body := g.rest(t, "POST", "/api/v1/mcp/register", reg); code != 201 || body["registered_count"] != 1.0 {
		t.Errorf("re-registration: %d %v", code, body)
	}
	// Another definition under the same id.
	other := map[string]any{"server_id": "remote", "transport_type": "HTTP",
		"connection_config": map[string]any{"url": "http://127.0.0.1:1/mcp"}, "tools": []any{}}
	if code, body := g.rest(t, "POST", "/api/v1/mcp/register", other); code != 409 || errorCode(body) != "conflict" {
		t.Errorf("another definition: %d %v, want 409 conflict", code, body)
	}
	// A definition without its url names the field.
	code, body = g.rest(t, "POST", "/api/v1/mcp/register", map[string]any{"server_id": "nourl", "transport_type": "HTTP",
		"connection_config": map[string]any{}, "tools": []any{}})
	if code != 422 || !strings.Contains(fmt.Sprint(body), "servers.nourl.url") {
		t.Errorf("definition without url: %d %v, want 422 naming servers.nourl.url", code, body)
	}
	// An upstream that cannot be reached: registered, every tool rejected with the reason.
	code, body = g.rest(t, "POST", "/api/v1/mcp/register", map[string]any{"server_id": "down", "transport_type": "HTTP",
		"connection_config": map[string]any{"url": "http://127.0.0.1:1/mcp"}, "tools": []any{map[string]any{"name": "echo", "schema": schema}}})
	if code != 201 || body["rejected_count"] != 1.0 || !strings.Contains(fmt.Sprint(body["rejected_tools"]), "cannot be checked") {
		t.Errorf("unreachable server: %d %v, want its tools rejected as not checkable", code, body)
	}
}

func TestJWTIdentities(t *testing.T) {
	const admin = "admin-bootstrap-key"
	secret := strings.Repeat("k", 40)
	g := startGateway(t, "auth:\n  mode: jwt\n  jwt:\n    secret: ${JWT_SECRET}\n    issuer: https://idp.example\nservers:"+demoServer("demo"),
		map[string]string{"SWITCHBOARD_ADMIN_KEY": admin, "JWT_SECRET": secret})
	sign := func(claims jwt.MapClaims) string {
		claims["iss"] = "https://idp.example"
		claims["exp"] = time.Now().Add(time.Hour).Unix()
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if code, body := g.restAs(t, admin, "POST", "/api/v1/mcp/policies/grant", map[string]any{"agent_id": "jwt-agent", "tool_name": "demo.*"}); code >= 300 {
		t.Fatalf("grant: %d %v", code, body)
	}
	agent := sign(jwt.MapClaims{"sub": "jwt-agent"})
	denied := sign(jwt.MapClaims{"sub": "jwt-agent", "mcpServerDenyIds": []string{"demo"}})
	isAdmin := sign(jwt.MapClaims{"sub": "someone", "isAdmin": true})

	if names := toolNames(t, g.connectAs(t, agent)); names["demo.echo"] == nil {
		t.Errorf("granted JWT agent lists %v", keys2(names))
	}
	cs := g.connectAs(t, denied)
	if names := toolNames(t, cs); len(names) != 0 {
		t.Errorf("JWT agent with demo in mcpServerDenyIds lists %v", keys2(names))
	}
	if text, res := callText(t, cs, "demo.echo", map[string]any{"text": "x"}); !res.IsError || !strings.Contains(text, "workspace:deny-id") {
		t.Errorf("deny id beats the grant: %q", text)
	}
	if code, _ := g.restAs(t, isAdmin, "GET", "/api/v1/audit", nil); code != 200 {
		t.Errorf("isAdmin JWT reading the audit log: %d", code)
	}
	none := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "x", "isAdmin": true, "iss": "https://idp.example",
		"exp": time.Now().Add(time.Hour).Unix()})
	unsigned, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	wrongIssuer, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "x", "iss": "https://evil.example",
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	for name, tok := range map[string]string{"alg none": unsigned, "wrong issuer": wrongIssuer, "garbage": "a.b.c"} {
		if code, body := g.restAs(t, tok, "GET", "/api/v1/tools", nil); code != 401 {
			t.Errorf("%s: %d %v, want 401", name, code, body)
		}
	}
}

func TestApprovalTokens(t *testing.T) {
	const admin = "admin-bootstrap-key"
	up := newFaultyUpstream(t)
	g := startGateway(t, "auth:\n  mode: keys\nservers:"+up.yaml("up"), map[string]string{"SWITCHBOARD_ADMIN_KEY": admin})
	_, body := g.restAs(t, admin, "POST", "/api/v1/keys", map[string]any{"agent_id": "writer"})
	key, _ := body["key"].(string)
	args := map[string]any{"text": "approved entry"}
	code, body := g.restAs(t, admin, "POST", "/api/v1/mcp/policies/grant", map[string]any{"agent_id": "writer", "tool_name": "up.write",
		"issue_token": true, "bind_arguments": args, "single_use": true})
	token, _ := body["token"].(string)
	if code >= 300 || token == "" {
		t.Fatalf("grant with token: %d %v", code, body)
	}
	call := func(params map[string]any, approval string) (int, map[string]any) {
		extra := map[string]any{}
		if approval != "" {
			extra["approval_token"] = approval
		}
		b := map[string]any{"server_id": "up", "tool_name": "write", "params": params}
		for k, v := range extra {
			b[k] = v
		}
		return g.restAs(t, key, "POST", "/api/v1/mcp/invoke", b)
	}
	if code, body := call(args, ""); code != 403 || !strings.Contains(fmt.Sprint(body), "token-missing") {
		t.Errorf("high-risk call without a token: %d %v", code, body)
	}
	if code, body := call(map[string]any{"text": "something else"}, token); code != 403 || !strings.Contains(fmt.Sprint(body), "token-args") {
		t.Errorf("token bound to other arguments: %d %v", code, body)
	}
	if code, body := call(args, token); code != 200 || body["success"] != true {
		t.Fatalf("approved call: %d %v", code, body)
	}
	if code, body := call(args, token); code != 403 || !strings.Contains(fmt.Sprint(body), "token-used") {
		t.Errorf("single-use token replayed: %d %v", code, body)
	}
	if n := up.count(demo.ToolWrite); n != 1 {
		t.Errorf("the upstream ran write %d times, want 1", n)
	}

	// A retried approved call (same idempotency key) gets the first result:
	// its single-use token was spent by the first execution.
	_, body = g.restAs(t, admin, "POST", "/api/v1/mcp/tokens", map[string]any{"agent_id": "writer", "server_id": "up", "tool_name": "write", "single_use": true})
	once, _ := body["token"].(string)
	for i := range 2 {
		code, body := g.restAs(t, key, "POST", "/api/v1/mcp/invoke", map[string]any{"server_id": "up", "tool_name": "write",
			"params": map[string]any{"text": "retried"}, "approval_token": once, "idempotency_key": "retry-1"})
		if code != 200 || body["success"] != true {
			t.Fatalf("approved call with an idempotency key, try %d: %d %v", i+1, code, body)
		}
	}
	if n := up.count(demo.ToolWrite); n != 2 {
		t.Errorf("the upstream ran write %d times, want 2 (the retry is a replay)", n)
	}

	// Over MCP the token travels in _meta and is not forwarded upstream.
	_, body = g.restAs(t, admin, "POST", "/api/v1/mcp/tokens", map[string]any{"agent_id": "writer", "server_id": "up", "tool_name": "write"})
	mcpToken, _ := body["token"].(string)
	cs := g.connectAs(t, key)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up.write", Arguments: args,
		Meta: mcp.Meta{"switchboard/approval-token": mcpToken}})
	if err != nil || res.IsError {
		t.Fatalf("MCP call with an approval token: %v %+v", err, res)
	}
}

// TestKeyWithDeclaredTools: POST /api/v1/keys with declared_tools (seed 000
// REQ-MCP-AUTH-002) creates the key and its invoke grants together, so the
// agent can call exactly those tools at once; a declaration naming an
// unknown server or a tool the server does not expose refuses the whole
// request, and no key or grant is left behind.
func TestKeyWithDeclaredTools(t *testing.T) {
	const admin = "admin-bootstrap-key"
	g := startGateway(t, "auth:\n  mode: keys\nservers:"+demoServer("demo"), map[string]string{"SWITCHBOARD_ADMIN_KEY": admin})
	waitFor(t, "demo to connect", func() bool {
		_, body := g.restAs(t, admin, "GET", "/api/v1/aggregator/servers/demo", nil)
		return body["status"] == "CONNECTED"
	})

	tests := []struct {
		name     string
		agent    string
		declared []string
		status   int
		message  []string // in a refusal
		tools    []string // what the agent's MCP session lists
	}{
		{name: "seed form and namespaced form", agent: "agent-a", declared: []string{"demo:echo", "demo.add", "demo:echo"}, status: 201,
			tools: []string{"demo.add", "demo.echo"}},
		{name: "unknown server", agent: "agent-b", declared: []string{"demo:echo", "nope:x"}, status: 400,
			message: []string{`declared_tools[1] "nope:x": no server "nope" is registered`}},
		{name: "tool not exposed", agent: "agent-c", declared: []string{"demo:teleport", "bad"}, status: 400,
			message: []string{`server "demo" does not expose a tool "teleport"`, `declared_tools[1] "bad"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := g.restAs(t, admin, "POST", "/api/v1/keys", map[string]any{"agent_id": tt.agent, "declared_tools": tt.declared})
			if code != tt.status {
				t.Fatalf("create key: %d %v, want %d", code, body, tt.status)
			}
			_, grants := g.restAs(t, admin, "GET", "/api/v1/mcp/policies/"+tt.agent, nil)
			if tt.status != 201 {
				for _, m := range tt.message {
					if !strings.Contains(fmt.Sprint(body), m) {
						t.Errorf("refusal %v does not say %q", body, m)
					}
				}
				if strings.Contains(fmt.Sprint(grants), "demo") {
					t.Errorf("refused request left grants: %v", grants)
				}
				_, keys := g.restAs(t, admin, "GET", "/api/v1/keys", nil)
				if strings.Contains(fmt.Sprint(keys), tt.agent) {
					t.Errorf("refused request left a key: %v", keys)
				}
				return
			}
			if n := len(body["grants"].([]any)); n != len(tt.tools) {
				t.Errorf("answer has %d grants, want %d: %v", n, len(tt.tools), body["grants"])
			}
			key, _ := body["key"].(string)
			got := keys2(toolNames(t, g.connectAs(t, key)))
			slices.Sort(got)
			if strings.Join(got, ",") != strings.Join(tt.tools, ",") {
				t.Errorf("agent lists %v, want %v", got, tt.tools)
			}
			if text, res := callText(t, g.connectAs(t, key), "demo.echo", map[string]any{"text": "bound"}); res.IsError || !strings.Contains(text, "bound") {
				t.Errorf("declared tool call: %q", text)
			}
		})
	}
}
