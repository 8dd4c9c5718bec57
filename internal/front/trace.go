package front

import (
	"context"
	"errors"
	"reflect"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/internal/telemetry"
)

// traceMiddleware makes a server span of every MCP request (and
// notification) the front receives, named and described as the MCP
// semantic conventions say ("tools/call demo.echo", mcp.method.name,
// gen_ai.tool.name, ...). Its parent is the caller's trace context: the
// traceparent in the request's _meta, where the conventions put it, else
// the traceparent header of the HTTP request that carried it. Installed
// only when tracing is on.
func (f *Front) traceMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ctx = extractTrace(ctx, req)
		name, attrs := f.requestAttrs(method, req)
		ctx, sp := f.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer sp.End()
		res, err := next(ctx, method, req)
		if err != nil {
			typ := "_OTHER"
			if rpcErr, ok := errors.AsType[*jsonrpc.Error](err); ok {
				typ = strconv.FormatInt(rpcErr.Code, 10)
				sp.SetAttributes(attribute.String(telemetry.AttrRPCStatusCode, typ))
			}
			sp.SetAttributes(attribute.String(telemetry.AttrErrorType, typ))
			sp.SetStatus(codes.Error, err.Error())
			return res, err
		}
		if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
			sp.SetAttributes(attribute.String(telemetry.AttrErrorType, "tool_error"))
			if d, ok := r.Meta[ErrorMetaKey].(map[string]any); ok {
				if code, ok := d["code"].(string); ok {
					sp.SetAttributes(attribute.String(telemetry.AttrErrorCode, code))
				}
			}
			sp.SetStatus(codes.Error, "tool_error")
		}
		return res, err
	}
}

// extractTrace returns ctx with the caller's trace context, if it sent one.
func extractTrace(ctx context.Context, req mcp.Request) context.Context {
	if m := requestMeta(req); m != nil {
		if _, ok := m["traceparent"]; ok {
			return telemetry.Propagator.Extract(ctx, telemetry.MetaCarrier(m))
		}
	}
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		return telemetry.Propagator.Extract(ctx, propagation.HeaderCarrier(ex.Header))
	}
	return ctx
}

// requestMeta is req's _meta, nil when it has none (or no params at all:
// the params of a request without them are a typed nil pointer).
func requestMeta(req mcp.Request) map[string]any {
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return p.GetMeta()
}

// requestAttrs are the span name and attributes of a received request.
func (f *Front) requestAttrs(method string, req mcp.Request) (string, []attribute.KeyValue) {
	name := method
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, attribute.String(telemetry.AttrMCPMethod, method))
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		if r.Params != nil {
			name += " " + r.Params.Name
			attrs = append(attrs, attribute.String(telemetry.AttrGenAIToolName, r.Params.Name),
				attribute.String(telemetry.AttrGenAIOperation, telemetry.OpExecuteTool))
		}
	case *mcp.GetPromptRequest:
		if r.Params != nil {
			name += " " + r.Params.Name
			attrs = append(attrs, attribute.String(telemetry.AttrGenAIPromptName, r.Params.Name))
		}
	case *mcp.ReadResourceRequest:
		if r.Params != nil {
			attrs = append(attrs, attribute.String(telemetry.AttrMCPResourceURI, r.Params.URI))
		}
	case *mcp.SubscribeRequest:
		if r.Params != nil {
			attrs = append(attrs, attribute.String(telemetry.AttrMCPResourceURI, r.Params.URI))
		}
	case *mcp.UnsubscribeRequest:
		if r.Params != nil {
			attrs = append(attrs, attribute.String(telemetry.AttrMCPResourceURI, r.Params.URI))
		}
	}
	if f.scope != "" {
		attrs = append(attrs, attribute.String(telemetry.AttrServer, f.scope))
	}
	version := ""
	if pv, ok := req.(interface{ ProtocolVersion() string }); ok {
		version = pv.ProtocolVersion()
	}
	if ss, _ := req.GetSession().(*mcp.ServerSession); ss != nil {
		if id := ss.ID(); id != "" {
			attrs = append(attrs, attribute.String(telemetry.AttrMCPSessionID, id))
		}
		if ip := ss.InitializeParams(); version == "" && ip != nil {
			version = ip.ProtocolVersion
		}
	}
	if version != "" {
		attrs = append(attrs, attribute.String(telemetry.AttrMCPProtocolVersion, version))
	}
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		attrs = append(attrs, attribute.String(telemetry.AttrNetworkTransport, "tcp"),
			attribute.String(telemetry.AttrNetworkProtocol, "http"))
	} else {
		attrs = append(attrs, attribute.String(telemetry.AttrNetworkTransport, "pipe"))
	}
	return name, attrs
}
