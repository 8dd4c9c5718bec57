package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/internal/telemetry"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestNewTracingEnvironment(t *testing.T) {
	const ep = "http://127.0.0.1:1" // never dialled: nothing is exported
	tests := []struct {
		name    string
		env     map[string]string
		enabled bool
		err     string // substring of the error; "" = no error
	}{
		{name: "nothing set: off", env: nil},
		{name: "endpoint: on", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, enabled: true},
		{name: "traces endpoint: on", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep + "/v1/traces"}, enabled: true},
		{name: "exporter otlp without endpoint: on", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, enabled: true},
		{name: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, enabled: true},
		{name: "exporter none wins over an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": ep}},
		{name: "SDK disabled wins", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "unsupported protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "unknown sampler", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "sometimes"}, err: "OTEL_TRACES_SAMPLER"},
		{name: "ratio out of range", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		{name: "bad batch delay", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_BSP_SCHEDULE_DELAY": "soon"}, err: "OTEL_BSP_SCHEDULE_DELAY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := telemetry.NewTracing(context.Background(), envOf(tt.env), nil)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one naming %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
			if tr.Enabled() != tt.enabled || (tr.Tracer() != nil) != tt.enabled {
				t.Errorf("Enabled = %v, Tracer = %v; want enabled %v", tr.Enabled(), tr.Tracer(), tt.enabled)
			}
		})
	}
}

// countExporter counts the spans exported to it (tracetest's in-memory
// exporter forgets them on Shutdown, which flushes them).
type countExporter struct {
	mu sync.Mutex
	n  int
}

func (c *countExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += len(spans)
	return nil
}

func (c *countExporter) Shutdown(context.Context) error { return nil }

func (c *countExporter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func TestSamplerFromEnvironment(t *testing.T) {
	tests := []struct {
		sampler, arg string
		sampled      bool // of a root span
	}{
		{"", "", true},
		{"always_on", "", true},
		{"always_off", "", false},
		{"parentbased_always_off", "", false},
		{"traceidratio", "0", false},
		{"traceidratio", "1", true},
		{"parentbased_traceidratio", "0", false},
		{"ALWAYS_OFF", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.sampler+"/"+tt.arg, func(t *testing.T) {
			exp := &countExporter{}
			tr, err := telemetry.NewTracing(context.Background(), envOf(map[string]string{
				"OTEL_TRACES_SAMPLER": tt.sampler, "OTEL_TRACES_SAMPLER_ARG": tt.arg}),
				&telemetry.TracingOptions{Exporter: exp})
			if err != nil {
				t.Fatal(err)
			}
			_, sp := tr.Tracer().Start(context.Background(), "root")
			sp.End()
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := sp.SpanContext().IsSampled(); got != tt.sampled || (exp.count() == 1) != tt.sampled {
				t.Errorf("sampled = %v with %d spans exported, want %v", got, exp.count(), tt.sampled)
			}
		})
	}
}

// traceService is an OTLP/gRPC receiver.
type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (s *traceService) Export(_ context.Context, in *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range in.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s.names = append(s.names, sp.Name)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestExportOverOTLP exports a span over each protocol to a receiver that
// decodes it, with the endpoint given each standard way.
func TestExportOverOTLP(t *testing.T) {
	var httpMu sync.Mutex
	var httpPaths, httpNames []string
	httpRcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		httpMu.Lock()
		httpPaths = append(httpPaths, r.URL.Path)
		for _, rs := range in.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					httpNames = append(httpNames, sp.Name)
				}
			}
		}
		httpMu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(httpRcv.Close)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	grpcRcv := &traceService{}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, grpcRcv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	tests := []struct {
		name     string
		env      map[string]string
		received func() []string
	}{
		{"http base endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": httpRcv.URL},
			func() []string { httpMu.Lock(); defer httpMu.Unlock(); return slices.Clone(httpNames) }},
		{"http traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": httpRcv.URL + "/custom/traces"},
			func() []string { httpMu.Lock(); defer httpMu.Unlock(); return slices.Clone(httpNames) }},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + lis.Addr().String()},
			func() []string { grpcRcv.mu.Lock(); defer grpcRcv.mu.Unlock(); return slices.Clone(grpcRcv.names) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := telemetry.NewTracing(context.Background(), envOf(tt.env), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, sp := tr.Tracer().Start(context.Background(), "span of "+tt.name)
			sp.End()
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(tt.received(), "span of "+tt.name) {
				t.Errorf("receiver has %q, want the span", tt.received())
			}
		})
	}
	httpMu.Lock()
	defer httpMu.Unlock()
	if want := []string{"/v1/traces", "/custom/traces"}; !slices.Equal(httpPaths, want) {
		t.Errorf("HTTP exports went to %q, want %q", httpPaths, want)
	}
}
