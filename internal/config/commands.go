package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// CheckCommands reports every stdio server whose command cannot be started
// on this machine: a name that lookPath does not find (exec.LookPath, so the
// gateway's PATH), or a path that does not exist or is not executable. A
// relative path is resolved against the server's cwd, as exec resolves it.
// SelfCommand is the gateway itself and always found. Each problem points at
// the server's command key and, when the server names its npm package, says
// how to get it.
//
// Loading a file does not check commands: the machine that validates a file
// is not always the one that runs it, and a server that is not started
// needs none. `switchboard config validate` calls it.
func (c *Config) CheckCommands(lookPath func(string) (string, error)) Errors {
	var errs Errors
	for _, s := range c.Servers {
		if s.Transport != TransportStdio || s.Command == "" || s.Command == SelfCommand {
			continue
		}
		msg := ""
		if !strings.ContainsRune(s.Command, os.PathSeparator) {
			if _, err := lookPath(s.Command); err != nil {
				msg = fmt.Sprintf("command %q is not on PATH", s.Command)
			}
		} else {
			path := s.Command
			if !filepath.IsAbs(path) && s.Cwd != "" {
				path = filepath.Join(s.Cwd, path)
			}
			switch fi, err := os.Stat(path); {
			case errors.Is(err, fs.ErrNotExist):
				msg = fmt.Sprintf("command %q does not exist", s.Command)
			case err != nil:
				msg = fmt.Sprintf("command %q cannot be checked: %v", s.Command, err)
			case fi.IsDir():
				msg = fmt.Sprintf("command %q is a directory", s.Command)
			case fi.Mode()&0o111 == 0:
				msg = fmt.Sprintf("command %q is not executable", s.Command)
			}
		}
		if msg == "" {
			continue
		}
		msg += ": the server would fail to start"
		switch {
		case s.Package != "" && (s.Command == "npx" || s.Command == "node" || s.Command == "npm"):
			msg += fmt.Sprintf(" (%s comes with Node.js; the server is the npm package %s)", s.Command, s.Package)
		case s.Package != "":
			msg += fmt.Sprintf(" (the server is the npm package %s: npm install -g %s)", s.Package, s.Package)
		}
		p := s.posFor("command")
		errs = append(errs, &Error{File: c.File, Line: p.Line, Column: p.Column, Field: c.serversKey() + "." + s.Name + ".command", Msg: msg})
	}
	return errs
}
