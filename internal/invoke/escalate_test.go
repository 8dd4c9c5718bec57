package invoke

import (
	"context"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// escalations records what the pipeline escalates.
type escalations struct {
	mu  sync.Mutex
	got []Failure
}

func (e *escalations) Escalate(_ context.Context, f Failure) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, f)
}

// TestEscalateOnlyFailuresForGood checks that a human hears of calls the
// upstream side failed after retries, and not of callers' mistakes, tool
// errors or an upstream's protocol answer.
func TestEscalateOnlyFailuresForGood(t *testing.T) {
	tests := []struct {
		name     string
		call     Call
		answer   func() (*mcp.CallToolResult, error)
		escalate bool
		attempts int
	}{
		{name: "unavailable after retries", call: Call{Name: "a.read"}, answer: func() (*mcp.CallToolResult, error) { return nil, notSent },
			escalate: true, attempts: 3},
		{name: "outcome unknown", call: Call{Name: "a.write"}, answer: func() (*mcp.CallToolResult, error) { return nil, lostAfterSend },
			escalate: true, attempts: 1},
		{name: "protocol error", call: Call{Name: "a.read"}, answer: func() (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad"}
		}},
		{name: "tool error result", call: Call{Name: "a.read"}, answer: func() (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true}, nil
		}},
		{name: "unknown tool", call: Call{Name: "a.nope"}, answer: func() (*mcp.CallToolResult, error) { return text("ok"), nil }},
		{name: "success", call: Call{Name: "a.read"}, answer: func() (*mcp.CallToolResult, error) { return text("ok"), nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			esc := &escalations{}
			up := newScripted(func(string, string, int) (*mcp.CallToolResult, error) { return tc.answer() })
			p := New(pipelineCatalog(t), up, &Options{Retry: fastRetry, Escalator: esc})
			tc.call.CorrelationID = "corr-1"
			_, _ = p.CallTool(t.Context(), tc.call)
			if got := len(esc.got) == 1; got != tc.escalate || len(esc.got) > 1 {
				t.Fatalf("escalations %+v, want escalated=%v", esc.got, tc.escalate)
			}
			if tc.escalate {
				f := esc.got[0]
				if f.CorrelationID != "corr-1" || f.Tool != tc.call.Name || f.Server != "a" || f.Attempts != tc.attempts || f.Error == "" || f.Code == "" {
					t.Errorf("failure %+v", f)
				}
			}
		})
	}
}
