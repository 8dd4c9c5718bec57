package front_test

import (
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

// TestListedItems checks which resources, templates and prompts a front
// serves and under which names: the aggregate front lists every available
// server's items as the catalog namespaces them, a server's transparent
// front only that server's, under the upstream's own names, and
// ServerVisible hides the items of the servers a caller may not use.
func TestListedItems(t *testing.T) {
	cat := catalog.New(nil)
	for _, e := range []struct {
		server    string
		available bool
	}{{"demo", true}, {"other", true}, {"down", false}} {
		if _, err := cat.Set(catalog.Entry{
			Server: e.server, Available: e.available,
			Resources: []*mcp.Resource{{Name: "readme", URI: "file:///" + e.server + "/readme"}},
			Templates: []*mcp.ResourceTemplate{{Name: "page", URITemplate: "file:///" + e.server + "/{page}"}},
			Prompts:   []*mcp.Prompt{{Name: "greet"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	snap := cat.Snapshot()
	// namespaced and original give the names each front should list for
	// the given servers' items.
	namespaced := func(servers ...string) (res, tpl, pr []string) {
		for _, r := range snap.Resources() {
			if slices.Contains(servers, r.Server) {
				res = append(res, r.Def.Name+" "+r.Def.URI)
			}
		}
		for _, tp := range snap.Templates() {
			if slices.Contains(servers, tp.Server) {
				tpl = append(tpl, tp.Def.Name+" "+tp.Def.URITemplate)
			}
		}
		for _, p := range snap.Prompts() {
			if slices.Contains(servers, p.Server) {
				pr = append(pr, p.Def.Name)
			}
		}
		return res, tpl, pr
	}
	allRes, allTpl, allPr := namespaced("demo", "other")
	demoRes, demoTpl, demoPr := namespaced("demo")
	if len(allRes) != 2 || len(allTpl) != 2 || len(allPr) != 2 {
		t.Fatalf("catalog has %v, %v, %v; want two of each", allRes, allTpl, allPr)
	}

	pipe := invoke.New(cat, nil, nil)
	for _, tc := range []struct {
		name         string
		opts         front.Options
		res, tpl, pr []string
	}{
		{"aggregate", front.Options{}, allRes, allTpl, allPr},
		{"aggregate, one server visible", front.Options{ServerVisible: func(_ authz.Identity, s string) bool { return s == "demo" }},
			demoRes, demoTpl, demoPr},
		{"aggregate, nothing visible", front.Options{ServerVisible: func(authz.Identity, string) bool { return false }},
			nil, nil, nil},
		{"transparent", front.Options{Server: "demo"},
			[]string{"readme file:///demo/readme"}, []string{"page file:///demo/{page}"}, []string{"greet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := connectFront(t, front.New(cat, pipe, &tc.opts), authz.LocalAdmin())
			var res, tpl, pr []string
			lr, err := cs.ListResources(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range lr.Resources {
				res = append(res, r.Name+" "+r.URI)
			}
			lt, err := cs.ListResourceTemplates(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range lt.ResourceTemplates {
				tpl = append(tpl, r.Name+" "+r.URITemplate)
			}
			lp, err := cs.ListPrompts(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range lp.Prompts {
				pr = append(pr, p.Name)
			}
			for _, got := range []struct {
				what      string
				got, want []string
			}{{"resources", res, tc.res}, {"templates", tpl, tc.tpl}, {"prompts", pr, tc.pr}} {
				slices.Sort(got.got)
				slices.Sort(got.want)
				if !slices.Equal(got.got, got.want) {
					t.Errorf("%s = %q, want %q", got.what, got.got, got.want)
				}
			}
		})
	}
}

// connectFront connects a client to f in memory as id; the test's end
// closes both and f.
func connectFront(t *testing.T, f *front.Front, id authz.Identity) *mcp.ClientSession {
	t.Helper()
	t.Cleanup(f.Close)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := f.Server().Connect(authz.WithIdentity(t.Context(), id), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
