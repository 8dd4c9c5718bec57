//go:build unix

package web_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/gatewaytest"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/testdeps"
	"github.com/switchboard-mcp/switchboard/internal/upstreamtest"
	"github.com/switchboard-mcp/switchboard/internal/web"
)

// demoEnv makes this test binary act as the demo server when the gateway
// under test starts it as a stdio upstream (the config's command is mapped
// to os.Args[0]).
const demoEnv = upstreamtest.DemoEnv

const chromium = "/usr/bin/chromium"

var updateScreenshot = flag.Bool("update-screenshot", false, "copy the servers page screenshot to docs/dashboard.png")

// mutableFixtureEnv makes this test binary act as the conformance fixture
// with its mutable tool (fixture.Options.Mutable), whose first description
// is the variable's value.
const mutableFixtureEnv = upstreamtest.MutableFixtureEnv

func TestMain(m *testing.M) {
	upstreamtest.ServeIfAsked()
	os.Exit(upstreamtest.WithLogDirectory(m.Run))
}

// browserDeps returns the playwright-core module directory, or skips (fails
// with SWITCHBOARD_REQUIRE_BROWSER=1) when the browser, node or the pinned
// npm module is missing.
func browserDeps(t *testing.T) string {
	t.Helper()
	missing := func(what string) {
		if os.Getenv("SWITCHBOARD_REQUIRE_BROWSER") == "1" {
			t.Fatalf("%s is missing, and SWITCHBOARD_REQUIRE_BROWSER=1", what)
		}
		t.Skipf("%s is missing (apt-get install chromium; make npm)", what)
	}
	if _, err := os.Stat(chromium); err != nil {
		missing(chromium)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node")
	}
	pw := filepath.Join(testdeps.RepoRoot(), "testdata", "npm", "node_modules", "playwright-core")
	if _, err := os.Stat(filepath.Join(pw, "package.json")); err != nil {
		missing("playwright-core (testdata/npm)")
	}
	return pw
}

// startGateway runs a real gateway (API keys, the demo server over stdio,
// and a second one left stopped) with the dashboard mounted beside it, as the binary serves it.
func startGateway(t *testing.T, adminKey string) *httptest.Server {
	t.Helper()
	yaml := `
auth:
  mode: keys
servers:
  demo:
    transport: stdio
    command: switchboard
    args: [demo-server]
    env: {` + demoEnv + `: "1"}
    auto_start: true
  scratch:
    description: a second demo server, left stopped
    transport: stdio
    command: switchboard
    args: [demo-server]
    env: {` + demoEnv + `: "1"}
    auto_start: false
  fx:
    description: an upstream that changes a tool's description when asked (started by the script)
    transport: stdio
    command: switchboard
    env: {` + mutableFixtureEnv + `: "Answers with its own description."}
    auto_start: false
`
	return gatewaytest.Start(t, yaml, &gatewaytest.Options{Env: map[string]string{app.AdminKeyEnv: adminKey}, Wrap: withDashboard}).Server
}

// withDashboard serves the dashboard in front of the gateway's handler, as
// `switchboard serve` does.
func withDashboard(gateway http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(web.Prefix, web.Handler())
	mux.Handle("/", gateway)
	return mux
}

// runScript runs testdata/<name>.cjs in node against the dashboard at
// gatewayURL, signing in with adminKey (extra is more of its environment),
// and returns where its screenshots went: $SWITCHBOARD_ARTIFACTS/<name>,
// or a temporary directory.
func runScript(t *testing.T, name, gatewayURL, adminKey string, extra ...string) string {
	t.Helper()
	pw := browserDeps(t)
	artifacts := os.Getenv("SWITCHBOARD_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	} else {
		artifacts = filepath.Join(artifacts, name)
		if err := os.MkdirAll(artifacts, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	script := filepath.Join("testdata", name+".cjs")
	// Reading them makes go test's cache notice when the script or the
	// harness every script requires changes.
	for _, f := range []string{script, filepath.Join("testdata", "harness.cjs")} {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(),
		"DASHBOARD_URL="+gatewayURL+web.Prefix,
		"DASHBOARD_ADMIN_KEY="+adminKey,
		"DASHBOARD_ARTIFACTS="+artifacts,
		"DASHBOARD_CHROMIUM="+chromium,
		"PLAYWRIGHT_CORE="+pw,
	)
	cmd.Env = append(cmd.Env, extra...)
	// Its own process group, so a timeout ends Chromium too, not just node.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out := &logtest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers of a crashed node
	}
	t.Logf("browser script:\n%s", out.String())
	if err != nil {
		t.Fatalf("browser script: %v (screenshots in %s)", err, artifacts)
	}
	return artifacts
}

// TestDashboardInBrowser drives the dashboard in headless Chromium against a
// real gateway: sign-in, servers and tools, a disconnect and reconnect seen
// live, search, a call from the "try it" form, audit, a quarantined tool's
// diff and approval; see
// testdata/dashboard.cjs. Screenshots go to $SWITCHBOARD_ARTIFACTS (or a
// temporary directory).
func TestDashboardInBrowser(t *testing.T) {
	browserDeps(t)
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	adminKey := "sb_test_admin_" + hex.EncodeToString(secret)
	// The server the script adds in the UI takes its env value as a
	// ${VAR} reference to the gateway's environment (a literal would need
	// a secrets key to be sealed).
	t.Setenv(demoEnv, "1")
	srv := startGateway(t, adminKey)

	artifacts := runScript(t, "dashboard", srv.URL, adminKey)

	for _, name := range []string{"servers.png", "tool.png", "audit.png", "quarantine.png", "overview.png", "add-server.png", "add-server-error.png"} {
		b, err := os.ReadFile(filepath.Join(artifacts, name))
		if err != nil {
			t.Errorf("screenshot: %v", err)
			continue
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("%s is not a PNG", name)
		}
	}
	if *updateScreenshot {
		b, err := os.ReadFile(filepath.Join(artifacts, "servers.png"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(testdeps.RepoRoot(), "docs", "dashboard.png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
