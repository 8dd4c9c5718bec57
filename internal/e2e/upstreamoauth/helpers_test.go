package upstreamoauth

import (
	"context"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/gatewaytest"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
)

// testSecretKey is the gateways' SWITCHBOARD_SECRET_KEY (base64 of 32 bytes).
const testSecretKey = "c3dpdGNoYm9hcmQtdGVzdC1zZWNyZXQta2V5LTMyYnk="

// adminKey is the gateways' SWITCHBOARD_ADMIN_KEY in mode keys.
const adminKey = "e2e-admin-bootstrap-key"

// gateway is a running gateway under test.
type gateway struct {
	app  *app.App
	srv  *httptest.Server
	logs *logtest.Buffer
}

func (g *gateway) url() string { return g.srv.URL }

// startGateway parses yaml (settings.listen is set to the gateway's real
// address, so that the URLs it gives out reach it) and serves a gateway on
// storeDSN (a SQLite path or a PostgreSQL DSN).
func startGateway(t testing.TB, yaml string, env map[string]string, storeDSN string) *gateway {
	t.Helper()
	return startGatewayOn(t, listen(t), yaml, env, storeDSN)
}

// listen opens a loopback listener, for a gateway whose URL must be known
// before it starts.
func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startGatewayOn is startGateway serving on ln. It serves before the
// servers connect, as `switchboard serve` does: an authorization server
// may fetch the gateway's keys (token exchange) while the gateway connects.
func startGatewayOn(t testing.TB, ln net.Listener, yaml string, env map[string]string, storeDSN string) *gateway {
	t.Helper()
	withDefaults := map[string]string{"SWITCHBOARD_SECRET_KEY": testSecretKey, "SWITCHBOARD_ADMIN_KEY": adminKey}
	maps.Copy(withDefaults, env)
	yaml = strings.Replace(yaml, "LISTEN", ln.Addr().String(), 1)
	g := gatewaytest.Start(t, yaml, &gatewaytest.Options{Env: withDefaults, Store: storeDSN, Listener: ln, ServeFirst: true})
	return &gateway{app: g.App, srv: g.Server, logs: g.Logs}
}

// rest does one REST request as key ("" for none) and decodes the answer.
func (g *gateway) rest(t testing.TB, key, method, path string, body any) (int, map[string]any) {
	t.Helper()
	code, out, err := g.tryRest(t.Context(), key, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, out
}

func (g *gateway) tryRest(ctx context.Context, key, method, path string, body any) (int, map[string]any, error) {
	return gatewaytest.REST(ctx, g.url(), key, method, path, body)
}

// serverByName finds a server in GET /api/v1/aggregator/servers.
func (g *gateway) serverByName(t testing.TB, key, name string) map[string]any {
	t.Helper()
	_, body := g.rest(t, key, "GET", "/api/v1/aggregator/servers", nil)
	list, _ := body["servers"].([]any)
	for _, s := range list {
		if m, _ := s.(map[string]any); m["name"] == name {
			return m
		}
	}
	t.Fatalf("server %q not listed: %v", name, body)
	return nil
}

// newKey creates an API key for agent, with a workspace policy (so that it
// needs no grant for a server whose default access is allow).
func (g *gateway) newKey(t testing.TB, agent string) string {
	t.Helper()
	key, _ := g.newKeyID(t, agent)
	return key
}

// newKeyID is newKey, with the identity id its caller has ("key:<id>").
func (g *gateway) newKeyID(t testing.TB, agent string) (key, identity string) {
	t.Helper()
	code, body := g.rest(t, adminKey, "POST", "/api/v1/keys", map[string]any{"agent_id": agent, "workspace_policy": true})
	key, _ = body["key"].(string)
	id, _ := body["id"].(string)
	if (code != http.StatusCreated && code != http.StatusOK) || key == "" || id == "" {
		t.Fatalf("create key for %s: %d %v", agent, code, body)
	}
	return key, "key:" + id
}

type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens an MCP session to the gateway's /mcp as key.
func (g *gateway) connect(t testing.TB, key string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.url() + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// textOf is the text content of a result.
func textOf(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

// waitFor polls cond every 50 ms until it holds, or fails after a minute.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replaceOnce replaces the first old in s, which must be there.
func replaceOnce(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic("replaceOnce: " + old + " not found")
	}
	return strings.Replace(s, old, new, 1)
}
