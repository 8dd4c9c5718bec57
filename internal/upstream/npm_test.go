package upstream_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

func TestNPMEverythingRelay(t *testing.T) {
	// The server offers its trigger tools because the gateway declares
	// sampling, elicitation and roots; what they ask reaches the calling peer.
	m := everything(t)
	tests := []struct {
		tool, args string
		want       string // in the result
		asked      string // what the peer was asked, "" for nothing
	}{
		{"trigger-sampling-request", `{"prompt":"hi"}`, "answers Resource trigger-sampling-request context: hi", "Resource trigger-sampling-request context: hi"},
		{"trigger-elicitation-request", `{}`, "Name: peer-trigger-elicitation-request", "Please provide inputs for the following fields:"},
		{"get-roots-list", `{}`, "URI: file:///peer-get-roots-list", "roots"},
		{"trigger-long-running-operation", `{"duration":0.1,"steps":2}`, "Long running operation completed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			p := newPeer("peer-"+tt.tool, allCaps)
			res, err := m.CallTool(upstream.WithPeer(context.Background(), p), "everything", &mcp.CallToolParams{
				Name:      tt.tool,
				Arguments: json.RawMessage(tt.args),
				Meta:      mcp.Meta{"progressToken": float64(5)},
			})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			var text []string
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					text = append(text, tc.Text)
				}
			}
			if got := strings.Join(text, "\n"); res.IsError || !strings.Contains(got, tt.want) {
				t.Errorf("result %q, want it to contain %q", got, tt.want)
			}
			progress, _, asked := p.snapshot()
			if tt.asked != "" && !slices.Contains(asked, tt.asked) {
				t.Errorf("the peer was asked %q, want %q among them", asked, tt.asked)
			}
			if tt.tool == "trigger-long-running-operation" {
				if len(progress) != 2 || progress[0].ProgressToken != float64(5) || progress[1].ProgressToken != float64(5) {
					t.Errorf("progress %+v, want 2 notifications with the caller's token 5", progress)
				}
			}
		})
	}
}
