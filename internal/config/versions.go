package config

// checkToolVersions checks tool_versions:, seed 000's version compatibility
// matrix: for a server, the versions of each tool the gateway accepts when a
// manifest is registered (POST /api/v1/mcp/register). A tool registered with
// a version outside its list is registered disabled.
//
//	tool_versions:
//	  github:
//	    create_issue: ["1.0.0", "1.1.0"]
func checkToolVersions(s scope, versions map[string]map[string][]string) {
	for _, server := range keysOf(s, versions) {
		tools, ss := versions[server], s.in(server)
		if ss.broken() {
			continue
		}
		if len(tools) == 0 {
			ss.atKey("needs at least one tool (remove the entry for none)")
			continue
		}
		for _, tool := range keysOf(ss, tools) {
			list, ts := tools[tool], ss.in(tool)
			if ts.broken() {
				continue
			}
			if len(list) == 0 {
				ts.atKey("needs at least one compatible version")
				continue
			}
			seen := map[string]bool{}
			for i, v := range list {
				if it := ts.item(i); !it.broken() {
					if seen[v] {
						it.atVal("version %q is listed twice", v)
					}
					seen[v] = true
				}
			}
		}
	}
}
