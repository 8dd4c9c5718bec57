package front_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// otlpReceiver is an OTLP/HTTP trace endpoint: it decodes what the
// exporter sends (ExportTraceServiceRequest, protobuf) and keeps the spans.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	srv   *httptest.Server
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(req.Body)
		var in coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &in)
		}
		if err != nil {
			t.Errorf("OTLP receiver: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range in.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) received() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// tracedUpstream is the demo server over Streamable HTTP, recording the
// trace context each tools/call reached it with: the traceparent header
// of the HTTP request and the traceparent in the request's _meta.
type tracedUpstream struct {
	mu      sync.Mutex
	headers []string
	metas   []string
	url     string
}

func newTracedUpstream(t *testing.T) *tracedUpstream {
	t.Helper()
	u := &tracedUpstream{}
	srv := demo.NewServer(nil)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.CallToolRequest); ok {
				tp, _ := r.Params.Meta["traceparent"].(string)
				u.mu.Lock()
				u.metas = append(u.metas, tp)
				u.headers = append(u.headers, r.Extra.Header.Get("traceparent"))
				u.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	u.url = ts.URL
	return u
}

func (u *tracedUpstream) seen() (headers, metas []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.headers), slices.Clone(u.metas)
}

type allowAll struct{}

func (allowAll) Decide(context.Context, authz.Request) (authz.Decision, error) {
	return authz.Decision{Allow: true, Rule: "test:allow"}, nil
}

type nullSink struct{}

func (nullSink) WriteAudit(context.Context, []audit.Record) error     { return nil }
func (nullSink) PurgeAudit(context.Context, time.Time) (int64, error) { return 0, nil }

// tracedGateway is the whole request path with tracing on: the front on
// Streamable HTTP, the pipeline with authorization, breakers and audit,
// and the upstream manager connected to up, exporting to an OTLP receiver.
func tracedGateway(t *testing.T, up *tracedUpstream, rcv *otlpReceiver) (url string, tracing *telemetry.Tracing) {
	t.Helper()
	ctx := context.Background()
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.srv.URL}
	tracing, err := telemetry.NewTracing(ctx, func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !tracing.Enabled() {
		t.Fatal("tracing is off with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}
	m := upstream.NewManager(&upstream.Options{Tracer: tracing.Tracer(), ShutdownTimeout: time.Second})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	if err := m.Add(&config.Server{Name: "demo", Transport: config.TransportHTTP, URL: up.url}); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	disc, err := m.Discovery("demo")
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.New(nil)
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Tools: disc.Tools}); err != nil {
		t.Fatal(err)
	}
	rec := audit.NewRecorder(nullSink{}, nil)
	t.Cleanup(func() { rec.Close(context.Background()) })
	p := invoke.New(cat, m, &invoke.Options{Tracer: tracing.Tracer(), Authorizer: allowAll{}, Recorder: rec,
		Breakers: resilience.NewBreakers(resilience.BreakerSettings{})})
	f := front.New(cat, p, &front.Options{Tracer: tracing.Tracer()})
	t.Cleanup(f.Close)
	h := f.StreamableHandler(nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The session's identity, as the gateway's auth layer leaves it.
		h.ServeHTTP(w, r.WithContext(authz.WithIdentity(r.Context(), authz.Identity{ID: "key:test", AgentID: "tester"})))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, tracing
}

// headerInjector sets the traceparent header of each request from its
// context, as an instrumented HTTP client does.
type headerInjector struct{}

func (headerInjector) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	propagation.TraceContext{}.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	return http.DefaultTransport.RoundTrip(r)
}

// TestTraceEndToEnd follows one tools/call from a client's span through
// the gateway's spans to the upstream, with the caller's trace context in
// _meta or in the HTTP header: one trace, each span the child of the one
// before, and the upstream handed the upstream span's context.
func TestTraceEndToEnd(t *testing.T) {
	for _, via := range []string{"meta", "header"} {
		t.Run(via, func(t *testing.T) {
			rcv := newOTLPReceiver(t)
			up := newTracedUpstream(t)
			url, tracing := tracedGateway(t, up, rcv)
			ctx := context.Background()

			// The client's own tracer: its span is the root of the trace.
			clientTP := sdktrace.NewTracerProvider()
			t.Cleanup(func() { _ = clientTP.Shutdown(ctx) })
			cctx, clientSpan := clientTP.Tracer("test-client").Start(ctx, "client", trace.WithSpanKind(trace.SpanKindClient))
			root := clientSpan.SpanContext()

			transport := &mcp.StreamableClientTransport{Endpoint: url}
			params := &mcp.CallToolParams{Name: "demo.echo", Arguments: map[string]any{"text": "traced"}}
			var sessCtx context.Context = ctx
			if via == "header" {
				transport.HTTPClient = &http.Client{Transport: headerInjector{}}
				sessCtx = cctx // the tools/call request is sent with the client span's context
			} else {
				carrier := propagation.MapCarrier{}
				propagation.TraceContext{}.Inject(cctx, carrier)
				params.Meta = mcp.Meta{"traceparent": carrier.Get("traceparent")}
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "trace-test"}, nil).Connect(ctx, transport, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(sessCtx, params)
			if err != nil || res.IsError {
				t.Fatalf("tools/call = %+v, %v", res, err)
			}
			clientSpan.End()
			if err := tracing.Shutdown(ctx); err != nil { // exports what is buffered
				t.Fatal(err)
			}

			spans := rcv.received()
			byName := map[string]*tracepb.Span{}
			for _, s := range spans {
				if hex.EncodeToString(s.TraceId) == root.TraceID().String() {
					byName[s.Name] = s
				}
			}
			// Each span and the span it must be the child of ("" = the
			// client's span).
			chain := []struct{ name, parent string }{
				{"tools/call demo.echo", ""},
				{"execute_tool demo.echo", "tools/call demo.echo"},
				{"authorize", "execute_tool demo.echo"},
				{"attempt", "execute_tool demo.echo"},
				{"circuit breaker", "attempt"},
				{"tools/call echo", "attempt"},
				{"audit", "execute_tool demo.echo"},
			}
			for _, c := range chain {
				s, ok := byName[c.name]
				if !ok {
					t.Errorf("no span %q in trace %s; received %d spans: %v", c.name, root.TraceID(), len(spans), spanNames(spans))
					continue
				}
				want := root.SpanID().String()
				if c.parent != "" {
					p, ok := byName[c.parent]
					if !ok {
						continue
					}
					want = hex.EncodeToString(p.SpanId)
				}
				if got := hex.EncodeToString(s.ParentSpanId); got != want {
					t.Errorf("span %q has parent %s, want %s (%s)", c.name, got, want, or(c.parent, "the client's span"))
				}
			}
			server, upSpan := byName["tools/call demo.echo"], byName["tools/call echo"]
			if server == nil || upSpan == nil {
				t.FailNow()
			}
			if server.Kind != tracepb.Span_SPAN_KIND_SERVER || upSpan.Kind != tracepb.Span_SPAN_KIND_CLIENT {
				t.Errorf("kinds: server span %v, upstream span %v; want SERVER and CLIENT", server.Kind, upSpan.Kind)
			}
			for _, kv := range []struct {
				span      *tracepb.Span
				key, want string
			}{
				{server, telemetry.AttrMCPMethod, "tools/call"},
				{server, telemetry.AttrGenAIToolName, "demo.echo"},
				{server, telemetry.AttrGenAIOperation, "execute_tool"},
				{upSpan, telemetry.AttrMCPMethod, "tools/call"},
				{upSpan, telemetry.AttrGenAIToolName, "echo"},
				{upSpan, telemetry.AttrServer, "demo"},
			} {
				if got := attr(kv.span, kv.key); got != kv.want {
					t.Errorf("span %q: %s = %q, want %q", kv.span.Name, kv.key, got, kv.want)
				}
			}

			// The upstream was handed the upstream span's context, in _meta
			// and in the header.
			want := "00-" + root.TraceID().String() + "-" + hex.EncodeToString(upSpan.SpanId) + "-01"
			headers, metas := up.seen()
			if len(headers) != 1 || headers[0] != want || len(metas) != 1 || metas[0] != want {
				t.Errorf("upstream received traceparent headers %q and _meta %q, want %q in each", headers, metas, want)
			}
		})
	}
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

func spanNames(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestTraceOffPassesMetaThrough: with tracing off the gateway makes no
// spans and leaves a caller's traceparent in _meta as it was, for the
// upstream to continue the caller's trace itself.
func TestTraceOffPassesMetaThrough(t *testing.T) {
	up := newTracedUpstream(t)
	ctx := context.Background()
	m := upstream.NewManager(&upstream.Options{ShutdownTimeout: time.Second})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	if err := m.Add(&config.Server{Name: "demo", Transport: config.TransportHTTP, URL: up.url}); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	disc, err := m.Discovery("demo")
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.New(nil)
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Tools: disc.Tools}); err != nil {
		t.Fatal(err)
	}
	f := front.New(cat, invoke.New(cat, m, nil), nil)
	t.Cleanup(f.Close)
	srv := httptest.NewServer(f.StreamableHandler(nil))
	t.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "trace-test"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	args, _ := json.Marshal(map[string]string{"text": "x"})
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo.echo", Arguments: json.RawMessage(args),
		Meta: mcp.Meta{"traceparent": tp}}); err != nil {
		t.Fatal(err)
	}
	headers, metas := up.seen()
	if len(metas) != 1 || metas[0] != tp || headers[0] != "" {
		t.Errorf("upstream received _meta %q and headers %q, want _meta %q and no header", metas, headers, tp)
	}
}
