package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// checkFallbackLists reports the fallbacks: entries without a tool. A list
// with a problem is marked bad, so that validateFallbacks, which names
// items by index, skips it.
func checkFallbackLists(s scope, fallbacks map[string][]string) {
	for _, key := range keysOf(s, fallbacks) {
		if e := s.in(key); !e.broken() && len(fallbacks[key]) == 0 {
			e.atKey("needs at least one fallback tool (remove the entry for none)")
			e.fail()
		}
	}
}

// validateFallbacks checks what needs the final settings and the servers: each
// name must be namespaced with the tool name separator, and its server part
// must be the prefix of a server in servers:. Tools themselves are unknown
// until discovery, so only servers are checked here. The server check is
// skipped when the servers could not all be read, or when a server is
// unprefixed (its own tool names may contain the separator).
func validateFallbacks(c *checker, cfg *Config, servers []*Server, serversKnown bool) {
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
		if c.broken(f) {
			continue // not a list, or an empty one: reported
		}
		check(f, key)
		if c.spot(f).bad {
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
