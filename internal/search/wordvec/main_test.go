package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func readFixture(t *testing.T) *wink {
	t.Helper()
	f, err := os.Open("testdata/fixture.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := readWink(f)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestBuild: only words of ASCII letters are kept, the first n of them in
// order of frequency, each with its rank, at unit length, with the mean
// removed.
func TestBuild(t *testing.T) {
	tb := build(readFixture(t), 8, 0)
	var got []string
	for _, e := range tb.entries {
		got = append(got, e.word)
	}
	// "x1" has a digit; "remove" is the ninth letter word, beyond n = 8.
	want := []string{"banana", "delete", "directory", "file", "files", "folder", "of", "the"}
	if !slices.Equal(got, want) {
		t.Errorf("words %v, want %v", got, want)
	}
	mean := make([]float64, tb.dims)
	for _, e := range tb.entries {
		n := 0.0
		for j, x := range e.vec {
			n += x * x
			mean[j] += x
		}
		if math.Abs(n-1) > 1e-9 {
			t.Errorf("%s: |v|² = %f", e.word, n)
		}
		if e.word == "the" && e.rank != 0 || e.word == "banana" && e.rank != 6 {
			t.Errorf("%s: rank %d", e.word, e.rank)
		}
	}
	if tb.dims != 6 {
		t.Errorf("dims %d", tb.dims)
	}
	// Fewer dimensions: the principal ones.
	if p := build(readFixture(t), 8, 3); p.dims != 3 || len(p.entries[0].vec) != 3 {
		t.Errorf("projected: %d dims, vector of %d", p.dims, len(p.entries[0].vec))
	}
}

// TestRunDeterministic: the committed table must be reproducible, so two
// runs over the same input give the same bytes, and the source is read from
// the package.json beside the input.
func TestRunDeterministic(t *testing.T) {
	dir := t.TempDir()
	var out [2][]byte
	for i := range out {
		p := filepath.Join(dir, "t.bin")
		if err := run("testdata/fixture.json", p, "", 8, 0); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	if !bytes.Equal(out[0], out[1]) {
		t.Error("two runs over the same input differ")
	}
	if !bytes.HasPrefix(out[0], []byte("SBWV\x01\x15fixture-vectors@0.1.0\x08\x06")) {
		t.Errorf("header %q", out[0][:30])
	}
	// 8 words: offsets, the words' bytes, and 8 records of rank and 6 bytes.
	if n := len("SBWV\x01\x15fixture-vectors@0.1.0\x08\x06") + 4*9 + len("bananadeletedirectoryfilefilesfolderofthe") + 8*(4+6); len(out[0]) != n {
		t.Errorf("size %d, want %d", len(out[0]), n)
	}
}

// TestReadWinkErrors: input that is not the expected JSON is an error.
func TestReadWinkErrors(t *testing.T) {
	for name, in := range map[string]string{
		"not json":     "{",
		"no words":     `{"dimensions": 3, "words": [], "vectors": {}}`,
		"short vector": `{"dimensions": 3, "words": ["a"], "vectors": {"a": [1, 2]}}`,
	} {
		if _, err := readWink(bytes.NewBufferString(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
