package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestToolVersions(t *testing.T) {
	cfg, err := Parse("v.yaml", []byte("servers: {}\ntool_versions:\n  gh:\n    create_issue: [\"1.0.0\", \"1.1.0\"]\n    search: [\"2\"]\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string][]string{"gh": {"create_issue": {"1.0.0", "1.1.0"}, "search": {"2"}}}
	if d := cmp.Diff(want, cfg.ToolVersions); d != "" {
		t.Errorf("ToolVersions (-want +got):\n%s", d)
	}
}

func TestFrontStateless(t *testing.T) {
	cfg, err := Parse("f.yaml", []byte("servers: {}\nfront:\n  stateless: true\n"), func(string) string { return "" })
	if err != nil || !cfg.Front.Stateless {
		t.Fatalf("stateless = %v, %v", cfg.Front.Stateless, err)
	}
	if _, err := Parse("f.yaml", []byte("servers: {}\nfront:\n  stateless: maybe\n"), func(string) string { return "" }); err == nil {
		t.Error("stateless: maybe accepted")
	}
}
