package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(string) string { return "" }
	code = Run(t.Context(), args, strings.NewReader(""), &out, &errb, getenv)
	return code, out.String(), errb.String()
}

// TestHelpGolden pins the --help texts: they are documentation, so a change
// to them should be deliberate (go test ./internal/cli -update).
func TestHelpGolden(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"stdio", "--help"}, {"demo-server", "--help"},
		{"status", "--help"}, {"start", "--help"}, {"call", "--help"}, {"servers", "add", "--help"},
		{"config", "validate", "--help"}, {"check", "--help"}, {"tools", "quarantined", "--help"}, {"tools", "approve", "--help"},
		{"keys", "create", "--help"}, {"grant", "--help"}, {"escalations", "--help"}, {"approvals", "--help"},
		{"import", "--help"}, {"connect", "--help"}, {"oauth", "--help"}, {"oauth", "clients", "--help"}, {"oauth", "grants", "--help"},
		{"servers", "probe", "--help"}, {"servers", "auth", "--help"}, {"connect-account", "--help"}} {
		name := strings.Join(args, "_")
		t.Run(name, func(t *testing.T) {
			code, out, _ := run(t, args...)
			if code != ExitOK {
				t.Fatalf("exit %d", code)
			}
			golden := filepath.Join("testdata", strings.TrimLeft(name, "-")+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if out != string(want) {
				t.Errorf("output differs from %s:\n%s", golden, out)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("servers:\n  a.b:\n    transport: carrier-pigeon\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"unknown command", []string{"frobnicate"}, ExitUsage, "unknown command"},
		{"unknown flag", []string{"serve", "--nope"}, ExitUsage, "unknown flag"},
		{"bad config", []string{"serve", "--config", bad}, ExitUsage, "bad.yaml:2:3: servers.a.b"},
		{"missing config", []string{"serve", "--config", filepath.Join(dir, "nope.yaml")}, ExitUsage, "nope.yaml"},
		{"bad log level", []string{"serve", "--log-level", "loud", "--store", filepath.Join(dir, "x.db")}, ExitUsage, "log level"},
		{"bad error rate", []string{"demo-server", "--error-rate", "2"}, ExitUsage, "--error-rate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, "version")
	if code != ExitOK || !strings.HasPrefix(out, "switchboard "+Version+" (") {
		t.Errorf("version: exit %d, %q", code, out)
	}
}
