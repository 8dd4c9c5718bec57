package clientcfg

import (
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// YAML renders definitions as the entries of a switchboard config's
// servers: mapping, indented by indent, keys in the order the
// configuration reference documents them.
func YAML(servers []*config.Server, indent string) ([]byte, error) {
	var b strings.Builder
	for _, s := range servers {
		ms := yaml.MapSlice{{Key: "transport", Value: s.Transport}}
		add := func(k string, v any) { ms = append(ms, yaml.MapItem{Key: k, Value: v}) }
		if s.Description != "" {
			add("description", s.Description)
		}
		if s.AutoStart != nil {
			add("auto_start", *s.AutoStart)
		}
		if s.Command != "" {
			add("command", s.Command)
		}
		if len(s.Args) > 0 {
			add("args", s.Args)
		}
		if len(s.Env) > 0 {
			add("env", sortedMap(s.Env))
		}
		if s.Cwd != "" {
			add("cwd", s.Cwd)
		}
		if s.URL != "" {
			add("url", s.URL)
		}
		if len(s.Headers) > 0 {
			add("headers", sortedMap(s.Headers))
		}
		body, err := yaml.MarshalWithOptions(yaml.MapSlice{{Key: s.Name, Value: ms}}, yaml.Indent(2), yaml.IndentSequence(true))
		if err != nil {
			return nil, fmt.Errorf("rendering server %q: %w", s.Name, err)
		}
		for _, line := range strings.SplitAfter(string(body), "\n") {
			if line != "" {
				b.WriteString(indent + line)
			}
		}
	}
	return []byte(b.String()), nil
}

func sortedMap(m map[string]string) yaml.MapSlice {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(yaml.MapSlice, len(keys))
	for i, k := range keys {
		out[i] = yaml.MapItem{Key: k, Value: m[k]}
	}
	return out
}
