package search

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"

	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// npmServers are the real tool lists dumped from the npm servers the gateway
// is tested with, and the descriptions an operator would give them.
var npmServers = []struct{ name, desc string }{
	{"everything", "MCP reference server that exercises every protocol feature"},
	{"filesystem", "Local filesystem access"},
	{"memory", "Knowledge graph memory"},
}

// blindServers are the servers of the blind set (testdata/blind), each
// described by its npm package's own description: what an operator who
// copies it into the config would write, chosen before any query ran.
var blindServers = []struct{ name, desc string }{
	{"everything", "MCP server that exercises all the features of the MCP protocol"},
	{"filesystem", "MCP server for filesystem access"},
	{"memory", "MCP server for enabling memory for Claude through a knowledge graph"},
	{"sequential-thinking", "MCP server for sequential thinking and problem solving"},
	{"github", "MCP server for using the GitHub API"},
	{"playwright", "Playwright Tools for MCP"},
	{"slack", "MCP server for interacting with Slack"},
}

// loadTools reads testdata/<dir>/<server>.json (a tools/list answer) and
// builds each tool's Doc as the gateway does.
func loadTools(t testing.TB, dir string, servers []struct{ name, desc string }) []Doc {
	t.Helper()
	var out []Doc
	for _, s := range servers {
		raw, err := os.ReadFile(filepath.Join("testdata", dir, s.name+".json"))
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

// npmDocs loads testdata/relevance/<server>.json through DocFromTool.
func npmDocs(t testing.TB) []Doc { return loadTools(t, "relevance", npmServers) }

// relevanceCase is one query and the tools that answer it. Task, in the
// blind set, is the situation the query was written from.
type relevanceCase struct {
	Task   string   `json:"task,omitempty"`
	Query  string   `json:"query"`
	Expect []string `json:"expect"`
}

func loadCases(t testing.TB, path string) []relevanceCase {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []relevanceCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cases
}

func loadRelevance(t testing.TB) []relevanceCase {
	return loadCases(t, filepath.Join("testdata", "relevance", "relevance.json"))
}

// metrics are the figures of one ranking over one query set. A query counts
// for recall@k when one of its expected tools is in the top k; MRR uses the
// rank of the best-placed expected tool (0 beyond the top ten). The para
// figures are over the queries that share no word with their tools.
type metrics struct {
	n, paraN          int
	r1, r3, mrr       float64
	paraR3            float64
	misses            []string // queries whose expected tool is not first
	missedTop3, total int
}

func (m metrics) row(name string) string {
	s := fmt.Sprintf("%-8s  recall@1 %.3f  recall@3 %.3f  MRR %.3f", name, m.r1, m.r3, m.mrr)
	if m.paraN > 0 {
		s += fmt.Sprintf("  recall@3 of the %d paraphrases %.3f", m.paraN, m.paraR3)
	}
	return s
}

// evaluate runs every case against ix. para, when not nil, marks the
// paraphrase queries.
func evaluate(t testing.TB, ix *Index, cases []relevanceCase, para func(relevanceCase) bool) metrics {
	t.Helper()
	var m metrics
	var hits1, hits3, rr, paraHits3 float64
	for _, c := range cases {
		res := ix.Search(context.Background(), Query{Text: c.Query, Limit: 10})
		rank := 0
		for i, h := range res.Hits {
			if contains(c.Expect, h.Name) {
				rank = i + 1
				break
			}
		}
		isPara := para != nil && para(c)
		if isPara {
			m.paraN++
		}
		if rank == 1 {
			hits1++
		}
		if rank >= 1 && rank <= 3 {
			hits3++
			if isPara {
				paraHits3++
			}
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
			m.misses = append(m.misses, fmt.Sprintf("rank %d for %q (want %v), top: %v", rank, c.Query, c.Expect, top))
		}
	}
	n := float64(len(cases))
	m.n = len(cases)
	m.r1, m.r3, m.mrr = hits1/n, hits3/n, rr/n
	if m.paraN > 0 {
		m.paraR3 = paraHits3 / float64(m.paraN)
	}
	return m
}

// ranking is one way of building the index that a relevance test compares.
type ranking struct {
	name string
	opts func() *Options
}

// rankings are the three the issue asks figures for: lexical only, the
// default, and the default fused with a (deterministic, test) embedder.
var rankings = []ranking{
	{"lexical", func() *Options { return &Options{LexicalOnly: true} }},
	{"default", func() *Options { return nil }},
	{"hybrid", func() *Options { return &Options{Embedder: hashEmbedder{}} }},
}

// buildIndex indexes docs with opts and, with an embedder, waits for every
// vector.
func buildIndex(t testing.TB, opts *Options, docs []Doc) *Index {
	t.Helper()
	ix := NewIndex(opts)
	t.Cleanup(ix.Close)
	ix.Upsert(docs...)
	if ix.Len() != len(docs) {
		t.Fatalf("Len = %d, want %d (duplicate names?)", ix.Len(), len(docs))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return ix
}

func checkExpected(t testing.TB, docs []Doc, cases []relevanceCase) {
	t.Helper()
	names := make(map[string]bool, len(docs))
	for _, d := range docs {
		names[d.Name] = true
	}
	for _, c := range cases {
		if len(c.Expect) == 0 {
			t.Fatalf("query %q expects nothing", c.Query)
		}
		for _, e := range c.Expect {
			if !names[e] {
				t.Fatalf("query %q expects %q, which is not in the corpus", c.Query, e)
			}
		}
	}
}

// TestRelevance is D1: the queries of relevance.json (written as a user
// would, next to the tool names) over the real npm tools plus the synthetic
// corpus, under each ranking. The default must stay at least where the
// lexical ranking stood before the semantic layer: recall@3 0.968, MRR 0.909.
func TestRelevance(t *testing.T) {
	corpus := append(npmDocs(t), syntheticDocs()...)
	cases := loadRelevance(t)
	if len(cases) < 40 {
		t.Fatalf("%d queries, want at least 40", len(cases))
	}
	checkExpected(t, corpus, cases)
	got := map[string]metrics{}
	for _, rk := range rankings {
		got[rk.name] = evaluate(t, buildIndex(t, rk.opts(), corpus), cases, nil)
	}
	for _, miss := range got["default"].misses {
		t.Logf("default: %s", miss)
	}
	t.Logf("existing set: %d queries over %d tools", len(cases), len(corpus))
	for _, rk := range rankings {
		t.Log(got[rk.name].row(rk.name))
	}
	// The floors are the default's before the word vectors (recall@3 0.968,
	// MRR 0.933; the lexical ranking's were 0.968 and 0.909): a change to
	// the semantic layer must not cost what the index already found.
	if d := got["default"]; d.r3 < 0.968 || d.mrr < 0.933 || d.r1 < 0.905 {
		t.Errorf("default: recall@1 %.3f, recall@3 %.3f, MRR %.3f; want at least 0.905, 0.968 and 0.933", d.r1, d.r3, d.mrr)
	}
	if l := got["lexical"]; l.r3 < 0.85 {
		t.Errorf("lexical: recall@3 = %.3f, want >= 0.85", l.r3)
	}
}

// blindDocs are the tools of the blind set's servers.
func blindDocs(t testing.TB) []Doc { return loadTools(t, "blind", blindServers) }

// ownWords are the terms of a tool's own text: its name, title and
// description, its parameters' names and descriptions.
func ownWords(d Doc) map[string]bool {
	text := d.Name + " " + d.OriginalName + " " + d.Description
	for _, p := range d.Params {
		text += " " + p.Name + " " + p.Description
	}
	own := map[string]bool{}
	for _, w := range Tokenize(text) {
		own[w] = true
	}
	return own
}

// paraphraseOf returns the test "does this query use none of its tools'
// words?": no query term equals a term of an expected tool's own text or is
// a prefix of one, or has one as a prefix, from four letters ("repo" and
// "repository" share a word; so, by this strict count, do "report" and
// "repo").
func paraphraseOf(docs []Doc) func(relevanceCase) bool {
	byName := make(map[string]Doc, len(docs))
	for _, d := range docs {
		byName[d.Name] = d
	}
	return func(c relevanceCase) bool {
		for _, e := range c.Expect {
			own := ownWords(byName[e])
			for _, q := range Tokenize(c.Query) {
				for o := range own {
					if q == o || len(q) >= 4 && len(o) >= 4 && (strings.HasPrefix(q, o) || strings.HasPrefix(o, q)) {
						return false
					}
				}
			}
		}
		return true
	}
}

// TestBlindRelevance measures the blind set (testdata/blind/queries.json):
// 120 queries written from task descriptions before any search was run,
// over the real tool lists of seven npm servers.
func TestBlindRelevance(t *testing.T) {
	corpus := blindDocs(t)
	cases := loadCases(t, filepath.Join("testdata", "blind", "queries.json"))
	checkExpected(t, corpus, cases)
	servers := map[string]bool{}
	for _, c := range cases {
		for _, e := range c.Expect {
			servers[e[:strings.IndexByte(e, '.')]] = true
		}
		if c.Task == "" {
			t.Errorf("query %q has no task description", c.Query)
		}
	}
	para := paraphraseOf(corpus)
	paraN := 0
	for _, c := range cases {
		if para(c) {
			paraN++
		}
	}
	if len(cases) < 120 || len(servers) < 6 || 2*paraN < len(cases) {
		t.Fatalf("blind set: %d queries over %d servers, %d paraphrases; want at least 120, 6 and half", len(cases), len(servers), paraN)
	}
	got := map[string]metrics{}
	for _, rk := range rankings {
		got[rk.name] = evaluate(t, buildIndex(t, rk.opts(), corpus), cases, para)
	}
	for _, miss := range got["default"].misses {
		t.Logf("default: %s", miss)
	}
	t.Logf("blind set: %d queries (%d paraphrases) over %d tools of %d servers", len(cases), paraN, len(corpus), len(servers))
	for _, rk := range rankings {
		t.Log(got[rk.name].row(rk.name))
	}
	// Issue 21 asks for recall@3 0.90; WordNet, GloVe's word vectors and
	// FOLDOC get the default to 0.533 (see docs/search.md, "What it does not
	// know"). These floors keep what it has: a regression fails, an
	// improvement raises them.
	if d, l := got["default"], got["lexical"]; d.r3 < 0.525 || d.r1 < 0.37 || d.mrr < 0.465 || d.paraR3 < 0.27 || d.r3 < l.r3+0.15 {
		t.Errorf("default: recall@1 %.3f, recall@3 %.3f (lexical %.3f), MRR %.3f, paraphrases %.3f; want at least 0.37, 0.525 (and 0.15 over lexical), 0.465 and 0.27",
			d.r1, d.r3, l.r3, d.mrr, d.paraR3)
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

// hashEmbedder is a deterministic stand-in for an embeddings model: a
// bag of hashed words and character trigrams in 256 dimensions, so texts
// that share words or word pieces ("configure", "configuration") are close.
// It knows no synonyms; it only lets the hybrid path be measured offline.
type hashEmbedder struct{}

func (hashEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, text := range texts {
		v := make([]float32, 256)
		add := func(s string, w float32) {
			h := fnv.New32a()
			h.Write([]byte(s))
			v[h.Sum32()%256] += w
		}
		for _, word := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		}) {
			if stopwords[word] {
				continue
			}
			add(word, 1)
			padded := "^" + word + "$"
			for k := 0; k+3 <= len(padded); k++ {
				add(padded[k:k+3], 0.3)
			}
		}
		var norm float64
		for _, x := range v {
			norm += float64(x * x)
		}
		if norm == 0 {
			v[0] = 1
		}
		out[i] = v
	}
	return out, nil
}
