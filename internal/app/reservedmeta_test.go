package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// metaRecorder is an upstream (a real go-sdk server over Streamable HTTP)
// whose tool, resource and prompt remember the _meta each request carried.
type metaRecorder struct {
	mu   sync.Mutex
	seen []mcp.Meta
}

func (m *metaRecorder) record(meta mcp.Meta) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = append(m.seen, meta)
}

func (m *metaRecorder) take() []mcp.Meta {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.seen
	m.seen = nil
	return out
}

func newMetaRecorder(t *testing.T) (*metaRecorder, string) {
	rec := &metaRecorder{}
	up := mcp.NewServer(&mcp.Implementation{Name: "meta", Version: "1"}, nil)
	up.AddTool(&mcp.Tool{Name: "echo_meta", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			rec.record(req.Params.Meta)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(req.Params.Meta)}}}, nil
		})
	up.AddResource(&mcp.Resource{URI: "meta://r", Name: "r", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			rec.record(req.Params.Meta)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "meta://r", Text: "r"}}}, nil
		})
	up.AddPrompt(&mcp.Prompt{Name: "p"}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		rec.record(req.Params.Meta)
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "p"}}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

// TestReservedMetaNeverReachesUpstream: whichever door a request comes
// through (REST tools/call, REST mcp/invoke, MCP tools/call, the call_tool
// meta-tool, resources/read, prompts/get), the gateway's _meta keys
// (switchboard/*) are taken out before the upstream sees the request, and
// the caller's other keys are forwarded.
func TestReservedMetaNeverReachesUpstream(t *testing.T) {
	rec, url := newMetaRecorder(t)
	g := startGateway(t, fmt.Sprintf("servers:\n  meta:\n    transport: http\n    url: %s\n    auto_start: true\n", url), nil)
	meta := map[string]any{
		"switchboard/approval-token":  "sbt_secret",
		"switchboard/idempotency-key": "",
		"switchboard/anything-else":   "x",
		"trace-id":                    "t-1",
	}
	check := func(t *testing.T, door string, want int) {
		t.Helper()
		seen := rec.take()
		if len(seen) != want {
			t.Fatalf("%s: upstream saw %d requests, want %d", door, len(seen), want)
		}
		for _, m := range seen {
			for k := range m {
				if strings.HasPrefix(k, "switchboard/") {
					t.Errorf("%s: upstream received reserved _meta key %q (all: %v)", door, k, m)
				}
			}
			if m["trace-id"] != "t-1" {
				t.Errorf("%s: caller's own _meta key not forwarded: %v", door, m)
			}
		}
	}

	if code, body := g.rest(t, "POST", "/api/v1/tools/call", map[string]any{"name": "meta.echo_meta", "arguments": map[string]any{}, "_meta": meta}); code != 200 {
		t.Fatalf("REST tools/call: %d %v", code, body)
	}
	check(t, "REST tools/call", 1)

	// mcp/invoke has no _meta of its own: nothing of the gateway's may be
	// added on the way.
	if code, body := g.rest(t, "POST", "/api/v1/mcp/invoke", map[string]any{"tool_name": "meta.echo_meta", "params": map[string]any{}, "approval_token": "sbt_secret"}); code != 200 {
		t.Fatalf("REST mcp/invoke: %d %v", code, body)
	}
	for _, m := range rec.take() {
		for k := range m {
			if strings.HasPrefix(k, "switchboard/") {
				t.Errorf("REST mcp/invoke: upstream received %q", k)
			}
		}
	}

	for _, path := range []string{"/mcp", "/servers/meta/mcp"} {
		cs := g.connect(t, path)
		name, uri, prompt := "meta.echo_meta", "meta+meta://r", "meta.p"
		if path != "/mcp" {
			name, uri, prompt = "echo_meta", "meta://r", "p"
		}
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}, Meta: meta}); err != nil {
			t.Fatalf("%s tools/call: %v", path, err)
		}
		check(t, path+" tools/call", 1)
		if _, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri, Meta: meta}); err != nil {
			t.Fatalf("%s resources/read %s: %v", path, uri, err)
		}
		check(t, path+" resources/read", 1)
		if _, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: prompt, Meta: meta}); err != nil {
			t.Fatalf("%s prompts/get: %v", path, err)
		}
		check(t, path+" prompts/get", 1)
	}
}
