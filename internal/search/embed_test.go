package search

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// concepts maps synonyms onto shared dimensions, so the fake model "knows"
// that opening a PR is creating a pull request while BM25 does not.
var concepts = map[string]int{
	"open": 0, "create": 0, "new": 0, "creates": 0,
	"pr": 1, "pull": 1, "request": 1,
	"close": 2, "closes": 2, "get": 3, "file": 4, "files": 4, "reading": 5, "read": 5,
}

// fakeVector is a deterministic bag-of-concepts embedding: known words hit
// their concept dimension, other words a hashed one.
func fakeVector(text string) []float32 {
	v := make([]float32, 64)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return r < 'a' || r > 'z' }) {
		if c, ok := concepts[w]; ok {
			v[c] = 1
			continue
		}
		h := fnv.New32a()
		h.Write([]byte(w))
		v[8+h.Sum32()%56] = 1
	}
	return v
}

// fakeEmbeddings is an httptest OpenAI-compatible /v1/embeddings server that
// records what it receives.
type fakeEmbeddings struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	status int // non-zero: fail with this status
	failed chan struct{}
	batch  []int
	models []string
	auths  []string
	paths  []string
}

func newFakeEmbeddings(t *testing.T) *fakeEmbeddings {
	f := &fakeEmbeddings{t: t, failed: make(chan struct{}, 1)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEmbeddings) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.batch = append(f.batch, len(req.Input))
	f.models = append(f.models, req.Model)
	f.auths = append(f.auths, r.Header.Get("Authorization"))
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	status := f.status
	f.mu.Unlock()
	if status != 0 {
		select {
		case f.failed <- struct{}{}:
		default:
		}
		// Echo the credential back, as a careless proxy might.
		http.Error(w, "upstream exploded for "+r.Header.Get("Authorization"), status)
		return
	}
	type item struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	var data []item
	// Reverse order: the client must sort by "index".
	for i := len(req.Input) - 1; i >= 0; i-- {
		data = append(data, item{i, fakeVector(req.Input[i])})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
}

func (f *fakeEmbeddings) setStatus(s int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = s
}

func TestOpenAIEmbedderRequests(t *testing.T) {
	for _, suffix := range []string{"", "/", "/v1", "/v1/", "/v1/embeddings"} {
		t.Run("url"+suffix, func(t *testing.T) {
			f := newFakeEmbeddings(t)
			e, err := NewOpenAIEmbedder(EmbeddingsConfig{URL: f.srv.URL + suffix, Model: "m-1", APIKey: "sk-test", BatchSize: 2})
			if err != nil {
				t.Fatal(err)
			}
			texts := []string{"open a pr", "read file", "get", "close", "new file"}
			got, err := e.Embed(context.Background(), texts)
			if err != nil {
				t.Fatal(err)
			}
			var want [][]float32
			for _, s := range texts {
				want = append(want, fakeVector(s))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("vectors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]int{2, 2, 1}, f.batch); diff != "" {
				t.Errorf("batch sizes (-want +got):\n%s", diff)
			}
			for i := range f.batch {
				if f.models[i] != "m-1" || f.auths[i] != "Bearer sk-test" || f.paths[i] != "POST /v1/embeddings" {
					t.Errorf("request %d: model %q auth %q %s", i, f.models[i], f.auths[i], f.paths[i])
				}
			}
		})
	}
}

func TestOpenAIEmbedderErrors(t *testing.T) {
	if _, err := NewOpenAIEmbedder(EmbeddingsConfig{URL: "http://x"}); err == nil {
		t.Error("no model: want an error")
	}
	if _, err := NewOpenAIEmbedder(EmbeddingsConfig{URL: "ftp://x", Model: "m"}); err == nil {
		t.Error("ftp URL: want an error")
	}
	f := newFakeEmbeddings(t)
	f.setStatus(http.StatusInternalServerError)
	e, err := NewOpenAIEmbedder(EmbeddingsConfig{URL: f.srv.URL, Model: "m", APIKey: "sk-secret-123"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Embed(context.Background(), []string{"x"})
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	if !strings.Contains(msg, f.srv.URL+"/v1/embeddings") || !strings.Contains(msg, "500") {
		t.Errorf("error %q lacks the URL or the status", msg)
	}
	if strings.Contains(msg, "sk-secret-123") {
		t.Errorf("error %q leaks the API key", msg)
	}
}

// hybridDocs make "open a pull request" mislead BM25: the rare word "open"
// puts the file tool first, above the pull request tools.
var hybridDocs = []Doc{
	{Name: "git.create_pull_request", OriginalName: "create_pull_request", Description: "Create a pull request.", Server: "git"},
	{Name: "git.close_pull_request", OriginalName: "close_pull_request", Description: "Close a pull request without merging it.", Server: "git"},
	{Name: "git.get_pull_request", OriginalName: "get_pull_request", Description: "Get a pull request.", Server: "git"},
	{Name: "fs.open_file", OriginalName: "open_file", Description: "Open a file for reading.", Server: "fs"},
}

func names(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Name)
	}
	return out
}

// TestHybridFusion is D3: with embeddings, a synonym BM25 cannot see
// ("open" for "create") moves the right tool to the top. Both indexes rank
// lexically only, without the offline semantic layer (whose word vectors
// already see that "open a pull request" is about pull requests), so that
// the test is about fusion.
func TestHybridFusion(t *testing.T) {
	ctx := context.Background()
	q := Query{Text: "open a pull request", Limit: 3}

	lex := NewIndex(&Options{LexicalOnly: true})
	t.Cleanup(lex.Close)
	lex.Upsert(hybridDocs...)
	lres := lex.Search(ctx, q)
	if lres.Mode != ModeLexical || len(lres.Hits) < 2 || lres.Hits[0].Name != "fs.open_file" ||
		lres.Hits[1].Name != "git.create_pull_request" {
		t.Fatalf("lexical premise: mode %s, hits %v", lres.Mode, names(lres.Hits))
	}

	f := newFakeEmbeddings(t)
	emb, err := NewOpenAIEmbedder(EmbeddingsConfig{URL: f.srv.URL, Model: "m", BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	ix := NewIndex(&Options{Embedder: emb, LexicalOnly: true})
	t.Cleanup(ix.Close)
	ix.Upsert(hybridDocs...)
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := ix.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	if n := ix.Embedded(); n != len(hybridDocs) {
		t.Fatalf("Embedded = %d, want %d", n, len(hybridDocs))
	}
	res := ix.Search(ctx, q)
	if res.Mode != ModeHybrid || res.Degraded != "" {
		t.Fatalf("mode %q degraded %q", res.Mode, res.Degraded)
	}
	if len(res.Hits) == 0 || res.Hits[0].Name != "git.create_pull_request" {
		t.Fatalf("hybrid hits = %v, want git.create_pull_request first", names(res.Hits))
	}
	top := res.Hits[0]
	if top.Score != 1 || top.Semantic < 0.8 || top.Lexical <= 0 || top.Lexical >= 1 {
		t.Errorf("top hit %+v: want score 1, semantic > 0.8, lexical in (0,1) (not the lexical top)", top)
	}
	// Background batches respect BatchSize: 4 docs → 3 + 1, then the query.
	if diff := cmp.Diff([]int{3, 1, 1}, f.batch); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
	// An unchanged document keeps its vector; a changed one is re-embedded.
	ix.Upsert(hybridDocs[0])
	changed := hybridDocs[3]
	changed.Description = "Open a file."
	ix.Upsert(changed)
	if err := ix.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{3, 1, 1, 1}, f.batch); diff != "" {
		t.Errorf("batch sizes after updates (-want +got):\n%s", diff)
	}
}

// TestEmbeddingsDown: a failing or unreachable endpoint degrades search to
// lexical, says why, and keeps the answer of the same index without
// embeddings.
func TestEmbeddingsDown(t *testing.T) {
	ctx := context.Background()
	q := Query{Text: "open a pull request"}
	lex := NewIndex(nil)
	t.Cleanup(lex.Close)
	lex.Upsert(hybridDocs...)
	want := lex.Search(ctx, q)

	for _, tc := range []struct {
		name   string
		break_ func(f *fakeEmbeddings)
		reason string
	}{
		{"status 500", func(f *fakeEmbeddings) { f.setStatus(http.StatusInternalServerError) }, "status 500"},
		{"closed", func(f *fakeEmbeddings) { f.srv.Close() }, "/v1/embeddings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEmbeddings(t)
			tc.break_(f)
			emb, err := NewOpenAIEmbedder(EmbeddingsConfig{URL: f.srv.URL, Model: "m", APIKey: "sk-hidden"})
			if err != nil {
				t.Fatal(err)
			}
			ix := NewIndex(&Options{Embedder: emb, QueryTimeout: 5 * time.Second})
			t.Cleanup(ix.Close)
			ix.Upsert(hybridDocs...)
			got := ix.Search(ctx, q)
			if got.Mode != ModeLexical || !strings.HasPrefix(got.Degraded, "embeddings endpoint unavailable: ") ||
				!strings.Contains(got.Degraded, tc.reason) {
				t.Errorf("mode %q degraded %q", got.Mode, got.Degraded)
			}
			if strings.Contains(got.Degraded, "sk-hidden") {
				t.Errorf("Degraded leaks the API key: %q", got.Degraded)
			}
			if diff := cmp.Diff(want.Hits, got.Hits); diff != "" {
				t.Errorf("hits (-lexical +degraded):\n%s", diff)
			}
			if n := ix.Embedded(); n != 0 {
				t.Errorf("Embedded = %d with the endpoint down", n)
			}
		})
	}
}

// TestEmbeddingsRecover: documents that failed to embed are retried in the
// background and search becomes hybrid once the endpoint is back.
func TestEmbeddingsRecover(t *testing.T) {
	f := newFakeEmbeddings(t)
	f.setStatus(http.StatusServiceUnavailable)
	emb, err := NewOpenAIEmbedder(EmbeddingsConfig{URL: f.srv.URL, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	ix := NewIndex(&Options{Embedder: emb})
	t.Cleanup(ix.Close)
	ix.Upsert(hybridDocs...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	select {
	case <-f.failed:
	case <-ctx.Done():
		t.Fatal("the background embedder never called the endpoint")
	}
	if n := ix.Embedded(); n != 0 {
		t.Fatalf("Embedded = %d while the endpoint fails", n)
	}
	f.setStatus(0)
	if err := ix.Flush(ctx); err != nil {
		t.Fatalf("Flush after recovery: %v", err)
	}
	if res := ix.Search(ctx, Query{Text: "open a pull request"}); res.Mode != ModeHybrid {
		t.Errorf("mode %q degraded %q", res.Mode, res.Degraded)
	}
}
