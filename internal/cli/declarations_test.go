package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/config"
)

// declServers are the servers of the declaration files: demo is the test
// gateway's; files is not registered there. Its command is one every
// machine has, so that validate's PATH check passes anywhere.
const declServers = `servers:
  demo: {transport: stdio, command: switchboard, args: [demo-server]}
  files:
    transport: stdio
    command: sh
    package: "@modelcontextprotocol/server-filesystem"
`

// missingDecl is seed 002's way of writing a server whose program is not
// installed: it parses, and validate reports the command.
const missingDecl = `mcp_servers:
  files:
    package: "@modelcontextprotocol/server-filesystem"
    command: "switchboard-test-no-such-program -y /srv/data"
  demo:
    command: switchboard demo-server
`

const goodDecl = declServers + `clients:
  claude-code:
    mcp_tools:
      required: [demo]
      optional: [files]
    role_restrictions:
      review:
        allowed_tools: [demo.echo, "demo.*", "demo.s*", files.read_file, bash]
  cursor:
    mcp_tools: {required: [demo, files]}
`

// toolsDecl is valid on its own; only the gateway knows demo has no "ech".
const toolsDecl = declServers + `clients:
  claude-code:
    mcp_tools: {required: [demo]}
    role_restrictions:
      review: {allowed_tools: [demo.ech, files.read_file, "demo.x*", demo.echo]}
`

// brokenDecl fails at load, so the gateway is not asked.
const brokenDecl = declServers + `clients:
  claude-code:
    mcp_tools: {required: [demo, gti], optional: [demo]}
    role_restrictions:
      review: {allowed_tool: [demo.echo]}
`

// TestDeclarationsAgainstGateway pins `config validate` and `check` against
// a real gateway (E3): check exits 1 while a required server is down and 0
// once it is back. The subtests run in order and share the gateway.
func TestDeclarationsAgainstGateway(t *testing.T) {
	g := startGateway(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, tools, broken := write("good.yaml", goodDecl), write("tools.yaml", toolsDecl), write("broken.yaml", brokenDecl)
	missing := write("missing.yaml", missingDecl)
	// transcript is what a terminal shows, with what varies per run replaced.
	transcript := func(code int, out, errOut string) string {
		s := out
		if errOut != "" {
			s += "--- stderr\n" + errOut
		}
		s = regexp.MustCompile(`(demo +CONNECTED +)(ok|not probed yet)`).ReplaceAllString(s, "${1}<health>")
		return normalizeText(s, dir, "<dir>", g.url, "<url>") + "--- exit " + string(rune('0'+code)) + "\n"
	}

	tests := []struct {
		name   string
		args   []string
		code   int
		golden string
	}{
		{"validate good", []string{"config", "validate", "-c", good}, ExitOK, "validate_good"},
		{"validate requirements", []string{"config", "validate", "-c", good, "--show-mcp-requirements"}, ExitOK, "validate_requirements"},
		{"validate unknown tools", []string{"config", "validate", "-c", tools}, ExitUsage, "validate_tools"},
		{"validate broken file", []string{"config", "validate", "-c", broken}, ExitUsage, "validate_broken"},
		{"validate missing command", []string{"config", "validate", "-c", missing}, ExitUsage, "validate_missing_command"},
		{"check up", []string{"check", "claude-code", "-c", good}, ExitOK, "check_up"},
		{"check unregistered required server", []string{"check", "cursor", "-c", good}, ExitFailure, "check_unregistered"},
		{"check unknown client", []string{"check", "windsurf", "-c", good}, ExitUsage, "check_unknown_client"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := g.cli(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			checkGolden(t, tc.golden+".txt", transcript(code, out, errOut))
		})
	}

	t.Run("check while the required server is down", func(t *testing.T) {
		if code, out, errOut := g.cli(t, "servers", "disconnect", "demo"); code != ExitOK {
			t.Fatalf("disconnect: exit %d %s %s", code, out, errOut)
		}
		code, out, errOut := g.cli(t, "check", "claude-code", "-c", good)
		if code != ExitFailure {
			t.Errorf("exit %d, want %d\n%s%s", code, ExitFailure, out, errOut)
		}
		checkGolden(t, "check_down.txt", transcript(code, out, errOut))
		code, out, errOut = g.cli(t, "config", "validate", "-c", good, "--show-mcp-requirements")
		if code != ExitOK {
			t.Errorf("validate: exit %d\n%s%s", code, out, errOut)
		}
		checkGolden(t, "validate_requirements_down.txt", transcript(code, out, errOut))
	})

	t.Run("check once it is back", func(t *testing.T) {
		if code, out, errOut := g.cli(t, "start", "demo"); code != ExitOK {
			t.Fatalf("start: exit %d %s %s", code, out, errOut)
		}
		if code, out, errOut := g.cli(t, "check", "claude-code", "-c", good); code != ExitOK || !strings.Contains(out, "\nready: ") {
			t.Errorf("exit %d, want %d\n%s%s", code, ExitOK, out, errOut)
		}
	})

	t.Run("check without a gateway", func(t *testing.T) {
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		code, out, errOut := g.cli(t, "check", "claude-code", "-c", good, "--url", down.URL)
		if code != ExitFailure || out != "" || !strings.Contains(errOut, "cannot reach the gateway at "+down.URL) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		code, _, errOut = g.cli(t, "config", "validate", "-c", good, "--url", down.URL)
		if code != ExitFailure || !strings.Contains(errOut, "cannot reach the gateway") {
			t.Errorf("validate with --url of no gateway: exit %d, stderr %q", code, errOut)
		}
	})
}

// TestHealthy pins what check counts as up: CONNECTED, and the last health
// check passed or none has run yet.
func TestHealthy(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		s    api.Server
		want bool
	}{
		{"connected, not probed", api.Server{Status: "CONNECTED"}, true},
		{"connected, no check yet", api.Server{Status: "CONNECTED", Health: &api.Health{Method: "ping"}}, true},
		{"connected, check ok", api.Server{Status: "CONNECTED", Health: &api.Health{LastCheck: &at, LastCheckOK: true}}, true},
		{"connected, check failed", api.Server{Status: "CONNECTED", Health: &api.Health{LastCheck: &at, ConsecutiveFailures: 1}}, false},
		{"degraded", api.Server{Status: "DEGRADED", Health: &api.Health{LastCheck: &at, LastCheckOK: true}}, false},
		{"disconnected", api.Server{Status: "DISCONNECTED"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := healthy(tc.s); got != tc.want {
				t.Errorf("healthy = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHint(t *testing.T) {
	pkg := &config.Server{Name: "fs", Package: "@x/fs"}
	plain := &config.Server{Name: "git"}
	tests := []struct {
		name, server string
		s            *config.Server
		asked, up    bool
		want         string
	}{
		{"running", "fs", pkg, true, true, "-"},
		{"down with a package", "fs", pkg, true, false, "npx -y @x/fs"},
		{"no gateway, package", "fs", pkg, false, false, "npx -y @x/fs"},
		{"down without a package", "git", plain, true, false, "switchboard start git"},
		{"no gateway, no package", "git", plain, false, false, "-"},
		{"not configured", "gti", nil, true, false, "add gti to servers:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, hint(tc.server, tc.s, tc.asked, tc.up)); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatchesAny(t *testing.T) {
	offered := []string{"read_file", "write_file", "list"}
	tests := []struct {
		tool string
		want bool
	}{
		{"read_file", true}, {"read", false}, {"*_file", true}, {"l*", true}, {"x*", false}, {"[", false},
	}
	for _, tc := range tests {
		if got := matchesAny(tc.tool, offered); got != tc.want {
			t.Errorf("matchesAny(%q) = %v, want %v", tc.tool, got, tc.want)
		}
	}
}
