package catalog

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func uriCatalog(t *testing.T) *Catalog {
	t.Helper()
	c := New(nil)
	mustSet(t, c, Entry{
		Server: "demo",
		Resources: []*mcp.Resource{
			{URI: "demo://readme", Name: "readme"},
			{URI: "file:///a+b.txt", Name: "plus"},
			{URI: "shared://x", Name: "shared"},
		},
		Templates: []*mcp.ResourceTemplate{{URITemplate: "demo://items/{id}", Name: "item"}},
	})
	mustSet(t, c, Entry{
		Server:    "other",
		Resources: []*mcp.Resource{{URI: "shared://x"}},
		Templates: []*mcp.ResourceTemplate{{URITemplate: "other://{+path}"}},
	})
	mustSet(t, c, Entry{
		Server:    "files",
		Prefix:    ptr(""),
		Resources: []*mcp.Resource{{URI: "file:///etc/hosts"}},
		Templates: []*mcp.ResourceTemplate{{URITemplate: "file:///srv/{name}"}},
	})
	// Two servers sharing a prefix: only their listings tell them apart.
	mustSet(t, c, Entry{Server: "p1", Prefix: ptr("p"), Templates: []*mcp.ResourceTemplate{{URITemplate: "one://{id}"}}})
	mustSet(t, c, Entry{Server: "p2", Prefix: ptr("p"), Resources: []*mcp.Resource{{URI: "two://1"}}})
	return c
}

func TestURIRoundTrip(t *testing.T) {
	snap := uriCatalog(t).Snapshot()
	tests := []struct {
		server, original, namespaced string
	}{
		{"demo", "demo://readme", "demo+demo://readme"},
		{"demo", "file:///a+b.txt", "demo+file:///a+b.txt"},
		{"demo", "demo://items/42", "demo+demo://items/42"}, // via template
		{"demo", "demo://unlisted", "demo+demo://unlisted"}, // prefix alone decides
		{"other", "other://deep/path/x", "other+other://deep/path/x"},
		{"files", "file:///etc/hosts", "file:///etc/hosts"},
		{"files", "file:///srv/index.html", "file:///srv/index.html"},
		{"p1", "one://7", "p+one://7"},
		{"p2", "two://1", "p+two://1"},
	}
	for _, tt := range tests {
		t.Run(tt.namespaced, func(t *testing.T) {
			if got := snap.NamespaceURI(tt.server, tt.original); got != tt.namespaced {
				t.Errorf("NamespaceURI(%q, %q) = %q, want %q", tt.server, tt.original, got, tt.namespaced)
			}
			server, original, ok := snap.ResolveURI(tt.namespaced)
			if diff := cmp.Diff([]any{tt.server, tt.original, true}, []any{server, original, ok}); diff != "" {
				t.Errorf("ResolveURI(%q) (-want +got):\n%s", tt.namespaced, diff)
			}
		})
	}
}

func TestResolveURI(t *testing.T) {
	snap := uriCatalog(t).Snapshot()
	type res struct {
		Server, Original string
		OK               bool
	}
	tests := []struct {
		uri  string
		want res
	}{
		// Original URIs of exactly one server resolve to it.
		{"demo://readme", res{"demo", "demo://readme", true}},
		{"demo://items/9", res{"demo", "demo://items/9", true}},
		// Listed by two servers: ambiguous.
		{"shared://x", res{}},
		{"demo+shared://x", res{"demo", "shared://x", true}},
		{"other+shared://x", res{"other", "shared://x", true}},
		// Shared prefix, nothing matches: no server can be chosen.
		{"p+three://1", res{}},
		// Unknown.
		{"", res{}},
		{"+", res{}},
		{"nope://x", res{}},
		{"unknown+demo://readme", res{}},
		{"file:///elsewhere", res{}},
	}
	for _, tt := range tests {
		server, original, ok := snap.ResolveURI(tt.uri)
		if diff := cmp.Diff(tt.want, res{server, original, ok}); diff != "" {
			t.Errorf("ResolveURI(%q) (-want +got):\n%s", tt.uri, diff)
		}
	}
}

func TestNamespacedDefinitions(t *testing.T) {
	snap := uriCatalog(t).Snapshot()
	var got []string
	for _, r := range snap.Resources() {
		got = append(got, r.Server+" "+r.URI+" "+r.Def.URI+" "+r.Def.Name)
	}
	want := []string{
		"demo demo+demo://readme demo+demo://readme demo.readme",
		"demo demo+file:///a+b.txt demo+file:///a+b.txt demo.plus",
		"demo demo+shared://x demo+shared://x demo.shared",
		"files file:///etc/hosts file:///etc/hosts ",
		"other other+shared://x other+shared://x ",
		"p2 p+two://1 p+two://1 ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	got = nil
	for _, tm := range snap.Templates() {
		got = append(got, tm.Server+" "+tm.URITemplate+" "+tm.OriginalURITemplate+" "+tm.Def.URITemplate+" "+tm.Def.Name)
	}
	want = []string{
		"demo demo+demo://items/{id} demo://items/{id} demo+demo://items/{id} demo.item",
		"files file:///srv/{name} file:///srv/{name} file:///srv/{name} ",
		"other other+other://{+path} other://{+path} other+other://{+path} ",
		"p1 p+one://{id} one://{id} p+one://{id} ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("templates (-want +got):\n%s", diff)
	}
	if got := snap.NamespaceURI("unknown", "x://y"); got != "x://y" {
		t.Errorf("NamespaceURI of an unknown server = %q, want it unchanged", got)
	}
}

func TestPrompts(t *testing.T) {
	c := New(&Options{Separator: "__"})
	mustSet(t, c, Entry{Server: "demo", Prompts: []*mcp.Prompt{{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}}}})
	mustSet(t, c, Entry{Server: "bare", Prefix: ptr(""), Prompts: []*mcp.Prompt{{Name: "plain"}}})
	snap := c.Snapshot()
	for name, want := range map[string]string{"demo__greet": "demo__greet", "demo.greet": "demo__greet", "plain": "plain"} {
		p, ok := snap.Prompt(name)
		if !ok || p.Name != want || p.Def.Name != want {
			t.Errorf("Prompt(%q) = %+v, %v; want %q", name, p, ok, want)
		}
	}
	if _, ok := snap.Prompt("greet"); ok {
		t.Error(`Prompt("greet") found an original name of a prefixed server`)
	}
	var got []string
	for _, p := range snap.Prompts() {
		got = append(got, p.Server+"/"+p.OriginalName+"/"+p.Name)
	}
	if diff := cmp.Diff([]string{"bare/plain/plain", "demo/greet/demo__greet"}, got); diff != "" {
		t.Errorf("Prompts() (-want +got):\n%s", diff)
	}
}
