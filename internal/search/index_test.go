package search

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestTokenize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"getHTTPResponse2", []string{"get", "http", "respons", "2", "gethttpresponse2"}},
		{"read_text_file", []string{"read", "text", "file", "readtextfile"}},
		{"list-directory-with-sizes", []string{"list", "directory", "size", "listdirectorywithsizes"}},
		{"filesystem.read_file", []string{"filesystem", "read", "file", "filesystemreadfile"}},
		{"Send a message to the channel.", []string{"send", "messag", "channel"}},
		{"creating created creates", []string{"creat", "creat", "creat"}},
		{"s3 bucket", []string{"3", "s3", "bucket"}}, // "s" is a stopword ("what's")
		{"  ", nil},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Tokenize(tc.in)); diff != "" {
				t.Errorf("Tokenize(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestStem(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"files", "file"}, {"file", "file"}, {"sizes", "size"}, {"sizing", "size"}, {"entries", "entry"}, {"queries", "query"},
		{"branches", "branch"}, {"processes", "process"}, {"status", "status"},
		{"running", "run"}, {"listing", "list"}, {"moving", "move"}, {"move", "move"},
		{"created", "creat"}, {"create", "creat"}, {"copied", "copy"}, {"added", "add"},
		{"servers", "serv"}, {"user", "user"}, {"string", "string"}, {"ec2", "ec2"},
	} {
		if got := Stem(tc.in); got != tc.want {
			t.Errorf("Stem(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		max  int
		want int
	}{
		{"serch", "search", 1, 1}, {"search", "saerch", 1, 1}, {"reposotory", "repository", 2, 1},
		{"kubernets", "kubernetes", 2, 1}, {"abc", "xyz", 1, 2}, {"same", "same", 1, 0},
	} {
		if got := editDistance(tc.a, tc.b, tc.max); got != tc.want {
			t.Errorf("editDistance(%q, %q, %d) = %d, want %d", tc.a, tc.b, tc.max, got, tc.want)
		}
	}
}

func TestDocFromTool(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{
		"path":{"type":"string","description":"file path"},
		"edits":{"type":"array","items":{"type":"object","properties":{"oldText":{"description":"text to find"}}}},
		"opts":{"type":"object","properties":{"dryRun":{"type":"boolean"}}}}}`)
	var mapSchema map[string]any
	if err := json.Unmarshal(schema, &mapSchema); err != nil {
		t.Fatal(err)
	}
	want := Doc{
		Name: "fs.edit_file", OriginalName: "edit_file", Description: "Edit a file",
		Params: []Param{
			{Name: "edits"}, {Name: "edits.oldText", Description: "text to find"},
			{Name: "opts"}, {Name: "opts.dryRun"},
			{Name: "path", Description: "file path"},
		},
		Server: "fs", ServerDescription: "files", Skills: []string{"file-system"},
	}
	for name, s := range map[string]any{"raw": schema, "map": mapSchema} {
		t.Run(name, func(t *testing.T) {
			got := DocFromTool("fs.edit_file", "fs", "files", &mcp.Tool{Name: "edit_file", Description: "Edit a file", InputSchema: s}, []string{"file-system"})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func doc(server, tool, desc string, skills ...string) Doc {
	return Doc{Name: server + "." + tool, OriginalName: tool, Description: desc, Server: server, Skills: skills}
}

// TestIndexUpdatesAndFilters runs with and without the semantic layer. The
// lexical ranking's hits are exact; the default may add related tools
// after them (the WordNet relatives of "issues" include "document").
func TestIndexUpdatesAndFilters(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts *Options
	}{{"lexical", &Options{LexicalOnly: true}}, {"default", nil}} {
		t.Run(mode.name, func(t *testing.T) { testIndexUpdatesAndFilters(t, mode.opts) })
	}
}

// hitsMatch reports whether got is want, or, with the semantic layer,
// starts with want.
func hitsMatch(opts *Options, want, got []string) bool {
	if opts == nil && len(got) >= len(want) {
		got = got[:len(want)]
	}
	return cmp.Equal(want, got)
}

func testIndexUpdatesAndFilters(t *testing.T, opts *Options) {
	ctx := context.Background()
	ix := NewIndex(opts)
	t.Cleanup(ix.Close)
	ix.Upsert(
		doc("gh", "search_issues", "Search issues", "code"),
		doc("gh", "create_issue", "Create an issue", "code"),
		doc("jira", "search_issues", "Search Jira issues", "tracker"),
		doc("fs", "read_file", "Read a file", "files"),
	)
	search := func(q Query) (Result, []string) {
		res := ix.Search(ctx, q)
		return res, names(res.Hits)
	}
	for _, tc := range []struct {
		name             string
		q                Query
		want             []string
		searched, server int
	}{
		{"all", Query{Text: "search issues"}, []string{"gh.search_issues", "jira.search_issues", "gh.create_issue"}, 4, 3},
		{"server filter", Query{Text: "search issues", Servers: []string{"jira", "jira"}}, []string{"jira.search_issues"}, 1, 1},
		// Both tools say "issue": which ranks first is the ranking's business
		// (compared in name order with the semantic layer), the filter's that
		// jira's is not there.
		{"skill filter", Query{Text: "issues", Skills: []string{"code", "nope"}}, []string{"gh.create_issue", "gh.search_issues"}, 2, 1},
		{"allow", Query{Text: "search issues", Allow: func(n string) bool { return !strings.HasPrefix(n, "gh.") }}, []string{"jira.search_issues"}, 2, 2},
		{"limit", Query{Text: "search issues", Limit: 1}, []string{"gh.search_issues"}, 4, 3},
		{"typo", Query{Text: "serch"}, []string{"gh.search_issues", "jira.search_issues"}, 4, 3},
		{"prefix", Query{Text: "rea"}, []string{"fs.read_file"}, 4, 3},
		{"camel name", Query{Text: "readFile"}, []string{"fs.read_file"}, 4, 3},
		{"empty", Query{Text: " "}, nil, 4, 3},
		{"no match", Query{Text: "zzzz"}, nil, 4, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, got := search(tc.q)
			if opts == nil && tc.name == "skill filter" {
				slices.Sort(got)
			}
			if !hitsMatch(opts, tc.want, got) {
				t.Errorf("hits %v, want %v", got, tc.want)
			}
			if res.Searched != tc.searched || res.Servers != tc.server || res.Mode != ModeLexical {
				t.Errorf("searched %d servers %d mode %s, want %d %d lexical", res.Searched, res.Servers, res.Mode, tc.searched, tc.server)
			}
			for i, h := range res.Hits {
				if h.Score <= 0 || h.Score > 1 || (i == 0 && h.Score != 1) || h.Semantic != 0 {
					t.Errorf("hit %d: %+v", i, h)
				}
			}
		})
	}

	// Replace by name, remove, and replace a server atomically.
	ix.Upsert(doc("fs", "read_file", "Open a document"))
	if _, got := search(Query{Text: "document"}); !hitsMatch(opts, []string{"fs.read_file"}, got) {
		t.Errorf("after replace: %v", got)
	}
	ix.Remove("gh.create_issue", "unknown")
	if ix.Len() != 3 {
		t.Errorf("Len = %d after Remove, want 3", ix.Len())
	}
	ix.ReplaceServer("gh", []Doc{doc("gh", "list_repos", "List repositories")})
	if _, got := search(Query{Text: "issues"}); !hitsMatch(opts, []string{"jira.search_issues"}, got) {
		t.Errorf("after ReplaceServer, issues: %v", got)
	}
	if res, got := search(Query{Text: "repositories", Servers: []string{"gh"}}); !hitsMatch(opts, []string{"gh.list_repos"}, got) || res.Searched != 1 {
		t.Errorf("after ReplaceServer, repositories: %v (searched %d)", got, res.Searched)
	}
	ix.ReplaceServer("gh", nil)
	ix.Remove("jira.search_issues", "fs.read_file")
	if ix.Len() != 0 || len(ix.termIDs) != 0 {
		t.Errorf("emptied index: Len %d, %d terms left", ix.Len(), len(ix.termIDs))
	}
	if res, got := search(Query{Text: "issues"}); got != nil || res.Searched != 0 {
		t.Errorf("empty index: %v %+v", got, res)
	}
}

// TestIndexIncremental checks that an index built by many small updates
// (including replacements and removals) answers like one built at once.
func TestIndexIncremental(t *testing.T) {
	ctx := context.Background()
	docs := syntheticDocs()
	whole := NewIndex(nil)
	t.Cleanup(whole.Close)
	whole.Upsert(docs...)

	inc := NewIndex(nil)
	t.Cleanup(inc.Close)
	for i := len(docs) - 1; i >= 0; i-- {
		junk := docs[i]
		junk.Description = "temporary junk words"
		inc.Upsert(junk)
		if i%3 == 0 {
			inc.Remove(junk.Name)
		}
	}
	inc.Upsert(docs...)
	if whole.Len() != inc.Len() || whole.MemoryBytes() <= 0 {
		t.Fatalf("Len %d vs %d", whole.Len(), inc.Len())
	}
	if _, ok := inc.termIDs["junk"]; ok {
		t.Error(`"junk" is still in the vocabulary`)
	}
	for _, c := range loadRelevance(t) {
		a, b := whole.Search(ctx, Query{Text: c.Query}), inc.Search(ctx, Query{Text: c.Query})
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("%q (-whole +incremental):\n%s", c.Query, diff)
		}
	}
}

// TestConcurrentSearchAndUpdate runs searches against updates; run with
// -race.
func TestConcurrentSearchAndUpdate(t *testing.T) {
	ix := NewIndex(nil)
	t.Cleanup(ix.Close)
	docs := syntheticDocs()
	ix.Upsert(docs[:500]...)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				res := ix.Search(context.Background(), Query{Text: fmt.Sprintf("list issues %d", i), Limit: 5})
				if len(res.Hits) > 5 {
					t.Errorf("worker %d: %d hits", w, len(res.Hits))
					return
				}
			}
		}()
	}
	for i := 500; i < len(docs); i += 10 {
		ix.Upsert(docs[i:min(i+10, len(docs))]...)
		ix.Remove(docs[i-500].Name)
		ix.ReplaceServer("slack", nil)
	}
	wg.Wait()
}

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"getHTTPResponse2", "read_text_file", "a.b-c_d", "ÄÖÜ straße ǅemal", "\xff\xfe", "İstanbul", "x--y..z__", "123abc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range Tokenize(s) {
			if tok == "" || strings.ToLower(tok) != tok {
				t.Fatalf("Tokenize(%q) has token %q", s, tok)
			}
		}
	})
}
