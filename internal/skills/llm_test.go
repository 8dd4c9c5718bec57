package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const testKey = "sk-test-SECRET-key-123"

// chatServer is a fake OpenAI-compatible endpoint: reply builds the model's
// message content from the tools of each request.
type chatServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []chatRequest
	auth     []string
	paths    []string
}

func newChatServer(t *testing.T, reply func(w http.ResponseWriter, r *http.Request, tools []llmTool)) *chatServer {
	t.Helper()
	cs := &chatServer{}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req chatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var batch struct{ Tools []llmTool }
		if len(req.Messages) == 2 {
			_ = json.Unmarshal([]byte(req.Messages[1].Content), &batch)
		}
		cs.mu.Lock()
		cs.requests = append(cs.requests, req)
		cs.auth = append(cs.auth, r.Header.Get("Authorization"))
		cs.paths = append(cs.paths, r.URL.Path)
		cs.mu.Unlock()
		reply(w, r, batch.Tools)
	}))
	t.Cleanup(cs.Close)
	return cs
}

// writeContent wraps the model's message content in a chat completion.
func writeContent(w http.ResponseWriter, content string) {
	_ = json.NewEncoder(w).Encode(map[string]any{
		"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": content}}},
	})
}

// goodReply files every tool under issue_tracking (0.9) and code_management (0.4).
func goodReply(w http.ResponseWriter, _ *http.Request, tools []llmTool) {
	var out []map[string]any
	for _, t := range tools {
		out = append(out, map[string]any{"name": t.Name, "skills": []map[string]any{
			{"skill_id": "code_management", "confidence": 0.4},
			{"skill_id": "issue_tracking", "confidence": 0.9},
		}, "new_skill": nil})
	}
	b, _ := json.Marshal(map[string]any{"tools": out})
	writeContent(w, string(b))
}

func newTestLLM(t *testing.T, url string, cfg LLMConfig, logs io.Writer) *LLM {
	t.Helper()
	cfg.URL, cfg.Model, cfg.APIKey = url, "test-model", testKey
	if logs == nil {
		logs = io.Discard
	}
	l, err := NewLLM(cfg, NewOffline(Default()), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func someTools(n int) []Tool {
	tools := make([]Tool, n)
	for i := range tools {
		tools[i] = Tool{Name: fmt.Sprintf("create_issue_%d", i), Server: "github", Description: "Create a new issue in a GitHub repository"}
	}
	return tools
}

func TestLLMGoodReply(t *testing.T) {
	cs := newChatServer(t, goodReply)
	l := newTestLLM(t, cs.URL+"/v1/", LLMConfig{BatchSize: 20}, nil)
	tools := someTools(45)
	got := l.ClassifyBatch(t.Context(), tools)

	want := Classification{
		Skills:     []Assignment{{"issue_tracking", 0.9}, {"code_management", 0.4}},
		Primary:    "issue_tracking",
		Classified: true,
		Method:     MethodLLM,
	}
	if len(got) != len(tools) {
		t.Fatalf("%d classifications for %d tools", len(got), len(tools))
	}
	for i, c := range got {
		if diff := cmp.Diff(want, c); diff != "" {
			t.Fatalf("tool %d (-want +got):\n%s", i, diff)
		}
	}

	var sizes []int
	for i, req := range cs.requests {
		if req.Model != "test-model" || req.ResponseFormat["type"] != "json_object" || len(req.Messages) != 2 ||
			req.Messages[0].Role != "system" || req.Messages[1].Role != "user" {
			t.Errorf("request %d shape: %+v", i, req)
			continue
		}
		for _, s := range Default() {
			if !strings.Contains(req.Messages[0].Content, s.ID) {
				t.Errorf("system prompt does not mention skill %s", s.ID)
			}
		}
		var batch struct{ Tools []llmTool }
		if err := json.Unmarshal([]byte(req.Messages[1].Content), &batch); err != nil {
			t.Fatalf("user message is not JSON: %v", err)
		}
		sizes = append(sizes, len(batch.Tools))
		if cs.auth[i] != "Bearer "+testKey {
			t.Errorf("Authorization = %q", cs.auth[i])
		}
		if cs.paths[i] != "/v1/chat/completions" {
			t.Errorf("path = %q", cs.paths[i])
		}
	}
	// Batches may arrive in any order.
	count := map[int]int{}
	for _, n := range sizes {
		count[n]++
	}
	if diff := cmp.Diff(map[int]int{20: 2, 5: 1}, count); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
}

func TestLLMConcurrencyBound(t *testing.T) {
	const limit, batches = 2, 6
	var inflight, peak, arrived atomic.Int32
	bothArrived := make(chan struct{})
	cs := newChatServer(t, func(w http.ResponseWriter, r *http.Request, tools []llmTool) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		// The first two requests wait for each other, proving they run
		// at the same time; a serial classifier would never send the
		// second and this liveness guard would report it.
		if arrived.Add(1) == limit {
			close(bothArrived)
		}
		select {
		case <-bothArrived:
		case <-time.After(10 * time.Second):
			http.Error(w, "requests were not concurrent", http.StatusInternalServerError)
			return
		case <-r.Context().Done():
			return
		}
		goodReply(w, r, tools)
	})
	l := newTestLLM(t, cs.URL, LLMConfig{BatchSize: 3, Concurrency: limit}, nil)
	got := l.ClassifyBatch(t.Context(), someTools(3*batches))
	for i, c := range got {
		if c.Method != MethodLLM {
			t.Fatalf("tool %d: method %q, note %q", i, c.Method, c.Note)
		}
	}
	if p := peak.Load(); p != limit {
		t.Errorf("peak concurrency %d, want %d", p, limit)
	}
	if n := len(cs.requests); n != batches {
		t.Errorf("%d requests, want %d", n, batches)
	}
}

func TestLLMFallback(t *testing.T) {
	release := make(chan struct{})
	tests := []struct {
		name    string
		reply   func(w http.ResponseWriter, r *http.Request, tools []llmTool)
		timeout time.Duration
		note    string // substring of every fallback Note
		llmOK   int    // tools the LLM still classified
	}{
		{"malformed JSON", func(w http.ResponseWriter, _ *http.Request, _ []llmTool) {
			writeContent(w, `{"tools": [ {"name": "x", "skills": [`)
		}, 0, "model reply is not the requested JSON", 0},
		{"not a chat reply", func(w http.ResponseWriter, _ *http.Request, _ []llmTool) {
			_, _ = io.WriteString(w, "<html>proxy error</html>")
		}, 0, "decode chat reply", 0},
		{"unknown skill id", func(w http.ResponseWriter, _ *http.Request, tools []llmTool) {
			writeContent(w, fmt.Sprintf(`{"tools":[{"name":%q,"skills":[{"skill_id":"astrology","confidence":0.9}]},
				{"name":%q,"skills":[{"skill_id":"email","confidence":0.8}]}]}`, tools[0].Name, tools[1].Name))
		}, 0, `unknown skill id "astrology"`, 1},
		{"confidence outside [0,1]", func(w http.ResponseWriter, _ *http.Request, tools []llmTool) {
			writeContent(w, fmt.Sprintf(`{"tools":[{"name":%q,"skills":[{"skill_id":"email","confidence":1.5}]},
				{"name":%q,"skills":[{"skill_id":"email","confidence":0.8}]}]}`, tools[0].Name, tools[1].Name))
		}, 0, "outside [0,1]", 1},
		{"missing tool", func(w http.ResponseWriter, _ *http.Request, tools []llmTool) {
			writeContent(w, fmt.Sprintf(`{"tools":[{"name":%q,"skills":[{"skill_id":"email","confidence":0.8}]}]}`, tools[1].Name))
		}, 0, "no verdict for this tool", 1},
		{"HTTP 500 echoing the key", func(w http.ResponseWriter, r *http.Request, _ []llmTool) {
			http.Error(w, "upstream exploded, your key was "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), http.StatusInternalServerError)
		}, 0, "500 Internal Server Error", 0},
		{"timeout", func(w http.ResponseWriter, r *http.Request, _ []llmTool) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}, 50 * time.Millisecond, "context deadline exceeded", 0},
	}
	t.Cleanup(func() { close(release) })
	o := NewOffline(Default())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := newChatServer(t, tc.reply)
			var logs bytes.Buffer
			l := newTestLLM(t, cs.URL, LLMConfig{Timeout: tc.timeout}, &logs)
			tools := []Tool{
				{Name: "create_issue", Server: "github", Description: "Create a new issue in a GitHub repository"},
				{Name: "send_email", Server: "gmail", Description: "Sends a new email"},
			}
			got := l.ClassifyBatch(t.Context(), tools)
			var llm int
			for i, c := range got {
				if c.Method == MethodLLM {
					llm++
					continue
				}
				want := o.Classify(tools[i])
				want.Method, want.Note = MethodOfflineFallback, c.Note
				if diff := cmp.Diff(want, c); diff != "" {
					t.Errorf("tool %d is not the offline verdict (-want +got):\n%s", i, diff)
				}
				if !strings.Contains(c.Note, tc.note) {
					t.Errorf("tool %d note %q, want it to contain %q", i, c.Note, tc.note)
				}
				if strings.Contains(c.Note, testKey) {
					t.Errorf("note leaks the API key: %q", c.Note)
				}
			}
			if llm != tc.llmOK {
				t.Errorf("%d tools classified by the LLM, want %d", llm, tc.llmOK)
			}
			if strings.Contains(logs.String(), testKey) {
				t.Errorf("logs leak the API key:\n%s", logs.String())
			}
			if !strings.Contains(logs.String(), "fell back") && !strings.Contains(logs.String(), "rejected") {
				t.Errorf("fallback not logged:\n%s", logs.String())
			}
		})
	}
}

func TestLLMCancelledContext(t *testing.T) {
	cs := newChatServer(t, goodReply)
	l := newTestLLM(t, cs.URL, LLMConfig{BatchSize: 1, Concurrency: 1}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i, c := range l.ClassifyBatch(ctx, someTools(3)) {
		if c.Method != MethodOfflineFallback || !strings.Contains(c.Note, "canceled") {
			t.Errorf("tool %d: %+v, want offline-fallback noting the cancellation", i, c)
		}
	}
}

func TestLLMNewSkillProposal(t *testing.T) {
	cs := newChatServer(t, func(w http.ResponseWriter, _ *http.Request, tools []llmTool) {
		writeContent(w, fmt.Sprintf("```json\n"+`{"tools":[{"name":%q,"skills":[],"new_skill":{"name":"Weather","description":"Forecasts and current conditions."}},
			{"name":%q,"skills":[{"skill_id":"email","confidence":0.95}],"new_skill":null}]}`+"\n```", tools[0].Name, tools[1].Name))
	})
	l := newTestLLM(t, cs.URL+"/v1/chat/completions", LLMConfig{}, nil)
	tools := []Tool{{Name: "weather.get_alerts", Server: "weather", Description: "Get weather alerts for a US state"}, {Name: "gmail.send_email", Server: "gmail"}}
	got := l.ClassifyBatch(t.Context(), tools)
	want := []Classification{
		{Skills: []Assignment{}, Method: MethodLLM, Proposed: &ProposedSkill{Name: "Weather", Description: "Forecasts and current conditions."}},
		{Skills: []Assignment{{"email", 0.95}}, Primary: "email", Classified: true, Method: MethodLLM},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("ClassifyBatch (-want +got):\n%s", diff)
	}
	q := NewSuggestions(0)
	for i := range tools {
		q.Offer(tools[i], got[i])
	}
	list := q.List()
	if len(list) != 1 {
		t.Fatalf("suggestions = %+v, want one", list)
	}
	sg := list[0]
	if sg.Tool != "weather.get_alerts" || sg.Server != "weather" || sg.ProposedName != "Weather" ||
		sg.Description != "Forecasts and current conditions." || !strings.Contains(sg.Reason, "LLM") || sg.ID == "" {
		t.Errorf("suggestion = %+v", sg)
	}
}

func TestNewLLM(t *testing.T) {
	o := NewOffline(Default())
	tests := []struct {
		name, url, model string
		offline          *Offline
		wantEndpoint     string
		wantErr          string
	}{
		{"base", "http://h:1", "m", o, "http://h:1/v1/chat/completions", ""},
		{"v1", "http://h:1/v1/", "m", o, "http://h:1/v1/chat/completions", ""},
		{"full", "https://h/openai/v1/chat/completions", "m", o, "https://h/openai/v1/chat/completions", ""},
		{"prefix", "https://h/api", "m", o, "https://h/api/v1/chat/completions", ""},
		{"no scheme", "h:1", "m", o, "", "http or https"},
		{"empty url", "", "m", o, "", "http or https"},
		{"no model", "http://h", "", o, "", "model is empty"},
		{"no offline", "http://h", "m", nil, "", "offline classifier is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewLLM(LLMConfig{URL: tc.url, Model: tc.model}, tc.offline, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.endpoint != tc.wantEndpoint || l.batchSize != DefaultBatchSize || l.concurrency != DefaultConcurrency || l.timeout != DefaultTimeout {
				t.Errorf("endpoint %q batch %d conc %d timeout %v", l.endpoint, l.batchSize, l.concurrency, l.timeout)
			}
		})
	}
}
