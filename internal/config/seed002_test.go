package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestSeed002File loads seed 002's own configuration file as the seed
// writes it: mcp_servers:/mcp_settings:, no transport, commands as one
// string, the seed's health checks and settings.
func TestSeed002File(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "seeds", "002_mcp_servers.yaml")
	cfg, err := Load(path, envFunc(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	yes, no := true, false
	want := []*Server{
		{
			Name: "code-search", Transport: "stdio", Command: "npx",
			Args:    []string{"-y", "@modelcontextprotocol/server-code-search", "--index-path", ".code-index"},
			Package: "@modelcontextprotocol/server-code-search", AutoStart: &no, DefaultAccess: "allow",
			HealthCheck: &HealthCheck{Method: "ping", Timeout: Seconds(2 * time.Second)},
		},
		{
			Name: "filesystem", Transport: "stdio", Command: "npx",
			Args:    []string{"-y", "@modelcontextprotocol/server-filesystem", "/allowed/path"},
			Package: "@modelcontextprotocol/server-filesystem", AutoStart: &yes, DefaultAccess: "allow",
			HealthCheck: &HealthCheck{Method: "tool_call", Tool: "filesystem.list_directory",
				Args: map[string]any{"path": "/tmp"}, Timeout: Seconds(5 * time.Second)},
		},
		{
			Name: "git", Transport: "stdio", Command: "npx",
			Args:    []string{"-y", "@modelcontextprotocol/server-git"},
			Package: "@modelcontextprotocol/server-git", AutoStart: &yes, DefaultAccess: "allow",
			HealthCheck: &HealthCheck{Method: "tool_call", Tool: "git.status", Timeout: Seconds(3 * time.Second)},
		},
	}
	opts := cmp.Options{cmp.AllowUnexported(Server{}), cmpopts.IgnoreFields(Server{}, "Pos")}
	if diff := cmp.Diff(want, cfg.Servers, opts); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}
	wantSettings := DefaultSettings()
	wantSettings.HealthCheckInterval = 30 * time.Second
	if diff := cmp.Diff(wantSettings, cfg.Settings); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	// The split words point at the command's line.
	if got, want := cfg.Server("filesystem").Pos["args[2]"], cfg.Server("filesystem").Pos["command"]; got != want || got.Line != 7 {
		t.Errorf(`Pos["args[2]"] = %v, want the command's position %v (line 7)`, got, want)
	}
}

// TestSeed002Defaults: seed 002's defaults are the gateway's.
func TestSeed002Defaults(t *testing.T) {
	s := DefaultSettings()
	got := map[string]any{
		"auto_start_default": s.AutoStartDefault, "health_check_interval_seconds": s.HealthCheckInterval,
		"health_check_timeout_seconds": s.HealthCheckTimeout, "startup_timeout_seconds": s.StartupTimeout,
		"shutdown_timeout_seconds": s.ShutdownTimeout, "log_directory": s.LogDirectory,
		"restart_on_failure": s.RestartOnFailure, "max_restart_attempts": s.MaxRestartAttempts,
	}
	want := map[string]any{
		"auto_start_default": false, "health_check_interval_seconds": 30 * time.Second,
		"health_check_timeout_seconds": 5 * time.Second, "startup_timeout_seconds": 10 * time.Second,
		"shutdown_timeout_seconds": 5 * time.Second, "log_directory": "logs/mcp_servers",
		"restart_on_failure": true, "max_restart_attempts": 3,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-seed 002 +gateway):\n%s", diff)
	}
}

// TestSeed002Errors: the seed's spellings, ranges and shorthands are
// checked with the position and the key as written.
func TestSeed002Errors(t *testing.T) {
	const file = "mcp.yaml"
	tests := []struct {
		name string
		yaml string
		want []wantErr
	}{
		{
			name: "both spellings of servers",
			yaml: "servers: {}\nmcp_servers:\n  a: {command: x}\n",
			want: []wantErr{{Line: 2, Field: "mcp_servers", Msg: `"servers" and "mcp_servers" are the same section`}},
		},
		{
			name: "both spellings of settings",
			yaml: "mcp_settings: {log_level: info}\nsettings: {log_level: debug}\n",
			want: []wantErr{{Line: 2, Field: "settings", Msg: `"mcp_settings" and "settings" are the same section`}},
		},
		{
			name: "problems name mcp_servers",
			yaml: "mcp_servers:\n  a:\n    command: x\n    max_restart_attempts: 11\n    health_check:\n      timeout_seconds: 31\n",
			want: []wantErr{
				{Line: 4, Field: "mcp_servers.a.max_restart_attempts", Msg: "must be between 1 and 10 (got 11)"},
				{Line: 6, Field: "mcp_servers.a.health_check.timeout_seconds", Msg: "must be between 1 and 30 seconds (got 31)"},
			},
		},
		{
			name: "unknown field under mcp_servers",
			yaml: "mcp_servers:\n  a:\n    command: x\n    comand: y\n",
			want: []wantErr{{Line: 4, Field: "mcp_servers.a.comand", Msg: `unknown field "comand"`}},
		},
		{
			name: "seed ranges of mcp_settings",
			yaml: "mcp_settings:\n  health_check_interval_seconds: 301\n  startup_timeout_seconds: 61\n  shutdown_timeout_seconds: 31\n  max_restart_attempts: 11\n  colour: blue\n",
			want: []wantErr{
				{Line: 2, Field: "mcp_settings.health_check_interval_seconds", Msg: "must be between 10 and 300 seconds (got 301)"},
				{Line: 3, Field: "mcp_settings.startup_timeout_seconds", Msg: "must be between 1 and 60 seconds (got 61)"},
				{Line: 4, Field: "mcp_settings.shutdown_timeout_seconds", Msg: "must be between 1 and 30 seconds (got 31)"},
				{Line: 5, Field: "mcp_settings.max_restart_attempts", Msg: "must be between 1 and 10 (got 11)"},
				{Line: 6, Field: "mcp_settings.colour", Msg: `unknown setting "colour"`},
			},
		},
		{
			name: "seed ranges at the low end",
			yaml: "settings:\n  health_check_interval_seconds: 9\n  health_check_timeout_seconds: 0.5\n  shutdown_timeout_seconds: 0.5\n",
			want: []wantErr{
				{Line: 2, Field: "settings.health_check_interval_seconds", Msg: "must be between 10 and 300 seconds (got 9)"},
				{Line: 3, Field: "settings.health_check_timeout_seconds", Msg: "must be between 1 and 30 seconds (got 0.5)"},
				{Line: 4, Field: "settings.shutdown_timeout_seconds", Msg: "must be between 1 and 30 seconds (got 0.5)"},
			},
		},
		{
			name: "per-server overrides in range",
			yaml: "servers:\n  a:\n    command: x\n    startup_timeout_seconds: 61\n    shutdown_timeout_seconds: 0.5\n",
			want: []wantErr{
				{Line: 4, Field: "servers.a.startup_timeout_seconds", Msg: "must be between 1 and 60 seconds (got 61)"},
				{Line: 5, Field: "servers.a.shutdown_timeout_seconds", Msg: "must be between 1 and 30 seconds (got 0.5)"},
			},
		},
		{
			name: "unterminated quote in a one-string command",
			yaml: "mcp_servers:\n  a:\n    command: \"npx -y 'pkg\"\n",
			want: []wantErr{{Line: 3, Field: "mcp_servers.a.command", Msg: "unterminated single quote"}},
		},
		{
			name: "a pipe in a one-string command",
			yaml: "mcp_servers:\n  a:\n    command: \"server | tee log\"\n",
			want: []wantErr{{Line: 3, Field: "mcp_servers.a.command", Msg: `'|' at offset 7 needs a shell`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(file, []byte(tt.yaml), envFunc(nil))
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse error = %v, want Errors", err)
			}
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(errs), len(tt.want), err)
			}
			for i, w := range tt.want {
				e := errs[i]
				if e.File != file || e.Line != w.Line || e.Field != w.Field || !strings.Contains(e.Msg, w.Msg) {
					t.Errorf("problem %d = %s, want %s:%d: %s: …%s…", i, e.Error(), file, w.Line, w.Field, w.Msg)
				}
			}
		})
	}
}

// TestCommandShorthands: a one-string command is split only when args is
// absent, and only a command implies stdio.
func TestCommandShorthands(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		transport string
		command   string
		args      []string
	}{
		{"split", "command: npx -y pkg /srv/my\\ data", "stdio", "npx", []string{"-y", "pkg", "/srv/my data"}},
		{"args key keeps the command whole", "command: \"/opt/My App/server\"\nargs: []", "stdio", "/opt/My App/server", nil},
		{"args given", "command: \"run me\"\nargs: [x]", "stdio", "run me", []string{"x"}},
		{"one word", "command: npx", "stdio", "npx", nil},
		{"quotes", `command: "python3 -c 'print(1)' \"a b\" ''"`, "stdio", "python3", []string{"-c", "print(1)", "a b", ""}},
		{"explicit transport kept", "transport: stdio\ncommand: a b", "stdio", "a", []string{"b"}},
		{"the demo server", "command: switchboard demo-server", "stdio", SelfCommand, []string{"demo-server"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := "mcp_servers:\n  a:\n"
			for _, l := range strings.Split(tt.yaml, "\n") {
				yaml += "    " + l + "\n"
			}
			cfg, err := Parse("c.yaml", []byte(yaml), envFunc(nil))
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, yaml)
			}
			s := cfg.Server("a")
			if s.Transport != tt.transport || s.Command != tt.command || !cmp.Equal(s.Args, tt.args, cmpopts.EquateEmpty()) {
				t.Errorf("got transport %q command %q args %q, want %q %q %q", s.Transport, s.Command, s.Args, tt.transport, tt.command, tt.args)
			}
		})
	}
}

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		line    string
		want    []string
		wantErr string
	}{
		{line: "a  b\tc", want: []string{"a", "b", "c"}},
		{line: `a\ b c`, want: []string{"a b", "c"}},
		{line: `'a "b"' "c 'd'" e`, want: []string{`a "b"`, `c 'd'`, "e"}},
		{line: `"a\"b\\c\d"`, want: []string{`a"b\c\d`}},
		{line: `pre'fix'"ed"`, want: []string{"prefixed"}},
		{line: "a \\\n b", want: []string{"a", "b"}},
		{line: "--opt=a#b", want: []string{"--opt=a#b"}},
		{line: "'$HOME' '|'", want: []string{"$HOME", "|"}},
		{line: "", want: nil},
		{line: "a 'b", wantErr: "unterminated single quote at offset 2"},
		{line: `a "b`, wantErr: "unterminated double quote at offset 2"},
		{line: `a\`, wantErr: "ends with a backslash"},
		{line: "a $HOME", wantErr: `'$' at offset 2 needs a shell`},
		{line: `a "$HOME"`, wantErr: `'$' inside double quotes`},
		{line: "a `b`", wantErr: "'`' at offset 2 needs a shell"},
		{line: "a > out", wantErr: "'>' at offset 2"},
		{line: "a; b", wantErr: "';' at offset 1"},
		{line: "a # note", wantErr: "'#' at offset 2"},
	}
	for _, tt := range tests {
		got, err := splitCommand(tt.line)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("splitCommand(%q) error = %v, want …%s…", tt.line, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("splitCommand(%q): %v", tt.line, err)
		case !cmp.Equal(got, tt.want):
			t.Errorf("splitCommand(%q) = %q, want %q", tt.line, got, tt.want)
		}
	}
}
