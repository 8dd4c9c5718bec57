package search

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// npmServers are the real tool lists dumped from the npm servers the gateway
// is tested with, and the descriptions an operator would give them.
var npmServers = []struct{ name, desc string }{
	{"everything", "MCP reference server that exercises every protocol feature"},
	{"filesystem", "Local filesystem access"},
	{"memory", "Knowledge graph memory"},
}

// npmDocs loads testdata/relevance/<server>.json through DocFromTool.
func npmDocs(t testing.TB) []Doc {
	t.Helper()
	var out []Doc
	for _, s := range npmServers {
		raw, err := os.ReadFile(filepath.Join("testdata", "relevance", s.name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var tools []*mcp.Tool
		if err := json.Unmarshal(raw, &tools); err != nil {
			t.Fatalf("%s.json: %v", s.name, err)
		}
		for _, tl := range tools {
			out = append(out, DocFromTool(s.name+"."+tl.Name, s.name, s.desc, tl, nil))
		}
	}
	return out
}

type relevanceCase struct {
	Query  string   `json:"query"`
	Expect []string `json:"expect"`
}

func loadRelevance(t testing.TB) []relevanceCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "relevance", "relevance.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []relevanceCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestRelevance is D1: the queries of relevance.json (written as a user
// would, before the ranking was tuned) over the real npm tools plus the
// synthetic corpus. A query counts for recall@3 when one of its expected
// tools is in the top 3 (several tools are acceptable answers to some
// queries, such as "run a sql query"); MRR uses the first expected tool's
// rank (0 beyond the top 10).
func TestRelevance(t *testing.T) {
	ix := NewIndex(nil)
	t.Cleanup(ix.Close)
	corpus := append(npmDocs(t), syntheticDocs()...)
	ix.Upsert(corpus...)
	if ix.Len() != len(corpus) {
		t.Fatalf("Len = %d, want %d (duplicate names?)", ix.Len(), len(corpus))
	}
	names := make(map[string]bool, len(corpus))
	for _, d := range corpus {
		names[d.Name] = true
	}
	cases := loadRelevance(t)
	if len(cases) < 40 {
		t.Fatalf("%d queries, want at least 40", len(cases))
	}
	var hits3, rr float64
	for _, c := range cases {
		for _, e := range c.Expect {
			if !names[e] {
				t.Fatalf("query %q expects %q, which is not in the corpus", c.Query, e)
			}
		}
		res := ix.Search(context.Background(), Query{Text: c.Query, Limit: 10})
		rank := 0
		for i, h := range res.Hits {
			if contains(c.Expect, h.Name) {
				rank = i + 1
				break
			}
		}
		if rank >= 1 && rank <= 3 {
			hits3++
		}
		if rank > 0 {
			rr += 1 / float64(rank)
		}
		if rank != 1 {
			var top []string
			for i, h := range res.Hits {
				if i == 3 {
					break
				}
				top = append(top, h.Name)
			}
			t.Logf("rank %d for %q (want %v), top: %v", rank, c.Query, c.Expect, top)
		}
	}
	n := float64(len(cases))
	t.Logf("corpus %d tools, %d queries: recall@3 = %.3f, MRR = %.3f", len(corpus), len(cases), hits3/n, rr/n)
	if hits3/n < 0.85 {
		t.Errorf("recall@3 = %.3f, want >= 0.85", hits3/n)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
