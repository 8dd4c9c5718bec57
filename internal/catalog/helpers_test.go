package catalog

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// objectSchema is the smallest valid input schema.
func objectSchema() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{"msg": map[string]any{"type": "string"}}}
}

func tool(name string) *mcp.Tool {
	return &mcp.Tool{Name: name, Description: "does " + name, InputSchema: objectSchema()}
}

// rawTool is a tool as it might arrive off the wire, with its schema
// still encoded.
func rawTool(name, inputSchema string) *mcp.Tool {
	t := &mcp.Tool{Name: name}
	if inputSchema != "" {
		t.InputSchema = json.RawMessage(inputSchema)
	}
	return t
}

func tools(names ...string) []*mcp.Tool {
	var ts []*mcp.Tool
	for _, n := range names {
		ts = append(ts, tool(n))
	}
	return ts
}

func ptr(s string) *string { return &s }

func mustSet(t *testing.T, c *Catalog, e Entry) []Rejected {
	t.Helper()
	rej, err := c.Set(e)
	if err != nil {
		t.Fatalf("Set(%q): %v", e.Server, err)
	}
	return rej
}

func toolNamesOf(ts []Tool) []string {
	var names []string
	for _, t := range ts {
		names = append(names, t.Name)
	}
	return names
}
