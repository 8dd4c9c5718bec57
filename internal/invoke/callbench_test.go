package invoke

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
)

type benchAllow struct{}

func (benchAllow) Decide(context.Context, authz.Request) (authz.Decision, error) {
	return authz.Decision{Allow: true, Rule: "grant:bench"}, nil
}

// benchPipeline is the pipeline of a gateway with every stage that
// tracing instruments (authorization, breakers, audit) in front of an
// upstream that answers at once, so that the benchmark measures the
// pipeline's own cost. opts adds to it (a tracer).
func benchPipeline(b *testing.B, opts Options) *Pipeline {
	b.Helper()
	cat := catalog.New(nil)
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Tools: []*mcp.Tool{
		{Name: "echo", InputSchema: map[string]any{"type": "object"}},
	}}); err != nil {
		b.Fatal(err)
	}
	res := text("switchboard bench")
	up := &fakeUpstreams{fn: func(context.Context, string, *mcp.CallToolParams) (*mcp.CallToolResult, error) { return res, nil }}
	opts.Authorizer = benchAllow{}
	opts.Breakers = resilience.NewBreakers(resilience.BreakerSettings{})
	opts.Recorder = handOffRecorder{}
	return New(cat, up, &opts)
}

// BenchmarkCallTool is one tools/call through the pipeline, tracing off
// (the default). Compare with the same benchmark before tracing existed,
// and with BenchmarkCallToolTraced.
func BenchmarkCallTool(b *testing.B) {
	p := benchPipeline(b, Options{})
	benchCalls(b, p)
}

func benchCalls(b *testing.B, p *Pipeline) {
	call := Call{Name: "demo.echo", Arguments: json.RawMessage(`{"text":"switchboard bench"}`), CorrelationID: "c-1",
		Identity: authz.Identity{ID: "key:1", AgentID: "agent"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.CallTool(ctx, call); err != nil {
			b.Fatal(err)
		}
	}
}
