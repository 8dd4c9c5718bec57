package clientcfg

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// File is a client's server list converted to switchboard definitions.
type File struct {
	Path   string
	Client Client
	// Entries are the servers that convert, in file order.
	Entries []*Entry
	// Problems are the servers that do not, each naming file:line:column
	// and the entry; the other entries are still usable.
	Problems config.Errors
}

// Entry is one client server converted to a switchboard definition.
type Entry struct {
	// Key is the entry's name in the client's file; Server.Name is its
	// switchboard name (lower case, no dots), which may differ.
	Key    string
	Line   int
	Column int
	// Server is the definition with every literal secret replaced by a
	// ${VAR} reference listed in Secrets, so it can be written to a file.
	Server *config.Server
	// Secrets are the values taken out of Server.
	Secrets []Secret
	// Notes are what the conversion changed or dropped, for the user.
	Notes []string
}

// Secret is one literal secret of a client entry, replaced by a reference
// to the environment variable Var. Its value is kept unexported so that
// printing an Entry never shows it.
type Secret struct {
	Field  string // "env.GITHUB_TOKEN" or "headers.Authorization"
	Var    string
	Line   int
	Column int
	ref    string // the reference as written in Server ("Bearer ${X}")
	value  string // the literal value in the client's file
}

// String names the secret without its value.
func (s Secret) String() string { return s.Field + " -> ${" + s.Var + "}" }

// WithSecrets returns a copy of the entry's definition holding the literal
// secret values again, for a gateway that seals them itself (the REST API
// encrypts literal env and header values before storing them).
func (e *Entry) WithSecrets() *config.Server {
	s := e.Server.Clone()
	s.Env = cloneMap(s.Env)
	s.Headers = cloneMap(s.Headers)
	for _, sec := range e.Secrets {
		m, k := s.Env, strings.TrimPrefix(sec.Field, "env.")
		if strings.HasPrefix(sec.Field, "headers.") {
			m, k = s.Headers, strings.TrimPrefix(sec.Field, "headers.")
		}
		m[k] = strings.ReplaceAll(sec.value, "$", "$$") // a literal, not a reference
	}
	return s
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Options are what variables in client files may refer to.
type Options struct {
	// Home replaces ${userHome}.
	Home string
	// Workspace replaces ${workspaceFolder}; "" = the folder holding the
	// file's .vscode or .cursor directory, or the file's own folder.
	Workspace string
}

// entryFields are the keys a client entry may have, across clients: the
// union keeps one reader for every format. ignoredFields are client-side
// settings that have no meaning behind a gateway.
var (
	entryFields   = []string{"type", "command", "args", "env", "cwd", "envFile", "url", "serverUrl", "headers", "disabled", "description"}
	ignoredFields = []string{"autoApprove", "alwaysAllow", "disabledTools", "timeout", "gallery", "version", "dev", "transportType"}
)

// Read converts the server list of a client file. A file that does not
// parse, or has no server list, is an error (config.Errors with the
// position); entries that do not convert are listed in File.Problems.
func Read(path string, data []byte, c Client, o *Options) (*File, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Workspace == "" {
		dir := filepath.Dir(path)
		if b := filepath.Base(dir); b == ".vscode" || b == ".cursor" {
			dir = filepath.Dir(dir)
		}
		opts.Workspace = dir
	}
	r := &reader{path: path, src: data, opts: opts, f: &File{Path: path, Client: c}}
	root, err := parseJSONC(data)
	if err != nil {
		se := err.(*syntaxError)
		return nil, r.errAt(se.offset, "", "not valid JSON: "+se.msg)
	}
	if root.kind != kindObject {
		return nil, r.errAt(root.start, "", "must be a JSON object, got "+root.kind.String())
	}
	key := c.serversKey()
	list := root.get(key)
	if list == nil && c == VSCode {
		if mcp := root.get("mcp"); mcp != nil { // VS Code's settings.json
			list, key = mcp.get("servers"), "mcp.servers"
		}
	}
	if list == nil {
		return nil, r.errAt(root.start, "", fmt.Sprintf("no %q object: this is not a %s MCP server list", key, c))
	}
	if list.kind != kindObject {
		return nil, r.errAt(list.start, key, "must be an object of server name to definition, got "+list.kind.String())
	}
	if c == VSCode {
		r.inputs = readInputs(root.get("inputs"))
	}
	names := map[string]string{} // switchboard name -> client key
	for _, m := range list.members {
		field := key + "." + m.key
		e, ok := r.entry(m, field)
		if !ok {
			continue
		}
		if prev, dup := names[e.Server.Name]; dup {
			r.problem(m.keyStart, field, fmt.Sprintf("its switchboard name %q is taken by %q: rename one of them", e.Server.Name, prev))
			continue
		}
		names[e.Server.Name] = m.key
		r.f.Entries = append(r.f.Entries, e)
	}
	nameSecrets(r.f.Entries)
	return r.f, nil
}

// input is a VS Code "inputs" item: a value the editor prompts for.
type input struct {
	password bool
}

func readInputs(n *node) map[string]input {
	out := map[string]input{}
	if n == nil || n.kind != kindArray {
		return out
	}
	for _, it := range n.items {
		if id := it.get("id"); id != nil && id.kind == kindString {
			pw := it.get("password")
			out[id.str] = input{password: pw != nil && pw.kind == kindBool && pw.boolean}
		}
	}
	return out
}

type reader struct {
	path   string
	src    []byte
	opts   Options
	f      *File
	inputs map[string]input
}

func (r *reader) errAt(off int, field, msg string) error {
	line, col := lineCol(r.src, off)
	return config.Errors{{File: r.path, Line: line, Column: col, Field: field, Msg: msg}}
}

func (r *reader) problem(off int, field, msg string) {
	line, col := lineCol(r.src, off)
	r.f.Problems = append(r.f.Problems, &config.Error{File: r.path, Line: line, Column: col, Field: field, Msg: msg})
}

// entry converts one client entry; problems are recorded, and ok is false
// when the entry cannot be imported.
func (r *reader) entry(m member, field string) (*Entry, bool) {
	n := m.value
	line, col := lineCol(r.src, m.keyStart)
	e := &Entry{Key: m.key, Line: line, Column: col, Server: &config.Server{}}
	s := e.Server
	ok := true
	bad := func(at *node, sub, msg string) {
		f := field
		if sub != "" {
			f += "." + sub
		}
		r.problem(at.start, f, msg)
		ok = false
	}
	if n.kind != kindObject {
		bad(n, "", "must be an object, got "+n.kind.String())
		return nil, false
	}
	s.Name = serverName(m.key)
	if s.Name == "" {
		r.problem(m.keyStart, field, "the name has no letter or digit to make a switchboard server name from")
		return nil, false
	}
	if s.Name != m.key {
		e.Notes = append(e.Notes, fmt.Sprintf("renamed from %q (switchboard names are lower case letters, digits, - and _)", m.key))
	}
	str := func(k string) (string, *node) {
		v := n.get(k)
		if v == nil || v.kind == kindNull {
			return "", nil
		}
		if v.kind != kindString {
			bad(v, k, "must be a string, got "+v.kind.String())
			return "", nil
		}
		return v.str, v
	}
	strMap := func(k string) (map[string]string, map[string]*node) {
		v := n.get(k)
		if v == nil || v.kind == kindNull {
			return nil, nil
		}
		if v.kind != kindObject {
			bad(v, k, "must be an object of strings, got "+v.kind.String())
			return nil, nil
		}
		out, at := map[string]string{}, map[string]*node{}
		for _, kv := range v.members {
			if kv.value.kind != kindString {
				// Numbers and booleans are common in hand-written env
				// blocks; clients pass them on as their JSON text.
				if kv.value.kind == kindNumber || kv.value.kind == kindBool {
					out[kv.key], at[kv.key] = string(r.src[kv.value.start:kv.value.end]), kv.value
					continue
				}
				bad(kv.value, k+"."+kv.key, "must be a string, got "+kv.value.kind.String())
				continue
			}
			out[kv.key], at[kv.key] = kv.value.str, kv.value
		}
		return out, at
	}
	for _, kv := range n.members {
		switch {
		case slices.Contains(entryFields, kv.key):
		case slices.Contains(ignoredFields, kv.key):
			e.Notes = append(e.Notes, fmt.Sprintf("%q is a client setting, not imported", kv.key))
		default:
			bad(kv.value, kv.key, fmt.Sprintf("unknown field %q (known: %s)", kv.key, strings.Join(entryFields, ", ")))
		}
	}

	typ, typNode := str("type")
	command, cmdNode := str("command")
	cwd, cwdNode := str("cwd")
	u, urlNode := str("url")
	if su, suNode := str("serverUrl"); suNode != nil {
		if urlNode != nil {
			bad(suNode, "serverUrl", "url is given too: give one of them")
		}
		u, urlNode = su, suNode
	}
	s.Description, _ = str("description")
	if envFile, at := str("envFile"); at != nil {
		e.Notes = append(e.Notes, fmt.Sprintf("envFile %q is not imported: put its variables in env or in the gateway's environment", envFile))
	}
	if d := n.get("disabled"); d != nil {
		if d.kind != kindBool {
			bad(d, "disabled", "must be true or false, got "+d.kind.String())
		} else if d.boolean {
			f := false
			s.AutoStart = &f
			e.Notes = append(e.Notes, "disabled in the client: imported with auto_start: false")
		}
	}

	switch strings.ToLower(typ) {
	case "":
		switch {
		case cmdNode != nil:
			s.Transport = "stdio"
		case urlNode != nil:
			s.Transport = guessRemote(u)
		}
	case "stdio", "local":
		s.Transport = "stdio"
	case "sse":
		s.Transport = "sse"
	case "http", "streamable-http", "streamablehttp", "streamable_http", "remote":
		s.Transport = "http"
	default:
		bad(typNode, "type", fmt.Sprintf("unknown type %q: want stdio, sse or http", typ))
	}
	switch {
	case cmdNode != nil && urlNode != nil:
		bad(urlNode, "url", "command is given too: a server is either a command (stdio) or a URL (http, sse)")
	case cmdNode == nil && urlNode == nil && ok:
		bad(n, "", "has neither command nor url")
	case s.Transport == "stdio" && cmdNode == nil && ok:
		bad(n, "", "type stdio needs a command")
	case s.Transport != "stdio" && urlNode == nil && ok:
		bad(n, "", "type "+s.Transport+" needs a url")
	}

	// args, command, cwd and url are not expanded by switchboard: client
	// variables there are resolved now or refused.
	plain := func(v string, at *node, sub string) string {
		out, err := r.resolvePlain(v)
		if err != "" {
			bad(at, sub, err)
		}
		if looksLikeToken(out) {
			bad(at, sub, "looks like a secret token, and switchboard would store it in clear here: move it to env (a ${VAR} reference) in the client's file first")
		}
		return out
	}
	if cmdNode != nil {
		s.Command = plain(command, cmdNode, "command")
	}
	if cwdNode != nil {
		s.Cwd = plain(cwd, cwdNode, "cwd")
	}
	if urlNode != nil {
		s.URL = plain(u, urlNode, urlNode.key(n))
		if pu, err := url.Parse(s.URL); err == nil {
			for k, vs := range pu.Query() {
				for _, v := range vs {
					if isSecretName(k) || looksLikeToken(v) {
						bad(urlNode, urlNode.key(n), fmt.Sprintf("query parameter %q looks like a secret, and switchboard would store the URL in clear: pass it as a header instead", k))
					}
				}
			}
		}
	}
	if a := n.get("args"); a != nil && a.kind != kindNull {
		if a.kind != kindArray {
			bad(a, "args", "must be a list of strings, got "+a.kind.String())
		}
		for i, it := range a.items {
			sub := fmt.Sprintf("args[%d]", i)
			switch it.kind {
			case kindString:
				s.Args = append(s.Args, plain(it.str, it, sub))
			case kindNumber, kindBool:
				s.Args = append(s.Args, string(r.src[it.start:it.end]))
			default:
				bad(it, sub, "must be a string, got "+it.kind.String())
			}
		}
	}
	env, envAt := strMap("env")
	headers, hdrAt := strMap("headers")
	for _, group := range []struct {
		name string
		m    map[string]string
		at   map[string]*node
		dst  *map[string]string
	}{{"env", env, envAt, &s.Env}, {"headers", headers, hdrAt, &s.Headers}} {
		if group.m == nil {
			continue
		}
		*group.dst = map[string]string{}
		for _, k := range slices.Sorted(mapKeys(group.m)) {
			v, at := group.m[k], group.at[k]
			sub := group.name + "." + k
			ref, literal, msg := r.convertRefs(v, e)
			if msg != "" {
				bad(at, sub, msg)
				continue
			}
			(*group.dst)[k] = ref
			// A value that already references a variable keeps it; only a
			// token pasted next to the reference is taken out.
			secret := literal != "" && isSecret(group.name, k, literal)
			if ref != strings.ReplaceAll(v, "$", "$$") {
				secret = looksLikeToken(literal)
			}
			if secret {
				l, c := lineCol(r.src, at.start)
				e.Secrets = append(e.Secrets, Secret{Field: sub, Line: l, Column: c, value: v})
			}
		}
	}
	if s.Transport == "stdio" && len(s.Headers) > 0 {
		bad(n.get("headers"), "headers", "a stdio server has no HTTP headers")
	}
	if s.Transport != "stdio" && len(s.Env) > 0 {
		bad(n.get("env"), "env", "a remote server has no environment: use headers")
	}
	if !ok {
		return nil, false
	}
	return e, true
}

// key is the name of the member whose value is n in parent (url or serverUrl).
func (n *node) key(parent *node) string {
	for _, m := range parent.members {
		if m.value == n {
			return m.key
		}
	}
	return ""
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// guessRemote picks the transport of a URL given without a type: clients
// that take a bare url try Streamable HTTP, and endpoints named /sse are
// the older SSE transport.
func guessRemote(u string) string {
	if pu, err := url.Parse(u); err == nil && strings.HasSuffix(strings.TrimSuffix(pu.Path, "/"), "/sse") {
		return "sse"
	}
	return "http"
}

// serverName turns a client's key into a switchboard server name: lower
// case, every run of other characters one "-".
func serverName(key string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(key) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_' || c == '-':
			if (c == '_' || c == '-') && b.Len() == 0 {
				continue
			}
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(c)
		default:
			dash = true
		}
	}
	name := b.String()
	if len(name) > 64 {
		name = strings.TrimRight(name[:64], "-_")
	}
	if !config.NameRE.MatchString(name) {
		return ""
	}
	return name
}

// clientVar matches the variable syntaxes of the clients: ${env:NAME}
// (VS Code, Cursor, Windsurf), ${input:id} (VS Code), ${NAME} and
// ${NAME:-default} (Claude Code), ${workspaceFolder} and ${userHome}.
var clientVar = regexp.MustCompile(`\$\{([^}]*)\}`)

var plainVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// resolvePlain resolves the variables of a value switchboard does not
// expand (command, args, cwd, url): only folder variables can be.
func (r *reader) resolvePlain(v string) (string, string) {
	var msg string
	out := clientVar.ReplaceAllStringFunc(v, func(m string) string {
		name := m[2 : len(m)-1]
		switch name {
		case "workspaceFolder", "workspaceRoot":
			return r.opts.Workspace
		case "userHome":
			if r.opts.Home != "" {
				return r.opts.Home
			}
		}
		if msg == "" {
			msg = fmt.Sprintf("uses %s, which switchboard cannot expand here (only in env and headers): write the value, or pass it through env", clientVarLabel(name))
		}
		return m
	})
	return out, msg
}

// clientVarLabel shows a variable without risking a secret: inputs and env
// names are names, never values.
func clientVarLabel(name string) string {
	if len(name) > 64 {
		return "a ${...} variable"
	}
	return "${" + name + "}"
}

// convertRefs rewrites a client's env or header value into switchboard's
// syntax (${NAME} references, $$ for a literal $) and returns the literal
// text left over, which decides whether the value is a secret.
func (r *reader) convertRefs(v string, e *Entry) (ref, literal, msg string) {
	var b, lit strings.Builder
	rest := v
	for {
		loc := clientVar.FindStringSubmatchIndex(rest)
		if loc == nil {
			break
		}
		pre := rest[:loc[0]]
		b.WriteString(strings.ReplaceAll(pre, "$", "$$"))
		lit.WriteString(pre)
		name := rest[loc[2]:loc[3]]
		rest = rest[loc[1]:]
		switch {
		case strings.HasPrefix(name, "env:") && plainVarName.MatchString(name[4:]):
			b.WriteString("${" + name[4:] + "}")
		case strings.HasPrefix(name, "input:"):
			id := name[len("input:"):]
			v := envVarName(id)
			if v == "" {
				return "", "", fmt.Sprintf("input %s has no letter or digit to name a variable after", clientVarLabel(id))
			}
			b.WriteString("${" + v + "}")
			note := fmt.Sprintf("VS Code input %q becomes ${%s}: set %s in the gateway's environment", id, v, v)
			if !slices.Contains(e.Notes, note) {
				e.Notes = append(e.Notes, note)
			}
		case name == "workspaceFolder" || name == "workspaceRoot":
			b.WriteString(strings.ReplaceAll(r.opts.Workspace, "$", "$$"))
		case name == "userHome" && r.opts.Home != "":
			b.WriteString(strings.ReplaceAll(r.opts.Home, "$", "$$"))
		case plainVarName.MatchString(name):
			b.WriteString("${" + name + "}")
		case strings.Contains(name, ":-") && plainVarName.MatchString(name[:strings.Index(name, ":-")]):
			n := name[:strings.Index(name, ":-")]
			b.WriteString("${" + n + "}")
			e.Notes = append(e.Notes, fmt.Sprintf("the default of ${%s:-...} is dropped: switchboard needs %s set", n, n))
		default:
			return "", "", fmt.Sprintf("uses %s, which switchboard has no equivalent for", clientVarLabel(name))
		}
	}
	b.WriteString(strings.ReplaceAll(rest, "$", "$$"))
	lit.WriteString(rest)
	return b.String(), strings.TrimSpace(lit.String()), ""
}

// envVarName makes an UPPER_CASE variable name from an id or key.
func envVarName(id string) string {
	var b strings.Builder
	for _, c := range strings.ToUpper(id) {
		if (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') {
			b.WriteRune(c)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "_") {
			b.WriteByte('_')
		}
	}
	s := strings.TrimRight(b.String(), "_")
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		s = "_" + s
	}
	return s
}

// nameSecrets gives each secret its variable and puts the reference in
// place of the literal. The variable is the env key itself when that is a
// conventional name, so "GITHUB_TOKEN" stays "${GITHUB_TOKEN}"; when two
// entries hold different values under one name, each is prefixed with its
// server's name.
func nameSecrets(entries []*Entry) {
	type use struct {
		e *Entry
		i int
	}
	byVar := map[string][]use{}
	for _, e := range entries {
		for i := range e.Secrets {
			sec := &e.Secrets[i]
			group, key, _ := strings.Cut(sec.Field, ".")
			switch {
			case group == "env" && conventional.MatchString(key):
				sec.Var = key
			case group == "headers" && strings.EqualFold(key, "Authorization"):
				sec.Var = envVarName(e.Server.Name + "_TOKEN")
			default:
				sec.Var = envVarName(e.Server.Name + "_" + key)
			}
			byVar[sec.Var] = append(byVar[sec.Var], use{e, i})
		}
	}
	for v, uses := range byVar {
		same := true
		for _, u := range uses[1:] {
			same = same && u.e.Secrets[u.i].value == uses[0].e.Secrets[uses[0].i].value
		}
		if same {
			continue
		}
		for _, u := range uses {
			u.e.Secrets[u.i].Var = envVarName(u.e.Server.Name + "_" + v)
		}
	}
	for _, e := range entries {
		for i := range e.Secrets {
			sec := &e.Secrets[i]
			group, key, _ := strings.Cut(sec.Field, ".")
			m := e.Server.Env
			if group == "headers" {
				m = e.Server.Headers
			}
			sec.ref = "${" + sec.Var + "}"
			// Keep an auth scheme readable: "Bearer ${NOTION_TOKEN}".
			if scheme, tok, ok := strings.Cut(sec.value, " "); ok && group == "headers" && isAuthScheme(scheme) && !strings.Contains(tok, " ") {
				sec.ref = scheme + " ${" + sec.Var + "}"
			}
			m[key] = sec.ref
		}
	}
}

var conventional = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

func isAuthScheme(s string) bool {
	switch strings.ToLower(s) {
	case "bearer", "basic", "token", "apikey", "api-key":
		return true
	}
	return false
}
