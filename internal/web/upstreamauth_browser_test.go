//go:build unix

package web_test

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/gatewaytest"
	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
)

// TestUpstreamConnectInBrowser drives the server page of an OAuth server
// in NEEDS_AUTH in headless Chromium (testdata/upstreamauth.cjs): the page
// says why, its "Connect with OAuth" button starts the flow and links the
// authorization page, which (approved at once) returns to the gateway's
// callback; the page then shows the grant and the server CONNECTED,
// without a restart, and never a token.
func TestUpstreamConnectInBrowser(t *testing.T) {
	browserDeps(t)
	up := oauthtest.NewUpstream(t, "")
	adminKey := "sb_test_admin_" + rand.Text()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// listen is the gateway's real address: the callback URL it gives the
	// authorization server must reach it.
	yaml := fmt.Sprintf("settings:\n  listen: %s\nauth:\n  mode: keys\nservers:\n  prot:\n    transport: http\n    url: %s\n    auto_start: true\n    auth: {type: oauth}\n",
		ln.Addr(), up.MCPURL())
	g := gatewaytest.Start(t, yaml, &gatewaytest.Options{Env: map[string]string{app.AdminKeyEnv: adminKey,
		"SWITCHBOARD_SECRET_KEY": "c3dpdGNoYm9hcmQtdGVzdC1zZWNyZXQta2V5LTMyYnk="}, Listener: ln, Wrap: withDashboard})

	artifacts := runScript(t, "upstreamauth", g.URL(), adminKey)

	html, err := os.ReadFile(filepath.Join(artifacts, "upstreamauth.html"))
	if err != nil {
		t.Fatal(err)
	}
	if len(up.Issued()) == 0 {
		t.Fatal("no token was issued: the flow did not run")
	}
	up.AssertNoToken(t, "the page", string(html))
	up.AssertNoToken(t, "the gateway's logs", g.Logs.String())
}
