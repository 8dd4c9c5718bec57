package app_test

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestTracingWired: the OTEL_* environment of the gateway turns tracing
// on, and a call through /mcp to a stdio server is exported as one trace
// over OTLP/HTTP — the MCP request, the pipeline's call and the request
// to the upstream.
func TestTracingWired(t *testing.T) {
	var mu sync.Mutex
	var spans []*tracepb.Span
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range in.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(rcv.Close)

	g := startGateway(t, "servers:"+demoServer("demo"), map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL,
		"OTEL_BSP_SCHEDULE_DELAY":     "20",
	})
	cs := g.connect(t, "/mcp")
	if _, res := callText(t, cs, "demo.echo", map[string]any{"text": "traced"}); res.IsError {
		t.Fatalf("demo.echo: %+v", res)
	}
	// Each span is the child of the one before it.
	want := []string{"tools/call demo.echo", "execute_tool demo.echo", "attempt", "tools/call echo"}
	var byName map[string]*tracepb.Span
	waitFor(t, "the call's spans at the OTLP receiver", func() bool {
		mu.Lock()
		defer mu.Unlock()
		byName = map[string]*tracepb.Span{}
		for _, s := range spans {
			byName[s.Name] = s
		}
		for _, n := range want {
			if byName[n] == nil {
				return false
			}
		}
		return true
	})
	trace := hex.EncodeToString(byName[want[0]].TraceId)
	for i, n := range want {
		s := byName[n]
		if got := hex.EncodeToString(s.TraceId); got != trace {
			t.Errorf("span %q is in trace %s, want %s", n, got, trace)
		}
		if i > 0 && string(s.ParentSpanId) != string(byName[want[i-1]].SpanId) {
			t.Errorf("span %q is not a child of %q", n, want[i-1])
		}
	}
}
