package telemetry

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestMetricsExposition(t *testing.T) {
	m := New()
	m.SetState("demo", "CONNECTED")
	m.SetState("demo", "ERROR")
	m.HealthCheck("demo", false, 3*time.Millisecond, 2, 0.25)
	m.Restarts("demo", 4)
	m.Call("demo", "ok", time.Millisecond)
	m.Call("other", "server_unavailable", time.Millisecond)
	m.Invocation("demo", "demo.echo", "agent-a", "success", "", 3, 42*time.Millisecond)
	m.Invocation("demo", "demo.fail", "agent-a", "error", "timeout", 1, time.Millisecond)
	m.Invocation("other", "other.x", "agent-a", "success", "", 1, time.Millisecond)
	m.CircuitState("demo:fail", 1)
	m.AuditDepth(7)
	m.AuditDropped()
	m.Sessions(12)
	m.SessionEvicted("identity")
	m.SessionEvicted("identity")
	m.SessionRefused("total")
	m.Forget("other")

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`switchboard_upstream_state{server="demo",state="ERROR"} 1`,
		`switchboard_upstream_state{server="demo",state="CONNECTED"} 0`,
		`switchboard_upstream_health_checks_total{result="failed",server="demo"} 1`,
		`switchboard_upstream_health_consecutive_failures{server="demo"} 2`,
		`switchboard_upstream_error_rate{server="demo"} 0.25`,
		`switchboard_upstream_restarts{server="demo"} 4`,
		`switchboard_tool_calls_total{outcome="ok",server="demo"} 1`,
		`mcp_invocations_total{agent_id="agent-a",server_id="demo",status="success",tool_name="demo.echo"} 1`,
		`mcp_invocation_latency_ms_bucket{server_id="demo",tool_name="demo.echo",le="50"} 1`,
		`mcp_invocation_latency_ms_bucket{server_id="demo",tool_name="demo.echo",le="10"} 0`,
		`mcp_retries_total{server_id="demo",tool_name="demo.echo"} 2`,
		`mcp_errors_total{error_type="timeout",server_id="demo",tool_name="demo.fail"} 1`,
		`mcp_circuit_state{circuit_key="demo:fail"} 1`,
		`switchboard_audit_queue_depth 7`,
		`switchboard_audit_dropped_total 1`,
		`switchboard_mcp_sessions 12`,
		`switchboard_mcp_session_evictions_total{limit="identity"} 2`,
		`switchboard_mcp_sessions_refused_total{limit="total"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %s", want)
		}
	}
	if strings.Contains(text, `server="other"`) || strings.Contains(text, `server_id="other"`) {
		t.Error("a forgotten server still has series")
	}
}
