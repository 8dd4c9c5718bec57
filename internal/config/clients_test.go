package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBrokenDeclarations loads every file in testdata/declarations and
// checks that it fails with exactly the problems its "# want: LINE:FIELD:
// MESSAGE" lines give (each a substring of one problem), no more (E3).
func TestBrokenDeclarations(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "declarations", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("%d declaration files, want at least 8", len(files))
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var wants []string
			for _, line := range strings.Split(string(data), "\n") {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					wants = append(wants, w)
				}
			}
			if len(wants) == 0 {
				t.Fatal("no # want: line")
			}
			_, err = Load(path, envFunc(nil))
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Load = %v, want *Errors", err)
			}
			var got []string
			for _, e := range *errs {
				if e.File != path {
					t.Errorf("error %q names file %q, want %q", e, e.File, path)
				}
				got = append(got, fmt.Sprintf("%d:%s: %s", e.Line, e.Field, e.Msg))
			}
			for i, w := range wants {
				if i >= len(got) || !strings.Contains(got[i], w) {
					t.Errorf("problem %d: want %q\ngot:\n%s", i, w, strings.Join(got, "\n"))
				}
			}
			if len(got) != len(wants) {
				t.Errorf("%d problems, want %d:\n%s", len(got), len(wants), strings.Join(got, "\n"))
			}
		})
	}
}

func TestParseClients(t *testing.T) {
	const yml = `servers:
  fs: {transport: stdio, command: npx}
  git: {transport: stdio, command: uvx, prefix: vcs}
clients:
  claude-code:
    mcp_tools:
      required: [fs, git]
      optional: []
    role_restrictions:
      review:
        allowed_tools: [fs.read_file, vcs.*, bash]
  cursor: {mcp_tools: {recommended: [git]}}
  bare:
`
	cfg, err := Parse("c.yaml", []byte(yml), envFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*Client{
		"claude-code": {Name: "claude-code", Pos: Pos{5, 3},
			MCPTools:         MCPTools{Required: []string{"fs", "git"}, Optional: []string{}},
			RoleRestrictions: map[string][]string{"review": {"fs.read_file", "vcs.*", "bash"}}},
		"cursor": {Name: "cursor", Pos: Pos{12, 3}, MCPTools: MCPTools{Recommended: []string{"git"}}},
		"bare":   {Name: "bare", Pos: Pos{13, 3}},
	}
	if diff := cmp.Diff(want, cfg.Clients); diff != "" {
		t.Errorf("clients (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"bare", "claude-code", "cursor"}, cfg.ClientNames()); diff != "" {
		t.Errorf("ClientNames (-want +got):\n%s", diff)
	}
	wantReqs := []Requirement{{LevelRequired, "fs", 0}, {LevelRequired, "git", 1}}
	if diff := cmp.Diff(wantReqs, cfg.Clients["claude-code"].MCPTools.Requirements()); diff != "" {
		t.Errorf("Requirements (-want +got):\n%s", diff)
	}
	for field, want := range map[string]Pos{
		"clients.claude-code." + wantReqs[1].Field():                    {7, 22},
		"clients.claude-code.role_restrictions.review.allowed_tools[1]": {11, 39},
		"clients.cursor.mcp_tools.recommended[0]":                       {12, 38},
	} {
		if got := cfg.Pos[field]; got != want {
			t.Errorf("Pos[%q] = %v, want %v", field, got, want)
		}
	}
}

// TestClientsSkipUnknowableChecks: when a server definition cannot be read,
// or a server is unprefixed, a name cannot be called unknown.
func TestClientsSkipUnknowableChecks(t *testing.T) {
	tests := []struct {
		name, yml string
		wantErrs  int
	}{
		{"broken server", "servers:\n  fs: [1]\nclients:\n  c: {mcp_tools: {required: [nope]}}\n", 1},
		{"unprefixed server", "servers:\n  fs: {transport: stdio, command: x, prefix: \"\"}\n" +
			"clients:\n  c: {role_restrictions: {r: {allowed_tools: [nope.x]}}}\n", 0},
		{"unprefixed server, unknown mcp_tools server", "servers:\n  fs: {transport: stdio, command: x, prefix: \"\"}\n" +
			"clients:\n  c: {mcp_tools: {optional: [nope]}, role_restrictions: {r: {allowed_tools: [nope.x]}}}\n", 1},
		{"no servers", "clients:\n  c: {mcp_tools: {required: [fs]}}\n", 1},
		{"broken server, syntax still checked", "servers:\n  fs: [1]\nclients:\n  c: {role_restrictions: {r: {allowed_tools: [nope.x, .x]}}}\n", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.yml), envFunc(nil))
			var n int
			var errs *Errors
			if errors.As(err, &errs) {
				n = len(*errs)
			}
			if n != tc.wantErrs {
				t.Errorf("%d problems, want %d: %v", n, tc.wantErrs, err)
			}
		})
	}
}
