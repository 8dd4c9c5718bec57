package search

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestBadInput: queries no one should send still get a sensible answer (no
// panic, scores in range, hits within the limit), and the same answer
// twice.
func TestBadInput(t *testing.T) {
	ix := buildIndex(t, nil, blindDocs(t))
	long := strings.Repeat("delete the file and list the directory ", 260) // ≈ 10 KB
	tests := []struct {
		name, query string
		wantHits    bool
	}{
		{"empty", "", false},
		{"blank", " \t\n", false},
		{"10 KB", long, true},
		{"binary", "\x00\x01\xff\xfe\x80\x90\x00\x7f\x1f", false},
		{"invalid UTF-8 around a word", "\xffdelete\xfe", true},
		{"NUL between words", "read\x00file", true},
		{"terminal escapes", "\x1b[31mlist\x1b[0m", false}, // "31mlist" is no word
		{"greek", "διάβασε ένα αρχείο", false},
		{"chinese", "读取文件", false},
		{"arabic", "احذف الملف", false},
		{"emoji", "🔥📁 ✨", false},
		{"mixed scripts", "read файл", true},
		{"one letter", "a", false},
		{"digits", "12345678901234567890", false},
		{"punctuation", "!!!???...---___", false},
		{"long word", strings.Repeat("x", 5000), false},
		{"many acronyms", strings.Repeat("pr ci db ", 200), true}, // "PR": pull request
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := ix.Search(ctx, Query{Text: tc.query, Limit: 5})
			checkResult(t, res, 5)
			if (len(res.Hits) > 0) != tc.wantHits {
				t.Errorf("hits %v, want some: %v", names(res.Hits), tc.wantHits)
			}
			if again := ix.Search(ctx, Query{Text: tc.query, Limit: 5}); !equalHits(res.Hits, again.Hits) {
				t.Errorf("second search differs: %v, then %v", names(res.Hits), names(again.Hits))
			}
		})
	}
}

// checkResult checks what holds of every result.
func checkResult(t testing.TB, res Result, limit int) {
	t.Helper()
	if len(res.Hits) > limit {
		t.Errorf("%d hits, limit %d", len(res.Hits), limit)
	}
	seen := map[string]bool{}
	for i, h := range res.Hits {
		if h.Score <= 0 || h.Score > 1 || i == 0 && h.Score != 1 || i > 0 && h.Score > res.Hits[i-1].Score {
			t.Errorf("hit %d: %+v", i, h)
		}
		if seen[h.Name] {
			t.Errorf("hit %s twice", h.Name)
		}
		seen[h.Name] = true
	}
	if res.Mode != ModeLexical || res.Searched <= 0 {
		t.Errorf("mode %q, searched %d", res.Mode, res.Searched)
	}
}

func equalHits(a, b []Hit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzQuery searches a real catalog with arbitrary text, in both rankings.
// The committed corpus (testdata/fuzz/FuzzQuery) holds the shapes of
// input that once mattered: empty, binary, other scripts, long, acronyms.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{"", "read a file", "PR 12", "repo", "in github open a ticket", "\xff\x00", "読む"} {
		f.Add(s)
	}
	docs := blindDocs(f)
	def, lex := NewIndex(nil), NewIndex(&Options{LexicalOnly: true})
	f.Cleanup(def.Close)
	f.Cleanup(lex.Close)
	def.Upsert(docs...)
	lex.Upsert(docs...)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, q string) {
		for _, ix := range []*Index{def, lex} {
			res := ix.Search(ctx, Query{Text: q, Limit: 7})
			checkResult(t, res, 7)
		}
		for _, term := range Tokenize(q) {
			if term == "" || strings.ToLower(term) != term || !utf8.ValidString(term) && utf8.ValidString(q) {
				t.Errorf("Tokenize(%q) gave term %q", q, term)
			}
		}
	})
}
