package clientcfg

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestConnectUndo points every fixture at the gateway, checks that the
// client's format still reads (the gateway is its only server, in the
// fields that client uses) and that nothing else in the file moved, then
// undoes and compares byte for byte.
func TestConnectUndo(t *testing.T) {
	stdio := Gateway{Command: "/usr/local/bin/switchboard", Args: []string{"stdio", "--config", "/etc/switchboard.yaml"}}
	http := Gateway{URL: "http://127.0.0.1:8080/mcp", Key: "sbk_test"}
	tests := []struct {
		file   string
		client Client
		g      Gateway
		keys   []string // the gateway entry's keys, as the client's format names them
	}{
		{"claude_desktop_config.json", ClaudeDesktop, stdio, []string{"command", "args"}},
		{"cursor_mcp.json", Cursor, http, []string{"url", "headers"}},
		{"cursor_mcp.json", Cursor, stdio, []string{"command", "args"}},
		{"vscode_mcp.json", VSCode, http, []string{"type", "url", "headers"}},
		{"vscode_mcp.json", VSCode, stdio, []string{"type", "command", "args"}},
		{"claude_code_mcp.json", ClaudeCode, http, []string{"type", "url", "headers"}},
		{"windsurf_mcp_config.json", Windsurf, http, []string{"serverUrl", "headers"}},
	}
	for _, tc := range tests {
		t.Run(tc.file+"/"+strings.Join(tc.keys, ","), func(t *testing.T) {
			orig, err := os.ReadFile(filepath.Join("testdata", "clients", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(path, orig, 0o600); err != nil {
				t.Fatal(err)
			}
			backup, err := Connect(path, tc.client, tc.g)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Read(path, got, tc.client, nil)
			if err != nil {
				t.Fatalf("%v\n%s", err, got)
			}
			if len(f.Entries) != 1 || len(f.Problems) != 0 || f.Entries[0].Key != EntryName {
				t.Fatalf("entries %+v, problems %v\n%s", f.Entries, f.Problems, got)
			}
			s := f.Entries[0].Server
			if tc.g.URL != "" && (s.URL != tc.g.URL || s.Transport != "http") {
				t.Errorf("server %+v, want http %s", s, tc.g.URL)
			}
			if tc.g.URL == "" && (s.Command != tc.g.Command || !slices.Equal(s.Args, tc.g.Args)) {
				t.Errorf("server %+v, want %s %v", s, tc.g.Command, tc.g.Args)
			}
			root, _ := parseJSONC(got)
			entry := root.get(tc.client.serversKey()).get(EntryName)
			var keys []string
			for _, m := range entry.members {
				keys = append(keys, m.key)
			}
			if !slices.Equal(keys, tc.keys) {
				t.Errorf("entry keys %v, want %v", keys, tc.keys)
			}
			// Everything before and after the server list is untouched.
			origRoot, _ := parseJSONC(orig)
			list := origRoot.get(tc.client.serversKey())
			newList := root.get(tc.client.serversKey())
			if !bytes.Equal(orig[:list.start], got[:newList.start]) || !bytes.Equal(orig[list.end:], got[newList.end:]) {
				t.Errorf("bytes outside the server list changed:\n%s", got)
			}
			if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("mode after connect: %v %v", st.Mode(), err)
			}
			if _, err := Connect(path, tc.client, tc.g); !errors.Is(err, ErrConnected) {
				t.Errorf("second connect: %v, want ErrConnected", err)
			}
			if err := Undo(path); err != nil {
				t.Fatal(err)
			}
			back, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(back, orig) {
				t.Errorf("undo did not restore the original byte for byte (%v)", err)
			}
			if _, err := os.Stat(backup); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("backup left behind: %v", err)
			}
			if err := Undo(path); err == nil {
				t.Error("a second undo succeeded")
			}
		})
	}
}

func TestRewrite(t *testing.T) {
	g := Gateway{Command: "sb", Args: []string{"stdio"}}
	tests := []struct {
		name, in string
		client   Client
		want     string
		err      string
	}{
		{"adds the list", "{\n\t\"theme\": \"dark\"\n}\n", ClaudeDesktop,
			"{\n\t\"theme\": \"dark\",\n\t\"mcpServers\": {\n\t\t\"switchboard\": {\n\t\t\t\"command\": \"sb\",\n\t\t\t\"args\": [\n\t\t\t\t\"stdio\"\n\t\t\t]\n\t\t}\n\t}\n}\n", ""},
		{"empty object", "{}", Cursor, "{\n  \"mcpServers\": {\n    \"switchboard\": {\n      \"command\": \"sb\",\n      \"args\": [\n        \"stdio\"\n      ]\n    }\n  }\n}", ""},
		{"keeps comments", "{\n  // mine\n  \"servers\": {}, /* keep */ \"x\": 1\n}", VSCode,
			"{\n  // mine\n  \"servers\": {\n    \"switchboard\": {\n      \"type\": \"stdio\",\n      \"command\": \"sb\",\n      \"args\": [\n        \"stdio\"\n      ]\n    }\n  }, /* keep */ \"x\": 1\n}", ""},
		{"broken", "{\n  \"mcpServers\": {", ClaudeDesktop, "", "f.json:2:18: not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Rewrite("f.json", []byte(tc.in), tc.client, g)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Errorf("got %q, %v\nwant %q", got, err, tc.want)
			}
		})
	}
	if _, err := Rewrite("f.json", []byte("{}"), ClaudeDesktop, Gateway{URL: "http://x/mcp"}); err == nil || !strings.Contains(err.Error(), "--stdio") {
		t.Errorf("http for Claude Desktop: %v", err)
	}
}
