package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of every span the gateway makes.
const TracerName = "github.com/switchboard-mcp/switchboard"

// Attribute keys of the OpenTelemetry semantic conventions the gateway
// sets (MCP and GenAI conventions, status Development), and its own under
// switchboard.*. They are shared by the packages that make spans so that a
// span of the front and one of the upstream say the same thing the same way.
const (
	AttrMCPMethod          = "mcp.method.name"
	AttrMCPSessionID       = "mcp.session.id"
	AttrMCPProtocolVersion = "mcp.protocol.version"
	AttrMCPResourceURI     = "mcp.resource.uri"
	AttrGenAIOperation     = "gen_ai.operation.name"
	AttrGenAIToolName      = "gen_ai.tool.name"
	AttrGenAIPromptName    = "gen_ai.prompt.name"
	AttrErrorType          = "error.type"
	AttrRPCStatusCode      = "rpc.response.status_code"
	AttrNetworkTransport   = "network.transport"
	AttrNetworkProtocol    = "network.protocol.name"

	AttrServer       = "switchboard.server"
	AttrAgent        = "switchboard.agent"
	AttrCorrelation  = "switchboard.correlation_id"
	AttrAttempt      = "switchboard.attempt"
	AttrAttempts     = "switchboard.attempts"
	AttrPolicyRule   = "switchboard.policy.rule"
	AttrBreakerState = "switchboard.breaker.state"
	AttrServedBy     = "switchboard.served_by"
	AttrErrorCode    = "switchboard.error.code"
)

// OpExecuteTool is gen_ai.operation.name of a tool call.
const OpExecuteTool = "execute_tool"

// Propagator is the trace context format the gateway reads and writes: W3C
// Trace Context (traceparent, tracestate), in HTTP headers and in MCP
// _meta alike.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// MetaCarrier lets a propagator read and write an MCP request's _meta
// (mcp.Meta is a map[string]any), where the MCP semantic conventions put
// the trace context: under the keys "traceparent" and "tracestate".
type MetaCarrier map[string]any

// Get returns the string value of key, "" if absent or not a string.
func (c MetaCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

// Set stores value under key.
func (c MetaCarrier) Set(key, value string) { c[key] = value }

// Keys lists the keys of the carrier.
func (c MetaCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// Tracing is the gateway's tracer: on when the standard OpenTelemetry
// environment asks for an exporter, off otherwise. Off, Tracer returns nil
// and the packages given it make no spans and do no propagation work at all
// (the no-op provider would still allocate a context per span).
type Tracing struct {
	provider *sdktrace.TracerProvider // nil when off
	tracer   trace.Tracer
	exporter string // "otlp/http/protobuf", "otlp/grpc", or "" when off
}

// Tracer returns the gateway's tracer, nil when tracing is off.
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil {
		return nil
	}
	return t.tracer
}

// Enabled reports whether spans are made and exported.
func (t *Tracing) Enabled() bool { return t != nil && t.tracer != nil }

// Describe says how spans are exported, for the startup log.
func (t *Tracing) Describe() string {
	if !t.Enabled() {
		return "off"
	}
	return t.exporter
}

// Shutdown exports the spans still buffered and stops the exporter. Safe
// on a Tracing that is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.provider == nil {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutting down: %w", err)
	}
	return nil
}

// TracingOptions are what NewTracing needs besides the environment.
type TracingOptions struct {
	// ServiceVersion is service.version of the resource.
	ServiceVersion string
	// Exporter, if set, replaces the OTLP exporter the environment names
	// (tests).
	Exporter sdktrace.SpanExporter
}

// NewTracing configures tracing from the standard OpenTelemetry variables,
// read through getenv:
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: off.
//   - OTEL_TRACES_EXPORTER=otlp, or an OTEL_EXPORTER_OTLP_ENDPOINT /
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: on, exporting over OTLP. Unlike
//     the SDK's own default, nothing set means off: a gateway that nobody
//     asked to trace makes no spans.
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL:
//     http/protobuf (default) or grpc.
//   - OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG: the standard
//     samplers; default parentbased_always_on.
//   - OTEL_SERVICE_NAME: service.name, default "switchboard".
//   - OTEL_BSP_SCHEDULE_DELAY: how long finished spans are batched before
//     export, in milliseconds; default 5000.
//
// The exporter reads its other variables (headers, timeout, compression,
// certificates, insecure) itself from the process environment.
func NewTracing(ctx context.Context, getenv func(string) string, opts *TracingOptions) (*Tracing, error) {
	var o TracingOptions
	if opts != nil {
		o = *opts
	}
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return &Tracing{}, nil
	}
	endpoint := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	signal := endpoint != ""
	if endpoint == "" {
		endpoint = env("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	switch name := strings.ToLower(env("OTEL_TRACES_EXPORTER")); name {
	case "none":
		return &Tracing{}, nil
	case "":
		if endpoint == "" && o.Exporter == nil {
			return &Tracing{}, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: switchboard exports traces with otlp (or none)", name)
	}
	sampler, err := samplerFromEnv(env("OTEL_TRACES_SAMPLER"), env("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		return nil, err
	}
	exp, desc := o.Exporter, "custom"
	if exp == nil {
		protocol := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if protocol == "" {
			protocol = env("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		if exp, desc, err = otlpExporter(ctx, protocol, endpoint, signal); err != nil {
			return nil, err
		}
	}
	service := env("OTEL_SERVICE_NAME")
	if service == "" {
		service = "switchboard"
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", service),
		attribute.String("service.version", o.ServiceVersion)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	var batch []sdktrace.BatchSpanProcessorOption
	if v := env("OTEL_BSP_SCHEDULE_DELAY"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("OTEL_BSP_SCHEDULE_DELAY=%q: want a number of milliseconds", v)
		}
		batch = append(batch, sdktrace.WithBatchTimeout(time.Duration(ms)*time.Millisecond))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, batch...),
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(res))
	return &Tracing{provider: tp, tracer: tp.Tracer(TracerName), exporter: desc}, nil
}

// otlpExporter makes the OTLP exporter protocol names. An endpoint from
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (signal) is used as it is; one from
// OTEL_EXPORTER_OTLP_ENDPOINT is a base URL to which HTTP adds /v1/traces.
// With no endpoint the exporter's default (localhost:4318 or :4317) holds.
func otlpExporter(ctx context.Context, protocol, endpoint string, signal bool) (sdktrace.SpanExporter, string, error) {
	switch strings.ToLower(protocol) {
	case "", "http/protobuf":
		var opts []otlptracehttp.Option
		if endpoint != "" {
			if !signal {
				endpoint = strings.TrimSuffix(endpoint, "/") + "/v1/traces"
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(endpoint))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, "", fmt.Errorf("tracing: OTLP/HTTP exporter: %w", err)
		}
		return exp, "otlp http/protobuf", nil
	case "grpc":
		var opts []otlptracegrpc.Option
		if endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(endpoint))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, "", fmt.Errorf("tracing: OTLP/gRPC exporter: %w", err)
		}
		return exp, "otlp grpc", nil
	default:
		return nil, "", fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: switchboard exports with http/protobuf or grpc", protocol)
	}
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER names, as the
// specification defines them.
func samplerFromEnv(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio between 0 and 1", arg)
		}
		return r, nil
	}
	name = strings.ToLower(name)
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	default:
		return nil, errors.New("OTEL_TRACES_SAMPLER=" + strconv.Quote(name) +
			": want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio")
	}
}
