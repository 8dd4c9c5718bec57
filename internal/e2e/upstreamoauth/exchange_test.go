package upstreamoauth

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/propagate"
)

// TestIdentityTokenExchange: a server with `identity: {propagate:
// token_exchange}` is reached with a token the organisation's
// authorization server (oidc-provider, with an RFC 8693 grant that trusts
// the gateway's JWKS) issued for the caller in exchange for the gateway's
// assertion: the resource server, introspecting each token, finds A's
// subject on A's calls and B's on B's, over MCP and REST; the gateway's
// own requests go as the gateway; tokens are exchanged once per caller and
// reused until near their expiry; the callers' keys, the client secret
// and the tokens stay out of the logs, API answers and the SQLite files.
func TestIdentityTokenExchange(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	gw := "http://" + ln.Addr().String()
	exchangeSecret := "exchanger-secret-" + randomText()
	p := startIdP(t, []string{gw + "/oauth/upstream/callback"}, time.Hour,
		"OIDC_EXCHANGE_JWKS="+gw+propagate.JWKSPath, "OIDC_EXCHANGE_ISSUER="+gw, "OIDC_EXCHANGE_SECRET="+exchangeSecret)
	up := newProtectedDemo(t, p)
	dir := t.TempDir()
	g := startGatewayOn(t, ln, fmt.Sprintf(`settings:
  listen: LISTEN
auth:
  mode: keys
servers:
  tx:
    transport: http
    url: %s
    auto_start: true
    identity:
      propagate: token_exchange
      token_endpoint: %s/token
      client_id: exchanger
      client_secret_env: TX_SECRET
      scopes: [mcp]
`, up.resource(), p.issuer), map[string]string{"TX_SECRET": exchangeSecret}, filepath.Join(dir, "sb.db"))

	if s := g.serverByName(t, adminKey, "tx"); s["status"] != "CONNECTED" {
		t.Fatalf("tx: %v, want CONNECTED (the gateway's own requests exchange a token for the gateway)", s)
	}
	keyA, idA := g.newKeyID(t, "agent-a")
	keyB, idB := g.newKeyID(t, "agent-b")
	csA := g.connect(t, keyA)
	for i := range 2 {
		res, err := csA.CallTool(t.Context(), &mcp.CallToolParams{Name: "tx.echo", Arguments: map[string]any{"text": "a"}})
		if err != nil || res.IsError {
			t.Fatalf("call %d as A: %v %v", i, err, res)
		}
		code, body := g.rest(t, keyB, "POST", "/api/v1/mcp/invoke", map[string]any{"server_id": "tx", "tool_name": "echo", "params": map[string]any{"text": "b"}})
		if code != http.StatusOK || body["success"] != true {
			t.Fatalf("call %d as B: %d %v", i, code, body)
		}
	}
	calls := up.toolCalls()
	if len(calls) != 4 {
		t.Fatalf("the resource server let %d tools/call through, want 4: %+v", len(calls), calls)
	}
	for i, c := range calls {
		if want := []string{idA, idB}[i%2]; c.sub != want {
			t.Errorf("call %d reached the server as %q, want %q", i, c.sub, want)
		}
	}
	exchanges := 0
	for _, is := range p.issued(t) {
		if is.GrantType == "urn:ietf:params:oauth:grant-type:token-exchange" {
			exchanges++
		}
	}
	if exchanges != 3 {
		t.Errorf("%d token exchanges, want 3 (the gateway, A, B: each token reused until near its expiry)", exchanges)
	}

	secrets := append([]string{exchangeSecret}, p.tokens(t)...)
	texts := map[string]string{"the gateway's log": g.logs.String()}
	for _, path := range []string{"/api/v1/aggregator/servers", "/api/v1/aggregator/servers/tx", "/api/v1/audit?limit=100", "/metrics"} {
		texts["GET "+path] = g.raw(t, path)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "sb.db*"))
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		texts[f] = string(raw)
	}
	for where, text := range texts {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds the exchange client's secret or an exchanged token in clear", where)
			}
		}
	}
	for _, c := range up.presented() {
		if c == keyA || c == keyB {
			t.Fatal("a caller's API key reached the upstream")
		}
	}
}
