package invoke

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// discardSink stores nothing: the benchmarks measure the audit path up to
// the store, not the store.
type discardSink struct{}

func (discardSink) WriteAudit(context.Context, []audit.Record) error     { return nil }
func (discardSink) PurgeAudit(context.Context, time.Time) (int64, error) { return 0, nil }

// auditCases are calls as the audit path sees them: the bench harness's
// echo, and a database tool with secrets in its arguments and in the JSON
// text of its result.
func auditCases() []struct {
	name string
	args json.RawMessage
	res  *mcp.CallToolResult
} {
	var items []string
	for i := range 20 {
		items = append(items, fmt.Sprintf(`{"id":%d,"name":"user %d","session_token":"tok-%d","roles":["dev","ops"]}`, i, i, i))
	}
	doc := `{"items":[` + strings.Join(items, ",") + `]}`
	return []struct {
		name string
		args json.RawMessage
		res  *mcp.CallToolResult
	}{
		{"echo", json.RawMessage(`{"text":"switchboard bench"}`), text("switchboard bench")},
		{"secrets", json.RawMessage(`{"query":"select id, name from users","limit":50,` +
			`"connection":{"host":"db","user":"app","password":"hunter2"},` +
			`"options":{"auth":{"api_key":"sk-live-123","Authorization":"Bearer abc"},"headers":{"X-Api-Key":"k","Accept":"application/json"}}}`),
			&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: doc}}, StructuredContent: json.RawMessage(doc)}},
	}
}

// handOffRecorder takes records and their derivations and drops both: what
// is left of the audit in the call's path when the writer does the rest.
type handOffRecorder struct{}

func (handOffRecorder) Record(audit.Record) bool                              { return true }
func (handOffRecorder) RecordDeferred(audit.Record, func(*audit.Record)) bool { return true }
func (handOffRecorder) RecordSyncDeferred(context.Context, audit.Record, func(*audit.Record)) error {
	return nil
}

// BenchmarkFinish is the audit path of one answered call: what
// Pipeline.finish does after the upstream answered. "queued" is the
// request path with audit_durability async (the record handed to the
// recorder, whose writer works meanwhile on the other core); "durable"
// waits until the recorder's writer has handed the record to the sink, as
// the default does (group commit of one: the benchmark calls one at a
// time); "call-path" is only what stays on the call's path, the writer's
// share dropped.
func BenchmarkFinish(b *testing.B) {
	red, err := audit.NewRedactor(nil)
	if err != nil {
		b.Fatal(err)
	}
	tool := catalog.Tool{Name: "db.query", Server: "db", OriginalName: "query"}
	st := &callState{attempts: 1, decision: authz.Decision{Allow: true, Rule: "grant:g1", Revision: 3}}
	for _, c := range auditCases() {
		b.Run(c.name+"/call-path", func(b *testing.B) {
			p := New(catalog.New(nil), nil, &Options{Recorder: handOffRecorder{}, Redactor: red})
			call := Call{Name: tool.Name, Arguments: c.args, CorrelationID: "c-1",
				Identity: authz.Identity{ID: "key:1", AgentID: "agent"}}
			res := &Result{CallToolResult: c.res, Tool: tool}
			b.ReportAllocs()
			for b.Loop() {
				p.finish(context.Background(), call, tool, st, res, nil, time.Millisecond)
			}
		})
		for _, durable := range []bool{false, true} {
			mode := "queued"
			if durable {
				mode = "durable"
			}
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				rec := audit.NewRecorder(discardSink{}, &audit.Options{QueueSize: 1 << 20})
				b.Cleanup(func() { rec.Close(context.Background()) })
				p := New(catalog.New(nil), nil, &Options{Recorder: rec, Redactor: red, DurableAudit: durable})
				call := Call{Name: tool.Name, Arguments: c.args, CorrelationID: "c-1",
					Identity: authz.Identity{ID: "key:1", AgentID: "agent"}}
				res := &Result{CallToolResult: c.res, Tool: tool}
				b.ReportAllocs()
				for b.Loop() {
					p.finish(context.Background(), call, tool, st, res, nil, time.Millisecond)
				}
				b.StopTimer()
				if err := rec.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
