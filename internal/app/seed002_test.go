package app_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/testdeps"
)

// TestSeed002FileServes runs seed 002's own configuration file
// (testdata/seeds/002_mcp_servers.yaml: mcp_servers:, mcp_settings:, no
// transport, one-string commands) with only the commands replaced: each npm
// package becomes `switchboard demo-server`, the gateway's demo server,
// written as one string too. The auto-started servers serve their tools; the
// one the seed leaves to its user starts on request.
func TestSeed002FileServes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testdeps.RepoRoot(), "testdata", "seeds", "002_mcp_servers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	commands := regexp.MustCompile(`(?m)^(\s+command: )"npx -y [^"]*"$`)
	if n := len(commands.FindAllString(string(raw), -1)); n != 3 {
		t.Fatalf("the seed's file has %d npx commands, want 3", n)
	}
	yaml := commands.ReplaceAllString(string(raw), `${1}"switchboard demo-server"`)
	g := startGateway(t, yaml, nil)

	for name, want := range map[string]struct{ status, health string }{
		"filesystem": {"CONNECTED", "tool_call"}, "git": {"CONNECTED", "tool_call"}, "code-search": {"DISCONNECTED", "ping"},
	} {
		s := g.serverByName(t, name)
		h, _ := s["health"].(map[string]any)
		if s["status"] != want.status || s["transport_type"] != "STDIO" || h["method"] != want.health {
			t.Errorf("server %s = %v, want %s over STDIO, health method %s", name, s, want.status, want.health)
		}
	}
	cs := g.connect(t, "/mcp")
	tools := toolNames(t, cs)
	for _, name := range []string{"filesystem.echo", "git.echo"} {
		if tools[name] == nil {
			t.Errorf("tools/list lacks %s: %v", name, keys(tools))
		}
	}
	for name := range tools {
		if strings.HasPrefix(name, "code-search.") {
			t.Errorf("tools/list has %s before code-search was started", name)
		}
	}
	if text, res := callText(t, cs, "git.echo", map[string]any{"text": "seed 002"}); res.IsError || text != "seed 002" {
		t.Errorf("git.echo = %q (isError %v)", text, res.IsError)
	}

	// auto_start: false: the user manages its lifecycle.
	if code, body := g.rest(t, "POST", "/api/v1/aggregator/servers/code-search/connect?wait=true", nil); code != 200 || body["status"] != "CONNECTED" {
		t.Fatalf("connect code-search: %d %v", code, body)
	}
	waitFor(t, "code-search tools listed", func() bool { return toolNames(t, cs)["code-search.add"] != nil })
	if text, res := callText(t, cs, "code-search.add", map[string]any{"a": 2, "b": 3}); res.IsError || text != "5" {
		t.Errorf("code-search.add = %q (isError %v)", text, res.IsError)
	}
}
