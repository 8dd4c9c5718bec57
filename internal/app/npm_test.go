package app_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/testdeps"
)

// everythingPath is server-everything's entry point.
func everythingPath(t *testing.T) string {
	return npmModule(t, "@modelcontextprotocol/server-everything/dist/index.js")
}

// startEverythingHTTP runs server-everything in one of its HTTP modes
// ("streamableHttp" or "sse"), pinned to loopback, and returns its port.
func startEverythingHTTP(t *testing.T, mode string) int {
	t.Helper()
	js := everythingPath(t)
	port := freePort(t)
	loopback := filepath.Join(testdeps.RepoRoot(), "testdata", "npm", "loopback.cjs")
	startNode(t, []string{fmt.Sprintf("PORT=%d", port), "NODE_OPTIONS=--require " + loopback}, js, mode)
	waitPort(t, port)
	return port
}

// TestNPMUpstreams is A2: the official npm servers as upstreams over stdio,
// Streamable HTTP and SSE, listed and called through the gateway's /mcp
// with a go-sdk client; two upstreams with the same tool name (echo) are
// both callable by their namespaced names.
func TestNPMUpstreams(t *testing.T) {
	js := everythingPath(t)
	fsJS := npmModule(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	httpPort := startEverythingHTTP(t, "streamableHttp")
	ssePort := startEverythingHTTP(t, "sse")
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hello from a temp dir\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`
servers:
  ev-stdio:
    transport: stdio
    command: node
    args: [%q, stdio]
    auto_start: true
  ev-http:
    transport: http
    url: http://127.0.0.1:%d/mcp
    auto_start: true
  ev-sse:
    transport: sse
    url: http://127.0.0.1:%d/sse
    auto_start: true
  fs:
    transport: stdio
    command: node
    args: [%q, %q]
    auto_start: true
`, js, httpPort, ssePort, fsJS, root) + demoServer("demo")
	g := startGateway(t, yaml, nil)
	for _, name := range []string{"ev-stdio", "ev-http", "ev-sse", "fs", "demo"} {
		if s := g.serverByName(t, name); s["status"] != "CONNECTED" {
			t.Fatalf("%s: %v", name, s)
		}
	}
	cs := g.connect(t, "/mcp")
	tools := toolNames(t, cs)
	for _, server := range []string{"ev-stdio", "ev-http", "ev-sse"} {
		name := server + ".echo"
		if tools[name] == nil {
			t.Errorf("tools/list lacks %s", name)
			continue
		}
		text, res := callText(t, cs, name, map[string]any{"message": "via " + server})
		if res.IsError || !strings.Contains(text, "via "+server) {
			t.Errorf("%s = %q isError=%v", name, text, res.IsError)
		}
	}
	// The same name on a third server (the demo) stays addressable too.
	if text, _ := callText(t, cs, "demo.echo", map[string]any{"text": "demo"}); text != "demo" {
		t.Errorf("demo.echo = %q", text)
	}
	text, res := callText(t, cs, "fs.read_text_file", map[string]any{"path": filepath.Join(root, "hello.txt")})
	if res.IsError || !strings.Contains(text, "hello from a temp dir") {
		t.Errorf("fs.read_text_file = %q isError=%v", text, res.IsError)
	}
}

// TestSecretsStayOut is A4b: the gateway's environment does not leak into a
// stdio upstream, and a configured header value appears in no log line and
// no API response.
func TestSecretsStayOut(t *testing.T) {
	js := everythingPath(t)
	httpPort := startEverythingHTTP(t, "streamableHttp")
	const canary = "sb-canary-7f3a9c"
	const headerSecret = "sb-header-secret-51d2"
	t.Setenv("SECRET_CANARY", canary)
	yaml := fmt.Sprintf(`
servers:
  ev:
    transport: stdio
    command: node
    args: [%q, stdio]
    auto_start: true
  remote:
    transport: http
    url: http://127.0.0.1:%d/mcp
    headers:
      X-Api-Key: ${UPSTREAM_KEY}
    auto_start: true
`, js, httpPort)
	g := startGateway(t, yaml, map[string]string{"UPSTREAM_KEY": headerSecret})
	cs := g.connect(t, "/mcp")
	text, res := callText(t, cs, "ev.get-env", map[string]any{})
	if res.IsError || !strings.Contains(text, "PATH") {
		t.Fatalf("ev.get-env = %q isError=%v (want the child's environment)", text, res.IsError)
	}
	if strings.Contains(text, canary) {
		t.Errorf("the stdio upstream received the gateway's SECRET_CANARY")
	}
	if _, res := callText(t, cs, "remote.echo", map[string]any{"message": "x"}); res.IsError {
		t.Errorf("remote.echo failed")
	}
	for _, path := range []string{"/api/v1/aggregator/servers", "/api/v1/aggregator/servers/remote", "/api/v1/tools"} {
		_, body := g.rest(t, "GET", path, nil)
		if strings.Contains(fmt.Sprint(body), headerSecret) {
			t.Errorf("GET %s shows the header secret", path)
		}
	}
	if strings.Contains(g.logs.String(), headerSecret) || strings.Contains(g.logs.String(), canary) {
		t.Errorf("a secret appears in the gateway's logs")
	}
}
