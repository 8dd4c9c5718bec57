package search

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestQueryIntent(t *testing.T) {
	ix := NewIndex(nil)
	t.Cleanup(ix.Close)
	tests := []struct {
		query string
		want  intent
	}{
		{"delete the old branch", intentDelete},
		{"erase a stored item", intentDelete}, // a synonym of the verb
		{"removing files", intentDelete},      // an inflection
		{"find and remove duplicates", intentDelete},
		{"show my files", intentRead},
		{"list open issues", intentRead},
		{"create a branch", intentNone},
		{"", intentNone},
		{"δημιουργία αρχείου", intentNone},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			sc := &scratch{}
			scanTokens(tc.query, func(raw, term string, whole bool) { sc.toks = append(sc.toks, qtoken{raw, term, whole}) })
			if got := ix.queryIntent(sc.toks); got != tc.want {
				t.Errorf("intent = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestServerKey(t *testing.T) {
	for name, want := range map[string]string{
		"github": "github", "GitHub": "github", "sequential-thinking": "sequentialthinking",
		"files_2": "files2", "": "",
	} {
		if got := serverKey(name); got != want {
			t.Errorf("serverKey(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestUnderstanding checks what the query understanding changes in a
// ranking, each case against the lexical ranking of the same documents.
func TestUnderstanding(t *testing.T) {
	docs := []Doc{
		{Name: "github.create_issue", OriginalName: "create_issue", Server: "github", Description: "Create an issue in a repository"},
		{Name: "gitlab.create_issue", OriginalName: "create_issue", Server: "gitlab", Description: "Create an issue in a project"},
		{Name: "github.get_pull_request", OriginalName: "get_pull_request", Server: "github", Description: "Get details of a pull request"},
		{Name: "github.get_page", OriginalName: "get_page", Server: "github", Description: "Get a wiki page"},
		{Name: "github.create_repository", OriginalName: "create_repository", Server: "github", Description: "Create a new repository"},
		{Name: "github.create_branch", OriginalName: "create_branch", Server: "github", Description: "Create a new branch"},
		{Name: "notes.remove_note", OriginalName: "remove_note", Server: "notes", Description: "Remove a note for good", Destructive: true},
		{Name: "notes.show_note", OriginalName: "show_note", Server: "notes", Description: "Show a note", ReadOnly: true},
		{Name: "notes.archive_note", OriginalName: "archive_note", Server: "notes", Description: "Move a note out of sight"},
	}
	tests := []struct {
		query            string
		want, lexicalTop string // the default's and the lexical ranking's first hit
	}{
		// The server the query names wins a tie ("in gitlab" matches only
		// the server field, as "in github" would).
		{"open an issue in gitlab", "gitlab.create_issue", "gitlab.create_issue"},
		// An acronym finds the words it stands for.
		{"get pr 12", "github.get_pull_request", "github.get_page"},
		// A truncated word no dictionary has completes to the tool's word.
		{"new repo now", "github.create_repository", "github.create_branch"},
		// The intent of the verb favours the tool whose annotations fit.
		{"erase a note", "notes.remove_note", "notes.show_note"},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			for _, rk := range []struct {
				opts *Options
				want string
			}{{nil, tc.want}, {&Options{LexicalOnly: true}, tc.lexicalTop}} {
				ix := buildIndex(t, rk.opts, docs)
				res := ix.Search(ctx, Query{Text: tc.query, Limit: 3})
				if len(res.Hits) == 0 || res.Hits[0].Name != rk.want {
					t.Errorf("lexical only %v: hits %v, want %s first", rk.opts != nil, names(res.Hits), rk.want)
				}
			}
		})
	}
}

// TestDocFromToolAnnotationsAndEnums: annotations become flags only when
// the tool says so, and enum values describe their parameter.
func TestDocFromToolAnnotationsAndEnums(t *testing.T) {
	yes, no := true, false
	schema := json.RawMessage(`{"type":"object","properties":{
		"method":{"type":"string","description":"How to merge","enum":["merge","squash","rebase"]},
		"tags":{"type":"array","items":{"type":"string","enum":["a","b"]}},
		"n":{"type":"integer","enum":[1,2]}}}`)
	tests := []struct {
		name                  string
		ann                   *mcp.ToolAnnotations
		readOnly, destructive bool
	}{
		{"none", nil, false, false},
		{"read only", &mcp.ToolAnnotations{ReadOnlyHint: true}, true, false},
		{"destructive", &mcp.ToolAnnotations{DestructiveHint: &yes}, false, true},
		{"not destructive", &mcp.ToolAnnotations{DestructiveHint: &no}, false, false},
		{"read only wins", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := DocFromTool("s.t", "s", "", &mcp.Tool{Name: "t", InputSchema: schema, Annotations: tc.ann}, nil)
			if d.ReadOnly != tc.readOnly || d.Destructive != tc.destructive {
				t.Errorf("ReadOnly %v Destructive %v, want %v %v", d.ReadOnly, d.Destructive, tc.readOnly, tc.destructive)
			}
			want := []Param{{"method", "How to merge (merge, squash, rebase)"}, {"n", ""}, {"tags", "(a, b)"}}
			if diff := cmp.Diff(want, d.Params); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
		})
	}
}
