package search

import (
	"errors"
	"testing"
)

var errTest = errors.New("malformed test table")

func TestReadTableHeader(t *testing.T) {
	tests := []struct {
		name           string
		data           string
		source         string
		count1, count2 int
		end            int // -1: past the end of data
		err            string
	}{
		{name: "good", data: "TEST\x01\x03abc\x05\x80\x01rest", source: "abc", count1: 5, count2: 128, end: 12},
		{name: "empty", data: "", err: "malformed test table: bad magic or version"},
		{name: "other magic", data: "SBWN\x01\x00\x01\x01", err: "malformed test table: bad magic or version"},
		{name: "other version", data: "TEST\x02\x00\x01\x01", err: "malformed test table: bad magic or version"},
		{name: "no source length", data: "TEST\x01", err: "malformed test table: truncated header"},
		{name: "truncated source", data: "TEST\x01\x05abc", err: "malformed test table: truncated header"},
		{name: "no counts", data: "TEST\x01\x00", end: -1},
		{name: "first count cut", data: "TEST\x01\x00\xff", end: -1},
		{name: "second count cut", data: "TEST\x01\x00\x07\xff", count1: 7, end: -1},
		{name: "count too large", data: "TEST\x01\x00\x80\x80\x80\x80\x10\x01", end: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			source, c1, c2, end, err := readTableHeader(tc.data, "TEST", errTest)
			if tc.err != "" {
				if !errors.Is(err, errTest) || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.end == -1 {
				if end <= len(tc.data) {
					t.Errorf("end = %d, want past the data (%d bytes)", end, len(tc.data))
				}
				return
			}
			if source != tc.source || c1 != tc.count1 || c2 != tc.count2 || end != tc.end {
				t.Errorf("got %q, %d, %d, end %d; want %q, %d, %d, end %d", source, c1, c2, end, tc.source, tc.count1, tc.count2, tc.end)
			}
		})
	}
}

// FuzzTableParsers: a damaged WordNet or word vector table is an error
// wrapping the table's sentinel, never a panic.
func FuzzTableParsers(f *testing.F) {
	for _, good := range []string{wordnetTable, wordvecTable} {
		for _, n := range []int{0, 5, 6, 7, 8, 12, 20, 64} {
			f.Add(good[:min(n, len(good))])
		}
	}
	f.Add("SBWN\x01\x00\xff")
	f.Add("SBWV\x01\x00\x07\xff")
	f.Fuzz(func(t *testing.T, data string) {
		if _, err := parseLexicon(data); err != nil && !errors.Is(err, errLexicon) {
			t.Errorf("parseLexicon: %v does not wrap errLexicon", err)
		}
		if _, err := parseWordVectors(data); err != nil && !errors.Is(err, errWordVectors) {
			t.Errorf("parseWordVectors: %v does not wrap errWordVectors", err)
		}
	})
}
