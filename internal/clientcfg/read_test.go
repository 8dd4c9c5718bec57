package clientcfg

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if got != string(want) {
		t.Errorf("differs from %s:\n%s", path, got)
	}
}

// fixtures are client files written from each client's documented format.
var fixtures = []struct {
	file   string
	client Client
	// secrets are the values that must not survive into the YAML.
	secrets []string
}{
	{"claude_desktop_config.json", ClaudeDesktop, []string{"ghp_FAKEfakeFAKEfakeFAKEfakeFAKEfake0000", "BSAfakefakefakefake12345"}},
	{"cursor_mcp.json", Cursor, []string{"lin_api_FAKEfakeFAKEfakeFAKEfake00", "s3cr3t-pass"}},
	{"vscode_mcp.json", VSCode, nil},
	{"claude_code_mcp.json", ClaudeCode, []string{"ntn_FAKEfakeFAKEfakeFAKEfake000"}},
	{"windsurf_mcp_config.json", Windsurf, []string{"figd_FAKEfakeFAKEfakeFAKE", "xoxb-0000000000-FAKEfakeFAKE"}},
	{"broken.json", ClaudeDesktop, []string{"sk-FAKEfakeFAKEfakeFAKEfake"}},
}

func readFixture(t *testing.T, file string, c Client) *File {
	t.Helper()
	path := filepath.Join("testdata", "clients", file)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Read(path, data, c, &Options{Home: "/home/alice", Workspace: "/work/project"})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// describe renders what Read found, the way a reviewer checks it.
func describe(t *testing.T, f *File) string {
	var b strings.Builder
	var servers []*config.Server
	for _, e := range f.Entries {
		servers = append(servers, e.Server)
		fmt.Fprintf(&b, "# %s (%s:%d:%d)\n", e.Key, filepath.Base(f.Path), e.Line, e.Column)
		for _, s := range e.Secrets {
			fmt.Fprintf(&b, "#   secret %s at line %d\n", s, s.Line)
		}
		for _, n := range e.Notes {
			fmt.Fprintf(&b, "#   note: %s\n", n)
		}
	}
	y, err := YAML(servers, "  ")
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString("servers:\n")
	b.Write(y)
	for _, p := range f.Problems {
		fmt.Fprintf(&b, "# problem: %s\n", strings.Replace(p.Error(), filepath.Join("testdata", "clients")+string(filepath.Separator), "", 1))
	}
	return b.String()
}

// TestReadFixtures converts each client's file and pins the result; no
// secret of the fixture may appear in it.
func TestReadFixtures(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.file, func(t *testing.T) {
			f := readFixture(t, fx.file, fx.client)
			got := describe(t, f)
			for _, s := range fx.secrets {
				if strings.Contains(got, s) {
					t.Errorf("secret %q copied in clear:\n%s", s, got)
				}
			}
			golden(t, strings.TrimSuffix(fx.file, ".json")+".golden", got)
		})
	}
}

// TestRoundTrip writes the converted servers as a switchboard config and
// reads it back with the config package: the gateway gets exactly the
// definitions shown, and WithSecrets restores each literal value.
func TestRoundTrip(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.file, func(t *testing.T) {
			f := readFixture(t, fx.file, fx.client)
			var servers []*config.Server
			for _, e := range f.Entries {
				servers = append(servers, e.Server)
			}
			y, err := YAML(servers, "  ")
			if err != nil {
				t.Fatal(err)
			}
			// Every ${VAR} resolves to a marker, so expansion is visible.
			getenv := func(k string) string {
				if strings.Contains(string(y), "${"+k+"}") {
					return "<" + k + ">"
				}
				return ""
			}
			cfg, err := config.Parse("import.yaml", append([]byte("servers:\n"), y...), getenv)
			if err != nil {
				t.Fatalf("%v\n%s", err, y)
			}
			if len(cfg.Servers) != len(f.Entries) {
				t.Fatalf("read back %d servers, want %d", len(cfg.Servers), len(f.Entries))
			}
			byName := map[string]*config.Server{}
			for _, s := range cfg.Servers {
				byName[s.Name] = s
			}
			for i, e := range f.Entries {
				got := byName[e.Server.Name]
				if got == nil {
					t.Fatalf("server %q not read back", e.Server.Name)
				}
				if got.Name != e.Server.Name || got.Transport != e.Server.Transport || got.Command != e.Server.Command ||
					got.URL != e.Server.URL || got.Cwd != e.Server.Cwd || !reflect.DeepEqual(got.Args, e.Server.Args) ||
					!reflect.DeepEqual(got.AutoStart, e.Server.AutoStart) {
					t.Errorf("server %d: read back %+v, want %+v", i, got, e.Server)
				}
				lit := e.WithSecrets()
				for _, s := range e.Secrets {
					group, key, _ := strings.Cut(s.Field, ".")
					m, back := lit.Env, got.Env
					if group == "headers" {
						m, back = lit.Headers, got.Headers
					}
					if !strings.Contains(back[key], "<"+s.Var+">") {
						t.Errorf("%s.%s reads back as %q, want a reference to %s", e.Server.Name, s.Field, back[key], s.Var)
					}
					if strings.ReplaceAll(m[key], "$$", "$") != s.value {
						t.Errorf("%s.%s: WithSecrets does not restore the literal value", e.Server.Name, s.Field)
					}
				}
			}
		})
	}
}

func TestReadFileErrors(t *testing.T) {
	tests := []struct {
		name, data string
		client     Client
		want       string
	}{
		{"broken json", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n    \"b\": {}\n  }\n}", ClaudeDesktop, `f.json:4:5: not valid JSON: unexpected '"' after the value of "a": want , or }`},
		{"empty", "", Cursor, "f.json:1:1: not valid JSON: empty file"},
		{"not object", "[1]", Cursor, "f.json:1:1: must be a JSON object, got a list"},
		{"no servers", `{"globalShortcut": "x"}`, ClaudeDesktop, `f.json:1:1: no "mcpServers" object`},
		{"vscode wants servers", `{"mcpServers": {}}`, VSCode, `no "servers" object`},
		{"servers not object", `{"mcpServers": []}`, Windsurf, "f.json:1:16: mcpServers: must be an object"},
		{"unterminated comment", "{/* x", VSCode, "unterminated /* comment"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read("f.json", []byte(tc.data), tc.client, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestVSCodeSettings(t *testing.T) {
	data := `{"editor.fontSize": 14, "mcp": {"servers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}}`
	f, err := Read("settings.json", []byte(data), VSCode, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Entries) != 1 || f.Entries[0].Server.Name != "time" || f.Entries[0].Server.Command != "uvx" {
		t.Errorf("entries %+v", f.Entries)
	}
}

func TestSecretDetection(t *testing.T) {
	tests := []struct {
		group, name, value string
		want               bool
	}{
		{"env", "GITHUB_PERSONAL_ACCESS_TOKEN", "abc123", true},
		{"env", "OPENAI_API_KEY", "whatever", true},
		{"env", "DB_PASSWORD", "hunter2", true},
		{"env", "MEMORY_FILE_PATH", "/tmp/x.jsonl", false},
		{"env", "AUTH_CONFIG_PATH", "/etc/auth.json", false},
		{"env", "TOKEN_LIMIT", "10000", false},
		{"env", "DEBUG", "true", false},
		{"env", "SOME_SETTING", "sk-abcdefghijklmnopqrstuvwx", true},
		{"env", "DATABASE_URL", "postgres://u:p@h/db", true},
		{"env", "DATABASE_URL", "postgres://localhost/db", false},
		{"headers", "Authorization", "Basic dXNlcjpwYXNz", true},
		{"headers", "X-Api-Key", "k", true},
		{"headers", "Accept", "application/json", false},
	}
	for _, tc := range tests {
		if got := isSecret(tc.group, tc.name, tc.value); got != tc.want {
			t.Errorf("isSecret(%s, %s) = %v, want %v", tc.group, tc.name, got, tc.want)
		}
	}
}

func TestPaths(t *testing.T) {
	getenv := func(k string) string {
		if k == "APPDATA" {
			return `C:\Users\a\AppData\Roaming`
		}
		return ""
	}
	tests := []struct {
		client Client
		goos   string
		want   string // the last candidate: the user's file
	}{
		{ClaudeDesktop, "darwin", "/home/a/Library/Application Support/Claude/claude_desktop_config.json"},
		{ClaudeDesktop, "linux", "/home/a/.config/Claude/claude_desktop_config.json"},
		{ClaudeDesktop, "windows", filepath.Join(`C:\Users\a\AppData\Roaming`, "Claude", "claude_desktop_config.json")},
		{Cursor, "linux", "/home/a/.cursor/mcp.json"},
		{VSCode, "darwin", "/home/a/Library/Application Support/Code/User/mcp.json"},
		{VSCode, "linux", "/home/a/.config/Code/User/mcp.json"},
		{ClaudeCode, "linux", "/home/a/.claude.json"},
		{Windsurf, "darwin", "/home/a/.codeium/windsurf/mcp_config.json"},
	}
	for _, tc := range tests {
		ps := Paths(tc.client, Env{GOOS: tc.goos, Home: "/home/a", Workdir: "/w", Getenv: getenv})
		if got := ps[len(ps)-1]; got != tc.want {
			t.Errorf("%s on %s: %q, want %q", tc.client, tc.goos, got, tc.want)
		}
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".cursor"), 0o755); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(dir, ".cursor", "mcp.json")
	if err := os.WriteFile(project, []byte(`{"mcpServers":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Find(Cursor, Env{GOOS: "linux", Home: t.TempDir(), Workdir: dir}); err != nil || got != project {
		t.Errorf("Find = %q, %v; want the project's file %q", got, err, project)
	}
	if _, err := Find(Windsurf, Env{GOOS: "linux", Home: t.TempDir(), Workdir: dir}); err == nil || !strings.Contains(err.Error(), "--file") {
		t.Errorf("Find with no file: %v", err)
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		path, data string
		want       Client
	}{
		{"x/mcp.json", `{"servers": {}}`, VSCode},
		{"x/settings.json", `{"mcp": {"servers": {}}}`, VSCode},
		{"x/.cursor/mcp.json", `{"mcpServers": {}}`, Cursor},
		{"x/mcp_config.json", `{"mcpServers": {}}`, Windsurf},
		{"x/claude_desktop_config.json", `{"mcpServers": {}}`, ClaudeDesktop},
		{"x/.mcp.json", `{"mcpServers": {}}`, ClaudeCode},
		{"x/other.json", `{"mcpServers": {}}`, ClaudeCode},
	}
	for _, tc := range tests {
		if got := Detect(tc.path, []byte(tc.data)); got != tc.want {
			t.Errorf("Detect(%s) = %s, want %s", tc.path, got, tc.want)
		}
	}
}
