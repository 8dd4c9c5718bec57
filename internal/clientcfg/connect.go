package clientcfg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// EntryName is the name under which [Rewrite] lists the gateway.
const EntryName = "switchboard"

// BackupSuffix is appended to a client file's path for the copy [Connect]
// keeps and [Undo] restores.
const BackupSuffix = ".switchboard-backup"

// Gateway says how a client reaches switchboard: over HTTP (URL, with Key
// as a bearer token) or by starting Command with Args (switchboard stdio).
type Gateway struct {
	URL     string
	Key     string
	Command string
	Args    []string
}

// clientEntry is a server as the clients write it; field order is the
// order people write them in, and omitempty leaves out what a client's
// format does not have.
type clientEntry struct {
	Type      string            `json:"type,omitempty"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	URL       string            `json:"url,omitempty"`
	ServerURL string            `json:"serverUrl,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
}

func (c Client) entry(g Gateway) (clientEntry, error) {
	var e clientEntry
	if g.URL == "" {
		e.Command, e.Args = g.Command, g.Args
		if c == VSCode || c == ClaudeCode {
			e.Type = "stdio"
		}
		return e, nil
	}
	if !c.HTTP() {
		return e, fmt.Errorf("%s's config file takes commands only: connect it with --stdio (remote servers are added in its settings instead)", c)
	}
	if g.Key != "" {
		e.Headers = map[string]string{"Authorization": "Bearer " + g.Key}
	}
	switch c {
	case Windsurf:
		e.ServerURL = g.URL
	case VSCode, ClaudeCode:
		e.Type, e.URL = "http", g.URL
	default:
		e.URL = g.URL
	}
	return e, nil
}

// Rewrite returns data with the client's server list replaced by the one
// gateway entry. Every byte outside that list is kept, comments included,
// so the client's other settings survive exactly as the user wrote them.
func Rewrite(path string, data []byte, c Client, g Gateway) ([]byte, error) {
	ce, err := c.entry(g)
	if err != nil {
		return nil, err
	}
	root, err := parseJSONC(data)
	if err != nil {
		se := err.(*syntaxError)
		line, col := lineCol(data, se.offset)
		return nil, fmt.Errorf("%s:%d:%d: not valid JSON: %s", path, line, col, se.msg)
	}
	if root.kind != kindObject {
		return nil, fmt.Errorf("%s: must be a JSON object, got %s", path, root.kind)
	}
	unit := indentUnit(data)
	key := c.serversKey()
	if m := root.memberOf(key); m != nil {
		ind := lineIndent(data, m.keyStart)
		val, err := json.MarshalIndent(map[string]clientEntry{EntryName: ce}, ind, unit)
		if err != nil {
			return nil, err
		}
		return splice(data, m.value.start, m.value.end, val), nil
	}
	// No list yet: add it as the object's last member.
	ind := unit
	if len(root.members) > 0 {
		ind = lineIndent(data, root.members[0].keyStart)
	}
	val, err := json.MarshalIndent(map[string]clientEntry{EntryName: ce}, ind, unit)
	if err != nil {
		return nil, err
	}
	ins := fmt.Sprintf("%q: %s", key, val)
	if len(root.members) == 0 {
		return splice(data, root.start, root.end, []byte("{\n"+ind+ins+"\n}")), nil
	}
	last := root.members[len(root.members)-1].value.end
	return splice(data, last, last, []byte(",\n"+ind+ins)), nil
}

func splice(data []byte, start, end int, repl []byte) []byte {
	out := make([]byte, 0, len(data)-(end-start)+len(repl))
	out = append(out, data[:start]...)
	out = append(out, repl...)
	return append(out, data[end:]...)
}

// lineIndent is the white space that starts the line holding off.
func lineIndent(data []byte, off int) string {
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	end := start
	for end < off && (data[end] == ' ' || data[end] == '\t') {
		end++
	}
	return string(data[start:end])
}

// indentUnit guesses one level of the file's indentation from its first
// indented line; two spaces when nothing is indented.
func indentUnit(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if trimmed != "" && len(trimmed) < len(line) {
			return line[:len(line)-len(trimmed)]
		}
	}
	return "  "
}

// ErrConnected reports that a client file already has a backup: it was
// connected and not undone since.
var ErrConnected = errors.New("already connected")

// Connect rewrites the client file at path to list only the gateway,
// first copying the file byte for byte to path+[BackupSuffix].
func Connect(path string, c Client, g Gateway) (backup string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the %s config: %w", c, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	out, err := Rewrite(path, data, c, g)
	if err != nil {
		return "", err
	}
	backup = path + BackupSuffix
	if _, err := os.Stat(backup); err == nil {
		return "", fmt.Errorf("%w: %s exists (undo with --undo first, or remove it)", ErrConnected, backup)
	}
	if err := writeFileAtomic(backup, data, st.Mode().Perm()); err != nil {
		return "", fmt.Errorf("keeping a backup: %w", err)
	}
	if err := writeFileAtomic(path, out, st.Mode().Perm()); err != nil {
		return "", fmt.Errorf("writing the %s config: %w", c, err)
	}
	return backup, nil
}

// Undo puts back the file [Connect] saved, byte for byte, and removes the
// backup.
func Undo(path string) error {
	backup := path + BackupSuffix
	data, err := os.ReadFile(backup)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no backup %s: this config was not changed by switchboard connect: %w", backup, err)
	}
	if err != nil {
		return err
	}
	st, err := os.Stat(backup)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, data, st.Mode().Perm()); err != nil {
		return fmt.Errorf("restoring %s: %w", path, err)
	}
	return os.Remove(backup)
}

// writeFileAtomic replaces path through a rename, so a client reading its
// file meanwhile sees the old or the new one, never half of one.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up on failure
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
