package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/switchboard-mcp/switchboard/internal/openai"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Embedder turns texts into vectors for semantic ranking. Implementations must
// return one vector per text, in order, and be safe for concurrent use: the
// index embeds documents in the background while searches embed queries.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// EmbeddingsConfig locates an OpenAI-compatible embeddings endpoint (OpenAI,
// Azure-style proxies, Ollama, vLLM, LiteLLM, ...).
type EmbeddingsConfig struct {
	URL, Model, APIKey string
	BatchSize          int           // texts per request; default 64
	Timeout            time.Duration // per request; default 10s
	HTTPClient         *http.Client  // nil = a plain client
}

// OpenAIEmbedder is an [Embedder] speaking the OpenAI /v1/embeddings protocol.
type OpenAIEmbedder struct {
	endpoint string // full URL of the embeddings route
	safeURL  string // endpoint with any userinfo redacted, for errors
	model    string
	apiKey   string
	batch    int
	timeout  time.Duration
	client   *http.Client
}

// NewOpenAIEmbedder calls POST {URL}/v1/embeddings (URL may already end in /v1 or /v1/embeddings: accept
// all three) with {"model","input":[...]} and reads data[i].embedding (order by "index"). Errors name the URL
// (never the API key) and the HTTP status.
func NewOpenAIEmbedder(cfg EmbeddingsConfig) (*OpenAIEmbedder, error) {
	if cfg.Model == "" {
		return nil, errors.New("embeddings: model is required")
	}
	u, err := openai.Endpoint(cfg.URL, "embeddings")
	if err != nil {
		return nil, fmt.Errorf("embeddings: url %q is not an http(s) URL", redactURL(cfg.URL))
	}
	e := &OpenAIEmbedder{
		endpoint: u.String(),
		safeURL:  u.Redacted(),
		model:    cfg.Model,
		apiKey:   cfg.APIKey,
		batch:    cfg.BatchSize,
		timeout:  cfg.Timeout,
		client:   cfg.HTTPClient,
	}
	if e.batch <= 0 {
		e.batch = 64
	}
	if e.timeout <= 0 {
		e.timeout = 10 * time.Second
	}
	if e.client == nil {
		e.client = &http.Client{}
	}
	return e, nil
}

// URL is the embeddings endpoint requests go to (userinfo redacted), for
// status pages and logs.
func (e *OpenAIEmbedder) URL() string { return e.safeURL }

// Embed sends texts in batches of BatchSize, one request at a time, and
// returns their vectors in input order.
func (e *OpenAIEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.batch {
		end := min(start+e.batch, len(texts))
		vecs, err := e.embedBatch(ctx, texts[start:end])
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func (e *OpenAIEmbedder) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	body, err := json.Marshal(struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}{e.model, texts})
	if err != nil {
		return nil, fmt.Errorf("embeddings: encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("embeddings: POST %s: %w", e.safeURL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.apiKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, e.redact(fmt.Errorf("embeddings: POST %s: %w", e.safeURL, err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, e.redact(fmt.Errorf("embeddings: POST %s: read response (status %d): %w", e.safeURL, resp.StatusCode, err))
	}
	if resp.StatusCode/100 != 2 {
		snippet := strings.TrimSpace(string(raw))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "..."
		}
		return nil, e.redact(fmt.Errorf("embeddings: POST %s: status %d: %s", e.safeURL, resp.StatusCode, snippet))
	}
	var parsed struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &parsed); err != nil {
		return nil, fmt.Errorf("embeddings: POST %s: decode response (status %d): %w", e.safeURL, resp.StatusCode, err)
	}
	if len(parsed.Data) != len(texts) {
		return nil, fmt.Errorf("embeddings: POST %s: got %d embeddings for %d inputs", e.safeURL, len(parsed.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range parsed.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("embeddings: POST %s: bad or repeated index %d", e.safeURL, d.Index)
		}
		if len(d.Embedding) == 0 {
			return nil, fmt.Errorf("embeddings: POST %s: empty embedding at index %d", e.safeURL, d.Index)
		}
		out[d.Index] = d.Embedding
	}
	return out, nil
}

// redact removes the API key from an error message, in case a server or a
// proxy echoes the Authorization header back.
func (e *OpenAIEmbedder) redact(err error) error {
	if e.apiKey == "" || !strings.Contains(err.Error(), e.apiKey) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), e.apiKey, "[redacted]"))
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}
