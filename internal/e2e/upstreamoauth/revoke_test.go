package upstreamoauth

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRevokedAtProvider: a grant revoked at the identity provider shows
// on the very next call: the resource server refuses the token, the
// gateway's refresh is refused, and the server is NEEDS_AUTH with the
// provider's reason on its status; authorizing again makes it CONNECTED
// and its tools work, without a restart of the gateway.
func TestRevokedAtProvider(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	p := startIdP(t, []string{"http://" + ln.Addr().String() + "/oauth/upstream/callback"}, time.Hour)
	up := newProtectedDemo(t, p)
	dir := t.TempDir()
	g := startGatewayOn(t, ln, "settings:\n  listen: LISTEN\nauth:\n  mode: keys\nservers:\n"+up.serverYAML(),
		map[string]string{"UP_SECRET": p.clientSecret}, filepath.Join(dir, "sb.db"))

	if s := g.serverByName(t, adminKey, "prot"); s["status"] != "NEEDS_AUTH" {
		t.Fatalf("before authorization: %v, want NEEDS_AUTH", s)
	}
	authorize(t, g)
	key := g.newKey(t, "agent")
	cs := g.connect(t, key)
	call := func() (*mcp.CallToolResult, error) {
		return cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "prot.echo", Arguments: map[string]any{"text": "hi"}})
	}
	if res, err := call(); err != nil || res.IsError || textOf(res) != "hi" {
		t.Fatalf("call after authorization: %v %v", err, res)
	}

	p.revokeAll(t)
	// One call: refused, and the server shows why.
	res, err := call()
	if err == nil && !res.IsError {
		t.Fatalf("a call after the revocation succeeded: %v", textOf(res))
	}
	s := g.serverByName(t, adminKey, "prot")
	reason, _ := s["error_message"].(string)
	if s["status"] != "NEEDS_AUTH" || !strings.Contains(reason, "invalid_grant") {
		t.Fatalf("after one call: %v, want NEEDS_AUTH with the provider's invalid_grant", s)
	}
	t.Logf("NEEDS_AUTH reason: %s", reason)

	// Authorized again: connected, no restart.
	authorize(t, g)
	if res, err := call(); err != nil || res.IsError || textOf(res) != "hi" {
		t.Fatalf("call after re-authorization: %v %v", err, res)
	}
	if up.rejected.Load() == 0 {
		t.Error("the resource server never refused a token: the revocation was not seen there")
	}
	assertNoSecrets(t, p, up, []*gateway{g}, filepath.Join(dir, "sb.db*"), "")
}
