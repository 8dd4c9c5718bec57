package invoke

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
)

// The pipeline's spans. Each is started only when the pipeline has a
// tracer: with tracing off not even the attribute lists are built, so the
// call path is what it was without tracing. The spans of one call:
//
//	execute_tool {tool}        the whole call, CallTool
//	├── authorize              the Authorizer's decision (each one: a
//	│                          fallback is authorized too)
//	├── attempt                one try, per retry and per fallback
//	│   ├── bulkhead           waiting for a slot on the server
//	│   ├── circuit breaker    the breaker's permission
//	│   └── tools/call {tool}  the upstream request (made by the upstream
//	│                          package, which propagates its context)
//	└── audit                  handing the record to the recorder (and,
//	                           with durable audit, waiting for the write)

// startCall starts the span of a whole call.
func (p *Pipeline) startCall(ctx context.Context, c Call) (context.Context, trace.Span) {
	return p.tracer.Start(ctx, telemetry.OpExecuteTool+" "+c.Name, trace.WithAttributes(
		attribute.String(telemetry.AttrGenAIOperation, telemetry.OpExecuteTool),
		attribute.String(telemetry.AttrGenAIToolName, c.Name),
		attribute.String(telemetry.AttrCorrelation, c.CorrelationID),
		attribute.String(telemetry.AttrAgent, c.Identity.AgentID)))
}

// endCall records the outcome of a call on its span and ends it.
func endCall(sp trace.Span, tool catalog.Tool, st *callState, res *Result, err error) {
	if tool.Server != "" {
		sp.SetAttributes(attribute.String(telemetry.AttrServer, tool.Server))
	}
	sp.SetAttributes(attribute.Int(telemetry.AttrAttempts, st.attempts))
	if st.servedBy != "" {
		sp.SetAttributes(attribute.String(telemetry.AttrServedBy, st.servedBy))
	}
	switch {
	case err != nil:
		failSpan(sp, err)
	case res != nil && res.IsError:
		// The semantic conventions' error.type of a tool result with
		// isError: the call worked, the tool reported a failure.
		sp.SetAttributes(attribute.String(telemetry.AttrErrorType, "tool_error"))
		sp.SetStatus(codes.Error, "tool_error")
	}
	sp.End()
}

// startStage starts the span of one stage of a call (a child of the
// call's span). Callers check p.tracer first.
func (p *Pipeline) startStage(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return p.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// endStage ends a stage's span, nil when tracing is off, recording err.
func endStage(sp trace.Span, err error) {
	if sp == nil {
		return
	}
	if err != nil {
		failSpan(sp, err)
	}
	sp.End()
}

// failSpan marks sp failed with the error's stable code as error.type.
func failSpan(sp trace.Span, err error) {
	typ := "_OTHER"
	var e *Error
	if errors.As(err, &e) {
		typ = string(e.Code)
		sp.SetAttributes(attribute.String(telemetry.AttrErrorCode, string(e.Code)))
	}
	sp.SetAttributes(attribute.String(telemetry.AttrErrorType, typ))
	sp.SetStatus(codes.Error, err.Error())
}
