package config

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/parse_errors.jsonl from the current output")

// goldenCase is one file and every problem Parse reports for it, each as
// Error() formats it: "FILE:LINE:COLUMN: FIELD: MSG".
type goldenCase struct {
	YAML   string   `json:"yaml"`
	Errors []string `json:"errors"`
}

// TestParseErrorsGolden pins the whole text of every problem, column
// included, for the files of the table tests and the fuzz corpus: the table
// tests check lines, fields and parts of messages, this checks the rest.
// The file was first written by the hand-written decoder that the typed
// decoder replaced, so the two report the same.
func TestParseErrorsGolden(t *testing.T) {
	const path = "testdata/parse_errors.jsonl"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	getenv := envFunc(map[string]string{"A": "a", "B": "b", "T": "t", "Y": "y", "K": "k", "HOME": "/root", "TOKEN": "t", "S": "k"})
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var c goldenCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		n++
		var got []string
		_, err := Parse("switchboard.yaml", []byte(c.YAML), getenv)
		var errs *Errors
		if errors.As(err, &errs) {
			for _, e := range *errs {
				got = append(got, e.Error())
			}
		}
		if *update {
			if len(got) > 0 {
				enc.Encode(goldenCase{c.YAML, got})
			}
			continue
		}
		if diff := cmp.Diff(c.Errors, got); diff != "" {
			t.Errorf("Parse(%q) problems (-want +got):\n%s", c.YAML, diff)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 400 {
		t.Errorf("%s has %d cases, want the whole corpus", path, n)
	}
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
