package catalog

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzToolLookup feeds arbitrary strings to the lookups every request goes
// through, and as a tool name, resource URI and template to Set: nothing may
// panic, and whatever registers must resolve by the names it advertises.
func FuzzToolLookup(f *testing.F) {
	for _, s := range []string{
		"", ".", "__", "+", "demo.echo", "demo__echo", "echo", "demo+demo://readme",
		"demo+demo://items/1", "file:///etc/hosts", "p+one://1", "{", "{+x}", "x{y}z", "%zz",
		strings.Repeat("a", 70), "demo." + strings.Repeat("é", 40), "\x00", "a+b+c",
	} {
		f.Add(s)
	}
	base := New(nil)
	for _, e := range []Entry{
		{Server: "demo", Tools: tools("echo", strings.Repeat("long", 20)), Resources: []*mcp.Resource{{URI: "demo://readme"}},
			Templates: []*mcp.ResourceTemplate{{URITemplate: "demo://items/{id}"}}, Prompts: []*mcp.Prompt{{Name: "greet"}}},
		{Server: "files", Prefix: ptr(""), Tools: tools("read"), Templates: []*mcp.ResourceTemplate{{URITemplate: "file:///{+path}"}}},
		{Server: "p1", Prefix: ptr("p"), Templates: []*mcp.ResourceTemplate{{URITemplate: "one://{id}"}}},
		{Server: "p2", Prefix: ptr("p"), Resources: []*mcp.Resource{{URI: "two://1"}}},
	} {
		if _, err := base.Set(e); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		snap := base.Snapshot()
		if tool, ok := snap.Tool(s); ok {
			if again, ok := snap.Tool(tool.Name); !ok || again.Name != tool.Name {
				t.Fatalf("Tool(%q) found %q, which does not resolve to itself", s, tool.Name)
			}
		}
		snap.Prompt(s)
		if server, original, ok := snap.ResolveURI(s); ok {
			if server == "" {
				t.Fatalf("ResolveURI(%q) resolved to no server", s)
			}
			snap.NamespaceURI(server, original)
		}

		c := New(&Options{MaxNameLen: 20})
		rej, err := c.Set(Entry{
			Server:    "fz",
			Tools:     []*mcp.Tool{tool(s)},
			Resources: []*mcp.Resource{{URI: s}},
			Templates: []*mcp.ResourceTemplate{{URITemplate: s}},
			Prompts:   []*mcp.Prompt{{Name: s}},
		})
		if err != nil {
			t.Fatalf("Set: %v", err)
		}
		snap = c.Snapshot()
		if len(rej) == 0 && len(snap.Tools()) != 1 {
			t.Fatalf("nothing rejected, but %d tools registered", len(snap.Tools()))
		}
		for _, tool := range snap.Tools() {
			if len(tool.Name) > 20 {
				t.Fatalf("tool name %q is longer than MaxNameLen", tool.Name)
			}
			if got, ok := snap.Tool(tool.Name); !ok || got.OriginalName != s {
				t.Fatalf("Tool(%q) = %+v, %v", tool.Name, got, ok)
			}
		}
		for _, r := range snap.Resources() {
			if server, original, ok := snap.ResolveURI(r.URI); !ok || server != "fz" || original != s {
				t.Fatalf("ResolveURI(%q) = %q, %q, %v; want fz, %q", r.URI, server, original, ok, s)
			}
		}
		for _, p := range snap.Prompts() {
			if got, ok := snap.Prompt(p.Name); !ok || got.OriginalName != s {
				t.Fatalf("Prompt(%q) = %+v, %v", p.Name, got, ok)
			}
		}
	})
}

func BenchmarkSet1000(b *testing.B) {
	// Distinct schemas, so the first Set compiles all of them.
	var ts []*mcp.Tool
	for i := range 1000 {
		ts = append(ts, &mcp.Tool{
			Name:        fmt.Sprintf("tool_%04d", i),
			Description: "benchmark tool",
			InputSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					fmt.Sprintf("arg%d", i): map[string]any{"type": "string", "minLength": 1},
					"count":                 map[string]any{"type": "integer", "minimum": 0},
				},
				"required": []any{fmt.Sprintf("arg%d", i)},
			},
		})
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			c := New(nil)
			if _, err := c.Set(Entry{Server: "bench", Tools: ts}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := New(nil)
		available := false
		for b.Loop() {
			available = !available // a real change every time
			if _, err := c.Set(Entry{Server: "bench", Available: available, Tools: ts}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkToolLookup(b *testing.B) {
	c := New(nil)
	for s := range 20 {
		var ts []*mcp.Tool
		for i := range 50 {
			ts = append(ts, tool(fmt.Sprintf("tool_%d", i)))
		}
		if _, err := c.Set(Entry{Server: fmt.Sprintf("srv%d", s), Tools: ts}); err != nil {
			b.Fatal(err)
		}
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := c.Snapshot().Tool("srv7.tool_42"); !ok {
				b.Fatal("not found")
			}
		}
	})
}
