package app_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/testdeps"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// switchboardBin builds the real switchboard binary once per test run.
func switchboardBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "switchboard-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "switchboard")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/switchboard")
		cmd.Dir = testdeps.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// stdioGatewayConfig writes a config for `switchboard stdio` whose demo
// upstream is the real binary's demo-server.
func stdioGatewayConfig(t *testing.T) (cfgPath, storePath string) {
	t.Helper()
	dir := t.TempDir()
	cfgPath = filepath.Join(dir, "switchboard.yaml")
	yaml := `
servers:
  demo:
    transport: stdio
    command: switchboard
    args: [demo-server]
    auto_start: true
  demo2:
    transport: stdio
    command: switchboard
    args: [demo-server]
    auto_start: true
`
	// Clients such as the Inspector start the gateway with an environment of
	// their own, without SWITCHBOARD_LOG_DIRECTORY: keep the logs here.
	yaml += "settings:\n  log_directory: " + filepath.Join(dir, "logs") + "\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath, filepath.Join(dir, "sb.db")
}

// TestStdioFront: the same calls work through `switchboard stdio`, the
// command desktop clients launch.
func TestStdioFront(t *testing.T) {
	bin := switchboardBin(t)
	cfgPath, storePath := stdioGatewayConfig(t)
	cmd := exec.Command(bin, "stdio", "--config", cfgPath, "--store", storePath, "--log-level", "warn")
	cs := connectClient(t, &mcp.CommandTransport{Command: cmd})
	tools := toolNames(t, cs)
	if tools["demo.echo"] == nil || tools["demo2.echo"] == nil {
		t.Fatalf("tools/list over stdio = %v", keys(tools))
	}
	for _, name := range []string{"demo.echo", "demo2.echo"} {
		if text, res := callText(t, cs, name, map[string]any{"text": "stdio " + name}); res.IsError || text != "stdio "+name {
			t.Errorf("%s = %q isError=%v", name, text, res.IsError)
		}
	}
}

// inspector runs the official MCP Inspector CLI (a client we did not write)
// and returns its JSON output.
func inspector(t *testing.T, args ...string) map[string]any {
	t.Helper()
	node := npmModule(t, "node/bin/node")
	js := npmModule(t, "@modelcontextprotocol/inspector/clients/launcher/build/index.js")
	full := append([]string{js, "--cli", "--format", "json", "-q", "--connect-timeout", "20000"}, args...)
	cmd := exec.Command(node, full...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.Output(); close(done) }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("inspector %v timed out", args)
	}
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("inspector %v: %v\nstdout: %s\nstderr: %s", args, err, out, stderr)
	}
	var res map[string]any
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("inspector output is not JSON: %s", out)
	}
	return res
}

// inspectorToolNames extracts tool names from an Inspector tools/list answer.
func inspectorToolNames(t *testing.T, res map[string]any) []string {
	t.Helper()
	r, _ := res["result"].(map[string]any)
	list, _ := r["tools"].([]any)
	var names []string
	for _, tl := range list {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	return names
}

func inspectorText(res map[string]any) string {
	r, _ := res["result"].(map[string]any)
	content, _ := r["content"].([]any)
	var sb strings.Builder
	for _, c := range content {
		if m, ok := c.(map[string]any); ok {
			sb.WriteString(fmt.Sprint(m["text"]))
		}
	}
	return sb.String()
}

// TestInspector is A1 and A3: the MCP Inspector CLI lists the demo tools as
// demo.* and calls demo.echo through /mcp, /sse and `switchboard stdio`.
func TestInspector(t *testing.T) {
	g := startGateway(t, "servers:"+demoServer("demo"), nil)
	bin := switchboardBin(t)
	cfgPath, storePath := stdioGatewayConfig(t)
	targets := map[string][]string{
		"mcp":   {g.url() + "/mcp", "--transport", "http"},
		"sse":   {g.url() + "/sse", "--transport", "sse"},
		"stdio": {"--transport", "stdio", "--", bin, "stdio", "--config", cfgPath, "--store", storePath, "--log-level", "warn"},
	}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			withMethod := func(extra ...string) []string {
				if name == "stdio" { // options must precede the command
					return append(append([]string{}, extra...), target...)
				}
				return append(append([]string{}, target...), extra...)
			}
			names := inspectorToolNames(t, inspector(t, withMethod("--method", "tools/list")...))
			found := false
			for _, n := range names {
				if n == "demo.echo" {
					found = true
				}
				if !strings.HasPrefix(n, "demo.") && !strings.HasPrefix(n, "demo2.") {
					t.Errorf("tool %q is not namespaced", n)
				}
			}
			if !found {
				t.Fatalf("Inspector tools/list = %v, want demo.echo", names)
			}
			res := inspector(t, withMethod("--method", "tools/call", "--tool-name", "demo.echo", "--tool-arg", "text=hello inspector")...)
			if got := inspectorText(res); got != "hello inspector" {
				t.Errorf("Inspector tools/call demo.echo = %q (%v)", got, res)
			}
		})
	}
}
