package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBuild reads a small dictionary in dictd's format: headwords of one
// entry are aliases of each other, "See {...}" makes an alias, braces make
// cross-references, and headwords that are not words (C++) are left out.
func TestBuild(t *testing.T) {
	entries, err := readDict("testdata/fixture.index", "testdata/fixture.dict")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Fatalf("%d entries, want 4", len(entries))
	}
	tb := build(entries)
	got := string(tb.encode("fixture"))
	want := "# fixture\n" +
		"channel\tachat room;aroom;xchat;xirc\n" +
		"chat room\tachannel;aroom;xchat;xirc\n" +
		"dir\tadirectory\n" +
		"directories\tadirectory;afolder;xfile system;xfiles\n" +
		"directory\tadirectories;afolder;xfile system;xfiles\n" +
		"folder\tadirectories;adirectory;xfile system;xfiles\n" +
		"room\tachannel;achat room;xchat;xirc\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

// TestRunDeterministic: the committed table must be reproducible.
func TestRunDeterministic(t *testing.T) {
	dir := t.TempDir()
	var out [2][]byte
	for i := range out {
		p := filepath.Join(dir, "t.txt")
		if err := run("testdata/fixture.index", "testdata/fixture.dict", p, "fixture"); err != nil {
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
}

// TestReadDictErrors: an index that does not fit its data is an error.
func TestReadDictErrors(t *testing.T) {
	dir := t.TempDir()
	for name, index := range map[string]string{
		"short line":   "folder\tA\n",
		"bad number":   "folder\tA!\tB\n",
		"out of range": "folder\tA\t////\n",
	} {
		p := filepath.Join(dir, "x.index")
		if err := os.WriteFile(p, []byte(index), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readDict(p, "testdata/fixture.dict"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
