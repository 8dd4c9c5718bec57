package search

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestComputingDict checks the embedded FOLDOC table: where it came from,
// that it is sorted (lookups are binary searches) and what it relates.
func TestComputingDict(t *testing.T) {
	cd, err := defaultComputingDict()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cd.source, "dict-foldoc@") || len(cd.lines) < 10000 {
		t.Errorf("source %q, %d headwords", cd.source, len(cd.lines))
	}
	rel := func(key string) map[string]float32 {
		m := map[string]float32{}
		cd.related(key, func(term string, w float32) { m[term] = w })
		return m
	}
	if w := rel("folder")["directory"]; w != foldocAlias {
		t.Errorf("folder → directory weighs %v, want an alias", w)
	}
	if w := rel("chat room")["channel"]; w != foldocAlias {
		t.Errorf("chat room → channel weighs %v, want an alias", w)
	}
	if w := rel("website")["url"]; w != foldocXref {
		t.Errorf("website → url weighs %v, want a cross-reference", w)
	}
	if got := cd.lookup("zzzz not a term"); got != "" {
		t.Errorf("lookup of nonsense: %q", got)
	}
}

// TestComputingDictMalformed: a damaged table is an error, never a panic.
func TestComputingDictMalformed(t *testing.T) {
	for name, data := range map[string]string{
		"empty":      "",
		"no header":  "folder\tadirectory\n",
		"no newline": "# x\nfolder\tadirectory",
		"no tab":     "# x\nfolder adirectory\n",
		"unsorted":   "# x\nfolder\tadirectory\nchat\txirc\n",
		"duplicate":  "# x\nfolder\tadirectory\nfolder\tadir\n",
		"empty key":  "# x\n\tadirectory\n",
	} {
		if _, err := parseComputingDict(data); !errors.Is(err, errComputingDict) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if cd, err := parseComputingDict("# x\nchat\txirc\nfolder\tadirectory\n"); err != nil || cd.lookup("folder") != "adirectory" {
		t.Errorf("a good table: %v", err)
	}
}

// TestComputingTerms: the computing dictionary finds tools by the words
// software people use for what the tools call otherwise ("folder" for
// directory, "chat rooms" for channels), which the lexical ranking cannot.
func TestComputingTerms(t *testing.T) {
	docs := []Doc{
		{Name: "fs.list_directory", OriginalName: "list_directory", Description: "List the entries of a directory.", Server: "fs"},
		{Name: "fs.read_file", OriginalName: "read_file", Description: "Read a file.", Server: "fs"},
		{Name: "ws.list_channels", OriginalName: "list_channels", Description: "List the channels of the workspace.", Server: "ws"},
		{Name: "calc.add", OriginalName: "add", Description: "Add two numbers.", Server: "calc"},
	}
	ctx := context.Background()
	def, lex := NewIndex(nil), NewIndex(&Options{LexicalOnly: true})
	t.Cleanup(def.Close)
	t.Cleanup(lex.Close)
	def.Upsert(docs...)
	lex.Upsert(docs...)
	for q, want := range map[string]string{
		"folder contents":            "fs.list_directory",
		"the chat rooms of our team": "ws.list_channels",
	} {
		if res := lex.Search(ctx, Query{Text: q}); len(res.Hits) > 0 && res.Hits[0].Name == want {
			t.Errorf("%q: premise: the lexical ranking already finds %s", q, want)
		}
		if res := def.Search(ctx, Query{Text: q}); len(res.Hits) == 0 || res.Hits[0].Name != want {
			t.Errorf("%q: hits %v, want %s first", q, names(res.Hits), want)
		}
	}
}
