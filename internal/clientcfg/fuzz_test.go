package clientcfg

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParse checks the position-keeping parser against encoding/json: on
// strict JSON both accept the same files and decode the same values, and
// no input makes it panic.
func FuzzParse(f *testing.F) {
	seedFixtures(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := parseJSONC(data)
		if !json.Valid(data) {
			return // comments and trailing commas are ours to accept
		}
		if err != nil {
			t.Fatalf("valid JSON refused: %v", err)
		}
		var want any
		if err := json.Unmarshal(data, &want); err != nil {
			t.Skip() // e.g. a number out of float64 range
		}
		if got := n.value(); !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %#v, encoding/json %#v", got, want)
		}
	})
}

// FuzzRead feeds any bytes to every client's reader and to Rewrite: errors
// carry a position, entries are valid switchboard names, and a rewritten
// file reads back.
func FuzzRead(f *testing.F) {
	seedFixtures(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range Clients() {
			file, err := Read("f.json", data, c, nil)
			if err != nil {
				continue
			}
			for _, e := range file.Entries {
				if e.Server.Name == "" || e.Line < 1 {
					t.Fatalf("entry %+v", e)
				}
			}
			for _, p := range file.Problems {
				if p.Line < 1 || p.Column < 1 {
					t.Fatalf("problem without a position: %v", p)
				}
			}
			out, err := Rewrite("f.json", data, c, Gateway{Command: "sb", Args: []string{"stdio"}})
			if err != nil {
				t.Fatalf("read but not rewritten: %v", err)
			}
			back, err := Read("f.json", out, c, nil)
			if err != nil || len(back.Entries) != 1 {
				t.Fatalf("rewritten file does not read back: %v\n%s", err, out)
			}
		}
	})
}

func seedFixtures(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "clients", "*.json"))
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"mcpServers":{"a":{"command":"x","env":{"K":"${env:V}$"}}}}`))
}
