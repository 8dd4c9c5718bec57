// Package clientcfg reads and rewrites the MCP server lists of desktop and
// editor clients (Claude Desktop, Cursor, VS Code, Claude Code, Windsurf),
// so servers a user already configured can move into switchboard and the
// client can then be pointed at the gateway.
//
// Every client file is JSON (VS Code and Cursor allow comments and trailing
// commas); most hold an "mcpServers" object of name to definition, VS Code a
// "servers" object plus "inputs". One parser with byte positions reads them
// all, so errors name file:line:column and the entry, and [Rewrite] replaces
// the server list while every other byte of the file stays as it was.
package clientcfg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Client names a client whose configuration file format is known.
type Client string

// The clients whose files are read and rewritten.
const (
	ClaudeDesktop Client = "claude-desktop"
	Cursor        Client = "cursor"
	VSCode        Client = "vscode"
	ClaudeCode    Client = "claude-code"
	Windsurf      Client = "windsurf"
)

// Clients lists the known clients in documentation order.
func Clients() []Client { return []Client{ClaudeDesktop, Cursor, VSCode, ClaudeCode, Windsurf} }

// ParseClient returns the client named s ("claude-desktop", "cursor", ...).
func ParseClient(s string) (Client, bool) {
	for _, c := range Clients() {
		if string(c) == strings.ToLower(s) {
			return c, true
		}
	}
	return "", false
}

// serversKey is the top-level key of the client's server list.
func (c Client) serversKey() string {
	if c == VSCode {
		return "servers"
	}
	return "mcpServers"
}

// HTTP reports whether the client's file can name a remote server by URL
// (Claude Desktop's takes commands only; remote servers are added in its UI).
func (c Client) HTTP() bool { return c != ClaudeDesktop }

// Env is where [Paths] looks: the operating system, the user's home, the
// working directory (for project files) and the environment (APPDATA,
// XDG_CONFIG_HOME).
type Env struct {
	GOOS    string
	Home    string
	Workdir string
	Getenv  func(string) string
}

// Paths returns the places the client keeps its server list, most specific
// first: a project's file in the working directory before the user's.
func Paths(c Client, e Env) []string {
	getenv := e.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	// appConfig is the per-user application directory of Electron apps.
	appConfig := func(app string) string {
		switch e.GOOS {
		case "darwin":
			return filepath.Join(e.Home, "Library", "Application Support", app)
		case "windows":
			if d := getenv("APPDATA"); d != "" {
				return filepath.Join(d, app)
			}
			return filepath.Join(e.Home, "AppData", "Roaming", app)
		}
		if d := getenv("XDG_CONFIG_HOME"); d != "" {
			return filepath.Join(d, app)
		}
		return filepath.Join(e.Home, ".config", app)
	}
	var out []string
	switch c {
	case ClaudeDesktop:
		out = append(out, filepath.Join(appConfig("Claude"), "claude_desktop_config.json"))
	case Cursor:
		out = append(out, filepath.Join(e.Workdir, ".cursor", "mcp.json"), filepath.Join(e.Home, ".cursor", "mcp.json"))
	case VSCode:
		out = append(out, filepath.Join(e.Workdir, ".vscode", "mcp.json"), filepath.Join(appConfig("Code"), "User", "mcp.json"))
	case ClaudeCode:
		out = append(out, filepath.Join(e.Workdir, ".mcp.json"), filepath.Join(e.Home, ".claude.json"))
	case Windsurf:
		out = append(out, filepath.Join(e.Home, ".codeium", "windsurf", "mcp_config.json"))
	}
	return out
}

// Find returns the first of [Paths] that exists.
func Find(c Client, e Env) (string, error) {
	paths := Paths(c, e)
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("looking for the %s config: %w", c, err)
		}
	}
	return "", fmt.Errorf("no %s config found (looked in %s): give its path with --file: %w",
		c, strings.Join(paths, ", "), os.ErrNotExist)
}

// Detect guesses the client format of a file given by path: VS Code's has
// "servers" at the top (or under "mcp" in its settings.json), every other
// client's "mcpServers".
func Detect(path string, data []byte) Client {
	root, err := parseJSONC(data)
	if err != nil || root.kind != kindObject {
		return ClaudeDesktop // any mcpServers reader reports the error
	}
	if root.get("mcpServers") == nil && (root.get("servers") != nil || root.get("mcp").get("servers") != nil) {
		return VSCode
	}
	switch filepath.Base(path) {
	case "mcp_config.json":
		return Windsurf
	case ".mcp.json", ".claude.json":
		return ClaudeCode
	case "claude_desktop_config.json":
		return ClaudeDesktop
	}
	if filepath.Base(filepath.Dir(path)) == ".cursor" {
		return Cursor
	}
	return ClaudeCode // the most general mcpServers shape: type, url and headers
}
