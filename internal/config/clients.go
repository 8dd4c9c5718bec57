package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// Levels of [MCPTools], in the order they are listed and checked.
const (
	LevelRequired    = "required"
	LevelRecommended = "recommended"
	LevelOptional    = "optional"
)

var (
	clientFields   = []string{"mcp_tools", "role_restrictions"}
	mcpToolsFields = []string{LevelRequired, LevelRecommended, LevelOptional}
)

// Client is what one MCP client tool (claude-code, cursor, …) declares it
// needs from the gateway: seed 002's passive declarations. Nothing is
// enforced at run time; `switchboard config validate` checks the
// references and `switchboard check <client>` is the pre-flight an operator
// (or the client's launcher) runs before starting the tool.
type Client struct {
	Name     string // the map key under clients:
	MCPTools MCPTools
	// RoleRestrictions maps a role of the client to the tools it may use:
	// yaml role_restrictions: {review: {allowed_tools: [fs.read_file, git.*, bash]}}.
	// An entry with a server part (fs.read_file, git.*) names a server or
	// prefix of servers:; one without (bash) is the client's own tool.
	// Every list is non-empty.
	RoleRestrictions map[string][]string
	// Pos is the position of the client's name key; the positions of its
	// entries are in [Config.Pos], e.g.
	// Pos["clients.cursor.mcp_tools.required[0]"].
	Pos Pos
}

// MCPTools are the servers (names in servers:) a client uses, by how much it
// needs them: yaml mcp_tools: {required: [fs, git], recommended: [search],
// optional: [github]}. A server appears at most once across the three.
type MCPTools struct {
	Required    []string // the client does not work without these
	Recommended []string // it works, but noticeably worse
	Optional    []string // nice to have
}

// Requirement is one server a client declares, with where it is declared.
type Requirement struct {
	Level  string // LevelRequired, LevelRecommended or LevelOptional
	Server string
	Index  int // position in its level's list, for field paths
}

// Field returns the requirement's path under the client, e.g.
// "mcp_tools.required[0]"; join it to "clients.<name>." for [Config.Pos].
func (r Requirement) Field() string {
	return fmt.Sprintf("mcp_tools.%s[%d]", r.Level, r.Index)
}

// Requirements lists every declared server, required first, then
// recommended, then optional, each level in file order, so reports read in
// order of importance.
func (m MCPTools) Requirements() []Requirement {
	var out []Requirement
	for _, l := range []struct {
		level string
		list  []string
	}{{LevelRequired, m.Required}, {LevelRecommended, m.Recommended}, {LevelOptional, m.Optional}} {
		for i, s := range l.list {
			out = append(out, Requirement{Level: l.level, Server: s, Index: i})
		}
	}
	return out
}

// ClientNames returns the names of the declared clients, sorted, for
// messages that list them.
func (c *Config) ClientNames() []string {
	return slices.Sorted(maps.Keys(c.Clients))
}

// decodeClients reads the clients: mapping. Checks that need the servers
// (every name must be known) are left to validateClients, since clients:
// may come before servers: in the file.
func (d *decoder) decodeClients(n ast.Node, st *sections) map[string]*Client {
	entries, _ := d.mapping(n, "clients")
	if len(entries) == 0 {
		return nil
	}
	out := make(map[string]*Client, len(entries))
	for _, e := range entries {
		f := join("clients", e.key)
		st.pos[f] = e.pos
		if msg := checkName("client name", e.key); msg != "" {
			d.errorf(e.pos, f, "%s", msg)
		}
		c := &Client{Name: e.key, Pos: e.pos}
		fields, _ := d.mapping(e.value, f)
		for _, fe := range fields {
			ff := join(f, fe.key)
			switch fe.key {
			case "mcp_tools":
				c.MCPTools = d.decodeMCPTools(fe.value, ff, st)
			case "role_restrictions":
				c.RoleRestrictions = d.decodeClientRoles(fe.value, ff, st)
			default:
				d.errorf(fe.pos, ff, "unknown field %q%s", fe.key, suggest(fe.key, clientFields))
				continue
			}
			st.pos[ff] = fe.pos
		}
		out[e.key] = c
	}
	return out
}

// decodeMCPTools reads a client's mcp_tools: the three lists of server
// names. A server listed a second time (in any list) is reported there and
// dropped, so each server has one level.
func (d *decoder) decodeMCPTools(n ast.Node, field string, st *sections) MCPTools {
	var m MCPTools
	lists := map[string]*[]string{LevelRequired: &m.Required, LevelRecommended: &m.Recommended, LevelOptional: &m.Optional}
	first := map[string]string{} // server -> field suffix of its first mention
	entries, _ := d.mapping(n, field)
	for _, e := range entries {
		lf := join(field, e.key)
		list, known := lists[e.key]
		if !known {
			d.errorf(e.pos, lf, "unknown level %q: use %s%s", e.key, quotedList(mcpToolsFields), suggest(e.key, mcpToolsFields))
			continue
		}
		st.pos[lf] = e.pos
		items, _ := d.sequence(e.value, lf)
		*list = make([]string, 0, len(items))
		var kept []int
		for i, item := range items {
			itf := fmt.Sprintf("%s[%d]", lf, i)
			st.pos[itf] = posOf(item)
			v, ok := d.listString(item, itf)
			if !ok {
				continue
			}
			at := fmt.Sprintf("%s[%d]", e.key, i)
			if prev, dup := first[v]; dup {
				d.errorf(posOf(item), itf, "server %q is listed twice (first at %s): give each server one level", v, prev)
				continue
			}
			first[v] = at
			*list = append(*list, v)
			kept = append(kept, i)
		}
		st.keep(lf, kept, len(items))
	}
	return m
}

// decodeClientRoles reads a client's role_restrictions: role ->
// {allowed_tools: [...]}. Unlike authz.role_restrictions, an empty list is an
// error: a declaration that allows a role nothing is a mistake, not a policy.
func (d *decoder) decodeClientRoles(n ast.Node, field string, st *sections) map[string][]string {
	return d.roleMap(n, field, st,
		"allowed_tools is required: the tools this role may use, e.g. allowed_tools: [fs.read_file, git.*, bash]", false,
		func(v ast.Node, f string, keyPos Pos) []string { return d.allowedTools(v, f, keyPos, st) })
}

// allowedTools reads a non-empty list of tool names; items that fail are
// reported and left out.
func (d *decoder) allowedTools(n ast.Node, field string, keyPos Pos, st *sections) []string {
	items, ok := d.sequence(n, field)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.errorf(keyPos, field, "must list at least one tool (server.tool, server.* or a tool of the client's own)")
		return nil
	}
	out := make([]string, 0, len(items))
	var kept []int
	first := map[string]int{}
	for i, item := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		st.pos[f] = posOf(item)
		v, ok := d.listString(item, f)
		if !ok {
			continue
		}
		if strings.ContainsFunc(v, isSpaceOrControl) {
			d.errorf(posOf(item), f, "tool name %s is invalid: write server.tool, server.* or a tool name, without spaces", strconv.Quote(v))
			continue
		}
		if j, dup := first[v]; dup {
			d.errorf(posOf(item), f, "%q is listed twice (first at [%d])", v, j)
			continue
		}
		first[v] = i
		out = append(out, v)
		kept = append(kept, i)
	}
	st.keep(field, kept, len(items))
	return out
}

// keep records which items of the list at field were kept, when some were
// not, for [sections.item].
func (st *sections) keep(field string, kept []int, n int) {
	if len(kept) == n {
		return
	}
	if st.index == nil {
		st.index = map[string][]int{}
	}
	st.index[field] = kept
}

// item returns the field path of the i-th kept item of the list at field.
func (st *sections) item(field string, i int) string {
	if idx, ok := st.index[field]; ok && i < len(idx) {
		i = idx[i]
	}
	return fmt.Sprintf("%s[%d]", field, i)
}

// validateClients checks the references of the declarations once the
// servers and the separator are known: every mcp_tools entry must be a
// server name, and the server part of every allowed_tools entry a server
// name or prefix. Tool names are known only after discovery; `switchboard
// config validate` checks those against a running gateway.
//
// The server checks are skipped when the servers could not all be read,
// and the allowed_tools server check also when a server is unprefixed (its
// own tool names may contain the separator); every allowed_tools check is
// skipped when the separator is invalid (the settings report it).
func validateClients(c *checker, cfg *Config, st *sections, servers []*Server, serversKnown bool) {
	if len(cfg.Clients) == 0 {
		return
	}
	names := make([]string, 0, len(servers))
	isName := map[string]bool{}
	prefixes := map[string]bool{}
	prefixesKnown := true
	for _, s := range servers {
		if !isName[s.Name] {
			names = append(names, s.Name)
		}
		isName[s.Name] = true
		p := s.EffectivePrefix()
		if p == "" {
			prefixesKnown = false
		}
		prefixes[p] = true
	}
	slices.Sort(names)
	known := "no servers are configured"
	if len(names) > 0 {
		known = "servers: " + strings.Join(names, ", ")
	}
	sep := cfg.Settings.ToolNameSeparator
	validSep := sep == "." || sep == "__"

	for _, name := range cfg.ClientNames() {
		cl := cfg.Clients[name]
		base := join("clients", name)
		for _, r := range cl.MCPTools.Requirements() {
			if !serversKnown || isName[r.Server] {
				continue
			}
			msg := fmt.Sprintf("unknown server %q (%s)", r.Server, known)
			if validSep {
				if server, _, found := strings.Cut(r.Server, sep); found && isName[server] {
					msg += fmt.Sprintf(": mcp_tools lists servers, not tools; write %q", server)
				}
			}
			c.add(place{field: st.item(join(base, "mcp_tools."+r.Level), r.Index)}, "%s", msg)
		}
		if !validSep {
			continue
		}
		for _, role := range slices.Sorted(maps.Keys(cl.RoleRestrictions)) {
			for i, t := range cl.RoleRestrictions[role] {
				server, tool, found := strings.Cut(t, sep)
				if !found {
					continue // a tool of the client's own, e.g. bash
				}
				f := st.item(fmt.Sprintf("%s.role_restrictions.%s.allowed_tools", base, role), i)
				switch {
				case server == "":
					c.add(place{field: f}, "%q has no server part: write server%stool, or a tool name without %q", t, sep, sep)
				case tool == "":
					c.add(place{field: f}, "%q has no tool part: write %s%s* for every tool of the server", t, server, sep)
				case serversKnown && prefixesKnown && !prefixes[server]:
					c.add(place{field: f}, "unknown server %q (%s)", server, known)
				}
			}
		}
	}
}

// quotedList lists items for messages: "a", "b" or "c".
func quotedList(items []string) string {
	quoted := make([]string, len(items))
	for i, k := range items {
		quoted[i] = strconv.Quote(k)
	}
	return joinOr(quoted)
}
