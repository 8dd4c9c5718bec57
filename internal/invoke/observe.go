package invoke

import "github.com/switchboard-mcp/switchboard/internal/telemetry"

// TelemetryObserver turns a pipeline outcome into metrics, the dashboard's
// series and an event.
func TelemetryObserver(metrics *telemetry.Metrics, series *telemetry.TimeSeries, events *telemetry.Bus) func(Outcome) {
	return func(o Outcome) { observeCall(metrics, series, events, o) }
}

func observeCall(metrics *telemetry.Metrics, series *telemetry.TimeSeries, events *telemetry.Bus, o Outcome) {
	server := o.Server
	if server == "" {
		server = "unknown"
	}
	metrics.Call(server, outcomeLabel(o), o.Took)
	metrics.Invocation(server, o.Tool, o.AgentID, o.Status, errorType(o), o.Attempts, o.Took)
	series.Record(o.Server, o.Tool, o.Status != "success", o.Took)
	events.Publish("invocation.completed", map[string]any{
		"correlation_id": o.CorrelationID, "agent_id": o.AgentID, "server": o.Server, "tool": o.Tool,
		"status": o.Status, "code": string(o.Code), "attempts": o.Attempts, "served_by": o.ServedBy,
		"latency_ms": float64(o.Took.Microseconds()) / 1e3,
	})
}

func outcomeLabel(o Outcome) string {
	switch o.Status {
	case "success":
		return "ok"
	case "tool_error":
		return "tool_error"
	}
	return string(o.Code)
}

func errorType(o Outcome) string {
	switch o.Status {
	case "success":
		return ""
	case "tool_error":
		return "tool_error"
	}
	return string(o.Code)
}
