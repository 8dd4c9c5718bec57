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
var States = []string{"CONNECTING", "CONNECTED", "DEGRADED", "DISCONNECTED", "ERROR"}

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
}

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
	}
	m.reg.MustRegister(m.state, m.checks, m.checkSeconds, m.consecutive, m.errorRate, m.restarts,
		m.calls, m.callSeconds,
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
}
