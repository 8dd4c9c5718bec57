package toolsearch_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/servers"
	"github.com/switchboard-mcp/switchboard/internal/skills"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/toolsearch"
)

// registry is the registered servers, by name: the service only asks it
// for names, ids and descriptions.
type registry map[string]servers.Info

func (r registry) Lookup(name string) (servers.Info, bool) {
	i, ok := r[name]
	return i, ok
}

func (r registry) Resolve(idOrName string) (servers.Info, bool) {
	for _, i := range r {
		if i.ID == idOrName || i.Name == idOrName {
			return i, true
		}
	}
	return servers.Info{}, false
}

var known = registry{
	"github": {ID: "id-github", Name: "github", Description: "GitHub repositories, issues and pull requests"},
	"notes":  {ID: "id-notes", Name: "notes", Description: "A personal note store"},
	"vault":  {ID: "id-vault", Name: "vault", Description: "Secrets"},
	"twins":  {ID: "id-twins", Name: "twins"},
}

func tool(name, desc string, params ...string) *mcp.Tool {
	props := map[string]any{}
	for _, p := range params {
		props[p] = map[string]any{"type": "string"}
	}
	return &mcp.Tool{Name: name, Description: desc, InputSchema: map[string]any{"type": "object", "properties": props}}
}

var githubTools = []*mcp.Tool{
	tool("create_issue", "Create a new issue in a GitHub repository", "owner", "repo", "title", "body"),
	tool("list_issues", "List issues in a GitHub repository", "owner", "repo"),
	tool("close_issue", "Close an issue in a GitHub repository", "owner", "repo", "number"),
	tool("create_pull_request", "Open a pull request from a branch", "owner", "repo", "head", "base"),
	tool("merge_pull_request", "Merge a pull request", "owner", "repo", "number"),
}

// twinTools differ only by name: their classifications tie.
var twinTools = []*mcp.Tool{
	tool("omega", "Create a new issue in a GitHub repository", "owner", "repo", "title", "body"),
	tool("alpha", "Create a new issue in a GitHub repository", "owner", "repo", "title", "body"),
}

var notesTools = []*mcp.Tool{
	tool("write_note", "Write a note to the personal note store", "title", "text"),
	tool("search_notes", "Search the notes by text", "query"),
}

var vaultTools = []*mcp.Tool{
	tool("create_issue", "Create a new issue in a GitHub repository", "owner", "repo", "title", "body"),
}

// service runs a search service over cat until the test ends. Only the
// agent "admin" sees the vault's tools.
func service(t *testing.T, cat *catalog.Catalog) (*toolsearch.Service, func()) {
	t.Helper()
	svc, err := toolsearch.New(cat, &toolsearch.Options{
		Servers: known,
		Status:  func(server string) string { return "CONNECTED" },
		Visible: func(id authz.Identity, tl catalog.Tool) bool { return id.AgentID == "admin" || tl.Server != "vault" },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30 s of its context ending")
		}
	}
	t.Cleanup(stop)
	return svc, stop
}

func set(t *testing.T, cat *catalog.Catalog, server string, available bool, tools []*mcp.Tool) {
	t.Helper()
	if _, err := cat.Set(catalog.Entry{Server: server, Available: available, Tools: tools}); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond every 5 ms; it fails the test after 30 s (a bound
// on a broken build: the index follows the catalog in the background).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func search(t *testing.T, svc *toolsearch.Service, agent, query string, serverFilter ...string) []string {
	t.Helper()
	resp, err := svc.Search(t.Context(), authz.Identity{AgentID: agent}, api.SearchRequest{Query: query, ServerFilter: serverFilter, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range resp.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// TestRunFollowsCatalog checks the index follows the catalog: a server's
// tools become searchable when set, change with it, and are forgotten
// with it.
func TestRunFollowsCatalog(t *testing.T) {
	cat := catalog.New(nil)
	set(t, cat, "github", true, githubTools) // before the service: indexed at its start
	svc, _ := service(t, cat)
	eventually(t, "github indexed", func() bool {
		return slices.Contains(search(t, svc, "bot", "create issue"), "github.create_issue")
	})
	if got := search(t, svc, "bot", "create issue"); got[0] != "github.create_issue" {
		t.Errorf("best hit for %q: %v", "create issue", got)
	}

	set(t, cat, "notes", true, notesTools)
	eventually(t, "notes indexed", func() bool {
		return slices.Contains(search(t, svc, "bot", "write a note"), "notes.write_note")
	})

	// A changed definition is indexed again.
	if got := search(t, svc, "bot", "zanzibar"); len(got) > 0 {
		t.Fatalf("found %v for a word no tool has yet", got)
	}
	changed := slices.Clone(notesTools)
	changed[1] = tool("search_notes", "Find zanzibar entries by keyword", "query")
	set(t, cat, "notes", true, changed)
	eventually(t, "the changed definition indexed", func() bool {
		return slices.Contains(search(t, svc, "bot", "zanzibar"), "notes.search_notes")
	})

	// A removed server's tools are forgotten: not found, not classified.
	names := []string{"notes.write_note", "notes.search_notes"}
	if len(svc.ToolSkills(t.Context(), names)) == 0 {
		t.Fatal("the notes tools were never classified")
	}
	cat.Remove("notes")
	eventually(t, "notes forgotten", func() bool { return len(svc.ToolSkills(t.Context(), names)) == 0 })
	if got := search(t, svc, "bot", "write a note"); slices.ContainsFunc(got, func(n string) bool { return strings.HasPrefix(n, "notes.") }) {
		t.Errorf("the removed server's tools are found: %v", got)
	}
	if got := search(t, svc, "bot", "create issue"); len(got) == 0 || got[0] != "github.create_issue" {
		t.Errorf("the other server's tools after the removal: %v", got)
	}
}

// TestNewWithoutOptions checks a service built with no options at all
// indexes and serves tools (of servers it knows nothing about).
func TestNewWithoutOptions(t *testing.T) {
	cat := catalog.New(nil)
	svc, err := toolsearch.New(cat, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	set(t, cat, "github", true, githubTools)
	eventually(t, "indexed", func() bool { return slices.Contains(search(t, svc, "bot", "create issue"), "github.create_issue") })
	resp, err := svc.Search(t.Context(), authz.Identity{}, api.SearchRequest{Query: "merge pull request", ServerFilter: []string{"github"}})
	if err != nil || len(resp.Tools) == 0 || resp.Tools[0].SourceServer.Name != "github" || resp.Tools[0].SourceServer.Status != "DISCONNECTED" {
		t.Errorf("search without a registry: %+v, %v", resp.Tools, err)
	}
}

// TestSearchFilters checks what a caller finds: only available tools it
// may call, of the servers it asks for (by name or id).
func TestSearchFilters(t *testing.T) {
	cat := catalog.New(nil)
	svc, _ := service(t, cat)
	set(t, cat, "github", true, githubTools)
	set(t, cat, "vault", true, vaultTools)
	set(t, cat, "notes", false, notesTools) // known, not connected
	eventually(t, "indexed", func() bool { return len(search(t, svc, "admin", "issue")) > 0 })

	tests := []struct {
		name, agent, query string
		servers            []string
		want               []string // the hits' servers, sorted, deduplicated
	}{
		{"the vault is hidden from a bot", "bot", "issue", nil, []string{"github"}},
		{"the vault is visible to the admin", "admin", "issue", nil, []string{"github", "vault"}},
		{"an unavailable server is not searched", "admin", "write a note", []string{"notes"}, nil},
		{"server filter by name", "admin", "issue", []string{"vault"}, []string{"vault"}},
		{"server filter by id", "admin", "issue", []string{"id-github"}, []string{"github"}},
		{"a server filter hides nothing more", "bot", "issue", []string{"vault"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, name := range search(t, svc, tc.agent, tc.query, tc.servers...) {
				server, _, _ := strings.Cut(name, ".")
				if !slices.Contains(got, server) {
					got = append(got, server)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("servers of the hits (-want +got):\n%s", diff)
			}
		})
	}

	// Connected, the server's tools are found.
	cat.SetAvailable("notes", true)
	eventually(t, "notes available", func() bool {
		return slices.Contains(search(t, svc, "bot", "write a note", "notes"), "notes.write_note")
	})
}

// TestSkillTools checks a skill's tools come most confident first (then by
// name), only those the caller may call, and an unknown skill is not found.
func TestSkillTools(t *testing.T) {
	ctx := t.Context()
	cat := catalog.New(nil)
	svc, _ := service(t, cat)
	set(t, cat, "github", true, githubTools)
	set(t, cat, "twins", true, twinTools)
	set(t, cat, "vault", true, vaultTools)
	set(t, cat, "notes", true, notesTools)
	var all []string
	for _, tl := range cat.Snapshot().Tools() {
		all = append(all, tl.Name)
	}
	var classes map[string]skillsOf
	eventually(t, "every tool classified", func() bool {
		classes = classify(svc.ToolSkills(ctx, all))
		return len(classes) == len(all)
	})

	// Of the vault's tool's skills, the one most tools have, so that there
	// is an order to check and a tool the filter must hide.
	count := map[string]int{}
	for _, c := range classes {
		for id := range c {
			count[id]++
		}
	}
	var skill string
	for id := range classes["vault.create_issue"] {
		if n := count[id]; n > count[skill] || (n == count[skill] && id < skill) {
			skill = id
		}
	}
	if count[skill] < 2 {
		t.Fatalf("no skill shared by two tools: %v", classes)
	}
	// Ties are ordered by name: the twins must tie for the check to count,
	// and the vault's tool must be one a bot would find but for its filter.
	if a, o := classes["twins.alpha"][skill], classes["twins.omega"][skill]; a == 0 || a != o {
		t.Fatalf("the twins do not tie on skill %s: %v %v", skill, classes["twins.alpha"], classes["twins.omega"])
	}
	if classes["vault.create_issue"][skill] == 0 {
		t.Fatalf("the vault's tool is not in skill %s: %v", skill, classes["vault.create_issue"])
	}

	for _, agent := range []string{"bot", "admin"} {
		t.Run(agent, func(t *testing.T) {
			got, err := svc.SkillTools(ctx, authz.Identity{AgentID: agent}, skill, 0)
			if err != nil {
				t.Fatal(err)
			}
			// What ToolSkills says, ordered by confidence then name.
			type entry struct {
				name string
				conf float64
			}
			var want []entry
			for name, c := range classes {
				if conf, ok := c[skill]; ok && (agent == "admin" || !strings.HasPrefix(name, "vault.")) {
					want = append(want, entry{name, conf})
				}
			}
			slices.SortFunc(want, func(x, y entry) int {
				switch {
				case x.conf > y.conf:
					return -1
				case x.conf < y.conf:
					return 1
				}
				return strings.Compare(x.name, y.name)
			})
			var wantNames, gotNames []string
			for _, e := range want {
				wantNames = append(wantNames, e.name)
			}
			for i, tl := range got {
				gotNames = append(gotNames, tl.Name)
				if i > 0 && tl.Score > got[i-1].Score {
					t.Errorf("%s (%.3f) after %s (%.3f): not most confident first", tl.Name, tl.Score, got[i-1].Name, got[i-1].Score)
				}
				if !slices.Contains(tl.SkillIDs, skill) || tl.SourceServer.ID != known[tl.SourceServer.Name].ID {
					t.Errorf("view %+v", tl)
				}
			}
			if diff := cmp.Diff(wantNames, gotNames); diff != "" {
				t.Errorf("tools of skill %s (-want +got):\n%s", skill, diff)
			}
			limited, err := svc.SkillTools(ctx, authz.Identity{AgentID: agent}, skill, 1)
			if err != nil || len(limited) != 1 || limited[0].Name != gotNames[0] {
				t.Errorf("limit 1: %v, %v; want the first, %s", limited, err, gotNames[0])
			}
		})
	}

	if _, err := svc.SkillTools(ctx, authz.Identity{AgentID: "bot"}, "no-such-skill", 0); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "no-such-skill") {
		t.Errorf("unknown skill: %v, want a not found naming it", err)
	}
}

// skillsOf is a tool's skills and their confidence.
type skillsOf map[string]float64

func classify(m map[string]skills.Classification) map[string]skillsOf {
	out := map[string]skillsOf{}
	for name, c := range m {
		s := skillsOf{}
		for _, a := range c.Skills {
			s[a.SkillID] = a.Confidence
		}
		out[name] = s
	}
	return out
}
