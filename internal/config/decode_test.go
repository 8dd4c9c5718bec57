package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecodeEdgeCases covers what the typed decoder must get right beyond
// the table tests, among them the cases where it reports more, or better
// placed, problems than the hand-written decoder it replaced, and aliases
// that would make a value contain itself (which hung that decoder) or grow
// without bound.
func TestDecodeEdgeCases(t *testing.T) {
	// Ten times ten times ... a: a million strings from a few lines.
	laughs := "l0: &l0 [a, a, a, a, a, a, a, a, a, a]"
	for i := 1; i <= 6; i++ {
		laughs += fmt.Sprintf(", l%d: &l%d [%s*l%d]", i, i, strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 9), i-1)
	}
	tests := []struct {
		name, yaml string
		want       []string // Error() of each problem
	}{
		{
			name: "a key with a dot does not stand for a nested key",
			yaml: "tool_versions:\n  a:\n    b: []\n  a.b:\n    c: [\"1\"]\n",
			want: []string{"f.yaml:3:5: tool_versions.a.b: needs at least one compatible version"},
		},
		{
			name: "a problem with a list item points at that item after one that failed",
			yaml: "front:\n  allowed_origins: [~, \"0\"]\n",
			want: []string{
				"f.yaml:2:21: front.allowed_origins[0]: must be a string, got null",
				`f.yaml:2:24: front.allowed_origins[1]: "0" is not an origin: want scheme://host[:port] such as https://app.example.com, without path`,
			},
		},
		{
			name: "an empty key does not hide where the server is",
			yaml: "servers:\n  a: {\"\": 1}\n",
			want: []string{
				`f.yaml:2:3: servers.a.transport: transport is required (one of "stdio", "sse" or "http")`,
				`f.yaml:2:7: servers.a.: unknown field ""`,
			},
		},
		{
			name: "the keys of a mapping whose merge failed are still checked",
			yaml: "settings:\n  listen_tls: {<<: 5, min_version: \"1.1\"}\n",
			want: []string{
				"f.yaml:2:20: settings.listen_tls: merge key (<<) needs a mapping or a list of mappings, got an integer",
				`f.yaml:2:36: settings.listen_tls.min_version: invalid value "1.1": must be one of "1.2" or "1.3"`,
			},
		},
		{
			name: "an alias to a mapping that contains it",
			yaml: "servers: &s\n  a:\n    transport: stdio\n    command: x\n    health_check: {method: tool_call, tool: t, args: {self: *s}}\n",
			want: []string{"f.yaml:5:54: servers.a.health_check.args.self.a.health_check.args: contains itself through an alias"},
		},
		{
			name: "aliases that expand to a million values",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n    health_check: {method: tool_call, tool: t, args: {" + laughs + "}}\n",
			want: []string{"f.yaml:5:91: servers.a.health_check.args.l4[7][8][8][8][9]: too large: aliases expand it to more than 100000 values"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tt.yaml), envFunc(nil))
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse error = %v, want *Errors", err)
			}
			var got []string
			for _, e := range *errs {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPosOfToolVersions: Config.Pos has the versions of tool_versions too,
// like the items of every other list.
func TestPosOfToolVersions(t *testing.T) {
	cfg, err := Parse("f.yaml", []byte("tool_versions:\n  gh:\n    create_issue: [\"1.0\", \"1.1\"]\n"), envFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Pos{"tool_versions": {1, 1}, "tool_versions.gh": {2, 3}, "tool_versions.gh.create_issue": {3, 5},
		"tool_versions.gh.create_issue[0]": {3, 20}, "tool_versions.gh.create_issue[1]": {3, 27}}
	if diff := cmp.Diff(want, cfg.Pos); diff != "" {
		t.Errorf("Pos (-want +got):\n%s", diff)
	}
}
