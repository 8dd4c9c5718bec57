package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParse reads a small dictionary in WordNet's format and checks what
// the table keeps of it.
func TestParse(t *testing.T) {
	g, err := parse(os.DirFS("testdata/dict"))
	if err != nil {
		t.Fatal(err)
	}
	// Proper names (Berlin) are gone, compounds give their heads ("take" is
	// the head of the phrasal verb "take_away"; "get_rid_of" has three words),
	// hyphens and markers are dropped.
	want := []string{"big", "cancel", "computing", "delete", "directory", "erase", "file", "keep", "large", "obliterate", "record", "remove", "science", "take", "wipe"}
	if diff := cmp.Diff(want, g.words); diff != "" {
		t.Errorf("words (-want +got):\n%s", diff)
	}
	id := map[string]int{}
	for i, w := range g.words {
		id[w] = i
	}
	syn := func(word string) *synset { return &g.synsets[g.senses[id[word]][0].synset] }
	if s := syn("file"); !s.computing || len(s.lemmas) != 1 || s.lemmas[0].word != id["file"] {
		// data_file's head is file itself, so it is not listed twice.
		t.Errorf("file: computing %v, lemmas %v", s.computing, s.lemmas)
	}
	if syn("delete").computing {
		t.Error("delete is not filed under computer science")
	}
	// Relations kept: the hypernym, not the antonym.
	del := syn("delete")
	if len(del.ptrs) != 1 || del.ptrs[0].rel != relHypernym || syn("remove") != &g.synsets[del.ptrs[0].to] {
		t.Errorf("delete links %v", del.ptrs)
	}
	// A phrasal verb is a sense of its head, after the direct ones.
	if ss := g.senses[id["wipe"]]; len(ss) != 1 || !ss[0].compound {
		t.Errorf("wipe senses %v", ss)
	}
	// Definitions keep their content words that are words of the table.
	var gloss []string
	for _, w := range syn("directory").gloss {
		gloss = append(gloss, g.words[w])
	}
	if diff := cmp.Diff([]string{"file"}, gloss); diff != "" {
		t.Errorf("directory gloss (-want +got):\n%s", diff)
	}
}

// TestEncodeDeterministic: the committed table must be reproducible, so two
// runs over the same dictionary give the same bytes.
func TestEncodeDeterministic(t *testing.T) {
	var out [2][]byte
	for i := range out {
		g, err := parse(os.DirFS("testdata/dict"))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = encode(g, "fixture")
	}
	if !bytes.Equal(out[0], out[1]) {
		t.Error("two encodings of the same dictionary differ")
	}
	if !bytes.HasPrefix(out[0], []byte("SBWN\x01\x07fixture")) {
		t.Errorf("header %q", out[0][:12])
	}
}
