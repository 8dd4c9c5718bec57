package upstream_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// everything connects to the reference npm server-everything over stdio,
// skipping when node or the package is not installed.
func everything(t *testing.T) *upstream.Manager {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	script, err := filepath.Abs("../../testdata/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Skipf("server-everything is not installed: %v", err)
	}
	// node starts slower than the fake servers, especially on a loaded CI box.
	m := newManager(t, nil, nil, &upstream.Options{ConnectTimeout: 2 * time.Minute})
	if err := m.Add(&config.Server{
		Name:      "everything",
		Transport: config.TransportStdio,
		Command:   node,
		Args:      []string{script, "stdio"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(context.Background(), "everything"); err != nil {
		t.Fatalf("Connect: %v\nstderr:\n%s", err, strings.Join(m.Stderr("everything"), "\n"))
	}
	return m
}

func TestNPMEverythingEcho(t *testing.T) {
	m := everything(t)
	res, err := m.CallTool(context.Background(), "everything", &mcp.CallToolParams{
		Name:      "echo",
		Arguments: json.RawMessage(`{"message": "hi"}`),
	})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if res.IsError || !strings.Contains(textOf(t, res), "hi") {
		t.Errorf("echo returned %+v, want the message back", res)
	}
	st, _ := m.Status("everything")
	if st.State != upstream.StateConnected || st.ServerInfo == nil {
		t.Errorf("status = %+v, want CONNECTED with server info", st)
	}
}

func TestNPMEverythingEnvHasNoCanary(t *testing.T) {
	const canary = "upstream-npm-canary-31337"
	t.Setenv("UPSTREAM_NPM_CANARY", canary)
	m := everything(t)
	res, err := m.CallTool(context.Background(), "everything", &mcp.CallToolParams{Name: "get-env", Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	text := textOf(t, res)
	if !strings.Contains(text, "PATH") {
		t.Fatalf("get-env returned no environment: %s", text)
	}
	if strings.Contains(text, canary) {
		t.Errorf("the gateway's environment leaked into the child: %s", text)
	}
}
