package catalog

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestEmptyCatalog(t *testing.T) {
	snap := New(nil).Snapshot()
	if snap == nil {
		t.Fatal("Snapshot() = nil")
	}
	if snap.Version() != 0 || len(snap.Tools()) != 0 || len(snap.Servers()) != 0 {
		t.Errorf("new catalog: version %d, %d tools, %d servers", snap.Version(), len(snap.Tools()), len(snap.Servers()))
	}
	if _, ok := snap.Tool("x.y"); ok {
		t.Error("empty catalog found a tool")
	}
	if snap.ServerTools("x") != nil || snap.Rejected("x") != nil {
		t.Error("empty catalog has items for an unknown server")
	}
}

func TestSortingAndLookups(t *testing.T) {
	c := New(nil)
	mustSet(t, c, Entry{Server: "zeta", Available: true, Tools: tools("b", "a")})
	mustSet(t, c, Entry{Server: "alpha", Prefix: ptr("zz"), Tools: tools("y", "x")})
	snap := c.Snapshot()
	if diff := cmp.Diff([]string{"alpha", "zeta"}, snap.Servers()); diff != "" {
		t.Errorf("Servers() (-want +got):\n%s", diff)
	}
	// By server first, so alpha's "zz.*" precede zeta's "zeta.*".
	if diff := cmp.Diff([]string{"zz.x", "zz.y", "zeta.a", "zeta.b"}, toolNamesOf(snap.Tools())); diff != "" {
		t.Errorf("Tools() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"zeta.a", "zeta.b"}, toolNamesOf(snap.ServerTools("zeta"))); diff != "" {
		t.Errorf("ServerTools(zeta) (-want +got):\n%s", diff)
	}
	got, ok := snap.ToolByOriginal("alpha", "y")
	if !ok || got.Name != "zz.y" || got.Available {
		t.Errorf("ToolByOriginal(alpha, y) = %+v, %v", got, ok)
	}
	if _, ok := snap.ToolByOriginal("alpha", "zz.y"); ok {
		t.Error("ToolByOriginal accepted a namespaced name")
	}
	if _, ok := snap.ToolByOriginal("nope", "y"); ok {
		t.Error("ToolByOriginal found a tool of an unknown server")
	}
	if z, _ := snap.Tool("zeta__b"); !z.Available || z.OriginalName != "b" {
		t.Errorf("Tool(zeta__b) = %+v", z)
	}
}

func TestSetAvailable(t *testing.T) {
	c := New(nil)
	mustSet(t, c, Entry{
		Server: "demo", Available: true, Tools: tools("a", "b"),
		Resources: []*mcp.Resource{{URI: "demo://r"}},
		Templates: []*mcp.ResourceTemplate{{URITemplate: "demo://{x}"}},
		Prompts:   []*mcp.Prompt{{Name: "p"}},
	})
	mustSet(t, c, Entry{Server: "other", Available: true, Tools: tools("a")})
	before := c.Snapshot()

	c.SetAvailable("demo", false)
	snap := c.Snapshot()
	if snap.Version() != before.Version()+1 {
		t.Errorf("version %d → %d, want +1", before.Version(), snap.Version())
	}
	var got []string
	for _, tool := range snap.Tools() {
		got = append(got, fmt.Sprintf("%s=%v", tool.Name, tool.Available))
	}
	for _, r := range snap.Resources() {
		got = append(got, fmt.Sprintf("%s=%v", r.URI, r.Available))
	}
	for _, tm := range snap.Templates() {
		got = append(got, fmt.Sprintf("%s=%v", tm.URITemplate, tm.Available))
	}
	for _, p := range snap.Prompts() {
		got = append(got, fmt.Sprintf("%s=%v", p.Name, p.Available))
	}
	want := []string{"demo.a=false", "demo.b=false", "other.a=true", "demo+demo://r=false", "demo+demo://{x}=false", "demo.p=false"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("availability (-want +got):\n%s", diff)
	}
	if tool, _ := snap.Tool("demo__a"); tool.Available {
		t.Error("lookup by the other separator form sees a stale availability")
	}
	// The old snapshot is immutable.
	if tool, _ := before.Tool("demo.a"); !tool.Available {
		t.Error("SetAvailable modified an earlier snapshot")
	}

	// No-ops: same availability, unknown server.
	c.SetAvailable("demo", false)
	c.SetAvailable("unknown", true)
	if v := c.Snapshot().Version(); v != snap.Version() {
		t.Errorf("no-op SetAvailable changed the version to %d", v)
	}
	c.SetAvailable("demo", true)
	if tool, _ := c.Snapshot().Tool("demo.b"); !tool.Available {
		t.Error("SetAvailable(true) did not mark demo.b available")
	}
}

func TestRemove(t *testing.T) {
	c := New(nil)
	mustSet(t, c, Entry{Server: "a", Tools: tools("x"), Resources: []*mcp.Resource{{URI: "a://r"}}})
	mustSet(t, c, Entry{Server: "b", Tools: tools("x")})
	before := c.Snapshot()
	c.Remove("a")
	snap := c.Snapshot()
	if snap.Version() != before.Version()+1 {
		t.Errorf("version %d → %d, want +1", before.Version(), snap.Version())
	}
	if diff := cmp.Diff([]string{"b.x"}, toolNamesOf(snap.Tools())); diff != "" {
		t.Errorf("tools after Remove (-want +got):\n%s", diff)
	}
	if _, ok := snap.Tool("a.x"); ok {
		t.Error("a.x still resolves")
	}
	if _, _, ok := snap.ResolveURI("a+a://r"); ok {
		t.Error("a removed server's URI still resolves")
	}
	if _, ok := before.Tool("a.x"); !ok {
		t.Error("Remove modified an earlier snapshot")
	}
	c.Remove("a")
	c.Remove("never")
	if v := c.Snapshot().Version(); v != snap.Version() {
		t.Errorf("removing unknown servers changed the version to %d", v)
	}
	// A removed server's names are free again.
	mustSet(t, c, Entry{Server: "c", Prefix: ptr("a"), Tools: tools("x")})
}

func TestVersionAndSubscribe(t *testing.T) {
	c := New(nil)
	type change struct{ Old, New uint64 }
	var got []change
	cancel := c.Subscribe(func(old, new *Snapshot) {
		if c.Snapshot() != new {
			t.Error("subscriber called before the swap")
		}
		got = append(got, change{old.Version(), new.Version()})
	})
	var second int
	var cancelSecond func()
	cancelSecond = c.Subscribe(func(old, new *Snapshot) {
		second++
		cancelSecond() // cancelling from inside a callback must not deadlock
	})

	e := Entry{Server: "demo", Tools: tools("a")}
	mustSet(t, c, e)                                                              // 0 → 1
	mustSet(t, c, e)                                                              // identical: no change
	mustSet(t, c, Entry{Server: "demo", Tools: []*mcp.Tool{tool("a")}})           // equal copy: no change
	mustSet(t, c, Entry{Server: "demo", Tools: tools("a", "b")})                  // 1 → 2
	mustSet(t, c, Entry{Server: "demo", Tools: tools("b", "a")})                  // same set, other order: no change
	mustSet(t, c, Entry{Server: "demo", Available: true, Tools: tools("a", "b")}) // 2 → 3
	c.SetAvailable("demo", false)                                                 // 3 → 4
	c.Remove("demo")                                                              // 4 → 5
	if _, err := c.Set(Entry{Server: "BAD"}); err == nil {
		t.Fatal("invalid server accepted")
	}
	cancel()
	cancel()         // idempotent
	mustSet(t, c, e) // 5 → 6, nobody listening

	want := []change{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes seen (-want +got):\n%s", diff)
	}
	if second != 1 {
		t.Errorf("self-cancelling subscriber called %d times, want 1", second)
	}
	if v := c.Snapshot().Version(); v != 6 {
		t.Errorf("final version %d, want 6", v)
	}
}

func TestSetReturnsRejectedEvenWhenUnchanged(t *testing.T) {
	c := New(nil)
	e := Entry{Server: "demo", Tools: []*mcp.Tool{tool("ok"), tool("bad name")}}
	first := mustSet(t, c, e)
	v := c.Snapshot().Version()
	again := mustSet(t, c, e)
	if diff := cmp.Diff(first, again); diff != "" || len(first) != 1 {
		t.Errorf("rejected on re-Set (-first +again):\n%s", diff)
	}
	if c.Snapshot().Version() != v {
		t.Error("identical re-Set changed the version")
	}
}

// TestConcurrentReadersAndWriter runs under -race: readers must always see
// a self-consistent snapshot while a writer keeps replacing it.
func TestConcurrentReadersAndWriter(t *testing.T) {
	c := New(nil)
	mustSet(t, c, Entry{Server: "s0", Tools: tools("t0", "t1")})
	var done atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !done.Load() {
				snap := c.Snapshot()
				for _, tool := range snap.Tools() {
					got, ok := snap.Tool(tool.Name)
					if !ok || got.Server != tool.Server || got.Available != tool.Available {
						t.Errorf("v%d: Tool(%q) = %+v, %v; want %+v", snap.Version(), tool.Name, got, ok, tool)
						return
					}
					if byOrig, ok := snap.ToolByOriginal(tool.Server, tool.OriginalName); !ok || byOrig.Name != tool.Name {
						t.Errorf("v%d: ToolByOriginal(%q, %q) = %+v, %v", snap.Version(), tool.Server, tool.OriginalName, byOrig, ok)
						return
					}
				}
				snap.ResolveURI("s1+x://y")
			}
		})
	}
	for i := range 200 {
		server := fmt.Sprintf("s%d", i%3)
		switch i % 4 {
		case 0, 1:
			mustSet(t, c, Entry{Server: server, Available: i%2 == 0, Tools: tools(fmt.Sprintf("t%d", i), "common")})
		case 2:
			c.SetAvailable(server, i%3 == 0)
		case 3:
			c.Remove(server)
		}
	}
	done.Store(true)
	wg.Wait()
}
