package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

func TestSoakWindows(t *testing.T) {
	tests := []struct {
		n            int
		second, last window
	}{
		{600, window{60, 120}, window{540, 600}}, // the 10 minutes: second and last minute
		{180, window{60, 120}, window{120, 180}}, // three minutes: still minutes, adjacent
		{179, window{44, 88}, window{135, 179}},  // shorter: quarters
		{60, window{15, 30}, window{45, 60}},
		{2, window{1, 2}, window{1, 2}},
		{1, window{0, 1}, window{0, 1}},
	}
	for _, tt := range tests {
		second, last := soakWindows(tt.n)
		if second != tt.second || last != tt.last {
			t.Errorf("soakWindows(%d) = %v, %v; want %v, %v", tt.n, second, last, tt.second, tt.last)
		}
	}
}

// samplesOf builds seconds of samples; lat[i] are the latencies (ms) of
// second i, rss and goroutines its readings (-1 = unread).
func samplesOf(lat [][]int, rss []int64, gor []int) []soakSample {
	s := make([]soakSample, len(lat))
	for i := range s {
		s[i].T = i
		for _, ms := range lat[i] {
			s[i].lat = append(s[i].lat, time.Duration(ms)*time.Millisecond)
			s[i].Ended++
			s[i].OK++
		}
		s[i].RSS, s[i].Goroutines = rss[i], gor[i]
	}
	return s
}

func TestStatsOf(t *testing.T) {
	s := samplesOf(
		[][]int{{100}, {1, 2, 3}, {4, 5, 6, 7, 8, 9, 10}, {200}},
		[]int64{1, 100, -1, 9},
		[]int{1, -1, 30, 9},
	)
	s[2].Unexpected = 2
	got := statsOf(s, window{1, 3})
	want := windowStats{Window: window{1, 3}, Calls: 10, Unexpected: 2,
		P50: 5 * time.Millisecond, P90: 9 * time.Millisecond, P99: 10 * time.Millisecond,
		RSSMean: 100, RSSN: 1, GoroutinesMean: 30, GoroutinesN: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statsOf (-want +got):\n%s", diff)
	}
	if got := statsOf(s, window{4, 4}); got.Calls != 0 || got.RSSN != 0 || got.P99 != 0 {
		t.Errorf("empty window: %+v", got)
	}
}

func TestPeriods(t *testing.T) {
	lat := make([][]int, 10)
	rss, gor := make([]int64, 10), make([]int, 10)
	for i := range lat {
		lat[i] = []int{i + 1}
	}
	var got []window
	for _, p := range periods(samplesOf(lat, rss, gor)) {
		got = append(got, p.Window)
	}
	// 10 s: quarters of 2 s, the last period cut short by nothing.
	if diff := cmp.Diff([]window{{0, 2}, {2, 4}, {4, 6}, {6, 8}, {8, 10}}, got); diff != "" {
		t.Errorf("periods (-want +got):\n%s", diff)
	}
}

func TestSoakVerdicts(t *testing.T) {
	second := windowStats{Window: window{60, 120}, Calls: 100, P99: 10 * time.Millisecond,
		RSSMean: 100 * mb, RSSN: 60, GoroutinesMean: 100, GoroutinesN: 60}
	okTotals := soakTotals{OK: 95, Expected: 5}
	okAudit := auditCount{Rows: 100, OKRows: 95}
	pass := func(vs []verdict) []bool {
		out := make([]bool, len(vs))
		for i, v := range vs {
			out[i] = v.Pass
		}
		return out
	}
	tests := []struct {
		name   string
		last   func(w *windowStats)
		totals soakTotals
		audit  auditCount
		want   []bool // p99, RSS, goroutines, audited, no unexpected errors
	}{
		{"all at their limits", func(w *windowStats) {
			w.P99, w.RSSMean, w.GoroutinesMean = 15*time.Millisecond, 110*mb, 90
		}, okTotals, okAudit, []bool{true, true, true, true, true}},
		{"just over", func(w *windowStats) {
			w.P99, w.RSSMean, w.GoroutinesMean = 15*time.Millisecond+1, 110.1*mb, 89.9
		}, okTotals, okAudit, []bool{false, false, false, true, true}},
		{"a missing audit row and an unexpected error", func(*windowStats) {},
			soakTotals{OK: 95, Expected: 4, Unexpected: 1}, auditCount{Rows: 99, OKRows: 95}, []bool{true, true, true, false, false}},
		{"an unreadable audit log misses", func(*windowStats) {},
			okTotals, auditCount{Err: "no such file"}, []bool{true, true, true, false, true}},
		{"unmeasured gauges and no calls miss", func(w *windowStats) {
			w.Calls, w.RSSN, w.GoroutinesN = 0, 0, 0
		}, okTotals, okAudit, []bool{false, false, false, true, true}},
		{"no calls at all is no pass", func(*windowStats) {}, soakTotals{}, auditCount{}, []bool{true, true, true, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			last := second
			last.Window = window{540, 600}
			tt.last(&last)
			vs := soakVerdicts(tt.totals, second, last, tt.audit)
			if diff := cmp.Diff(tt.want, pass(vs)); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s\n%+v", diff, vs)
			}
			if want := !slices.Contains(tt.want, false); allPass(vs) != want {
				t.Errorf("allPass = %v, want %v", allPass(vs), want)
			}
		})
	}
	if allPass(nil) {
		t.Error("no verdicts pass")
	}
}

// breaker is the gateway's answer to a call of server's echo while its
// circuit breaker is open.
func breaker(server string) error {
	return fmt.Errorf(`calling %s.echo: tool error: circuit breaker for "%s.echo" is OPEN: failing fast without calling server "%s"`, server, server, server)
}

func TestClassify(t *testing.T) {
	plain, failing := soakUpstream{Name: "u01"}, soakUpstream{Name: "u20", ErrorRate: 0.05}
	fault := errors.New(`calling u20.echo: demo: injected fault (error rate 0.05)`)
	tests := []struct {
		name string
		u    soakUpstream
		err  error
		want outcome
	}{
		{"ok", failing, nil, outcomeOK},
		{"the failing upstream's fault", failing, fault, outcomeExpected},
		{"the same text from another upstream", plain, fault, outcomeUnexpected},
		{"another error of the failing upstream", failing, context.DeadlineExceeded, outcomeUnexpected},
		{"the failing upstream's breaker open", failing, breaker("u20"), outcomeExpected},
		{"another upstream's breaker open", plain, breaker("u01"), outcomeUnexpected},
		{"the breaker of another upstream, on the failing one's call", failing, breaker("u03"), outcomeUnexpected},
	}
	for _, tt := range tests {
		if got := classify(tt.u, tt.err); got != tt.want {
			t.Errorf("%s: classify = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestParseGoroutines(t *testing.T) {
	tests := []struct {
		name, text string
		want       int
		wantErr    bool
	}{
		{"with help and type", "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 42\ngo_threads 7\n", 42, false},
		{"a float value", "go_goroutines 1.5e+02\n", 150, false},
		{"not the prefix of another name", "go_goroutines_total 3\n", 0, true},
		{"missing", "go_threads 7\n", 0, true},
		{"bad value", "go_goroutines NaNx\n", 0, true},
	}
	for _, tt := range tests {
		got, err := parseGoroutines(strings.NewReader(tt.text))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: parseGoroutines = %d, %v; want %d, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestSoakUpstreamsConfig(t *testing.T) {
	ups := soakUpstreams(soakParams{Upstreams: 20, Slow: 5, ErrorRate: 0.05})
	var slow []time.Duration
	var failing []string
	for _, u := range ups {
		if u.Latency > 0 {
			slow = append(slow, u.Latency)
		}
		if u.ErrorRate > 0 {
			failing = append(failing, u.Name)
		}
	}
	ms := time.Millisecond
	if diff := cmp.Diff([]time.Duration{20 * ms, 28 * ms, 35 * ms, 43 * ms, 50 * ms}, slow); diff != "" {
		t.Errorf("slow upstreams (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"u20"}, failing); diff != "" {
		t.Errorf("failing upstreams (-want +got):\n%s", diff)
	}

	cfg, err := config.Parse("soak.yaml", []byte(soakServers("/bin/switchboard", ups)), func(string) string { return "" })
	if err != nil {
		t.Fatalf("the gateway would reject the config: %v", err)
	}
	if len(cfg.Servers) != 20 {
		t.Fatalf("%d servers in the config, want 20", len(cfg.Servers))
	}
	for name, want := range map[string][]string{
		"u01": {"demo-server", "--latency", "20ms"},
		"u05": {"demo-server", "--latency", "50ms"},
		"u06": {"demo-server"},
		"u20": {"demo-server", "--error-rate", "0.05"},
	} {
		s := cfg.Server(name)
		if s == nil || s.Transport != config.TransportStdio || !s.AutoStartOr(false) {
			t.Fatalf("%s: %+v, want an auto-started stdio server", name, s)
		}
		if diff := cmp.Diff(want, s.Args); diff != "" {
			t.Errorf("%s args (-want +got):\n%s", name, diff)
		}
	}
}

func TestRunOpenLoop(t *testing.T) {
	spec := loadSpec{Rate: 100, Duration: time.Second, MaxInFlight: 1000}
	var gauged atomic.Int64
	res := runOpenLoop(t.Context(), spec, func(_ context.Context, seq int) (outcome, error) {
		switch {
		case seq%10 == 3:
			return outcomeExpected, errors.New("injected fault")
		case seq == 7:
			return outcomeUnexpected, errors.New("boom")
		}
		return outcomeOK, nil
	}, func() gaugeReading {
		n := gauged.Add(1)
		return gaugeReading{RSS: 1000 * n, Goroutines: int(n), CPU: time.Duration(n) * time.Millisecond}
	})
	if res.Scheduled != 100 || res.Started != 100 || res.Dropped != 0 || len(res.Samples) != 1 {
		t.Fatalf("scheduled %d, started %d, dropped %d, %d samples; want 100, 100, 0, 1", res.Scheduled, res.Started, res.Dropped, len(res.Samples))
	}
	tot := totalsOf(res, spec.Duration)
	if tot.OK != 89 || tot.Expected != 10 || tot.Unexpected != 1 {
		t.Errorf("outcomes %d ok, %d expected, %d unexpected; want 89, 10, 1", tot.OK, tot.Expected, tot.Unexpected)
	}
	s := res.Samples[0]
	if s.Started != 100 || s.Ended != 100 || len(s.lat) != 100 || s.P99 < s.P50 {
		t.Errorf("sample: %+v", s)
	}
	// One reading at the start (the CPU base) and one at the end of the second.
	if s.RSS != 2000 || s.Goroutines != 2 || s.GatewayCPU != time.Millisecond {
		t.Errorf("sample gauges: RSS %d, goroutines %d, CPU %v; want 2000, 2, 1ms", s.RSS, s.Goroutines, s.GatewayCPU)
	}
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0], "call 7: boom") {
		t.Errorf("errors kept: %q", res.Errors)
	}
}

// TestRunOpenLoopDrops checks the load stays open: calls that do not end
// do not hold the schedule back, and those due beyond the in-flight bound
// are dropped and counted.
func TestRunOpenLoopDrops(t *testing.T) {
	release := make(chan struct{})
	spec := loadSpec{Rate: 50, Duration: time.Second, MaxInFlight: 3,
		dispatched: func() { close(release) }} // only then may the calls end
	res := runOpenLoop(t.Context(), spec, func(context.Context, int) (outcome, error) {
		<-release
		return outcomeOK, nil
	}, nil)
	if res.Scheduled != 50 || res.Started != 3 || res.Dropped != 47 {
		t.Fatalf("scheduled %d, started %d, dropped %d; want 50, 3, 47", res.Scheduled, res.Started, res.Dropped)
	}
	if s := res.Samples[0]; s.Dropped != 47 || s.Started != 3 || s.Ended != 3 || s.RSS != -1 || s.GatewayCPU != -1 {
		t.Errorf("sample: %+v", s)
	}
}

func TestLoadSpec(t *testing.T) {
	s := loadSpec{Rate: 300, Duration: 10 * time.Minute}
	if got := s.scheduled(); got != 180_000 {
		t.Errorf("scheduled = %d, want 180000", got)
	}
	if got := s.seconds(); got != 600 {
		t.Errorf("seconds = %d, want 600", got)
	}
	if got := s.due(150); got != 500*time.Millisecond {
		t.Errorf("due(150) = %v, want 500ms", got)
	}
	if got := (loadSpec{Rate: 3, Duration: 1500 * time.Millisecond}).scheduled(); got != 5 {
		t.Errorf("3/s for 1.5s: scheduled = %d, want 5 (at 0, 1/3, 2/3, 1, 4/3 s)", got)
	}
}

// soakReportOf is a small report for the writers.
func soakReportOf(t *testing.T) *soakReport {
	t.Helper()
	lat := [][]int{{1, 2}, {3}, {}, {4, 50}}
	s := samplesOf(lat, []int64{50e6, 51e6, -1, 52e6}, []int{10, 11, 12, -1})
	for i := range s {
		l := summarize(s[i].lat)
		s[i].P50, s[i].P90, s[i].P99 = l.P50, l.P90, l.P99
	}
	p := soakParams{Duration: 4 * time.Second, Rate: 2, Upstreams: 3, Slow: 1, ErrorRate: 0.5, Clients: 1, MaxInFlight: 4}
	r := &soakReport{Env: environment{Date: "2026-01-02 03:04:05", OS: "linux", CPUs: 2, LoadAvg: "1.00 2.00 3.00"},
		Params: p, Upstreams: soakUpstreams(p), Samples: s, Goroutines: "go_goroutines",
		Audit: auditCount{Rows: 5, OKRows: 5, ByKind: map[string]int{"invocation": 5}}}
	r.Totals = totalsOf(loadResult{Samples: s, Scheduled: 8, Started: 5}, p.Duration)
	second, last := soakWindows(len(s))
	r.Second, r.Last = statsOf(s, second), statsOf(s, last)
	r.Periods = periods(s)
	r.Verdicts = soakVerdicts(r.Totals, r.Second, r.Last, r.Audit)
	r.Pass = allPass(r.Verdicts)
	r.Errors = []string{"t=1s call 3: `odd` error"}
	return r
}

func TestWriteSoakSVG(t *testing.T) {
	var buf bytes.Buffer
	if err := writeSoakSVG(&buf, soakReportOf(t)); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML, with a path per series and its legend.
	type path struct {
		D     string `xml:"d,attr"`
		Title string `xml:"title"`
	}
	var doc struct {
		XMLName xml.Name `xml:"svg"`
		Paths   []path   `xml:"path"`
		Texts   []string `xml:"text"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not well-formed: %v\n%s", err, buf.String())
	}
	var titles []string
	for _, p := range doc.Paths {
		titles = append(titles, p.Title)
	}
	if diff := cmp.Diff([]string{"p50", "p90", "p99", "RSS", "goroutines"}, titles); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
	// Second 2 has no calls and no RSS, second 3 no goroutines: the lines
	// break there instead of drawing a zero.
	moves := func(d string) int { return strings.Count(d, "M") }
	if got := []int{moves(doc.Paths[0].D), moves(doc.Paths[3].D), moves(doc.Paths[4].D)}; !cmp.Equal(got, []int{2, 2, 1}) {
		t.Errorf("line segments of p50, RSS, goroutines = %v, want [2 2 1]", got)
	}
	texts := strings.Join(doc.Texts, "|")
	for _, want := range []string{"[ms]", "[MB]", "time since the start of the load [m:ss]", "0:00", "0:04", "p99", "RSS", "goroutines", "2nd window", "last window"} {
		if !strings.Contains(texts, want) {
			t.Errorf("no text %q in the plot: %s", want, texts)
		}
	}
}

func TestNiceSteps(t *testing.T) {
	for _, tt := range []struct{ max, want float64 }{{0, 1}, {math.NaN(), 1}, {9, 2}, {100, 20}, {0.3, 0.1}, {451, 100}, {1000, 200}} {
		if got := niceStep(tt.max); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("niceStep(%v) = %v, want %v", tt.max, got, tt.want)
		}
	}
	for _, tt := range []struct{ n, want float64 }{{4, 1}, {20, 2}, {60, 10}, {600, 60}, {3600, 600}} {
		if got := niceTimeStep(tt.n); got != tt.want {
			t.Errorf("niceTimeStep(%v) = %v, want %v", tt.n, got, tt.want)
		}
	}
	if got := fmtTick(0.30000000000000004, 0.1); got != "0.3" {
		t.Errorf("fmtTick = %q", got)
	}
	if got := fmtClock(605); got != "10:05" {
		t.Errorf("fmtClock(605) = %q", got)
	}
}

func TestWriteSoakMarkdown(t *testing.T) {
	r := soakReportOf(t)
	var buf bytes.Buffer
	if err := writeSoakMarkdown(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"load average 1.00 2.00 3.00",
		"3 stdio demo servers (slow: u01 20ms; u03 fails 50% of its calls)",
		"| p99 stable |", "| RSS flat |", "| goroutines flat |", "| every call audited |", "| no unexpected errors |",
		"second and last quarters",
		"5 rows (5 ok)",
		"| 0–1s | 2 |",
		"`t=1s call 3: 'odd' error`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	dir := t.TempDir()
	if err := writeSoakFiles(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{soakJSON, soakMD, soakSVG} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written (%v)", name, err)
		}
	}
}

// TestSoakEndToEnd runs a tiny soak against real processes: the gateway,
// three stdio demo servers (one slow, one failing half its calls), and
// checks the report's accounting against the gateway's audit log.
func TestSoakEndToEnd(t *testing.T) {
	bin := buildOnce(t)
	out := t.TempDir()
	o := &options{bin: bin, soakMode: true, soak: soakParams{Duration: 2 * time.Second, Rate: 30, Upstreams: 3, Slow: 1,
		ErrorRate: 0.5, Clients: 2, MaxInFlight: 64, Out: out}}
	var stdout bytes.Buffer
	if err := runSoak(t.Context(), o, slog.New(slog.DiscardHandler), &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, soakJSON))
	if err != nil {
		t.Fatal(err)
	}
	var rep soakReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	tot := rep.Totals
	if tot.Started != 60 || tot.Dropped != 0 || tot.OK+tot.Expected+tot.Unexpected != 60 {
		t.Errorf("totals %+v: want 60 calls started and ended", tot)
	}
	if tot.Unexpected != 0 || tot.Expected == 0 {
		t.Errorf("%d unexpected, %d expected errors; want 0 and some (first: %q)", tot.Unexpected, tot.Expected, rep.Errors)
	}
	if rep.Audit.Err != "" || rep.Audit.Rows != 60 || rep.Audit.OKRows != tot.OK {
		t.Errorf("audit %+v: want 60 rows, %d ok", rep.Audit, tot.OK)
	}
	if len(rep.Samples) != 2 {
		t.Errorf("%d samples, want 2", len(rep.Samples))
	}
	gors := 0
	for _, s := range rep.Samples {
		if s.RSS <= 0 {
			t.Errorf("second %d: RSS %d, want it read", s.T, s.RSS)
		}
		if s.Goroutines > 0 {
			gors++
		}
	}
	// A scrape slower than goroutinesFresh leaves a second without; on a
	// loaded machine that may happen, but not in every second.
	if gors == 0 {
		t.Error("no second has the gateway's goroutines")
	}
	if !strings.Contains(stdout.String(), "## Verdicts") {
		t.Errorf("the report was not printed:\n%s", stdout.String())
	}
	for _, name := range []string{soakMD, soakSVG} {
		if fi, err := os.Stat(filepath.Join(out, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written (%v)", name, err)
		}
	}
	if left := processesOf(t, bin); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}

func TestGoroutineWatcher(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "# TYPE go_goroutines gauge\ngo_goroutines 42\n")
	}))
	defer srv.Close()
	w := &goroutineWatcher{url: srv.URL, client: srv.Client()}
	if got := w.latest(time.Now()); got != -1 {
		t.Errorf("before any scrape: %d, want -1", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()
	for w.latest(time.Now()) != 42 {
		if err := sleep(t.Context(), 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	<-done
	if got := w.latest(time.Now().Add(goroutinesFresh + time.Second)); got != -1 {
		t.Errorf("a stale scrape: %d, want -1", got)
	}
}

// TestRunOpenLoopInterrupted checks an interruption stops the schedule but
// lets the calls in flight end (their context is not cancelled), so every
// call sent is accounted for.
func TestRunOpenLoopInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var sawCancelled atomic.Int64
	spec := loadSpec{Rate: 100, Duration: time.Minute, MaxInFlight: 1000}
	res := runOpenLoop(ctx, spec, func(ctx context.Context, seq int) (outcome, error) {
		if seq == 20 {
			cancel()
		}
		if ctx.Err() != nil {
			sawCancelled.Add(1)
		}
		return outcomeOK, nil
	}, nil)
	if !res.Interrupted || res.Scheduled < 21 || res.Scheduled >= spec.scheduled() {
		t.Fatalf("interrupted %v after %d scheduled calls; want interrupted after 21 to %d", res.Interrupted, res.Scheduled, spec.scheduled())
	}
	ended := 0
	for _, s := range res.Samples {
		ended += s.Ended
	}
	if res.Started+res.Dropped != res.Scheduled || ended != res.Started {
		t.Errorf("%d started + %d dropped of %d scheduled, %d ended", res.Started, res.Dropped, res.Scheduled, ended)
	}
	if len(res.Samples) == 0 || len(res.Samples) >= spec.seconds() {
		t.Errorf("%d samples, want the seconds begun before the interruption", len(res.Samples))
	}
	if n := sawCancelled.Load(); n != 0 {
		t.Errorf("%d calls ran with a cancelled context", n)
	}
}
