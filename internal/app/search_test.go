package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSearchModeThroughMCP is D4: in search mode a go-sdk client over /mcp
// sees only the meta-tools, finds everything.echo (server-everything over
// stdio) with search_tools and calls it with call_tool: the gateway's own
// tools carry no prefix (seed 004 AG-US7 AC7).
func TestSearchModeThroughMCP(t *testing.T) {
	js := everythingPath(t)
	g := startGateway(t, fmt.Sprintf("front:\n  tool_exposure: search\nservers:\n  everything:\n    transport: stdio\n    command: node\n    args: [%q, stdio]\n    auto_start: true\n", js)+
		demoServer("demo"), nil)
	cs := g.connect(t, "/mcp")
	names := toolNames(t, cs)
	if len(names) != 2 || names["search_tools"] == nil || names["call_tool"] == nil {
		t.Fatalf("search mode lists %v, want only the two meta-tools", keys2(names))
	}
	text, res := callText(t, cs, "search_tools", map[string]any{"query": "echo back a message", "server_filter": []string{"everything"}})
	if res.IsError {
		t.Fatalf("search_tools: %s", text)
	}
	var found struct {
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(text), &found); err != nil || len(found.Tools) == 0 {
		t.Fatalf("search_tools answered %s (%v)", text, err)
	}
	if found.Tools[0].Name != "everything.echo" || found.Tools[0].InputSchema == nil {
		t.Fatalf("best match %q (schema %v), want everything.echo with its schema; all: %s", found.Tools[0].Name, found.Tools[0].InputSchema, text)
	}
	text, res = callText(t, cs, "call_tool", map[string]any{"name": "everything.echo", "arguments": map[string]any{"message": "found and called"}})
	if res.IsError || !strings.Contains(text, "found and called") {
		t.Fatalf("call_tool: %q", text)
	}
}

// TestSearchAPI checks POST /api/v1/search against the AG-US2 contract.
func TestSearchAPI(t *testing.T) {
	g := startGateway(t, "servers:"+demoServer("demo")+demoServer("other")+"\n  idle:\n    transport: stdio\n    command: switchboard\n    args: [demo-server]\n", nil)
	code, body := g.rest(t, "POST", "/api/v1/search", map[string]any{"query": "add two numbers", "limit": 5})
	if code != 200 {
		t.Fatalf("search: %d %v", code, body)
	}
	tools, _ := body["tools"].([]any)
	if len(tools) == 0 {
		t.Fatalf("no results: %v", body)
	}
	first := tools[0].(map[string]any)
	if n := first["name"]; n != "demo.add" && n != "other.add" {
		t.Errorf("best match %v, want an add tool", n)
	}
	src, _ := first["source_server"].(map[string]any)
	if src["name"] == nil || src["id"] == "" || src["status"] != "CONNECTED" || first["original_name"] != "add" {
		t.Errorf("result lacks the AG-US2 fields: %v", first)
	}
	ids, ok := first["skill_ids"].([]any)
	if !ok {
		t.Errorf("no skill_ids: %v", first)
	}
	// Every skill comes with the classifier's confidence, in the same order.
	as, _ := first["skills"].([]any)
	if len(as) == 0 || len(as) != len(ids) {
		t.Errorf("skills %v do not match skill_ids %v", first["skills"], ids)
	}
	for i, a := range as {
		m := a.(map[string]any)
		c, _ := m["confidence"].(float64)
		if m["skill_id"] != ids[i] || c <= 0 || c > 1 {
			t.Errorf("skills[%d] = %v, want skill %v with a confidence in (0, 1]", i, m, ids[i])
		}
	}
	if len(as) > 0 && as[0].(map[string]any)["skill_id"] != first["primary_skill_id"] {
		t.Errorf("primary %v is not the most confident skill %v", first["primary_skill_id"], as[0])
	}
	prev := 2.0
	servers := map[any]bool{}
	for _, tl := range tools {
		m := tl.(map[string]any)
		s := m["score"].(float64)
		if s > prev {
			t.Errorf("results not sorted by score: %v", tools)
		}
		prev = s
		servers[m["source_server"].(map[string]any)["name"]] = true
	}
	if servers["idle"] {
		t.Error("a disconnected server's tools are in the results")
	}
	if !servers["demo"] || !servers["other"] {
		t.Errorf("results come from %v, want both connected servers", servers)
	}
	meta, _ := body["metadata"].(map[string]any)
	if meta["servers_searched"] != 2.0 || meta["total_tools_searched"] != 10.0 || meta["ranking"] != "lexical" {
		t.Errorf("metadata = %v, want 2 servers, 10 tools, lexical", meta)
	}
	_, body = g.rest(t, "POST", "/api/v1/search", map[string]any{"query": "add two numbers", "server_filter": []string{"other"}})
	for _, tl := range body["tools"].([]any) {
		if s := tl.(map[string]any)["source_server"].(map[string]any)["name"]; s != "other" {
			t.Errorf("server_filter other returned a tool of %v", s)
		}
	}
	code, body = g.rest(t, "GET", "/api/v1/skills", nil)
	if code != 200 || len(body["skills"].([]any)) < 15 {
		t.Errorf("skills: %d %v", code, body)
	}
	_ = mcp.Implementation{}
}

// TestSearchWithEmbeddings wires an OpenAI-compatible embeddings endpoint
// (a local fake with deterministic vectors) into the gateway: search turns
// hybrid; with the endpoint down it degrades to lexical and says why.
func TestSearchWithEmbeddings(t *testing.T) {
	var down atomic.Bool
	emb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		out := struct {
			Data []item `json:"data"`
		}{}
		for i, text := range req.Input {
			v := make([]float32, 16)
			for _, word := range strings.Fields(strings.ToLower(text)) {
				v[len(word)%16]++
			}
			out.Data = append(out.Data, item{Index: i, Embedding: v})
		}
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(emb.Close)
	g := startGateway(t, fmt.Sprintf("search:\n  embeddings:\n    url: %s\n    model: fake-embed\nservers:", emb.URL)+demoServer("demo"), nil)
	var meta map[string]any
	waitFor(t, "hybrid ranking", func() bool {
		_, body := g.rest(t, "POST", "/api/v1/search", map[string]any{"query": "add two numbers"})
		meta, _ = body["metadata"].(map[string]any)
		return meta["ranking"] == "hybrid"
	})
	// Per-skill embeddings follow the embedded tools (AG-US3 AC5).
	waitFor(t, "a skill with an embedding", func() bool {
		_, body := g.rest(t, "GET", "/api/v1/skills", nil)
		for _, s := range body["skills"].([]any) {
			if m := s.(map[string]any); m["id"] == "utilities" {
				n, _ := m["embedded_tools"].(float64)
				return n >= 1
			}
		}
		return false
	})
	down.Store(true)
	_, body := g.rest(t, "POST", "/api/v1/search", map[string]any{"query": "add two numbers"})
	meta, _ = body["metadata"].(map[string]any)
	if meta["ranking"] != "lexical" || meta["degraded"] == nil || len(body["tools"].([]any)) == 0 {
		t.Errorf("embeddings down: %v, want lexical results with a degraded reason", body)
	}
}

// TestSearchableWhileLLMClassifies holds the LLM classifier's answer back:
// the new server's tools are searchable at once with the offline verdict
// marked pending (seed 001), and take the LLM's verdict when it comes.
func TestSearchableWhileLLMClassifies(t *testing.T) {
	release := make(chan struct{})
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		var req struct {
			Messages []struct {
				Role, Content string
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", 400)
			return
		}
		var user struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal([]byte(req.Messages[len(req.Messages)-1].Content), &user); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		type skill struct {
			SkillID    string  `json:"skill_id"`
			Confidence float64 `json:"confidence"`
		}
		type verdict struct {
			Name   string  `json:"name"`
			Skills []skill `json:"skills"`
		}
		var out struct {
			Tools []verdict `json:"tools"`
		}
		for _, tl := range user.Tools {
			out.Tools = append(out.Tools, verdict{Name: tl.Name, Skills: []skill{{"data_analysis", 0.9}}})
		}
		content, _ := json.Marshal(out)
		json.NewEncoder(w).Encode(map[string]any{
			"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": string(content)}}},
		})
	}))
	t.Cleanup(llm.Close)
	g := startGateway(t, fmt.Sprintf("skills:\n  classifier:\n    mode: llm\n    url: %s\n    model: fake\nservers:", llm.URL)+demoServer("demo"), nil)
	// Registered after the gateway's, so it runs first: a failing test
	// must not leave the gateway's close waiting on a held-back answer.
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	hit := func() map[string]any {
		_, body := g.rest(t, "POST", "/api/v1/search", map[string]any{"query": "add two numbers"})
		tools, _ := body["tools"].([]any)
		for _, tl := range tools {
			if m := tl.(map[string]any); m["name"] == "demo.add" {
				return m
			}
		}
		return nil
	}
	var first map[string]any
	waitFor(t, "demo.add searchable while the LLM has not answered", func() bool {
		first = hit()
		return first != nil
	})
	if first["classification_pending"] != true || len(first["skills"].([]any)) == 0 {
		t.Errorf("before the LLM answers: %v, want the offline skills marked classification_pending", first)
	}
	close(release)
	released = true
	waitFor(t, "the LLM's verdict", func() bool {
		m := hit()
		return m != nil && m["classification_pending"] == nil && m["primary_skill_id"] == "data_analysis"
	})
	code, body := g.rest(t, "GET", "/api/v1/tools/demo.add", nil)
	if code != 200 || body["primary_skill_id"] != "data_analysis" || body["classification_pending"] != nil {
		t.Errorf("tool record after classification: %d %v", code, body)
	}
}
