package upstream

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
)

// startSpan starts the client span of one request relayed to server, as
// the MCP semantic conventions describe an MCP client's request. Only
// called when tracing is on.
func (s *supervisor) startSpan(ctx context.Context, server string, spec callSpec) (context.Context, trace.Span) {
	name := spec.method
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, attribute.String(telemetry.AttrMCPMethod, spec.method), attribute.String(telemetry.AttrServer, server))
	switch {
	case spec.method == "tools/call":
		name += " " + spec.target
		attrs = append(attrs, attribute.String(telemetry.AttrGenAIToolName, spec.target),
			attribute.String(telemetry.AttrGenAIOperation, telemetry.OpExecuteTool))
	case spec.method == "prompts/get":
		name += " " + spec.target
		attrs = append(attrs, attribute.String(telemetry.AttrGenAIPromptName, spec.target))
	case spec.uri != "":
		attrs = append(attrs, attribute.String(telemetry.AttrMCPResourceURI, spec.uri))
	}
	if s.cfg.Transport == config.TransportStdio {
		attrs = append(attrs, attribute.String(telemetry.AttrNetworkTransport, "pipe"))
	} else {
		attrs = append(attrs, attribute.String(telemetry.AttrNetworkTransport, "tcp"),
			attribute.String(telemetry.AttrNetworkProtocol, "http"))
	}
	return s.opts.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpan records the outcome of a relayed request on its span and ends it.
func endSpan(sp trace.Span, err error) {
	if err != nil {
		typ := "_OTHER"
		var rpcErr *jsonrpc.Error
		switch {
		case errors.As(err, &rpcErr):
			typ = strconv.FormatInt(rpcErr.Code, 10)
			sp.SetAttributes(attribute.String(telemetry.AttrRPCStatusCode, typ))
		case IsResultTooLarge(err):
			typ = "result_too_large"
		}
		sp.SetAttributes(attribute.String(telemetry.AttrErrorType, typ))
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

// injectMeta returns meta with the trace context of ctx under traceparent
// (and tracestate), replacing what the caller sent there: the upstream's
// parent is the gateway's span, which itself continues the caller's trace.
// meta is the relay's own copy (router.begin clones it), so it is written
// in place.
func injectMeta(ctx context.Context, meta mcp.Meta) mcp.Meta {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	if meta == nil {
		meta = mcp.Meta{}
	}
	delete(meta, "tracestate") // the propagator writes it only when there is one
	telemetry.Propagator.Inject(ctx, telemetry.MetaCarrier(meta))
	return meta
}

// traceTransport sets the traceparent header of every HTTP request made
// for a traced call, so that an upstream (or a proxy in front of it) that
// reads W3C headers rather than _meta joins the trace too.
type traceTransport struct {
	base http.RoundTripper
}

func (t *traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(req.Context()).IsValid() {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not modify the caller's request
	telemetry.Propagator.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	return t.base.RoundTrip(req)
}
