package upstream

import "testing"

func TestPackageRunner(t *testing.T) {
	tests := []struct {
		command string
		args    []string
		want    string
	}{
		{"npx", []string{"-y", "@modelcontextprotocol/server-filesystem", "/tmp"}, "npx"},
		{"/usr/local/bin/npx", nil, "npx"},
		{"uvx", []string{"mcp-server-fetch"}, "uvx"},
		{"bunx", nil, "bunx"},
		{"pnpx", nil, "pnpx"},
		{"pnpm", []string{"dlx", "x"}, "pnpm dlx"},
		{"pnpm", []string{"--silent", "dlx", "x"}, "pnpm dlx"},
		{"pnpm", []string{"run", "x"}, ""},
		{"yarn", []string{"dlx", "x"}, "yarn dlx"},
		{"docker", []string{"run", "-i", "--rm", "mcp/fetch"}, "docker run"},
		{"podman", []string{"run", "-i", "img"}, "podman run"},
		{"docker", []string{"exec", "-i", "c"}, ""},
		{"uv", []string{"tool", "run", "x"}, "uv tool"},
		{"uv", []string{"run", "server.py"}, ""},
		{"pipx", []string{"run", "x"}, "pipx run"},
		{"node", []string{"server.js"}, ""},
		{"npx-wrapper", nil, ""},
		{"switchboard", []string{"demo-server"}, ""},
	}
	for _, tt := range tests {
		if got := packageRunner(tt.command, tt.args); got != tt.want {
			t.Errorf("packageRunner(%q, %q) = %q, want %q", tt.command, tt.args, got, tt.want)
		}
	}
}
