package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/gatewaytest"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/testdeps"
)

// npmModule is [testdeps.NPMModule] for the tests that also start the
// pinned servers with the node on PATH: without one they skip.
func npmModule(t testing.TB, rel string) string {
	t.Helper()
	p := testdeps.NPMModule(t, rel)
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not on PATH")
	}
	return p
}

// testSecretKey is the secret key of test gateways (base64 of 32 bytes).
const testSecretKey = "c3dpdGNoYm9hcmQtdGVzdC1zZWNyZXQta2V5LTMyYnk="

// gateway is a running gateway under test.
type gateway struct {
	app  *app.App
	http *httptest.Server
	logs *logtest.Buffer
	base string // a gateway in another process: its URL
}

// url is the gateway's base URL.
func (g *gateway) url() string {
	if g.base != "" {
		return g.base
	}
	return g.http.URL
}

// tryRest is restAs without failing the test: transport errors are
// returned (a replica under test may have been killed).
func (g *gateway) tryRest(key, method, path string, body any) (int, map[string]any, error) {
	return gatewaytest.REST(context.Background(), g.url(), key, method, path, body)
}

// startGateway parses yaml (with the demo server re-exec wired in), starts a
// gateway on a temp SQLite store and serves it with httptest.
func startGateway(t testing.TB, yaml string, env map[string]string) *gateway {
	t.Helper()
	return startGatewayStore(t, yaml, env, filepath.Join(t.TempDir(), "switchboard.db"))
}

func startGatewayStore(t testing.TB, yaml string, env map[string]string, storePath string) *gateway {
	t.Helper()
	return startGatewayOn(t, nil, yaml, env, storePath, nil)
}

// startGatewayOn is startGatewayStore serving on ln (nil: a new loopback
// listener), for a config that must name the gateway's own URL; wrap, if
// not nil, wraps the gateway's handler (e.g. to watch what it answers).
func startGatewayOn(t testing.TB, ln net.Listener, yaml string, env map[string]string, storePath string,
	wrap func(http.Handler) http.Handler) *gateway {
	t.Helper()
	if _, ok := env["SWITCHBOARD_SECRET_KEY"]; !ok {
		// Servers registered through the API may carry literal env values,
		// which the gateway stores only encrypted.
		env = maps.Clone(env)
		if env == nil {
			env = map[string]string{}
		}
		env["SWITCHBOARD_SECRET_KEY"] = testSecretKey
	}
	gw := gatewaytest.Start(t, yaml, &gatewaytest.Options{Env: env, Store: storePath, Listener: ln, Wrap: wrap})
	return &gateway{app: gw.App, http: gw.Server, logs: gw.Logs}
}

// demoServer is the YAML of a demo upstream over stdio (this test binary).
func demoServer(name string) string {
	return fmt.Sprintf(`
  %s:
    transport: stdio
    command: switchboard
    args: [demo-server]
    env: {%s: "1"}
    auto_start: true
`, name, demoEnv)
}

// connect opens an MCP client session to the gateway over Streamable HTTP
// (path "/mcp") or SSE (path "/sse").
func (g *gateway) connect(t *testing.T, path string) *mcp.ClientSession {
	t.Helper()
	var tr mcp.Transport
	switch path {
	case "/sse":
		tr = &mcp.SSEClientTransport{Endpoint: g.url() + path}
	default:
		tr = &mcp.StreamableClientTransport{Endpoint: g.url() + path}
	}
	return connectClient(t, tr)
}

func connectClient(t *testing.T, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	// The SSE client transport ties its event stream to the Connect ctx, so
	// it must live as long as the session.
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func toolNames(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	out := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		out[tool.Name] = tool
	}
	return out
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String(), res
}

// rest does one REST request and decodes the JSON answer.
func (g *gateway) rest(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, g.url()+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: status %d, body not JSON: %s", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, out
}

// serverByName finds a server in GET /api/v1/aggregator/servers.
func (g *gateway) serverByName(t *testing.T, name string) map[string]any {
	t.Helper()
	_, body := g.rest(t, "GET", "/api/v1/aggregator/servers", nil)
	for _, s := range body["servers"].([]any) {
		m := s.(map[string]any)
		if m["name"] == name {
			return m
		}
	}
	t.Fatalf("server %q not listed: %v", name, body)
	return nil
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// startNode runs a node script in the background for the test's lifetime.
func startNode(t *testing.T, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("node", args...)
	cmd.Env = append(os.Environ(), env...)
	var out logtest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("node %v output:\n%s", args, out.String())
		}
	})
}

func waitPort(t *testing.T, port int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("port %d", port), func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// newAppErr builds (and closes) a gateway from yaml, returning app.New's
// error.
func newAppErr(t *testing.T, yaml string) (*app.App, error) {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml), os.Getenv)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Settings.Store = filepath.Join(t.TempDir(), "switchboard.db")
	a, err := app.New(t.Context(), cfg, &app.Options{SelfExecutable: os.Args[0], Getenv: func(string) string { return "" }})
	if err == nil {
		t.Cleanup(func() { a.Close(context.Background()) })
	}
	return a, err
}
