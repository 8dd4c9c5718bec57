package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wantShort computes the documented shortening independently of shorten.
func wantShort(full string, max int) string {
	sum := sha256.Sum256([]byte(full))
	return full[:max-9] + "_" + hex.EncodeToString(sum[:])[:8]
}

func TestNaming(t *testing.T) {
	long := strings.Repeat("x", 80)
	type hit struct{ Server, Original, Name string }
	tests := []struct {
		name      string
		opts      *Options
		entries   []Entry
		wantNames []string       // Tools(), in order
		lookups   map[string]hit // name → expected tool; zero hit = not found
	}{
		{
			name:      "default separator, prefix is the server name",
			entries:   []Entry{{Server: "demo", Tools: tools("echo")}},
			wantNames: []string{"demo.echo"},
			lookups: map[string]hit{
				"demo.echo":  {"demo", "echo", "demo.echo"},
				"demo__echo": {"demo", "echo", "demo.echo"},
				"echo":       {},
				"demo_echo":  {},
				"":           {},
			},
		},
		{
			name:      "double underscore separator",
			opts:      &Options{Separator: "__"},
			entries:   []Entry{{Server: "demo", Tools: tools("echo")}},
			wantNames: []string{"demo__echo"},
			lookups: map[string]hit{
				"demo__echo": {"demo", "echo", "demo__echo"},
				"demo.echo":  {"demo", "echo", "demo__echo"},
				"echo":       {},
			},
		},
		{
			name:      "empty prefix leaves names unchanged",
			entries:   []Entry{{Server: "demo", Prefix: ptr(""), Tools: tools("echo", "a.b")}},
			wantNames: []string{"a.b", "echo"},
			lookups: map[string]hit{
				"echo":      {"demo", "echo", "echo"},
				"a.b":       {"demo", "a.b", "a.b"},
				"a__b":      {},
				"demo.echo": {},
			},
		},
		{
			name:      "custom prefix",
			entries:   []Entry{{Server: "demo", Prefix: ptr("d"), Tools: tools("echo")}},
			wantNames: []string{"d.echo"},
			lookups: map[string]hit{
				"d.echo":    {"demo", "echo", "d.echo"},
				"d__echo":   {"demo", "echo", "d.echo"},
				"demo.echo": {},
			},
		},
		{
			name: "same original name on two servers",
			entries: []Entry{
				{Server: "b", Tools: tools("search")},
				{Server: "a", Tools: tools("search")},
			},
			wantNames: []string{"a.search", "b.search"},
			lookups: map[string]hit{
				"a.search":  {"a", "search", "a.search"},
				"b__search": {"b", "search", "b.search"},
				"search":    {},
			},
		},
		{
			name:      "original names containing separators",
			entries:   []Entry{{Server: "demo", Tools: tools("a.b", "a__b")}},
			wantNames: []string{"demo.a.b", "demo.a__b"},
			lookups: map[string]hit{
				"demo.a.b":   {"demo", "a.b", "demo.a.b"},
				"demo__a.b":  {"demo", "a.b", "demo.a.b"},
				"demo.a__b":  {"demo", "a__b", "demo.a__b"},
				"demo__a__b": {"demo", "a__b", "demo.a__b"},
			},
		},
		{
			name:      "long name shortened to exactly MaxNameLen",
			entries:   []Entry{{Server: "demo", Tools: tools(long)}},
			wantNames: []string{wantShort("demo."+long, 64)},
			lookups: map[string]hit{
				wantShort("demo."+long, 64):  {"demo", long, wantShort("demo."+long, 64)},
				wantShort("demo__"+long, 64): {"demo", long, wantShort("demo."+long, 64)},
				"demo." + long:               {"demo", long, wantShort("demo."+long, 64)},
				"demo__" + long:              {"demo", long, wantShort("demo."+long, 64)},
			},
		},
		{
			name:      "custom MaxNameLen",
			opts:      &Options{MaxNameLen: 20},
			entries:   []Entry{{Server: "demo", Tools: tools("exactly_fifteen", "sixteen_chars_xx")}},
			wantNames: []string{"demo.exactly_fifteen", wantShort("demo.sixteen_chars_xx", 20)},
		},
		{
			name:      "unprefixed long name is shortened too",
			entries:   []Entry{{Server: "demo", Prefix: ptr(""), Tools: tools(long)}},
			wantNames: []string{wantShort(long, 64)},
			lookups: map[string]hit{
				wantShort(long, 64): {"demo", long, wantShort(long, 64)},
				long:                {"demo", long, wantShort(long, 64)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(tt.opts)
			for _, e := range tt.entries {
				if rej := mustSet(t, c, e); len(rej) > 0 {
					t.Fatalf("Set(%q) rejected %v", e.Server, rej)
				}
			}
			snap := c.Snapshot()
			if diff := cmp.Diff(tt.wantNames, toolNamesOf(snap.Tools())); diff != "" {
				t.Errorf("Tools() names (-want +got):\n%s", diff)
			}
			for _, tool := range snap.Tools() {
				if max := c.maxLen; len(tool.Name) > max {
					t.Errorf("tool %q is %d bytes long, over %d", tool.Name, len(tool.Name), max)
				}
			}
			for name, want := range tt.lookups {
				got, ok := snap.Tool(name)
				if ok != (want != hit{}) {
					t.Errorf("Tool(%q) found = %v, want %v", name, ok, !ok)
					continue
				}
				if diff := cmp.Diff(want, hit{got.Server, got.OriginalName, got.Name}); ok && diff != "" {
					t.Errorf("Tool(%q) (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

func TestShortenedNamesStableAcrossSetOrder(t *testing.T) {
	// Names that agree on everything the shortened form keeps: only the hash
	// tells them apart, and it must not depend on registration order.
	head := strings.Repeat("n", 70)
	entries := []Entry{
		{Server: "alpha", Tools: tools(head+"_one", head+"_two", "short")},
		{Server: "beta", Tools: tools(head+"_one", head+"_three")},
		{Server: "gamma", Prefix: ptr(""), Tools: tools(head + "_four")},
	}
	orders := [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}}
	var first []string
	for _, order := range orders {
		c := New(nil)
		for _, i := range order {
			mustSet(t, c, entries[i])
		}
		names := toolNamesOf(c.Snapshot().Tools())
		seen := map[string]bool{}
		for _, n := range names {
			if n != "alpha.short" && len(n) != 64 {
				t.Errorf("order %v: %q is %d bytes, want exactly 64", order, n, len(n))
			}
			if seen[n] {
				t.Errorf("order %v: duplicate name %q", order, n)
			}
			seen[n] = true
		}
		if first == nil {
			first = names
			continue
		}
		if diff := cmp.Diff(first, names); diff != "" {
			t.Errorf("order %v gives other names (-first +this):\n%s", order, diff)
		}
	}
}

func TestShorten(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short", 64, "short"},
		{strings.Repeat("a", 64), 64, strings.Repeat("a", 64)},
		{strings.Repeat("a", 65), 64, wantShort(strings.Repeat("a", 65), 64)},
		{strings.Repeat("b", 200), 16, wantShort(strings.Repeat("b", 200), 16)},
	}
	for _, tt := range tests {
		got := shorten(tt.in, tt.max)
		if got != tt.want {
			t.Errorf("shorten(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
		if len(got) > tt.max {
			t.Errorf("shorten(%q, %d) is %d bytes long", tt.in, tt.max, len(got))
		}
	}
}

func TestToolDefIsACopy(t *testing.T) {
	upstream := tool("echo")
	upstream.Meta = mcp.Meta{"k": "v"}
	c := New(nil)
	mustSet(t, c, Entry{Server: "demo", Tools: []*mcp.Tool{upstream}})
	got, ok := c.Snapshot().Tool("demo.echo")
	if !ok {
		t.Fatal("demo.echo not found")
	}
	if upstream.Name != "echo" {
		t.Errorf("upstream definition renamed to %q", upstream.Name)
	}
	if got.Def.Name != "demo.echo" {
		t.Errorf("Def.Name = %q, want demo.echo", got.Def.Name)
	}
	// Mutating the upstream's values afterwards must not reach the catalog.
	upstream.InputSchema.(map[string]any)["type"] = "string"
	upstream.Meta["k"] = "changed"
	if typ := got.Def.InputSchema.(map[string]any)["type"]; typ != "object" {
		t.Errorf("Def.InputSchema shares the upstream map: type = %v", typ)
	}
	if v := got.Def.Meta["k"]; v != "v" {
		t.Errorf("Def.Meta shares the upstream map: k = %v", v)
	}
	data, err := json.Marshal(got.Def)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if want := hex.EncodeToString(sum[:]); got.Hash != want {
		t.Errorf("Hash = %s, want sha256 of the Def's JSON %s", got.Hash, want)
	}
}

func TestHashTracksDefinition(t *testing.T) {
	hashOf := func(t *testing.T, def *mcp.Tool) string {
		t.Helper()
		c := New(nil)
		mustSet(t, c, Entry{Server: "demo", Tools: []*mcp.Tool{def}})
		got, ok := c.Snapshot().Tool("demo.echo")
		if !ok {
			t.Fatal("demo.echo not found")
		}
		return got.Hash
	}
	base := hashOf(t, tool("echo"))
	// Same schema, encoded with another key order: same definition.
	raw := rawTool("echo", `{"properties":{"msg":{"type":"string"}},"type":"object"}`)
	raw.Description = "does echo"
	if h := hashOf(t, raw); h != base {
		t.Errorf("re-ordered schema keys changed the hash: %s != %s", h, base)
	}
	changed := tool("echo")
	changed.Description = "does something else"
	if h := hashOf(t, changed); h == base {
		t.Error("changing the description did not change the hash")
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, opts := range []*Options{{Separator: "/"}, {Separator: "-"}, {MaxNameLen: 8}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%+v) did not panic", *opts)
				}
			}()
			New(opts)
		}()
	}
	if got := New(&Options{}).Snapshot().Separator(); got != "." {
		t.Errorf("default separator = %q, want \".\"", got)
	}
}
