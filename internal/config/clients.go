package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Levels of [MCPTools], in the order they are listed and checked.
const (
	LevelRequired    = "required"
	LevelRecommended = "recommended"
	LevelOptional    = "optional"
)

// Client is what one MCP client tool (claude-code, cursor, …) declares it
// needs from the gateway: seed 002's passive declarations. Nothing is
// enforced at run time; `switchboard config validate` checks the
// references and `switchboard check <client>` is the pre-flight an operator
// (or the client's launcher) runs before starting the tool.
type Client struct {
	Name     string   // the map key under clients:
	MCPTools MCPTools `yaml:"mcp_tools"`
	// RoleRestrictions maps a role of the client to the tools it may use:
	// yaml role_restrictions: {review: {allowed_tools: [fs.read_file, git.*, bash]}}.
	// An entry with a server part (fs.read_file, git.*) names a server or
	// prefix of servers:; one without (bash) is the client's own tool.
	// Every list is non-empty.
	RoleRestrictions map[string][]string `yaml:"role_restrictions,roles=client"`
	// Pos is the position of the client's name key; the positions of its
	// entries are in [Config.Pos], e.g.
	// Pos["clients.cursor.mcp_tools.required[0]"].
	Pos Pos
}

// MCPTools are the servers (names in servers:) a client uses, by how much it
// needs them: yaml mcp_tools: {required: [fs, git], recommended: [search],
// optional: [github]}. A server appears at most once across the three.
type MCPTools struct {
	Required    []string `yaml:"required,nonempty"`    // the client does not work without these
	Recommended []string `yaml:"recommended,nonempty"` // it works, but noticeably worse
	Optional    []string `yaml:"optional,nonempty"`    // nice to have
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

// setKey names the client after its key and checks the name. Checks that
// need the servers (every name must be known) are left to validateClients,
// since clients: may come before servers: in the file.
func (c *Client) setKey(s scope, name string) {
	c.Name, c.Pos = name, s.a.s.key
	if msg := checkName("client name", name); msg != "" {
		s.atKey("%s", msg)
	}
}

func (m *MCPTools) unknownKey(key string, known []string) string {
	return fmt.Sprintf("unknown level %q: use %s%s", key, quotedList(known), suggest(key, known))
}

// check gives each server one level: a server listed a second time (in any
// list, in the order the file lists them) is reported there and dropped. A
// level the file names is a list, even when null.
func (m *MCPTools) check(s scope) bool {
	levels := []struct {
		name string
		list *[]string
	}{{LevelRequired, &m.Required}, {LevelRecommended, &m.Recommended}, {LevelOptional, &m.Optional}}
	slices.SortStableFunc(levels, func(a, b struct {
		name string
		list *[]string
	}) int {
		return s.in(a.name).a.s.seq - s.in(b.name).a.s.seq
	})
	ok := true
	first := map[string]string{} // server -> the first mention, e.g. "required[0]"
	for _, l := range levels {
		if !s.in(l.name).has() {
			continue
		}
		if *l.list == nil {
			*l.list = []string{}
		}
		for i, v := range *l.list {
			it := s.in(l.name).item(i)
			if it.broken() {
				continue
			}
			if prev, dup := first[v]; dup {
				it.atKey("server %q is listed twice (first at %s): give each server one level", v, prev)
				it.fail()
				ok = false
				continue
			}
			first[v] = fmt.Sprintf("%s[%d]", l.name, i)
		}
	}
	return ok
}

// clientRole is a role of a client's role_restrictions as the file writes
// it.
type clientRole struct {
	AllowedTools []string `yaml:"allowed_tools,nonempty"`
}

func (r *clientRole) setKey(s scope, name string) { checkRoleName(s, name) }

func (r *clientRole) tools() []string { return r.AllowedTools }

// check requires allowed_tools, a non-empty list of tool names without
// spaces, each listed once. Unlike authz.role_restrictions, an empty list is
// an error: a declaration that allows a role nothing is a mistake, not a
// policy. Items that fail are skipped by validateClients.
func (r *clientRole) check(s scope) bool {
	ok := requireAllowedTools(s, "allowed_tools is required: the tools this role may use, e.g. allowed_tools: [fs.read_file, git.*, bash]")
	tools := s.in("allowed_tools")
	if tools.has() && !tools.broken() && len(r.AllowedTools) == 0 {
		tools.atKey("must list at least one tool (server.tool, server.* or a tool of the client's own)")
		ok = false
	}
	first := map[string]int{}
	for i, v := range r.AllowedTools {
		it := tools.item(i)
		switch j, dup := first[v]; {
		case it.broken():
			continue
		case strings.ContainsFunc(v, isSpaceOrControl):
			it.atKey("tool name %s is invalid: write server.tool, server.* or a tool name, without spaces", strconv.Quote(v))
		case dup:
			it.atKey("%q is listed twice (first at [%d])", v, j)
		default:
			first[v] = i
			continue
		}
		it.fail()
		ok = false
	}
	return ok
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
func validateClients(c *checker, cfg *Config, servers []*Server, serversKnown bool) {
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
			f := base + "." + r.Field()
			if !serversKnown || isName[r.Server] || c.broken(f) {
				continue
			}
			msg := fmt.Sprintf("unknown server %q (%s)", r.Server, known)
			if validSep {
				if server, _, found := strings.Cut(r.Server, sep); found && isName[server] {
					msg += fmt.Sprintf(": mcp_tools lists servers, not tools; write %q", server)
				}
			}
			c.add(place{field: f}, "%s", msg)
		}
		if !validSep {
			continue
		}
		for _, role := range slices.Sorted(maps.Keys(cl.RoleRestrictions)) {
			for i, t := range cl.RoleRestrictions[role] {
				f := fmt.Sprintf("%s.role_restrictions.%s.allowed_tools[%d]", base, role, i)
				server, tool, found := strings.Cut(t, sep)
				if !found || c.broken(f) {
					continue // a tool of the client's own, e.g. bash, or an item already reported
				}
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
