package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCheckCommands: a stdio command is looked up as exec would, and a
// missing one is reported at its line with an install hint.
func TestCheckCommands(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "server.sh")
	plain := filepath.Join(dir, "notes.txt")
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{script, 0o755}, {plain, 0o644}} {
		if err := os.WriteFile(f.path, []byte("#!/bin/sh\n"), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	yaml := "mcp_servers:\n" +
		"  self: {command: switchboard demo-server}\n" +
		"  found: {command: sh -c true}\n" +
		"  missing: {command: \"npx -y pkg\", package: pkg}\n" +
		"  gone: {command: " + filepath.Join(dir, "gone") + ", package: \"@scope/srv\"}\n" +
		"  script: {command: " + script + "}\n" +
		"  relative: {command: ./server.sh, cwd: " + dir + "}\n" +
		"  plain: {command: " + plain + "}\n" +
		"  folder: {command: " + dir + "}\n" +
		"  remote: {transport: http, url: \"https://e/mcp\"}\n"
	cfg, err := Parse("c.yaml", []byte(yaml), envFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	lookPath := func(name string) (string, error) {
		if name == "sh" {
			return "/bin/sh", nil
		}
		return "", errors.New("not found")
	}
	var got []string
	for _, e := range cfg.CheckCommands(lookPath) {
		got = append(got, e.Error())
	}
	want := []string{
		`c.yaml:9:12: mcp_servers.folder.command: command "` + dir + `" is a directory: the server would fail to start`,
		`c.yaml:5:10: mcp_servers.gone.command: command "` + filepath.Join(dir, "gone") + `" does not exist: the server would fail to start (the server is the npm package @scope/srv: npm install -g @scope/srv)`,
		`c.yaml:4:13: mcp_servers.missing.command: command "npx" is not on PATH: the server would fail to start (npx comes with Node.js; the server is the npm package pkg)`,
		`c.yaml:8:11: mcp_servers.plain.command: command "` + plain + `" is not executable: the server would fail to start`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CheckCommands (-want +got):\n%s", diff)
	}
}
