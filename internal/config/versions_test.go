package config

import (
	"strings"
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

func TestFrontAllowedHostsAndOrigins(t *testing.T) {
	none := func(string) string { return "" }
	cfg, err := Parse("f.yaml", []byte("servers: {}\nfront:\n  allowed_hosts: [gw.example.com, 10.0.0.5]\n  allowed_origins: [https://app.example.com, http://localhost:5173]\n"), none)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"gw.example.com", "10.0.0.5"}, cfg.Front.AllowedHosts); d != "" {
		t.Errorf("AllowedHosts (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"https://app.example.com", "http://localhost:5173"}, cfg.Front.AllowedOrigins); d != "" {
		t.Errorf("AllowedOrigins (-want +got):\n%s", d)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"front:\n  allowed_origins: [app.example.com]\n", `f.yaml:3:21: front.allowed_origins[0]: "app.example.com" is not an origin`},
		{"front:\n  allowed_origins:\n    - https://ok.example\n    - https://x.example/path\n", `f.yaml:5:7: front.allowed_origins[1]: "https://x.example/path" is not an origin`},
		{"front:\n  allowed_hosts: [\"https://gw.example.com/\"]\n", `f.yaml:3:19: front.allowed_hosts[0]: "https://gw.example.com/" is not a host name`},
		{"front:\n  allowed_hosts: [\"\"]\n", `f.yaml:3:19: front.allowed_hosts[0]: must not be empty`},
		{"front:\n  allowed_hosts: gw.example.com\n", `front.allowed_hosts`},
	} {
		_, err := Parse("f.yaml", []byte("servers: {}\n"+tt.yaml), none)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want it to contain %q", tt.yaml, err, tt.want)
		}
	}
}

func TestServerProtocolVersion(t *testing.T) {
	none := func(string) string { return "" }
	for _, v := range []string{"auto", "2025-11-25", "2026-07-28", "2024-11-05"} {
		cfg, err := Parse("p.yaml", []byte("servers:\n  a:\n    transport: stdio\n    command: x\n    protocol_version: "+v+"\n"), none)
		if err != nil {
			t.Errorf("%s: %v", v, err)
			continue
		}
		if got := cfg.Servers[0].ProtocolVersion; got != v {
			t.Errorf("%s: ProtocolVersion = %q", v, got)
		}
	}
	_, err := Parse("p.yaml", []byte("servers:\n  a:\n    transport: stdio\n    command: x\n    protocol_version: 2099-01-01\n"), none)
	if err == nil || !strings.Contains(err.Error(), `p.yaml:5:5: servers.a.protocol_version: unknown MCP revision "2099-01-01"`) {
		t.Errorf("unknown revision: %v", err)
	}
}
