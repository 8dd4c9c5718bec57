package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// decodeFallbacks reads the fallbacks: mapping of namespaced tool to the list
// of tools tried in its place. Lists whose items fail to decode are marked bad
// so that validateFallbacks, which indexes items by position, skips them.
func (d *decoder) decodeFallbacks(n ast.Node, st *sections) map[string][]string {
	entries, _ := d.mapping(n, "fallbacks")
	if len(entries) == 0 {
		return nil
	}
	out := make(map[string][]string, len(entries))
	for _, e := range entries {
		f := join("fallbacks", e.key)
		st.pos[f] = e.pos
		items, ok := d.sequence(e.value, f)
		if !ok {
			st.bad[f] = true
			continue
		}
		if len(items) == 0 {
			d.errorf(e.pos, f, "needs at least one fallback tool (remove the entry for none)")
			st.bad[f] = true
			continue
		}
		list := make([]string, 0, len(items))
		for i, item := range items {
			itemField := fmt.Sprintf("%s[%d]", f, i)
			st.pos[itemField] = posOf(item)
			v, itemOK := d.listString(item, itemField)
			if !itemOK {
				st.bad[f] = true
				continue
			}
			list = append(list, v)
		}
		out[e.key] = list
	}
	return out
}

// validateFallbacks checks what needs the final settings and the servers: each
// name must be namespaced with the tool name separator, and its server part
// must be the prefix of a server in servers:. Tools themselves are unknown
// until discovery, so only servers are checked here. The server check is
// skipped when the servers could not all be read, or when a server is
// unprefixed (its own tool names may contain the separator).
func validateFallbacks(c *checker, cfg *Config, st *sections, servers []*Server, serversKnown bool) {
	sep := cfg.Settings.ToolNameSeparator
	if len(cfg.Fallbacks) == 0 || (sep != "." && sep != "__") {
		return // a bad separator is reported by the settings
	}
	prefixes := map[string]bool{}
	for _, s := range servers {
		p := s.EffectivePrefix()
		if p == "" {
			serversKnown = false
		}
		prefixes[p] = true
	}
	check := func(field, name string) bool {
		server, _, found := strings.Cut(name, sep)
		switch {
		case !found || server == "":
			c.add(place{field: field}, "%q is not a namespaced tool name: write server%stool", name, sep)
			return false
		case serversKnown && !prefixes[server]:
			c.add(place{field: field}, "unknown server %q: no server in servers: has this name or prefix", server)
			return false
		}
		return true
	}
	for _, key := range slices.Sorted(maps.Keys(cfg.Fallbacks)) {
		f := join("fallbacks", key)
		check(f, key)
		if st.bad[f] {
			continue
		}
		first := map[string]int{}
		for i, name := range cfg.Fallbacks[key] {
			itemField := fmt.Sprintf("%s[%d]", f, i)
			if j, dup := first[name]; dup {
				c.add(place{field: itemField}, "%q is listed twice (first at [%d])", name, j)
				continue
			}
			first[name] = i
			if name == key {
				c.add(place{field: itemField}, "a tool cannot fall back to itself")
				continue
			}
			check(itemField, name)
		}
	}
}
