package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/switchboard-mcp/switchboard/internal/openai"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// LLMConfig says how to reach an OpenAI-compatible chat endpoint. Zero
// BatchSize, Concurrency and Timeout take their defaults.
type LLMConfig struct {
	// URL is the endpoint's base ("https://api.openai.com", ".../v1") or the
	// full ".../v1/chat/completions" path.
	URL, Model, APIKey string
	// BatchSize is the number of tools per request (default 20).
	BatchSize int
	// Concurrency bounds requests in flight at once (default 4).
	Concurrency int
	// Timeout bounds one request (default 30s).
	Timeout time.Duration
	// HTTPClient defaults to a plain client; requests are bounded by Timeout.
	HTTPClient *http.Client
}

// LLM defaults.
const (
	DefaultBatchSize   = 20
	DefaultConcurrency = 4
	DefaultTimeout     = 30 * time.Second
)

// maxReplyBytes bounds what we read of a reply: a batch of 20 verdicts is a
// few KiB, and a misbehaving endpoint must not exhaust memory.
const maxReplyBytes = 4 << 20

// LLM classifies tools with a chat model, which understands descriptions the
// offline classifier's word matching cannot. It is never worse than offline:
// any failure, for a batch or one tool, yields the offline verdict marked
// "offline-fallback" with a Note. Safe for concurrent use.
type LLM struct {
	endpoint    string
	model       string
	apiKey      string
	batchSize   int
	concurrency int
	timeout     time.Duration
	client      *http.Client
	offline     *Offline
	logger      *slog.Logger
	prompt      string
	known       map[string]bool
}

// NewLLM checks cfg and prepares the system prompt from offline's taxonomy.
// offline is required: it is both the taxonomy and the fallback.
func NewLLM(cfg LLMConfig, offline *Offline, logger *slog.Logger) (*LLM, error) {
	if offline == nil {
		return nil, errors.New("skills: llm classifier: offline classifier is required")
	}
	endpoint, err := chatEndpoint(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("skills: llm classifier: %w", err)
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("skills: llm classifier: model is empty")
	}
	if cfg.BatchSize < 0 || cfg.Concurrency < 0 || cfg.Timeout < 0 {
		return nil, errors.New("skills: llm classifier: batch size, concurrency and timeout must not be negative")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l := &LLM{
		endpoint:    endpoint,
		model:       cfg.Model,
		apiKey:      cfg.APIKey,
		batchSize:   cmpOr(cfg.BatchSize, DefaultBatchSize),
		concurrency: cmpOr(cfg.Concurrency, DefaultConcurrency),
		timeout:     cmpOr(cfg.Timeout, DefaultTimeout),
		client:      cfg.HTTPClient,
		offline:     offline,
		logger:      logger,
		known:       map[string]bool{},
	}
	if l.client == nil {
		l.client = &http.Client{}
	}
	for _, s := range offline.skills {
		l.known[s.ID] = true
	}
	l.prompt = systemPrompt(offline.skills)
	return l, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// chatEndpoint accepts the forms operators paste: a base URL, a /v1 base or
// the full chat completions path.
func chatEndpoint(raw string) (string, error) {
	u, err := openai.Endpoint(raw, "chat/completions")
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// Skills returns the taxonomy the classifier offers the model.
func (l *LLM) Skills() []Skill { return l.offline.Skills() }

// ClassifyBatch classifies tools in batches of BatchSize with at most
// Concurrency requests in flight, and returns one verdict per tool in the
// same order. It returns when every request has finished; a cancelled ctx
// makes the remaining batches fall back to offline.
func (l *LLM) ClassifyBatch(ctx context.Context, tools []Tool) []Classification {
	out := make([]Classification, len(tools))
	sem := make(chan struct{}, l.concurrency)
	var wg sync.WaitGroup
	for start := 0; start < len(tools); start += l.batchSize {
		end := min(start+l.batchSize, len(tools))
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			l.fallback(out[start:end], tools[start:end], fmt.Sprintf("llm not asked: %v", ctx.Err()))
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			l.classifyOne(ctx, tools[start:end], out[start:end])
		})
	}
	wg.Wait()
	return out
}

// classifyOne sends one batch and fills out, tool by tool.
func (l *LLM) classifyOne(ctx context.Context, tools []Tool, out []Classification) {
	reply, err := l.ask(ctx, tools)
	if err != nil {
		note := l.redact(fmt.Sprintf("llm request: %v", err))
		l.logger.Warn("skills: llm classification fell back to offline", "tools", len(tools), "reason", note)
		l.fallback(out, tools, note)
		return
	}
	// Match verdicts to tools by name; repeated names (the same tool name
	// on two servers in one batch) take the verdicts in order.
	byName := map[string][]llmVerdict{}
	for _, v := range reply.Tools {
		byName[v.Name] = append(byName[v.Name], v)
	}
	var failed int
	for i, t := range tools {
		vs := byName[t.Name]
		if len(vs) == 0 {
			failed++
			l.fallback(out[i:i+1], tools[i:i+1], "llm reply has no verdict for this tool")
			continue
		}
		byName[t.Name] = vs[1:]
		c, err := l.verdict(vs[0])
		if err != nil {
			failed++
			l.fallback(out[i:i+1], tools[i:i+1], l.redact("llm verdict rejected: "+err.Error()))
			continue
		}
		out[i] = c
	}
	if failed > 0 {
		l.logger.Warn("skills: llm verdicts rejected, offline used for those tools", "tools", len(tools), "rejected", failed)
	}
}

// verdict checks one tool's verdict against the taxonomy and the contract.
func (l *LLM) verdict(v llmVerdict) (Classification, error) {
	c := Classification{Method: MethodLLM}
	seen := map[string]bool{}
	for _, a := range v.Skills {
		switch {
		case !l.known[a.SkillID]:
			return Classification{}, fmt.Errorf("unknown skill id %q", truncate(a.SkillID, 64))
		case a.Confidence == nil:
			return Classification{}, fmt.Errorf("skill %q has no confidence", a.SkillID)
		case *a.Confidence < 0 || *a.Confidence > 1:
			return Classification{}, fmt.Errorf("skill %q confidence %v outside [0,1]", a.SkillID, *a.Confidence)
		case seen[a.SkillID]:
			continue
		}
		seen[a.SkillID] = true
		c.Skills = append(c.Skills, Assignment{SkillID: a.SkillID, Confidence: round3(*a.Confidence)})
	}
	if v.NewSkill != nil && strings.TrimSpace(v.NewSkill.Name) != "" {
		c.Proposed = &ProposedSkill{
			Name:        truncate(strings.TrimSpace(v.NewSkill.Name), 80),
			Description: truncate(strings.TrimSpace(v.NewSkill.Description), 500),
		}
	}
	return finish(c), nil
}

func (l *LLM) fallback(out []Classification, tools []Tool, note string) {
	for i, t := range tools {
		c := l.offline.Classify(t)
		c.Method = MethodOfflineFallback
		c.Note = note
		out[i] = c
	}
}

// redact keeps the API key out of notes and logs even if an endpoint or a
// transport error echoes it back.
func (l *LLM) redact(s string) string {
	if l.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, l.apiKey, "[redacted]")
}

// The chat completions wire format, as far as we use it.
type (
	chatRequest struct {
		Model          string         `json:"model"`
		Messages       []chatMessage  `json:"messages"`
		ResponseFormat map[string]any `json:"response_format"`
		Temperature    float64        `json:"temperature"`
	}
	chatMessage struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	chatResponse struct {
		Choices []struct {
			Message chatMessage `json:"message"`
		} `json:"choices"`
	}
	// llmReply is the JSON the system prompt asks the model for.
	llmReply struct {
		Tools []llmVerdict `json:"tools"`
	}
	llmVerdict struct {
		Name   string `json:"name"`
		Skills []struct {
			SkillID    string   `json:"skill_id"`
			Confidence *float64 `json:"confidence"`
		} `json:"skills"`
		NewSkill *ProposedSkill `json:"new_skill"`
	}
	llmTool struct {
		Name        string   `json:"name"`
		Server      string   `json:"server,omitempty"`
		Description string   `json:"description,omitempty"`
		Params      []string `json:"params,omitempty"`
	}
)

// ask sends one batch and decodes the model's JSON reply.
func (l *LLM) ask(ctx context.Context, tools []Tool) (*llmReply, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()

	batch := make([]llmTool, len(tools))
	for i, t := range tools {
		batch[i] = llmTool{Name: t.Name, Server: t.Server, Description: truncate(t.Description, 2000), Params: t.Params}
	}
	user, err := json.Marshal(map[string]any{"tools": batch})
	if err != nil {
		return nil, fmt.Errorf("encode tools: %w", err)
	}
	body, err := json.Marshal(chatRequest{
		Model: l.model,
		Messages: []chatMessage{
			{Role: "system", Content: l.prompt},
			{Role: "user", Content: string(user)},
		},
		ResponseFormat: map[string]any{"type": "json_object"},
	})
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if l.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+l.apiKey)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, err // *url.Error already names the method and URL
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return nil, fmt.Errorf("read reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, truncate(strings.TrimSpace(string(raw)), 200))
	}
	var chat chatResponse
	if err := json.Unmarshal(raw, &chat); err != nil {
		return nil, fmt.Errorf("decode chat reply: %w", err)
	}
	if len(chat.Choices) == 0 {
		return nil, errors.New("chat reply has no choices")
	}
	var reply llmReply
	if err := json.Unmarshal([]byte(stripFences(chat.Choices[0].Message.Content)), &reply); err != nil {
		return nil, fmt.Errorf("model reply is not the requested JSON: %w", err)
	}
	return &reply, nil
}

// stripFences removes a ```json fence some models add despite
// response_format.
func stripFences(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "```") {
		return s
	}
	s = strings.TrimPrefix(s, "```")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSuffix(strings.TrimSpace(s), "```")
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// systemPrompt lists the taxonomy and the reply format. It is built once:
// the taxonomy does not change under a classifier.
func systemPrompt(skills []Skill) string {
	var b strings.Builder
	b.WriteString(`You classify the tools of MCP servers into skill categories.
Skills (id: name — description; example tools):
`)
	for _, s := range skills {
		fmt.Fprintf(&b, "- %s: %s — %s", s.ID, s.Name, s.Description)
		if len(s.Examples) > 0 {
			fmt.Fprintf(&b, "; examples: %s", strings.Join(s.Examples, ", "))
		}
		b.WriteByte('\n')
	}
	b.WriteString(`
The user message is a JSON object {"tools":[{"name","server","description","params"}]}.
For every tool, give 1 to 3 skills from the list above, by skill_id, each with a confidence between 0 and 1
(0.5 or more only when you are fairly sure it is the tool's main purpose), highest first.
If no listed skill fits, give an empty skills array and propose a new skill; otherwise new_skill is null.
Reply with one JSON object and nothing else, every tool exactly once, names copied exactly:
{"tools":[{"name":"<tool name>","skills":[{"skill_id":"<id>","confidence":0.9}],"new_skill":{"name":"<short name>","description":"<one sentence>"}|null}]}
`)
	return b.String()
}
