package invoke

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// BenchmarkCallToolTraced is BenchmarkCallTool with tracing on: every
// call sampled, its spans batched to an exporter that drops them (the
// cost of making the spans, not of sending them).
func BenchmarkCallToolTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardSpans{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p := benchPipeline(b, Options{Tracer: tp.Tracer("bench")})
	benchCalls(b, p)
}
