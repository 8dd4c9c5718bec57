// Package telemetry holds the gateway's Prometheus instruments. They live on
// a registry of their own (no global state), passed to whoever records.
package telemetry

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// States are the upstream states exported by switchboard_upstream_state.
var States = []string{"CONNECTING", "CONNECTED", "DEGRADED", "DISCONNECTED", "ERROR", "NEEDS_AUTH"}

// Metrics is the set of instruments. Safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	state        *prometheus.GaugeVec
	checks       *prometheus.CounterVec
	checkSeconds *prometheus.HistogramVec
	consecutive  *prometheus.GaugeVec
	errorRate    *prometheus.GaugeVec
	restarts     *prometheus.GaugeVec
	calls        *prometheus.CounterVec
	callSeconds  *prometheus.HistogramVec

	// seed 000 instruments (names and labels as the seed gives them)
	invocations  *prometheus.CounterVec
	latencyMS    *prometheus.HistogramVec
	retries      *prometheus.CounterVec
	circuitState *prometheus.GaugeVec
	errors       *prometheus.CounterVec
	auditDepth   prometheus.Gauge
	auditDropped prometheus.Counter

	sessions        prometheus.Gauge
	sessionEvicted  *prometheus.CounterVec
	sessionsRefused *prometheus.CounterVec
}

// LatencyBucketsMS are the seed's buckets of mcp_invocation_latency_ms.
var LatencyBucketsMS = []float64{10, 50, 100, 250, 500, 1000, 2500, 5000}

// New returns the instruments registered on a fresh registry, with the Go
// runtime and process collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_upstream_state",
			Help: "1 for the state each upstream server is in, 0 for the others.",
		}, []string{"server", "state"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_upstream_health_checks_total",
			Help: "Health checks of upstream servers, by result (ok or failed).",
		}, []string{"server", "result"}),
		checkSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_upstream_health_check_seconds",
			Help:    "Response time of upstream health checks.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}, []string{"server"}),
		consecutive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_upstream_health_consecutive_failures",
			Help: "Consecutive failed health checks of each upstream server.",
		}, []string{"server"}),
		errorRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_upstream_error_rate",
			Help: "Share of failed calls among each upstream server's recent calls (0..1).",
		}, []string{"server"}),
		restarts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_upstream_restarts",
			Help: "Automatic restarts of each upstream server since it was last started by an operator.",
		}, []string{"server"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_tool_calls_total",
			Help: "Tool calls through the gateway, by server and outcome (ok, tool_error, or an error code).",
		}, []string{"server", "outcome"}),
		callSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_tool_call_seconds",
			Help:    "Duration of tool calls through the gateway, routing included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"server"}),
		invocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_invocations_total",
			Help: "Tool invocations by server, tool, agent and status (success, tool_error, denied, error).",
		}, []string{"server_id", "tool_name", "agent_id", "status"}),
		latencyMS: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_invocation_latency_ms",
			Help:    "Tool invocation latency in milliseconds, retries and fallbacks included.",
			Buckets: LatencyBucketsMS,
		}, []string{"server_id", "tool_name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_retries_total",
			Help: "Retry attempts (attempts beyond the first) of tool invocations.",
		}, []string{"server_id", "tool_name"}),
		circuitState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcp_circuit_state",
			Help: "Circuit breaker state per server:tool (0=CLOSED, 1=OPEN, 2=HALF_OPEN).",
		}, []string{"circuit_key"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_errors_total",
			Help: "Failed tool invocations by error type (the stable error code, or tool_error).",
		}, []string{"server_id", "tool_name", "error_type"}),
		auditDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_audit_queue_depth",
			Help: "Audit records waiting to be written.",
		}),
		auditDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_audit_dropped_total",
			Help: "Audit records lost because the queue was full or the store kept failing.",
		}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_mcp_sessions",
			Help: "Live MCP sessions of the HTTP endpoints (Streamable HTTP and SSE), counted against front.max_sessions.",
		}),
		sessionEvicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_mcp_session_evictions_total",
			Help: "Idle MCP sessions ended to make room for a new one, by the cap that required it (identity or total).",
		}, []string{"limit"}),
		sessionsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_mcp_sessions_refused_total",
			Help: "New MCP sessions refused because a cap was reached with every session busy, by cap (identity or total).",
		}, []string{"limit"}),
	}
	m.reg.MustRegister(m.state, m.checks, m.checkSeconds, m.consecutive, m.errorRate, m.restarts,
		m.calls, m.callSeconds,
		m.invocations, m.latencyMS, m.retries, m.circuitState, m.errors, m.auditDepth, m.auditDropped,
		m.sessions, m.sessionEvicted, m.sessionsRefused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// SetState records the state a server is in.
func (m *Metrics) SetState(server, state string) {
	for _, s := range States {
		v := 0.0
		if s == state {
			v = 1
		}
		m.state.WithLabelValues(server, s).Set(v)
	}
}

// HealthCheck records one health check of a server.
func (m *Metrics) HealthCheck(server string, ok bool, took time.Duration, consecutiveFailures int, errorRate float64) {
	result := "ok"
	if !ok {
		result = "failed"
	}
	m.checks.WithLabelValues(server, result).Inc()
	m.checkSeconds.WithLabelValues(server).Observe(took.Seconds())
	m.consecutive.WithLabelValues(server).Set(float64(consecutiveFailures))
	m.errorRate.WithLabelValues(server).Set(errorRate)
}

// Restarts records a server's restart count.
func (m *Metrics) Restarts(server string, n int) {
	m.restarts.WithLabelValues(server).Set(float64(n))
}

// Call records one tool call.
func (m *Metrics) Call(server, outcome string, took time.Duration) {
	m.calls.WithLabelValues(server, outcome).Inc()
	m.callSeconds.WithLabelValues(server).Observe(took.Seconds())
}

// Invocation records one tool invocation with the seed's instruments.
// status is success, tool_error, denied or error; errorType the error code
// ("" on success); attempts counts upstream calls (retries = attempts-1).
func (m *Metrics) Invocation(server, tool, agent, status, errorType string, attempts int, took time.Duration) {
	m.invocations.WithLabelValues(server, tool, agent, status).Inc()
	m.latencyMS.WithLabelValues(server, tool).Observe(float64(took.Microseconds()) / 1e3)
	if attempts > 1 {
		m.retries.WithLabelValues(server, tool).Add(float64(attempts - 1))
	}
	if errorType != "" {
		m.errors.WithLabelValues(server, tool, errorType).Inc()
	}
}

// CircuitState records a breaker's state (0=CLOSED, 1=OPEN, 2=HALF_OPEN).
func (m *Metrics) CircuitState(key string, state int) {
	m.circuitState.WithLabelValues(key).Set(float64(state))
}

// AuditDepth records the audit queue depth.
func (m *Metrics) AuditDepth(n int) { m.auditDepth.Set(float64(n)) }

// AuditDropped counts one lost audit record.
func (m *Metrics) AuditDropped() { m.auditDropped.Inc() }

// Sessions records the number of live MCP sessions.
func (m *Metrics) Sessions(n int) { m.sessions.Set(float64(n)) }

// SessionEvicted counts one idle MCP session ended to make room; limit is
// the cap that required it.
func (m *Metrics) SessionEvicted(limit string) { m.sessionEvicted.WithLabelValues(limit).Inc() }

// SessionRefused counts one MCP session refused at a cap.
func (m *Metrics) SessionRefused(limit string) { m.sessionsRefused.WithLabelValues(limit).Inc() }

// Forget drops a removed server's series.
func (m *Metrics) Forget(server string) {
	l := prometheus.Labels{"server": server}
	m.state.DeletePartialMatch(l)
	m.checks.DeletePartialMatch(l)
	m.checkSeconds.DeletePartialMatch(l)
	m.consecutive.DeletePartialMatch(l)
	m.errorRate.DeletePartialMatch(l)
	m.restarts.DeletePartialMatch(l)
	m.calls.DeletePartialMatch(l)
	m.callSeconds.DeletePartialMatch(l)
	sl := prometheus.Labels{"server_id": server}
	m.invocations.DeletePartialMatch(sl)
	m.latencyMS.DeletePartialMatch(sl)
	m.retries.DeletePartialMatch(sl)
	m.errors.DeletePartialMatch(sl)
}
