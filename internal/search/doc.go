package search

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Param is one input parameter of a tool: callers often search by what a
// tool takes ("by email address") rather than by what it is called.
type Param struct {
	Name, Description string
}

// Doc is one indexed tool. Name (namespaced, unique) is the key.
type Doc struct {
	Name, OriginalName, Description string
	Params                          []Param
	Server, ServerDescription       string
	Skills                          []string // skill ids (boosted field)
	// ReadOnly and Destructive are the tool's annotations (readOnlyHint,
	// destructiveHint), set only when the tool says so: a query's intent
	// ("show", "wipe") favours the tools that fit it.
	ReadOnly, Destructive bool
}

// DocFromTool builds a Doc from an MCP tool definition (params from the JSON input schema's
// "properties": names + "description"s; nested objects one level deep).
//
// A nested property is named "parent.child", whether it sits under an object
// parameter's "properties" or an array parameter's "items"; the string
// values of a parameter's enum follow its description. The tool's title,
// when it adds words the description lacks, is prefixed to the description.
// ReadOnly and Destructive come from the tool's annotations.
func DocFromTool(name, server, serverDescription string, t *mcp.Tool, skills []string) Doc {
	d := Doc{Name: name, Server: server, ServerDescription: serverDescription}
	if len(skills) > 0 {
		d.Skills = append([]string(nil), skills...)
	}
	if t == nil {
		return d
	}
	d.OriginalName = t.Name
	d.Description = t.Description
	title := t.Title
	if title == "" && t.Annotations != nil {
		title = t.Annotations.Title
	}
	if title != "" && title != t.Name && title != t.Description {
		if d.Description == "" {
			d.Description = title
		} else {
			d.Description = title + ". " + d.Description
		}
	}
	d.Params = schemaParams(t.InputSchema)
	if a := t.Annotations; a != nil {
		d.ReadOnly = a.ReadOnlyHint
		d.Destructive = !a.ReadOnlyHint && a.DestructiveHint != nil && *a.DestructiveHint
	}
	return d
}

// schemaParams lists the parameters of a JSON schema, whatever Go type holds
// it (a map from a client, json.RawMessage or a typed schema from a server).
func schemaParams(schema any) []Param {
	m := asMap(schema)
	if m == nil {
		return nil
	}
	var out []Param
	props, _ := m["properties"].(map[string]any)
	for _, name := range sortedKeys(props) {
		p, _ := props[name].(map[string]any)
		out = append(out, Param{Name: name, Description: paramText(p)})
		nested, _ := p["properties"].(map[string]any)
		if nested == nil {
			if items, ok := p["items"].(map[string]any); ok {
				nested, _ = items["properties"].(map[string]any)
			}
		}
		for _, child := range sortedKeys(nested) {
			c, _ := nested[child].(map[string]any)
			out = append(out, Param{Name: name + "." + child, Description: paramText(c)})
		}
	}
	return out
}

// paramText is what describes a parameter: its description and the string
// values of its enum, which callers search by ("squash", "dark", "png").
func paramText(p map[string]any) string {
	text := str(p["description"])
	enum, _ := p["enum"].([]any)
	if items, ok := p["items"].(map[string]any); ok && enum == nil {
		enum, _ = items["enum"].([]any)
	}
	var vals []string
	for _, v := range enum {
		if s, ok := v.(string); ok && s != "" {
			vals = append(vals, s)
		}
	}
	if len(vals) == 0 {
		return text
	}
	if text != "" {
		text += " "
	}
	return text + "(" + strings.Join(vals, ", ") + ")"
}

func asMap(v any) map[string]any {
	switch s := v.(type) {
	case nil:
		return nil
	case map[string]any:
		return s
	case json.RawMessage:
		var m map[string]any
		if json.Unmarshal(s, &m) != nil {
			return nil
		}
		return m
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
