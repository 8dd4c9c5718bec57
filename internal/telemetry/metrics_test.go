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
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %s", want)
		}
	}
	if strings.Contains(text, `server="other"`) {
		t.Error("a forgotten server still has series")
	}
}
