package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixture"
)

// eraClient is a go-sdk client that samples, elicits and lists roots, and
// counts how often it was asked.
type eraClient struct {
	*mcp.Client
	asked    atomic.Int64
	progress atomic.Int64
}

func newEraClient() *eraClient {
	c := &eraClient{}
	c.Client = mcp.NewClient(&mcp.Implementation{Name: "era-client", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			c.asked.Add(1)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "forty-two"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			c.asked.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com"}}, nil
		},
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { c.progress.Add(1) },
	})
	return c
}

func resultText(res *mcp.CallToolResult) string {
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String()
}

// TestStatelessClientThroughGateway: a client of the 2026-07-28 revision
// gets it from the gateway (no fallback to 2025-11-25) on /mcp and on
// /servers/{name}/mcp, and sampling and elicitation work for it whatever
// the server: one of the new revision (its input requests pass through, its
// state sealed in the gateway's), one that speaks it over a classic session
// (the server's SDK asks with requests of its own, the gateway parks the
// call), and one written the classic way.
func TestStatelessClientThroughGateway(t *testing.T) {
	fx := httptest.NewServer(fixture.Handler(nil))
	t.Cleanup(fx.Close)
	upstreams := map[string]string{
		"stdio-2026":    fmt.Sprintf("    transport: stdio\n    command: switchboard\n    env: {%s: \"1\"}\n    protocol_version: 2026-07-28\n", fixtureEnv),
		"stdio-auto":    fmt.Sprintf("    transport: stdio\n    command: switchboard\n    env: {%s: \"1\"}\n", fixtureEnv),
		"stdio-classic": fmt.Sprintf("    transport: stdio\n    command: switchboard\n    env: {%s: classic}\n", fixtureEnv),
		"http":          fmt.Sprintf("    transport: http\n    url: %s/mcp\n", fx.URL),
	}
	for kind, def := range upstreams {
		t.Run(kind, func(t *testing.T) {
			g := startGateway(t, "servers:\n  fx:\n"+def+"    auto_start: true\n", nil)
			for _, endpoint := range []string{"/mcp", "/servers/fx/mcp"} {
				prefix := "fx."
				if endpoint != "/mcp" {
					prefix = ""
				}
				client := newEraClient()
				cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.url() + endpoint}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
					t.Errorf("%s: negotiated %s, want 2026-07-28", endpoint, v)
				}
				for _, c := range []struct {
					tool string
					args map[string]any
					want string
				}{
					{prefix + fixture.ToolSimpleText, nil, "This is a simple text response for testing."},
					{prefix + fixture.ToolSampling, map[string]any{"prompt": "p"}, "LLM response: forty-two"},
					{prefix + fixture.ToolElicitation, map[string]any{"message": "m"}, `User response: action=accept, content={"email":"ada@example.com","username":"ada"}`},
				} {
					res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
					if err != nil {
						t.Errorf("%s %s: %v", endpoint, c.tool, err)
						continue
					}
					if got := resultText(res); res.IsError || got != c.want {
						t.Errorf("%s %s: isError %v, %q; want %q", endpoint, c.tool, res.IsError, got, c.want)
					}
				}
				if n := client.asked.Load(); n != 2 {
					t.Errorf("%s: the client was asked %d times, want 2", endpoint, n)
				}
				params := &mcp.CallToolParams{Name: prefix + fixture.ToolWithProgress}
				params.SetProgressToken("p1")
				if _, err := cs.CallTool(t.Context(), params); err != nil {
					t.Errorf("%s progress: %v", endpoint, err)
				}
				waitFor(t, "3 progress notifications", func() bool { return client.progress.Load() >= 3 })
				cs.Close()
			}
		})
	}
}

// TestStatelessLogLevel: a client of the stateless revision gets the log
// messages of its call at the level its request's _meta names, and none
// without one, whatever revision the upstream session speaks.
func TestStatelessLogLevel(t *testing.T) {
	g := startGateway(t, fmt.Sprintf(`servers:
  n:
    transport: stdio
    command: switchboard
    env: {%[1]s: "1"}
    protocol_version: 2026-07-28
    auto_start: true
  c:
    transport: stdio
    command: switchboard
    env: {%[1]s: classic}
    auto_start: true
`, fixtureEnv), nil)
	for _, server := range []string{"n", "c"} {
		for _, level := range []string{"debug", ""} {
			meta := map[string]any{
				"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
				"io.modelcontextprotocol/clientCapabilities": map[string]any{},
			}
			if level != "" {
				meta["io.modelcontextprotocol/logLevel"] = level
			}
			tool := server + "." + fixture.ToolWithLogging
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
				"params": map[string]any{"name": tool, "arguments": map[string]any{}, "_meta": meta}})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url()+"/mcp", bytes.NewReader(body))
			for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
				"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool} {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got := strings.Count(string(b), `"notifications/message"`)
			want := 3
			if level == "" {
				want = 0
			}
			if got != want {
				t.Errorf("%s with logLevel %q: %d log messages, want %d; response:\n%s", server, level, got, want, b)
			}
		}
	}
}

// TestLocalModeSecretKey: a local-mode gateway with no key configured makes
// its own (0600, next to the store) on first use, so a server registered
// with a literal env value is sealed and works, and again after a restart
// on the same store.
func TestLocalModeSecretKey(t *testing.T) {
	dir := t.TempDir()
	storePath := filepath.Join(dir, "switchboard.db")
	env := map[string]string{"SWITCHBOARD_SECRET_KEY": ""}
	g := startGatewayStore(t, "servers: {}\n", env, storePath)
	code, body, err := g.tryRest("", "POST", "/api/v1/aggregator/servers", map[string]any{
		"name": "d", "transport_type": "STDIO", "auto_connect": true,
		"connection_config": map[string]any{"command": "switchboard", "args": []string{"demo-server"},
			"env": map[string]any{demoEnv: "1", "DEMO_TOKEN": "s3cr3t-literal"}},
	})
	if err != nil || code != 201 {
		t.Fatalf("register with a literal env value: %d %v %v", code, body, err)
	}
	fi, err := os.Stat(filepath.Join(dir, "switchboard.key"))
	if err != nil {
		t.Fatalf("no local key file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	raw, _ := os.ReadFile(storePath)
	if bytes.Contains(raw, []byte("s3cr3t-literal")) {
		t.Error("the literal env value is in the store in clear")
	}
	waitFor(t, "d connected", func() bool { return g.serverByName(t, "d")["status"] == "CONNECTED" })
	g.app.Close(context.Background())

	g2 := startGatewayStore(t, "servers: {}\n", env, storePath)
	waitFor(t, "d connected after a restart", func() bool { return g2.serverByName(t, "d")["status"] == "CONNECTED" })
}
