package config

import (
	"fmt"

	"github.com/goccy/go-yaml/ast"
)

// decodeToolVersions reads tool_versions:, seed 000's version compatibility
// matrix: for a server, the versions of each tool the gateway accepts when a
// manifest is registered (POST /api/v1/mcp/register). A tool registered with
// a version outside its list is registered disabled.
//
//	tool_versions:
//	  github:
//	    create_issue: ["1.0.0", "1.1.0"]
func (d *decoder) decodeToolVersions(n ast.Node, st *sections) map[string]map[string][]string {
	servers, _ := d.mapping(n, "tool_versions")
	if len(servers) == 0 {
		return nil
	}
	out := make(map[string]map[string][]string, len(servers))
	for _, s := range servers {
		sf := join("tool_versions", s.key)
		st.pos[sf] = s.pos
		tools, ok := d.mapping(s.value, sf)
		if !ok {
			continue
		}
		if len(tools) == 0 {
			d.errorf(s.pos, sf, "needs at least one tool (remove the entry for none)")
			continue
		}
		m := make(map[string][]string, len(tools))
		for _, t := range tools {
			tf := join(sf, t.key)
			st.pos[tf] = t.pos
			items, ok := d.sequence(t.value, tf)
			if !ok {
				continue
			}
			if len(items) == 0 {
				d.errorf(t.pos, tf, "needs at least one compatible version")
				continue
			}
			seen := map[string]bool{}
			for i, item := range items {
				itf := fmt.Sprintf("%s[%d]", tf, i)
				v, ok := d.listString(item, itf)
				if !ok {
					continue
				}
				if v == "" {
					d.errorf(posOf(item), itf, "must not be empty")
					continue
				}
				if seen[v] {
					d.errorf(posOf(item), itf, "version %q is listed twice", v)
					continue
				}
				seen[v] = true
				m[t.key] = append(m[t.key], v)
			}
		}
		out[s.key] = m
	}
	return out
}
