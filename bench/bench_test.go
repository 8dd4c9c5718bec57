package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"p50 of two is the first", ms(1, 2), 50, 1 * time.Millisecond},
		{"p50 of 100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 is the max", ms(hundred...), 100, 100 * time.Millisecond},
		{"p0 is the min", ms(hundred...), 0, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(p%d) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	ds := []time.Duration{4, 1, 3, 2} // unsorted on purpose
	got := summarize(ds)
	want := latency{N: 4, P50: 2, P90: 4, P99: 4, Max: 4, Mean: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summarize (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(latency{}, summarize(nil)); diff != "" {
		t.Errorf("summarize(nil) (-want +got):\n%s", diff)
	}
}

func TestEvaluate(t *testing.T) {
	us := time.Microsecond
	call := func(s string, p50 time.Duration, perSec float64, gwCPU time.Duration) callResult {
		c := callResult{Scenario: s, Latency: latency{P50: p50}, Throughput: throughput{PerSecond: perSec}}
		if gwCPU > 0 {
			c.Throughput.CPUPerCall = map[string]time.Duration{roleClient: time.Millisecond, roleGateway: gwCPU}
		}
		return c
	}
	t10k := func(gw, direct time.Duration, rss ...rssPoint) *tools10kResult {
		return &tools10kResult{Gateway: latency{N: 99, P50: gw}, Direct: latency{N: 19, P50: direct}, RSS: rss}
	}
	const MB = 1_000_000
	tests := []struct {
		name string
		rep  report
		want []goal
	}{
		{
			name: "all measured",
			rep: report{
				Calls: []callResult{
					call(scenarioDirect, 100*us, 1000, 0),
					call(scenarioHTTP, 350*us, 850, 150*us),      // exactly at every limit: pass
					call(scenarioStdio, 251*us, 1190, 151*us),    // 1µs, 0.01× and 1µs short: miss
					call(scenarioStdioAsync, 100*us, 5000, 1*us), // no goals of its own
				},
				Tools10k: t10k(130*time.Millisecond, 100*time.Millisecond,
					rssPoint{0, 120 * MB}, rssPoint{20, 140 * MB}, rssPoint{100, 154 * MB}),
			},
			want: []goal{
				{scenarioStdio, "p50 latency added", metricDeltaP50, 150e3, 151e3, false, ""},
				{scenarioStdio, "calls/s vs direct HTTP", metricRatio, 1.2, 1.19, false, ""},
				{scenarioStdio, "gateway CPU per call", metricCPUPerCall, 150e3, 151e3, false, ""},
				{scenarioHTTP, "p50 latency added", metricDeltaP50, 250e3, 250e3, true, ""},
				{scenarioHTTP, "calls/s vs direct", metricRatio, 0.85, 0.85, true, ""},
				{scenarioHTTP, "gateway CPU per call", metricCPUPerCall, 150e3, 150e3, true, ""},
				{scenarioTools10k, "gateway RSS (peak of start/20/N lists)", metricRSS, 150e6, 154e6, false, "peak after 100 lists"},
				{scenarioTools10k, "RSS stable: after N lists vs after 20", metricGrowth, 0.1, 0.1, true, "140 MB after 20 → 154 MB after 100"},
				{scenarioTools10k, "tools/list p50 vs one upstream direct", metricTimeRatio, 1.3, 1.3, true, "130ms vs 100ms"},
			},
		},
		{
			name: "no baseline: only the CPU goals, which need none",
			rep:  report{Calls: []callResult{call(scenarioHTTP, 1, 1, 90*us), call(scenarioStdio, 1, 1, 0)}},
			want: []goal{{scenarioHTTP, "gateway CPU per call", metricCPUPerCall, 150e3, 90e3, true, ""}},
		},
		{
			name: "a gateway faster than direct passes",
			rep:  report{Calls: []callResult{call(scenarioDirect, 100*us, 1000, 0), call(scenarioStdio, 90*us, 2000, 0)}},
			want: []goal{
				{scenarioStdio, "p50 latency added", metricDeltaP50, 150e3, -10e3, true, ""},
				{scenarioStdio, "calls/s vs direct HTTP", metricRatio, 1.2, 2, true, ""},
			},
		},
		{
			name: "a baseline of zero calls/s gives ratio 0, not a division by zero",
			rep:  report{Calls: []callResult{call(scenarioDirect, 100*us, 0, 0), call(scenarioHTTP, 100*us, 10, 0)}},
			want: []goal{
				{scenarioHTTP, "p50 latency added", metricDeltaP50, 250e3, 0, true, ""},
				{scenarioHTTP, "calls/s vs direct", metricRatio, 0.85, 0, false, ""},
			},
		},
		{
			name: "tools10k: memory shrinking after 20 lists is stable; too few lists leave stability out",
			rep: report{Tools10k: t10k(100*time.Millisecond, 100*time.Millisecond,
				rssPoint{0, 100 * MB}, rssPoint{20, 149 * MB}, rssPoint{100, 120 * MB})},
			want: []goal{
				{scenarioTools10k, "gateway RSS (peak of start/20/N lists)", metricRSS, 150e6, 149e6, true, "peak after 20 lists"},
				{scenarioTools10k, "RSS stable: after N lists vs after 20", metricGrowth, 0.1, -29.0 / 149, true, "149 MB after 20 → 120 MB after 100"},
				{scenarioTools10k, "tools/list p50 vs one upstream direct", metricTimeRatio, 1.3, 1, true, "100ms vs 100ms"},
			},
		},
		{
			name: "tools10k with 20 lists: no stability; without RSS: no memory goals at all",
			rep:  report{Tools10k: t10k(100*time.Millisecond, 100*time.Millisecond, rssPoint{0, 100 * MB}, rssPoint{20, 101 * MB})},
			want: []goal{
				{scenarioTools10k, "gateway RSS (peak of start/20/N lists)", metricRSS, 150e6, 101e6, true, "peak after 20 lists"},
				{scenarioTools10k, "tools/list p50 vs one upstream direct", metricTimeRatio, 1.3, 1, true, "100ms vs 100ms"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := evaluate(&tt.rep)
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b float64) bool {
				d := a - b
				return d < 1e-9 && d > -1e-9
			})); diff != "" {
				t.Errorf("evaluate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFmtDur(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0µs"},
		{123456, "123µs"},
		{999 * time.Microsecond, "999µs"},
		{1234 * time.Microsecond, "1.23ms"},
		{12345 * time.Microsecond, "12.3ms"},
		{123456 * time.Microsecond, "123ms"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := fmtDur(tt.d); got != tt.want {
				t.Errorf("fmtDur(%v) = %q, want %q", tt.d, got, tt.want)
			}
		})
	}
	if got := fmtDelta(-5 * time.Microsecond); got != "−5µs" {
		t.Errorf("fmtDelta(-5µs) = %q", got)
	}
	if got := fmtDelta(5 * time.Microsecond); got != "+5µs" {
		t.Errorf("fmtDelta(5µs) = %q", got)
	}
}

func TestWriteTable(t *testing.T) {
	rep := &report{
		Env:    environment{Date: "2026-01-02 03:04:05", OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2, GoVersion: "go1.26"},
		Params: params{Calls: 10, Warmup: 1, Concurrency: 4, Duration: time.Second, ListCalls: 3},
		Calls: []callResult{
			{Scenario: scenarioDirect, Latency: latency{P50: 100 * time.Microsecond, P99: 300 * time.Microsecond}, Throughput: throughput{PerSecond: 1000}},
			{Scenario: scenarioHTTP, Latency: latency{P50: 300 * time.Microsecond, P99: 900 * time.Microsecond}, Throughput: throughput{PerSecond: 800}},
		},
	}
	rep.Tools10k = &tools10kResult{Upstreams: 20, ToolsPerUpstream: 500, Tools: 10000, Pages: 10, DirectTools: 10000, DirectPages: 10,
		Gateway: latency{N: 99, P50: 600 * time.Millisecond}, Direct: latency{N: 19, P50: 400 * time.Millisecond},
		RSS: []rssPoint{{0, 160e6}, {20, 120e6}, {100, 125e6}}, StartSeconds: 3.2}
	rep.Goals = evaluate(rep)
	var buf bytes.Buffer
	if err := writeTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"2 CPUs",
		"+200µs", // Δp50
		"+600µs", // Δp99
		"0.80×",  // throughput ratio
		"gateway (20 × 500)",
		"1.50×", // tools10k listing vs direct
		"after start  after 20 lists  after 100 lists  stable (N vs 20)",
		"160 MB          120 MB           125 MB        yes, +4.2%",
		"(peak right after start)",
		"(120 MB after 20 → 125 MB after 100)",
		"(600ms vs 400ms)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	var verdicts []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if i := slices.IndexFunc(f, func(s string) bool { return s == "PASS" || s == "MISS" }); i > 0 {
			verdicts = append(verdicts, f[0]+" "+f[i])
		}
	}
	if diff := cmp.Diff([]string{"gateway/http PASS", "gateway/http MISS", "tools10k MISS", "tools10k PASS", "tools10k MISS"}, verdicts); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s\n%s", diff, out)
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantErr   bool
		scenarios []string
	}{
		{"defaults", nil, false, []string{scenarioDirect, scenarioHTTP, scenarioStdio, scenarioList, scenarioTools10k}},
		{"subset, deduplicated", []string{"-scenarios", "list, direct,list"}, false, []string{scenarioList, scenarioDirect}},
		{"unknown scenario", []string{"-scenarios", "gateway/sse"}, true, nil},
		{"empty scenarios", []string{"-scenarios", ","}, true, nil},
		{"zero calls", []string{"-calls", "0"}, true, nil},
		{"negative duration", []string{"-duration", "-1s"}, true, nil},
		{"stray argument", []string{"now"}, true, nil},
		{"zero rounds", []string{"-rounds", "0"}, true, nil},
		{"profile with rounds", []string{"-profile", "/tmp/p", "-rounds", "2"}, true, nil},
		{"one tools10k list", []string{"-tools10k-lists", "1"}, true, nil},
		{"tools10k upstreams with fewer tools than the demo's own", []string{"-tools10k-tools", "4"}, true, nil},
		{"soak", []string{"-soak", "-soak-duration", "1m", "-soak-rate", "50"}, false, []string{scenarioDirect, scenarioHTTP, scenarioStdio, scenarioList, scenarioTools10k}},
		{"soak shorter than a second", []string{"-soak", "-soak-duration", "500ms"}, true, nil},
		{"soak at rate 0", []string{"-soak", "-soak-rate", "0"}, true, nil},
		{"soak: every upstream slow", []string{"-soak", "-soak-upstreams", "3", "-soak-slow", "3"}, true, nil},
		{"soak: error rate above 1", []string{"-soak", "-soak-error-rate", "1.5"}, true, nil},
		{"soak with profile", []string{"-soak", "-profile", "/tmp/p"}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, &bytes.Buffer{})
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseFlags(%q) error = %v, want error %v", tt.args, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tt.scenarios, o.Scenarios); diff != "" {
				t.Errorf("scenarios (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMeasureLatency(t *testing.T) {
	var n atomic.Int64
	ds, err := measureLatency(t.Context(), 3, 5, func(context.Context) error { n.Add(1); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 5 || n.Load() != 8 {
		t.Errorf("measured %d calls of %d made, want 5 of 8", len(ds), n.Load())
	}

	boom := errors.New("boom")
	_, err = measureLatency(t.Context(), 1, 5, func(context.Context) error { return boom })
	if !errors.Is(err, boom) {
		t.Errorf("failing warm-up: got %v, want %v", err, boom)
	}
}

func TestMeasureThroughput(t *testing.T) {
	ok := func(context.Context) error { return nil }
	r, err := measureThroughput(t.Context(), 4, 0, 20*time.Millisecond, ok, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls == 0 || r.Errors != 0 || r.Workers != 4 || r.PerSecond <= 0 {
		t.Errorf("got %+v, want some calls, no errors, 4 workers", r)
	}

	boom := errors.New("boom")
	r, err = measureThroughput(t.Context(), 2, 0, 20*time.Millisecond, func(context.Context) error { return boom }, nil)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("all calls failing: got error %v, want one naming the first failure", err)
	}
	if r.Errors == 0 || r.FirstErr != "boom" {
		t.Errorf("all calls failing: got %+v, want errors counted", r)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := measureThroughput(ctx, 2, time.Hour, time.Hour, ok, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v, want context.Canceled", err)
	}
}

func TestPerCall(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name          string
		before, after map[string]time.Duration
		calls         int64
		secs          float64
		want          map[string]time.Duration
		wantBusy      float64
	}{
		{
			name:   "two roles",
			before: map[string]time.Duration{roleClient: 100 * ms, roleUpstream: 0},
			after:  map[string]time.Duration{roleClient: 1100 * ms, roleUpstream: 3000 * ms},
			calls:  1000, secs: 2,
			want:     map[string]time.Duration{roleClient: ms, roleUpstream: 3 * ms},
			wantBusy: 2,
		},
		{
			name:   "a process that appeared during the window counts from zero",
			before: map[string]time.Duration{roleClient: 0},
			after:  map[string]time.Duration{roleClient: 100 * ms, roleUpstream: 100 * ms},
			calls:  100, secs: 1,
			want:     map[string]time.Duration{roleClient: ms, roleUpstream: ms},
			wantBusy: 0.2,
		},
		{name: "no calls", after: map[string]time.Duration{roleClient: ms}, calls: 0, secs: 1},
		{name: "no samples", calls: 10, secs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, busy := perCall(tt.before, tt.after, tt.calls, tt.secs)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("per call (-want +got):\n%s", diff)
			}
			if busy != tt.wantBusy {
				t.Errorf("cores busy = %v, want %v", busy, tt.wantBusy)
			}
		})
	}
}

func TestMedianThroughput(t *testing.T) {
	tp := func(perSec float64) throughput { return throughput{PerSecond: perSec, Calls: int64(perSec)} }
	tests := []struct {
		name string
		in   []throughput
		want throughput
	}{
		{"none", nil, throughput{}},
		{"one round lists no rounds", []throughput{tp(5)}, tp(5)},
		{"odd: the middle round, rounds in run order", []throughput{tp(9), tp(1), tp(5)},
			throughput{PerSecond: 5, Calls: 5, Rounds: []float64{9, 1, 5}}},
		{"even: the lower middle", []throughput{tp(4), tp(1), tp(3), tp(2)},
			throughput{PerSecond: 2, Calls: 2, Rounds: []float64{4, 1, 3, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, medianThroughput(tt.in)); diff != "" {
				t.Errorf("median (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 5}
	for _, s := range []string{"abc", "defg", "h"} {
		if _, err := tb.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got := tb.String(); got != "defgh" {
		t.Errorf("tail = %q, want %q", got, "defgh")
	}
}

func TestPrefixWriter(t *testing.T) {
	var buf bytes.Buffer
	pw := &prefixWriter{prefix: "demo: ", w: &buf}
	for _, s := range []string{"one\ntw", "o\n", "three"} {
		if _, err := pw.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff("demo: one\ndemo: two\n", buf.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

func TestConfigs(t *testing.T) {
	tests := []struct {
		name, servers string
		want          config.Server
	}{
		{"http", httpServer("http://127.0.0.1:1/mcp"),
			config.Server{Name: "demo", Transport: config.TransportHTTP, URL: "http://127.0.0.1:1/mcp"}},
		{"stdio", stdioServer(`/tmp/a "b": c/switchboard`),
			config.Server{Name: "demo", Transport: config.TransportStdio, Command: `/tmp/a "b": c/switchboard`, Args: []string{"demo-server"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("bench.yaml", []byte(tt.servers), func(string) string { return "" })
			if err != nil {
				t.Fatalf("the gateway would reject the config: %v\n%s", err, tt.servers)
			}
			s := cfg.Server("demo")
			if s == nil {
				t.Fatalf("no server demo in %s", tt.servers)
			}
			if !s.AutoStartOr(false) {
				t.Error("demo is not auto-started: the gateway would serve no tools")
			}
			got := config.Server{Name: s.Name, Transport: s.Transport, URL: s.URL, Command: s.Command, Args: s.Args}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreUnexported(config.Server{})); diff != "" {
				t.Errorf("server (-want +got):\n%s", diff)
			}
		})
	}
}
