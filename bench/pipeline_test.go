package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// BenchmarkPipeline measures what the call pipeline adds to one tools/call
// over bare routing (issue 5, C8): the same call through invoke.Pipeline
// with no stage configured ("bare": resolve, timeout, route) and with every
// stage the gateway runs ("full": identity, rate limit, authorization with
// its decision cache, idempotency, bulkhead, circuit breaker, retry budget,
// redaction, audit record queued to a real SQLite store, outcome hook).
// The upstream answers in memory, so the figure is the pipeline's own cost.
// Each reports its p50 per call as "p50-ns" next to the mean ns/op:
//
//	go test ./bench -run '^$' -bench Pipeline -benchtime 20000x
func BenchmarkPipeline(b *testing.B) {
	cat := catalog.New(nil)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true,
		Tools: []*mcp.Tool{{Name: "echo", InputSchema: map[string]any{"type": "object"}, Annotations: ro}}}); err != nil {
		b.Fatal(err)
	}
	up := &memUpstream{res: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "switchboard bench"}}}}
	call := invoke.Call{Name: "demo.echo", Arguments: json.RawMessage(`{"text":"switchboard bench"}`),
		Identity: authz.Identity{ID: "key:bench", AgentID: "bench-agent", Roles: []string{"dev"}}}

	b.Run("bare", func(b *testing.B) {
		runPipeline(b, invoke.New(cat, up, nil), call)
	})
	b.Run("full", func(b *testing.B) {
		ctx := context.Background()
		db, err := store.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		engine, err := authz.New(ctx, &memGrants{}, authz.Policy{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := engine.Grant(ctx, authz.Grant{AgentID: "bench-agent", Server: "demo", Tool: "*"}, authz.GrantOptions{}); err != nil {
			b.Fatal(err)
		}
		red, err := audit.NewRedactor(nil)
		if err != nil {
			b.Fatal(err)
		}
		rec := audit.NewRecorder(benchSink{db}, nil)
		defer rec.Close(ctx)
		budgets := map[string]*resilience.RetryBudget{}
		var mu sync.Mutex
		p := invoke.New(cat, up, &invoke.Options{
			Authorizer:  engine,
			Recorder:    rec,
			Redactor:    red,
			Limiter:     resilience.NewRateLimiter(resilience.RateLimit{Rate: 1e9}, nil),
			Bulkhead:    resilience.NewBulkheads(resilience.BulkheadSettings{}),
			Breakers:    resilience.NewBreakers(resilience.BreakerSettings{}),
			Idempotency: resilience.NewIdempotency[*invoke.Result](0, 0, nil),
			RetryBudget: func(server string) invoke.RetryBudget {
				mu.Lock()
				defer mu.Unlock()
				bb, ok := budgets[server]
				if !ok {
					bb = resilience.NewRetryBudget(resilience.RetryBudgetSettings{}, nil)
					budgets[server] = bb
				}
				return bb
			},
			OnCall: func(invoke.Outcome) {},
		})
		runPipeline(b, p, call)
	})
}

func runPipeline(b *testing.B, p *invoke.Pipeline, call invoke.Call) {
	ctx := context.Background()
	for range 1000 { // warm the decision cache, the breaker map, the pools
		if _, err := p.CallTool(ctx, call); err != nil {
			b.Fatal(err)
		}
	}
	took := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := p.CallTool(ctx, call); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
}

// memUpstream answers every call at once.
type memUpstream struct{ res *mcp.CallToolResult }

func (m *memUpstream) CallTool(context.Context, string, *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	return m.res, nil
}
func (m *memUpstream) ReadResource(context.Context, string, *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	return nil, nil
}
func (m *memUpstream) GetPrompt(context.Context, string, *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	return nil, nil
}
func (m *memUpstream) Complete(context.Context, string, *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	return nil, nil
}
func (m *memUpstream) Subscribe(context.Context, string, *mcp.SubscribeParams) error     { return nil }
func (m *memUpstream) Unsubscribe(context.Context, string, *mcp.UnsubscribeParams) error { return nil }
func (m *memUpstream) SetLoggingLevel(context.Context, string, *mcp.SetLoggingLevelParams) error {
	return nil
}

// memGrants is an in-memory authz.Store.
type memGrants struct {
	mu     sync.Mutex
	grants []authz.Grant
}

func (m *memGrants) ListGrants(context.Context) ([]authz.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.grants), nil
}
func (m *memGrants) PutGrant(_ context.Context, g authz.Grant) (authz.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.grants = append(m.grants, g)
	return g, nil
}
func (m *memGrants) DeleteGrant(context.Context, string) error   { return nil }
func (m *memGrants) PutToken(context.Context, authz.Token) error { return nil }
func (m *memGrants) GetToken(context.Context, string) (authz.Token, error) {
	return authz.Token{}, authz.ErrNotFound
}
func (m *memGrants) UseToken(context.Context, string, time.Time) error { return nil }
func (m *memGrants) RevokeToken(context.Context, string) error         { return nil }

// benchSink writes audit records to the store, as the gateway does.
type benchSink struct{ db *store.DB }

func (s benchSink) WriteAudit(ctx context.Context, recs []audit.Record) error {
	rows := make([]store.Invocation, len(recs))
	for i, r := range recs {
		rows[i] = store.Invocation(r)
	}
	return s.db.InsertInvocations(ctx, rows)
}

func (s benchSink) PurgeAudit(ctx context.Context, before time.Time) (int64, error) {
	return s.db.PurgeInvocations(ctx, before)
}
