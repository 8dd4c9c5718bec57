package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// scripted is an upstream whose answers per tool come from a script, and
// which counts the calls that reached it.
type scripted struct {
	fakeUpstreams
	mu     sync.Mutex
	calls  map[string]int // "server/tool" -> calls
	answer func(server, tool string, n int) (*mcp.CallToolResult, error)
}

func newScripted(answer func(server, tool string, n int) (*mcp.CallToolResult, error)) *scripted {
	return &scripted{calls: map[string]int{}, answer: answer}
}

func (s *scripted) CallTool(ctx context.Context, server string, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	s.mu.Lock()
	k := server + "/" + p.Name
	s.calls[k]++
	n := s.calls[k]
	s.mu.Unlock()
	return s.answer(server, p.Name, n)
}

func (s *scripted) count(k string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[k]
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// pipelineCatalog has a read-only tool, a side-effecting one and an
// idempotent one on server a, and a read-only tool on server b.
func pipelineCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	cat := catalog.New(nil)
	schema := map[string]any{"type": "object"}
	f := false
	tools := map[string][]*mcp.Tool{
		"a": {
			{Name: "read", InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			{Name: "write", InputSchema: schema},
			{Name: "put", InputSchema: schema, Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &f}},
		},
		"b": {{Name: "read", InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}},
	}
	for server, ts := range tools {
		if _, err := cat.Set(catalog.Entry{Server: server, Available: true, Tools: ts}); err != nil {
			t.Fatal(err)
		}
	}
	return cat
}

// fastRetry retries at once, so tests do not wait.
var fastRetry = resilience.RetryPolicy{MaxAttempts: 3, Base: time.Microsecond, MaxDelay: time.Microsecond,
	Jitter: func(d time.Duration) time.Duration { return d }}

// notSent and lostAfterSend are the two kinds of transient failure.
var (
	notSent       = &upstream.UnavailableError{Server: "a", State: upstream.StateConnecting, Reason: "restarting"}
	lostAfterSend = &upstream.UnavailableError{Server: "a", State: upstream.StateError, Reason: "connection lost", Sent: true}
)

func TestRetryClassification(t *testing.T) {
	tests := []struct {
		name     string
		call     Call
		answer   func(n int) (*mcp.CallToolResult, error)
		code     Code // "" = success
		attempts int
		calls    int
	}{
		{name: "read-only tool, two transient failures then success", call: Call{Name: "a.read"},
			answer: func(n int) (*mcp.CallToolResult, error) {
				if n <= 2 {
					return nil, lostAfterSend
				}
				return text("ok"), nil
			}, attempts: 3, calls: 3},
		{name: "tool error is returned at once", call: Call{Name: "a.read"},
			answer: func(int) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "bad"}}}, nil
			}, attempts: 1, calls: 1},
		{name: "side-effecting tool is not retried after the request was sent", call: Call{Name: "a.write"},
			answer: func(int) (*mcp.CallToolResult, error) { return nil, lostAfterSend },
			code:   CodeOutcomeUnknown, attempts: 1, calls: 1},
		{name: "side-effecting tool is retried when the request never left", call: Call{Name: "a.write"},
			answer: func(n int) (*mcp.CallToolResult, error) {
				if n == 1 {
					return nil, notSent
				}
				return text("ok"), nil
			}, attempts: 2, calls: 2},
		{name: "side-effecting tool with an idempotency key is retried", call: Call{Name: "a.write", IdempotencyKey: "k1"},
			answer: func(n int) (*mcp.CallToolResult, error) {
				if n == 1 {
					return nil, lostAfterSend
				}
				return text("ok"), nil
			}, attempts: 2, calls: 2},
		{name: "idempotent tool is retried", call: Call{Name: "a.put"},
			answer: func(n int) (*mcp.CallToolResult, error) {
				if n == 1 {
					return nil, lostAfterSend
				}
				return text("ok"), nil
			}, attempts: 2, calls: 2},
		{name: "retries are bounded", call: Call{Name: "a.read"},
			answer: func(int) (*mcp.CallToolResult, error) { return nil, notSent },
			code:   CodeServerUnavailable, attempts: 3, calls: 3},
		{name: "a reply over max_result_bytes is not retried", call: Call{Name: "a.read"},
			answer: func(int) (*mcp.CallToolResult, error) { return nil, tooLarge },
			code:   CodeResultTooLarge, attempts: 1, calls: 1},
		{name: "an upstream protocol error is not retried", call: Call{Name: "a.read"},
			answer: func(int) (*mcp.CallToolResult, error) { return nil, errors.New("boom") },
			code:   CodeUpstream, attempts: 1, calls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := newScripted(func(_, _ string, n int) (*mcp.CallToolResult, error) { return tc.answer(n) })
			p := New(pipelineCatalog(t), up, &Options{Retry: fastRetry, Idempotency: resilience.NewIdempotency[*Result](0, 0, nil)})
			res, err := p.CallTool(t.Context(), tc.call)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if res.Attempts != tc.attempts {
					t.Errorf("attempts = %d, want %d", res.Attempts, tc.attempts)
				}
			} else {
				if CodeOf(err) != tc.code {
					t.Fatalf("err = %v (code %q), want %q", err, CodeOf(err), tc.code)
				}
				var e *Error
				if errors.As(err, &e) && tc.attempts > 1 && e.Attempts != tc.attempts {
					t.Errorf("error attempts = %d, want %d", e.Attempts, tc.attempts)
				}
			}
			tool := tc.call.Name[2:]
			if got := up.count("a/" + tool); got != tc.calls {
				t.Errorf("upstream saw %d calls, want %d", got, tc.calls)
			}
		})
	}
}

// tooLarge is a reply over max_result_bytes, as the upstream package
// returns it from a call.
var tooLarge = fmt.Errorf("calling tool %q on server %q: %w", "read", "a", &upstream.ResultTooLargeError{Size: 20 << 20, Limit: 16 << 20})

// TestResultTooLarge checks that a reply over max_result_bytes fails its
// call with its own code and message, and is not held against the tool:
// its breaker stays closed, and no fallback runs in its place (the call
// ran).
func TestResultTooLarge(t *testing.T) {
	up := newScripted(func(_, tool string, _ int) (*mcp.CallToolResult, error) {
		if tool == "read" {
			return nil, tooLarge
		}
		return text("ok"), nil
	})
	br := resilience.NewBreakers(resilience.BreakerSettings{FailureThreshold: 1, Cooldown: time.Hour, HalfOpenMax: 1})
	p := New(pipelineCatalog(t), up, &Options{Retry: fastRetry, Breakers: br})
	for range 3 {
		_, err := p.CallTool(t.Context(), Call{Name: "a.read"})
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeResultTooLarge || e.Server != "a" {
			t.Fatalf("err = %v (code %q), want result_too_large on server a", err, CodeOf(err))
		}
		want := `calling tool "a.read" on server "a": result too large: upstream reply of 20971520 bytes exceeds max_result_bytes (16777216)`
		if e.Message != want {
			t.Errorf("message = %q, want %q", e.Message, want)
		}
	}
	if got := up.count("a/read"); got != 3 {
		t.Errorf("upstream saw %d calls, want 3: a breaker opened by a large reply would refuse the next", got)
	}
	if st := br.Get(resilience.Key("a", "read")).State(); st != resilience.Closed {
		t.Errorf("breaker %s, want CLOSED", st)
	}
}

func TestOutcomeUnknownMessage(t *testing.T) {
	up := newScripted(func(string, string, int) (*mcp.CallToolResult, error) { return nil, lostAfterSend })
	p := New(pipelineCatalog(t), up, &Options{Retry: fastRetry})
	_, err := p.CallTool(t.Context(), Call{Name: "a.write"})
	if CodeOf(err) != CodeOutcomeUnknown {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"outcome is unknown", "not retried", "idempotency key"} {
		if !contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestBreakerOpensAndFailsFast(t *testing.T) {
	up := newScripted(func(string, string, int) (*mcp.CallToolResult, error) { return nil, errors.New("internal error") })
	br := resilience.NewBreakers(resilience.BreakerSettings{FailureThreshold: 3, Cooldown: time.Hour, HalfOpenMax: 1})
	p := New(pipelineCatalog(t), up, &Options{Retry: fastRetry, Breakers: br})
	for range 3 {
		if _, err := p.CallTool(t.Context(), Call{Name: "a.read"}); CodeOf(err) != CodeUpstream {
			t.Fatalf("err = %v", err)
		}
	}
	for range 5 {
		_, err := p.CallTool(t.Context(), Call{Name: "a.read"})
		if CodeOf(err) != CodeCircuitOpen {
			t.Fatalf("err = %v, want circuit_open", err)
		}
		var e *Error
		if errors.As(err, &e) && e.RetryAfter <= 0 {
			t.Errorf("circuit open without Retry-After: %+v", e)
		}
	}
	if got := up.count("a/read"); got != 3 {
		t.Errorf("upstream saw %d calls, want 3 (the open breaker must not call it)", got)
	}
	// Another tool of the same server has its own breaker.
	if _, err := p.CallTool(t.Context(), Call{Name: "a.write"}); CodeOf(err) != CodeUpstream {
		t.Errorf("a.write: %v", err)
	}
}

func TestFallbackServesWhenBreakerOpen(t *testing.T) {
	up := newScripted(func(server, _ string, _ int) (*mcp.CallToolResult, error) {
		if server == "a" {
			return nil, errors.New("internal error")
		}
		return text("from b"), nil
	})
	br := resilience.NewBreakers(resilience.BreakerSettings{FailureThreshold: 1, Cooldown: time.Hour})
	p := New(pipelineCatalog(t), up, &Options{Retry: fastRetry, Breakers: br,
		Fallbacks: map[string][]string{"a.read": {"a.nonexistent", "b.read"}}})
	if _, err := p.CallTool(t.Context(), Call{Name: "a.read"}); CodeOf(err) != CodeUpstream {
		t.Fatalf("first call: %v", err) // a protocol error is an answer: no fallback
	}
	res, err := p.CallTool(t.Context(), Call{Name: "a.read"})
	if err != nil {
		t.Fatalf("fallback call: %v", err)
	}
	if res.ServedBy != "b.read" || res.Content[0].(*mcp.TextContent).Text != "from b" {
		t.Errorf("served by %q: %+v", res.ServedBy, res.Content)
	}
	if res.Tool.Name != "b.read" {
		t.Errorf("result tool = %q", res.Tool.Name)
	}
}

func TestIdempotentConcurrentCallsRunOnce(t *testing.T) {
	release := make(chan struct{})
	up := newScripted(func(string, string, int) (*mcp.CallToolResult, error) {
		<-release
		return text("once"), nil
	})
	p := New(pipelineCatalog(t), up, &Options{Retry: fastRetry, Idempotency: resilience.NewIdempotency[*Result](time.Minute, 100, nil)})
	args := json.RawMessage(`{"x":1}`)
	var wg sync.WaitGroup
	results := make([]*Result, 10)
	errs := make([]error, 10)
	for i := range 10 {
		wg.Go(func() {
			results[i], errs[i] = p.CallTool(t.Context(), Call{Name: "a.write", Arguments: args, IdempotencyKey: "same",
				Identity: authz.Identity{ID: "key:1", AgentID: "agent"}})
		})
	}
	// Let the calls pile up on the first one; none may reach the upstream twice.
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	for i := range 10 {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if got := results[i].Content[0].(*mcp.TextContent).Text; got != "once" {
			t.Errorf("call %d got %q", i, got)
		}
	}
	if got := up.count("a/write"); got != 1 {
		t.Errorf("upstream saw %d calls, want 1", got)
	}
	// Same key, other arguments: a conflict, not a replay.
	_, err := p.CallTool(t.Context(), Call{Name: "a.write", Arguments: json.RawMessage(`{"x":2}`), IdempotencyKey: "same",
		Identity: authz.Identity{ID: "key:1", AgentID: "agent"}})
	if CodeOf(err) != CodeIdempotencyConflict {
		t.Errorf("other arguments: %v, want idempotency_conflict", err)
	}
	// Key order does not make another call.
	if _, err := p.CallTool(t.Context(), Call{Name: "a.write", Arguments: json.RawMessage(` { "x" : 1 } `), IdempotencyKey: "same",
		Identity: authz.Identity{ID: "key:1", AgentID: "agent"}}); err != nil {
		t.Errorf("same call re-spaced: %v", err)
	}
	// Another agent's key is another key.
	if _, err := p.CallTool(t.Context(), Call{Name: "a.write", Arguments: args, IdempotencyKey: "same",
		Identity: authz.Identity{ID: "key:2", AgentID: "other"}}); err != nil {
		t.Fatal(err)
	}
	if got := up.count("a/write"); got != 2 {
		t.Errorf("upstream saw %d calls, want 2", got)
	}
}

// denyAll is an Authorizer that allows only agent "ok".
type denyAll struct{ calls atomic.Int32 }

func (d *denyAll) Decide(_ context.Context, r authz.Request) (authz.Decision, error) {
	d.calls.Add(1)
	if r.Identity.AgentID == "ok" {
		return authz.Decision{Allow: true, Rule: "grant:g1", Revision: 7}, nil
	}
	return authz.Decision{Rule: "default-deny", Reason: "no grant", Revision: 7}, nil
}

// memRecorder keeps audit records.
type memRecorder struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (m *memRecorder) Record(r audit.Record) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, r)
	return true
}

type plainRedactor struct{}

func (plainRedactor) ParamsHash(args json.RawMessage) string { return "hash:" + string(args) }
func (plainRedactor) Summary(v any, max int) string          { b, _ := json.Marshal(v); return string(b) }

func TestAuthorizeAndAudit(t *testing.T) {
	up := newScripted(func(_, tool string, _ int) (*mcp.CallToolResult, error) { return text("done " + tool), nil })
	rec := &memRecorder{}
	p := New(pipelineCatalog(t), up, &Options{Retry: fastRetry, Authorizer: &denyAll{}, Recorder: rec, Redactor: plainRedactor{}})
	ok := authz.Identity{ID: "key:ok", AgentID: "ok"}
	res, err := p.CallTool(t.Context(), Call{Name: "a.read", Identity: ok, TicketID: "T-1", CorrelationID: "c-1"})
	if err != nil || res.Decision.Rule != "grant:g1" || res.CorrelationID != "c-1" {
		t.Fatalf("allowed call: %+v, %v", res, err)
	}
	_, err = p.CallTool(t.Context(), Call{Name: "a.read", Identity: authz.Identity{ID: "key:no", AgentID: "no"}})
	if CodeOf(err) != CodeDenied || !contains(err.Error(), "default-deny") {
		t.Fatalf("denied call: %v", err)
	}
	_, err = p.CallTool(t.Context(), Call{Name: "a.read"})
	if CodeOf(err) != CodeUnauthenticated {
		t.Fatalf("anonymous call: %v", err)
	}
	_, err = p.CallTool(t.Context(), Call{Name: "a.nope", Identity: ok})
	if CodeOf(err) != CodeToolNotFound {
		t.Fatalf("unknown tool: %v", err)
	}
	if got := up.count("a/read"); got != 1 {
		t.Errorf("upstream saw %d calls, want 1", got)
	}
	if len(rec.recs) != 4 {
		t.Fatalf("%d audit records, want 4", len(rec.recs))
	}
	want := []struct{ decision, rule, code string }{
		{"ALLOW", "grant:g1", ""}, {"DENY", "default-deny", "denied"}, {"DENY", "unauthenticated", "unauthenticated"}, {"", "", "tool_not_found"},
	}
	for i, w := range want {
		r := rec.recs[i]
		if r.PolicyDecision != w.decision || r.PolicyRule != w.rule || r.ErrorCode != w.code {
			t.Errorf("record %d = decision %q rule %q code %q, want %+v", i, r.PolicyDecision, r.PolicyRule, r.ErrorCode, w)
		}
	}
	first := rec.recs[0]
	if !first.Success || first.TicketID != "T-1" || first.CorrelationID != "c-1" || first.Attempts != 1 ||
		first.PolicyRevision != 7 || first.ResultSummary == "" || first.Server != "a" || first.Tool != "read" {
		t.Errorf("allowed record = %+v", first)
	}
}

// fixedLimiter refuses every call.
type fixedLimiter struct{}

func (fixedLimiter) Allow(string) (bool, time.Duration) { return false, 1500 * time.Millisecond }

func TestRateLimited(t *testing.T) {
	up := newScripted(func(string, string, int) (*mcp.CallToolResult, error) { return text("x"), nil })
	p := New(pipelineCatalog(t), up, &Options{Limiter: fixedLimiter{}})
	_, err := p.CallTool(t.Context(), Call{Name: "a.read"})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeRateLimited || e.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("err = %#v", err)
	}
	if up.count("a/read") != 0 {
		t.Error("a rate-limited call reached the upstream")
	}
}

// fullBulkhead refuses every slot.
type fullBulkhead struct{}

func (fullBulkhead) Acquire(context.Context, string) (func(), error) {
	return nil, errors.New("bulkhead full")
}

func TestBulkheadFullIsServerBusy(t *testing.T) {
	up := newScripted(func(string, string, int) (*mcp.CallToolResult, error) { return text("x"), nil })
	p := New(pipelineCatalog(t), up, &Options{Bulkhead: fullBulkhead{}, Retry: fastRetry})
	if _, err := p.CallTool(t.Context(), Call{Name: "a.read"}); CodeOf(err) != CodeServerBusy {
		t.Fatalf("err = %v", err)
	}
}

// noBudget refuses every retry.
type noBudget struct{ calls atomic.Int32 }

func (b *noBudget) Call()          { b.calls.Add(1) }
func (b *noBudget) TryRetry() bool { return false }

func TestRetryBudgetStopsRetries(t *testing.T) {
	up := newScripted(func(string, string, int) (*mcp.CallToolResult, error) { return nil, notSent })
	b := &noBudget{}
	p := New(pipelineCatalog(t), up, &Options{Retry: fastRetry, RetryBudget: func(string) RetryBudget { return b }})
	_, err := p.CallTool(t.Context(), Call{Name: "a.read"})
	if CodeOf(err) != CodeServerUnavailable || !contains(err.Error(), "retry budget") {
		t.Fatalf("err = %v", err)
	}
	if up.count("a/read") != 1 || b.calls.Load() != 1 {
		t.Errorf("calls = %d, budget calls = %d, want 1 and 1", up.count("a/read"), b.calls.Load())
	}
}

func TestDisabledTool(t *testing.T) {
	up := newScripted(func(string, string, int) (*mcp.CallToolResult, error) { return text("x"), nil })
	p := New(pipelineCatalog(t), up, &Options{ToolState: func(t catalog.Tool) (bool, string) {
		return t.Name != "a.write", "version 0.9 is not compatible"
	}})
	if _, err := p.CallTool(t.Context(), Call{Name: "a.write"}); CodeOf(err) != CodeToolDisabled || !contains(err.Error(), "0.9") {
		t.Fatalf("disabled tool: %v", err)
	}
	if _, err := p.CallTool(t.Context(), Call{Name: "a.read"}); err != nil {
		t.Fatalf("enabled tool: %v", err)
	}
	if up.count("a/write") != 0 {
		t.Error("a disabled tool reached the upstream")
	}
}
