package cli

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixtureDir holds the client files written from each client's documented
// format (shared with internal/clientcfg's tests).
var fixtureDir = filepath.Join("..", "clientcfg", "testdata", "clients")

// runIn runs the command line with getenv and replaces dir in the output,
// so goldens do not depend on the temporary directory.
func runIn(t *testing.T, dir string, getenv func(string) string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	code := Run(t.Context(), args, strings.NewReader(""), &out, &errb, getenv)
	clean := func(s string) string { return strings.ReplaceAll(s, dir, "$DIR") }
	return code, clean(out.String()), clean(errb.String())
}

func noEnv(string) string { return "" }

// TestImportGolden pins what import shows and writes for every client's
// file, and that a config file keeps its comments when servers are added.
func TestImportGolden(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "switchboard.yaml")
	existing := "# my gateway\nsettings:\n  log_level: debug\n\nservers:\n  # the built-in demo\n  demo:\n    transport: stdio\n    command: switchboard\n    args: [demo-server]\n\nauth:\n  mode: local\n"
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"claude-desktop", []string{"import", "--from", "claude-desktop", "--file", filepath.Join(fixtureDir, "claude_desktop_config.json")}, ExitOK},
		{"cursor", []string{"import", "--from", "cursor", "--file", filepath.Join(fixtureDir, "cursor_mcp.json")}, ExitOK},
		{"vscode", []string{"import", "--from", filepath.Join(fixtureDir, "vscode_mcp.json")}, ExitOK},
		{"claude-code", []string{"import", "--from", "claude-code", "--file", filepath.Join(fixtureDir, "claude_code_mcp.json")}, ExitFailure},
		{"windsurf", []string{"import", "--from", "windsurf", "--file", filepath.Join(fixtureDir, "windsurf_mcp_config.json")}, ExitOK},
		{"broken", []string{"import", "--from", filepath.Join(fixtureDir, "broken.json")}, ExitFailure},
		{"write-dry-run", []string{"import", "--from", "claude-desktop", "--file", filepath.Join(fixtureDir, "claude_desktop_config.json"), "--write", cfg, "--dry-run"}, ExitOK},
		{"write", []string{"import", "--from", "claude-desktop", "--file", filepath.Join(fixtureDir, "claude_desktop_config.json"), "--write", cfg}, ExitOK},
		{"write-again", []string{"import", "--from", "claude-desktop", "--file", filepath.Join(fixtureDir, "claude_desktop_config.json"), "--write", cfg}, ExitOK},
		{"no-source", []string{"import"}, ExitUsage},
	}
	if err := os.WriteFile(cfg, []byte(existing), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runIn(t, dir, noEnv, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, errOut)
			}
			if strings.Contains(out+errOut, "FAKEfake") {
				t.Errorf("a secret of the fixture was printed:\n%s%s", out, errOut)
			}
			checkGolden(t, "import-"+tc.name+".txt", out+errOut)
			if tc.name == "write-dry-run" {
				if got, _ := os.ReadFile(cfg); string(got) != existing {
					t.Errorf("--dry-run changed the file")
				}
			}
		})
	}
	got, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), existing[:strings.Index(existing, "\nauth:")]) || !strings.HasSuffix(string(got), "\nauth:\n  mode: local\n") {
		t.Errorf("the user's lines moved:\n%s", got)
	}
	checkGolden(t, "import-written.yaml", string(got))
}

// TestConnectGolden pins connect's report and its undo.
func TestConnectGolden(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp.json")
	orig, err := os.ReadFile(filepath.Join(fixtureDir, "cursor_mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		return map[string]string{envURL: "http://127.0.0.1:9999", envAPIKey: "sbk_example"}[k]
	}
	steps := []struct {
		name string
		args []string
		code int
	}{
		{"dry-run", []string{"connect", "cursor", "--file", path, "--dry-run"}, ExitOK},
		{"http", []string{"connect", "cursor", "--file", path}, ExitOK},
		{"again", []string{"connect", "cursor", "--file", path}, ExitUsage},
		{"undo", []string{"connect", "cursor", "--file", path, "--undo"}, ExitOK},
		{"stdio", []string{"connect", "claude-desktop", "--file", path, "--command", "/opt/switchboard", "--config", "/etc/switchboard.yaml"}, ExitOK},
		{"http-claude-desktop", []string{"connect", "claude-desktop", "--file", path, "--http"}, ExitFailure},
		{"unknown", []string{"connect", "emacs"}, ExitUsage},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.name == "stdio" {
				if _, _, errOut := runIn(t, dir, getenv, "connect", "cursor", "--file", path, "--undo"); errOut == "" {
					t.Fatal("undo of an undone file succeeded")
				}
			}
			code, out, errOut := runIn(t, dir, getenv, s.args...)
			if code != s.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, s.code, errOut)
			}
			checkGolden(t, "connect-"+s.name+".txt", out+errOut)
			if s.name == "undo" {
				if got, _ := os.ReadFile(path); string(got) != string(orig) {
					t.Error("undo did not restore the file byte for byte")
				}
			}
		})
	}
}

// TestImportEndToEnd imports a Claude Desktop config listing the demo
// server, both ways, and calls its tool through the gateway: with --write
// the gateway starts from the written config; with --apply a running
// gateway registers, seals and connects it.
func TestImportEndToEnd(t *testing.T) {
	dir := t.TempDir()
	desktop := filepath.Join(dir, "claude_desktop_config.json")
	// The demo server is this test binary re-executed ("switchboard" is
	// the gateway's own binary); the env value is a literal to seal.
	if err := os.WriteFile(desktop, []byte(fmt.Sprintf(`{
  "mcpServers": {
    "Demo Server": {
      "command": "switchboard",
      "args": ["demo-server"],
      "env": {"%s": "1", "DEMO_API_KEY": "not-used-but-secret"}
    }
  }
}`, demoEnv)), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("write", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "switchboard.yaml")
		code, out, errOut := runIn(t, dir, noEnv, "import", "--from", "claude-desktop", "--file", desktop, "--write", cfg)
		if code != ExitOK {
			t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
		}
		written, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(written), "not-used-but-secret") || !strings.Contains(string(written), "${DEMO_API_KEY}") {
			t.Fatalf("the secret is not a reference:\n%s", written)
		}
		t.Setenv("DEMO_API_KEY", "from-the-environment")
		servers := strings.TrimPrefix(string(written), "servers:")
		g := startGatewayWith(t, strings.Replace(servers, "transport: stdio", "transport: stdio\n    auto_start: true", 1))
		code, out, errOut = g.cli(t, "call", "demo-server.echo", "--arg", "text=imported")
		if code != ExitOK || !strings.Contains(out, "imported") {
			t.Errorf("call: exit %d, %q %q", code, out, errOut)
		}
	})

	t.Run("apply", func(t *testing.T) {
		t.Setenv("SWITCHBOARD_SECRET_KEY", base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")))
		g := startGatewayWith(t, " {}")
		code, out, errOut := g.cli(t, "import", "--from", "claude-desktop", "--file", desktop, "--apply")
		if code != ExitOK || !strings.Contains(out, "✓ demo-server registered") {
			t.Fatalf("import --apply: exit %d\n%s%s", code, out, errOut)
		}
		waitFor(t, "demo-server to connect", func() bool {
			_, out, _ := g.cli(t, "status")
			return strings.Contains(out, "CONNECTED")
		})
		code, out, errOut = g.cli(t, "call", "demo-server.echo", "--arg", "text=applied")
		if code != ExitOK || !strings.Contains(out, "applied") {
			t.Errorf("call: exit %d, %q %q", code, out, errOut)
		}
		// Importing again skips what the gateway has.
		_, out, _ = g.cli(t, "import", "--from", "claude-desktop", "--file", desktop, "--apply")
		if !strings.Contains(out, "already on the gateway") {
			t.Errorf("second import: %s", out)
		}
	})
}
