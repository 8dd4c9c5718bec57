package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
)

// TestDemoThroughFront lists and calls the demo server's tools through /mcp
// and /sse with a go-sdk client.
func TestDemoThroughFront(t *testing.T) {
	g := startGateway(t, "servers:"+demoServer("demo"), nil)
	for _, path := range []string{"/mcp", "/sse"} {
		t.Run(path, func(t *testing.T) {
			cs := g.connect(t, path)
			tools := toolNames(t, cs)
			for _, want := range []string{"demo.echo", "demo.add", "demo.now", "demo.sleep", "demo.fail"} {
				if tools[want] == nil {
					t.Errorf("tools/list lacks %s; got %v", want, keys(tools))
				}
			}
			text, res := callText(t, cs, "demo.echo", map[string]any{"text": "héllo wörld"})
			if text != "héllo wörld" || res.IsError {
				t.Errorf("demo.echo = %q (isError %v), want the text unchanged", text, res.IsError)
			}
			// The other separator form is accepted too.
			if text, _ := callText(t, cs, "demo__echo", map[string]any{"text": "x"}); text != "x" {
				t.Errorf("demo__echo = %q", text)
			}
			// A tool error stays a tool error (isError), unchanged.
			text, res = callText(t, cs, "demo.fail", map[string]any{"mode": "tool", "message": "boom"})
			if !res.IsError || !strings.Contains(text, "boom") {
				t.Errorf("demo.fail tool = %q isError=%v", text, res.IsError)
			}
			// A protocol error of the upstream is relayed as a protocol error.
			_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "demo.fail", Arguments: map[string]any{"mode": "protocol", "message": "kaput"}})
			if err == nil || !strings.Contains(err.Error(), "kaput") {
				t.Errorf("demo.fail protocol: err = %v, want the upstream's protocol error", err)
			}
			// Unknown tool: a JSON-RPC error naming it.
			_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "demo.nope"})
			if err == nil || !strings.Contains(err.Error(), "demo.nope") {
				t.Errorf("unknown tool: err = %v, want an error naming demo.nope", err)
			}
			// Resources and prompts are aggregated with reversible names.
			rr, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "demo+demo://readme"})
			if err != nil || len(rr.Contents) == 0 || rr.Contents[0].URI != "demo+demo://readme" {
				t.Errorf("resources/read demo+demo://readme: %v %+v", err, rr)
			}
			pr, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "demo.greet", Arguments: map[string]string{"name": "Ada"}})
			if err != nil || len(pr.Messages) == 0 {
				t.Fatalf("prompts/get demo.greet: %v", err)
			}
			if tc, ok := pr.Messages[0].Content.(*mcp.TextContent); !ok || !strings.Contains(tc.Text, "Ada") {
				t.Errorf("prompt text = %+v", pr.Messages[0].Content)
			}
		})
	}
	// The calls and the server's state are in the Prometheus metrics.
	resp, err := http.Get(g.url() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`switchboard_tool_calls_total{outcome="ok",server="demo"}`,
		`switchboard_tool_calls_total{outcome="tool_error",server="demo"} 2`,
		`switchboard_upstream_state{server="demo",state="CONNECTED"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestKillUpstream is A4: kill -9 of a stdio upstream leaves the gateway and
// the other upstreams serving; the dead one is ERROR with a reason, its calls
// get 503 (REST) or an error naming it (MCP).
func TestKillUpstream(t *testing.T) {
	// Without automatic restarts, so that the dead server stays dead.
	g := startGateway(t, "servers:"+demoServer("alpha")+"    restart_on_failure: false\n"+demoServer("beta"), nil)
	cs := g.connect(t, "/mcp")
	alpha := g.serverByName(t, "alpha")
	pid := int(alpha["pid"].(float64))
	if pid <= 0 {
		t.Fatalf("alpha has no pid: %v", alpha)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "alpha to be ERROR", func() bool { return g.serverByName(t, "alpha")["status"] == "ERROR" })
	if msg, _ := g.serverByName(t, "alpha")["error_message"].(string); msg == "" {
		t.Errorf("alpha is ERROR without a reason")
	}
	if st := g.serverByName(t, "beta")["status"]; st != "CONNECTED" {
		t.Errorf("beta status = %v, want CONNECTED", st)
	}
	// REST: 503 naming the server and its status.
	code, body := g.rest(t, "POST", "/api/v1/tools/call", map[string]any{"name": "alpha.echo", "arguments": map[string]any{"text": "x"}})
	if code != 503 {
		t.Errorf("REST call to dead server: %d %v, want 503", code, body)
	}
	e, _ := body["error"].(map[string]any)
	if e["code"] != "server_unavailable" || !strings.Contains(fmt.Sprint(e["message"]), "alpha") || !strings.Contains(fmt.Sprint(e["message"]), "ERROR") {
		t.Errorf("503 body = %v, want code server_unavailable naming alpha and ERROR", body)
	}
	// MCP: an error naming the server.
	text, res := callText(t, cs, "alpha.echo", map[string]any{"text": "x"})
	if !res.IsError || !strings.Contains(text, "alpha") || !strings.Contains(text, "ERROR") {
		t.Errorf("MCP call to dead server = %q isError=%v, want an error naming alpha and ERROR", text, res.IsError)
	}
	// The other server keeps working, on both fronts.
	if text, _ := callText(t, cs, "beta.echo", map[string]any{"text": "still here"}); text != "still here" {
		t.Errorf("beta.echo = %q", text)
	}
	code, body = g.rest(t, "POST", "/api/v1/tools/call", map[string]any{"name": "beta.echo", "arguments": map[string]any{"text": "ok"}})
	if code != 200 {
		t.Errorf("REST beta.echo: %d %v", code, body)
	}
	// tools/list no longer offers the dead server's tools.
	if tools := toolNames(t, cs); tools["alpha.echo"] != nil || tools["beta.echo"] == nil {
		t.Errorf("after the kill tools/list = %v", keys(tools))
	}
}

// TestRESTServers covers registration, validation, conflicts, routing by
// original name + server_id, removal and persistence across a restart.
func TestRESTServers(t *testing.T) {
	storePath := filepath.Join(t.TempDir(), "sb.db")
	g := startGatewayStore(t, "servers:"+demoServer("demo"), nil, storePath)

	exe := os.Args[0]
	reg := map[string]any{
		"name":           "extra",
		"description":    "a second demo",
		"transport_type": "STDIO",
		"connection_config": map[string]any{
			"command": exe, "args": []string{"demo-server"}, "env": map[string]string{demoEnv: "1"},
		},
		"auto_connect": true,
	}
	code, body := g.rest(t, "POST", "/api/v1/aggregator/servers", reg)
	if code != 201 || body["id"] == "" || body["name"] != "extra" || body["transport_type"] != "STDIO" {
		t.Fatalf("register: %d %v", code, body)
	}
	id := body["id"].(string)
	if code, body := g.rest(t, "POST", "/api/v1/aggregator/servers", reg); code != 409 {
		t.Errorf("duplicate register: %d %v, want 409", code, body)
	}
	bad := map[string]any{"name": "bad.name", "transport_type": "HTTP", "connection_config": map[string]any{}}
	if code, body := g.rest(t, "POST", "/api/v1/aggregator/servers", bad); code != 422 || body["error"].(map[string]any)["code"] != "validation_failed" {
		t.Errorf("invalid register: %d %v, want 422 validation_failed", code, body)
	}
	waitFor(t, "extra to connect", func() bool { return g.serverByName(t, "extra")["status"] == "CONNECTED" })

	// By id and by name.
	if code, body := g.rest(t, "GET", "/api/v1/aggregator/servers/"+id, nil); code != 200 || body["name"] != "extra" {
		t.Errorf("GET by id: %d %v", code, body)
	}
	if code, _ := g.rest(t, "GET", "/api/v1/aggregator/servers/nope", nil); code != 404 {
		t.Errorf("GET unknown server: %d, want 404", code)
	}

	// Tools grouped by server, filter by server_id.
	code, body = g.rest(t, "GET", "/api/v1/tools?server_id="+id, nil)
	if code != 200 {
		t.Fatalf("GET tools: %d %v", code, body)
	}
	for _, tl := range body["tools"].([]any) {
		if tl.(map[string]any)["server_name"] != "extra" {
			t.Errorf("server_id filter leaked %v", tl)
		}
	}
	code, body = g.rest(t, "GET", "/api/v1/tools/extra.echo", nil)
	if code != 200 || body["original_name"] != "echo" || body["server_id"] != id {
		t.Errorf("GET tool: %d %v", code, body)
	}
	if code, body := g.rest(t, "GET", "/api/v1/tools/extra.nope", nil); code != 404 || body["error"].(map[string]any)["code"] != "tool_not_found" {
		t.Errorf("GET unknown tool: %d %v", code, body)
	}

	// Original name + server_id routes like the namespaced name.
	code, body = g.rest(t, "POST", "/api/v1/tools/call", map[string]any{"name": "echo", "server_id": id, "arguments": map[string]any{"text": "by id"}})
	if code != 200 {
		t.Fatalf("call by original name: %d %v", code, body)
	}
	md := body["metadata"].(map[string]any)
	if md["routed_to"] != "extra" || md["routing_time_ms"] == nil || md["execution_time_ms"] == nil {
		t.Errorf("metadata = %v", md)
	}
	if c := body["content"].([]any)[0].(map[string]any); c["text"] != "by id" {
		t.Errorf("content = %v", c)
	}
	if code, _ := g.rest(t, "POST", "/api/v1/tools/call", map[string]any{"name": "nope.echo"}); code != 404 {
		t.Errorf("call unknown tool: %d, want 404", code)
	}

	// Disconnect / connect.
	code, body = g.rest(t, "POST", "/api/v1/aggregator/servers/extra/disconnect", nil)
	if code != 200 || body["status"] != "DISCONNECTED" {
		t.Errorf("disconnect: %d %v", code, body)
	}
	if code, _ := g.rest(t, "POST", "/api/v1/tools/call", map[string]any{"name": "extra.echo", "arguments": map[string]any{"text": "x"}}); code != 503 {
		t.Errorf("call after disconnect: %d, want 503", code)
	}
	code, body = g.rest(t, "POST", "/api/v1/aggregator/servers/extra/connect?wait=true", nil)
	if code != 200 || body["status"] != "CONNECTED" {
		t.Errorf("connect: %d %v", code, body)
	}
	code, body = g.rest(t, "GET", "/api/v1/aggregator/servers/extra/capabilities", nil)
	if info, _ := body["server_info"].(map[string]any); code != 200 || info["name"] != "switchboard-demo" || body["tools"].(float64) != 5 || body["protocol_version"] == "" {
		t.Errorf("capabilities: %d %v", code, body)
	}
	code, body = g.rest(t, "GET", "/api/v1/aggregator/servers/extra/history", nil)
	if code != 200 || len(body["history"].([]any)) < 4 {
		t.Errorf("history: %d %v", code, body)
	}

	// Renaming moves the tools to the new namespace; the id stays.
	code, body = g.rest(t, "PATCH", "/api/v1/aggregator/servers/extra", map[string]any{"name": "renamed"})
	if code != 200 || body["id"] != id || body["name"] != "renamed" {
		t.Fatalf("rename: %d %v", code, body)
	}
	waitFor(t, "renamed to connect", func() bool { return g.serverByName(t, "renamed")["status"] == "CONNECTED" })
	if code, _ := g.rest(t, "GET", "/api/v1/tools/renamed.echo", nil); code != 200 {
		t.Errorf("renamed.echo: %d", code)
	}
	if code, _ := g.rest(t, "GET", "/api/v1/tools/extra.echo", nil); code != 404 {
		t.Errorf("extra.echo after rename: %d, want 404", code)
	}
	if code, _ := g.rest(t, "PATCH", "/api/v1/aggregator/servers/demo", map[string]any{"name": "x"}); code != 409 {
		t.Errorf("rename of a config server: %d, want 409", code)
	}
	if code, _ := g.rest(t, "PATCH", "/api/v1/aggregator/servers/renamed", map[string]any{"name": "demo"}); code != 409 {
		t.Errorf("rename onto a taken name: %d, want 409", code)
	}
	code, _ = g.rest(t, "PATCH", "/api/v1/aggregator/servers/renamed", map[string]any{"name": "extra"})
	if code != 200 {
		t.Fatalf("rename back: %d", code)
	}
	waitFor(t, "extra to connect again", func() bool { return g.serverByName(t, "extra")["status"] == "CONNECTED" })

	// A config-file server cannot be deleted through the API.
	if code, _ := g.rest(t, "DELETE", "/api/v1/aggregator/servers/demo", nil); code != 409 {
		t.Errorf("DELETE config server: %d, want 409", code)
	}

	// Restart on the same store: the API-registered server is back.
	g.http.Close()
	g.app.Close(t.Context())
	g2 := startGatewayStore(t, "servers:"+demoServer("demo"), nil, storePath)
	if s := g2.serverByName(t, "extra"); s["id"] != id || s["status"] != "CONNECTED" {
		t.Errorf("after restart extra = %v", s)
	}
	if code, _ := g2.rest(t, "DELETE", "/api/v1/aggregator/servers/"+id, nil); code != 204 {
		t.Errorf("DELETE: %d", code)
	}
	if code, _ := g2.rest(t, "GET", "/api/v1/aggregator/servers/extra", nil); code != 404 {
		t.Errorf("GET after DELETE: %d, want 404", code)
	}
	if code, _ := g2.rest(t, "GET", "/api/v1/tools/extra.echo", nil); code != 404 {
		t.Errorf("tool after DELETE: %d, want 404", code)
	}
	if code, body := g2.rest(t, "GET", "/readyz", nil); code != 200 {
		t.Errorf("readyz: %d %v", code, body)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestListChangedReachesClients: a server registered at runtime makes the
// gateway send notifications/tools/list_changed, and the new tools are
// listed; the same on removal.
func TestListChangedReachesClients(t *testing.T) {
	g := startGateway(t, "servers:"+demoServer("demo"), nil)
	changed := make(chan struct{}, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "watcher", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.url() + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if tools := toolNames(t, cs); tools["late.echo"] != nil {
		t.Fatal("late.echo listed before registration")
	}
	code, body := g.rest(t, "POST", "/api/v1/aggregator/servers", map[string]any{
		"name": "late", "transport_type": "STDIO", "auto_connect": true,
		"connection_config": map[string]any{"command": os.Args[0], "args": []string{"demo-server"}, "env": map[string]string{demoEnv: "1"}},
	})
	if code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed after registering a server")
	}
	waitFor(t, "late.echo to be listed", func() bool { return toolNames(t, cs)["late.echo"] != nil })
	if text, _ := callText(t, cs, "late.echo", map[string]any{"text": "new"}); text != "new" {
		t.Errorf("late.echo = %q", text)
	}
	for len(changed) > 0 {
		<-changed
	}
	if code, _ := g.rest(t, "DELETE", "/api/v1/aggregator/servers/late", nil); code != 204 {
		t.Fatalf("DELETE: %d", code)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed after removing a server")
	}
	if toolNames(t, cs)["late.echo"] != nil {
		t.Error("late.echo still listed after removal")
	}
}

// TestInvalidToolRejected: a tool whose input schema is not valid JSON
// Schema is rejected with a reason the API shows, and the server's other
// tools still register.
func TestInvalidToolRejected(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "odd", Version: "1"}, nil)
	ok := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "fine"}}}, nil
	}
	up.AddTool(&mcp.Tool{Name: "good", InputSchema: map[string]any{"type": "object"}}, ok)
	up.AddTool(&mcp.Tool{Name: "bad", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"x": map[string]any{"type": "nonsense"}},
	}}, ok)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(srv.Close)
	g := startGateway(t, fmt.Sprintf("servers:\n  odd:\n    transport: http\n    url: %s\n    auto_start: true\n", srv.URL), nil)
	s := g.serverByName(t, "odd")
	if s["status"] != "CONNECTED" || s["tool_count"].(float64) != 1 {
		t.Fatalf("odd = %v, want CONNECTED with 1 tool", s)
	}
	rej, _ := s["rejected_tools"].([]any)
	if len(rej) != 1 || rej[0].(map[string]any)["name"] != "bad" || rej[0].(map[string]any)["reason"] == "" {
		t.Fatalf("rejected_tools = %v, want bad with a reason", s["rejected_tools"])
	}
	cs := g.connect(t, "/mcp")
	if tools := toolNames(t, cs); tools["odd.good"] == nil || tools["odd.bad"] != nil {
		t.Errorf("tools/list = %v, want odd.good only", keys(tools))
	}
	if text, _ := callText(t, cs, "odd.good", map[string]any{}); text != "fine" {
		t.Errorf("odd.good = %q", text)
	}
}

// TestReadyAfterAutoStartTried: /readyz is 503 while an auto-start server is
// still being tried and 200 once the attempt ended, even in failure.
func TestReadyAfterAutoStartTried(t *testing.T) {
	cfg, err := config.Parse("test.yaml", []byte(`
servers:
  mute:
    transport: stdio
    command: sleep
    args: ["30"]
    auto_start: true
settings:
  connect_timeout_seconds: 1
  shutdown_timeout_seconds: 1
`), os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Settings.Store = filepath.Join(t.TempDir(), "sb.db")
	a, err := app.New(t.Context(), cfg, &app.Options{SelfExecutable: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	g := &gateway{app: a, http: srv, logs: &logtest.Buffer{}}
	a.Start()
	if code, body := g.rest(t, "GET", "/readyz", nil); code != 503 {
		t.Errorf("readyz while connecting: %d %v, want 503", code, body)
	}
	if code, _ := g.rest(t, "GET", "/healthz", nil); code != 200 {
		t.Errorf("healthz: %d", code)
	}
	waitFor(t, "readyz 200", func() bool { code, _ := g.rest(t, "GET", "/readyz", nil); return code == 200 })
	if s := g.serverByName(t, "mute"); s["status"] != "ERROR" || s["error_message"] == "" {
		t.Errorf("mute = %v, want ERROR with a reason", s)
	}
}

// TestUnprefixedCollision: two servers exposing the same names unprefixed is
// a registration error shown on the server, never a silent override.
func TestUnprefixedCollision(t *testing.T) {
	yaml := "servers:" + demoServer("one") + "    prefix: \"\"\n" + demoServer("two") + "    prefix: \"\"\n"
	g := startGateway(t, yaml, nil)
	one, two := g.serverByName(t, "one"), g.serverByName(t, "two")
	var loser map[string]any
	switch {
	case one["status"] == "CONNECTED" && two["status"] == "ERROR":
		loser = two
	case two["status"] == "CONNECTED" && one["status"] == "ERROR":
		loser = one
	default:
		t.Fatalf("one = %v, two = %v: want one CONNECTED, the other ERROR", one["status"], two["status"])
	}
	if msg, _ := loser["error_message"].(string); !strings.Contains(msg, "collision") && !strings.Contains(msg, "collide") {
		t.Errorf("error_message = %q, want it to name the collision", msg)
	}
	cs := g.connect(t, "/mcp")
	if text, _ := callText(t, cs, "echo", map[string]any{"text": "unprefixed"}); text != "unprefixed" {
		t.Errorf("echo = %q", text)
	}
}

// TestStoredSecretReference: a server registered through the API keeps its
// ${VAR} reference, not the secret; after a restart without the variable it
// is listed with the reason and refuses to connect rather than sending an
// unresolved header.
func TestStoredSecretReference(t *testing.T) {
	up := httptest.NewServer(demo.Handler(nil))
	t.Cleanup(up.Close)
	storePath := filepath.Join(t.TempDir(), "sb.db")
	env := map[string]string{"REMOTE_TOKEN": "tok-5e8c1"}
	g := startGatewayStore(t, "servers: {}\n", env, storePath)
	code, body := g.rest(t, "POST", "/api/v1/aggregator/servers", map[string]any{
		"name": "remote", "transport_type": "HTTP", "auto_connect": true,
		"connection_config": map[string]any{"url": up.URL + "/mcp", "headers": map[string]string{"X-Token": "${REMOTE_TOKEN}"}},
	})
	if code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	waitFor(t, "remote to connect", func() bool { return g.serverByName(t, "remote")["status"] == "CONNECTED" })
	g.http.Close()
	g.app.Close(t.Context())

	raw, err := os.ReadFile(storePath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "tok-5e8c1") {
		t.Error("the store holds the resolved secret")
	}

	g2 := startGatewayStore(t, "servers: {}\n", map[string]string{}, storePath)
	s := g2.serverByName(t, "remote")
	if s["status"] != "ERROR" || !strings.Contains(fmt.Sprint(s["error_message"]), "REMOTE_TOKEN") {
		t.Errorf("after restart without the variable: %v", s)
	}
	if code, _ := g2.rest(t, "POST", "/api/v1/aggregator/servers/remote/connect", nil); code != 409 {
		t.Errorf("connect: %d, want 409", code)
	}
}

// TestRestartAfterKill: with the default restart policy a killed stdio
// upstream is restarted and CONNECTED again; the API shows the new pid, the
// restart count and how the process ended. The time it took is logged (B7).
func TestRestartAfterKill(t *testing.T) {
	g := startGateway(t, "servers:"+demoServer("phoenix")+"settings:\n  restart_backoff_initial_ms: 100\n", nil)
	first := g.serverByName(t, "phoenix")
	pid := int(first["pid"].(float64))
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	waitFor(t, "phoenix to be restarted", func() bool {
		s = g.serverByName(t, "phoenix")
		p, _ := s["pid"].(float64)
		return s["status"] == "CONNECTED" && int(p) != pid && int(p) != 0
	})
	t.Logf("SIGKILL → CONNECTED again in %v (restart_backoff_initial_ms 100)", time.Since(killed).Round(time.Millisecond))
	if s["restarts"].(float64) < 1 || !strings.Contains(fmt.Sprint(s["last_exit"]), "killed") || s["started_at"] == nil {
		t.Errorf("after the restart: restarts=%v last_exit=%v started_at=%v", s["restarts"], s["last_exit"], s["started_at"])
	}
	cs := g.connect(t, "/mcp")
	if text, _ := callText(t, cs, "phoenix.echo", map[string]any{"text": "back"}); text != "back" {
		t.Errorf("phoenix.echo after restart = %q", text)
	}
}

// TestDrainOnDisconnect is B5 through the API: with 5 slow calls in flight,
// disconnect returns after they complete and reports them as pending; a new
// call during the drain gets 503.
func TestDrainOnDisconnect(t *testing.T) {
	g := startGateway(t, "servers:"+demoServer("slow"), nil)
	cs := g.connect(t, "/mcp")
	var wg sync.WaitGroup
	results := make(chan string, 5)
	for range 5 {
		wg.Go(func() {
			text, res := callText(t, cs, "slow.sleep", map[string]any{"ms": 1500})
			if res.IsError {
				text = "isError: " + text
			}
			results <- text
		})
	}
	waitFor(t, "5 calls in flight", func() bool { return g.serverByName(t, "slow")["in_flight"].(float64) == 5 })
	done := make(chan map[string]any, 1)
	go func() {
		_, body := g.rest(t, "POST", "/api/v1/aggregator/servers/slow/disconnect", nil)
		done <- body
	}()
	waitFor(t, "the drain to start", func() bool { return g.serverByName(t, "slow")["draining"] == true })
	if code, body := g.rest(t, "POST", "/api/v1/tools/call", map[string]any{"name": "slow.echo", "arguments": map[string]any{"text": "x"}}); code != 503 {
		t.Errorf("call during the drain: %d %v, want 503", code, body)
	}
	body := <-done
	wg.Wait()
	close(results)
	for r := range results {
		if !strings.HasPrefix(r, "slept") {
			t.Errorf("a drained call ended with %q, want it to complete", r)
		}
	}
	if body["pending_requests"] != float64(5) || body["status"] != "DISCONNECTED" {
		t.Errorf("disconnect answered %v, want DISCONNECTED with pending_requests 5", body)
	}
}
