package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// The soak's verdicts (issue 18).
const (
	// p99Factor: the last minute's p99 may be at most this times the
	// second minute's.
	p99Factor = 1.5
	// flatTolerance: the last minute's mean RSS and goroutines may differ
	// from the second minute's by at most this share.
	flatTolerance = 0.10
	// fullWindow is the comparison window of a soak of at least
	// 3 × fullWindow: the second and the last minute.
	fullWindow = 60
)

// window is the whole seconds [From, To) of the soak.
type window struct {
	From int `json:"from_s"`
	To   int `json:"to_s"`
}

func (w window) String() string { return fmt.Sprintf("%d–%ds", w.From, w.To) }

// soakWindows returns the two windows the verdicts compare in a soak of n
// seconds: the second minute and the last one. A soak shorter than three
// minutes uses quarters instead (the second quarter and the last), so a
// short run still compares a warm period with the end.
func soakWindows(n int) (second, last window) {
	w := fullWindow
	if n < 3*fullWindow {
		w = max(n/4, 1)
	}
	return window{From: min(w, n-1), To: min(2*w, n)}, window{From: max(n-w, 0), To: n}
}

// windowStats summarizes the samples of a window.
type windowStats struct {
	Window     window        `json:"window"`
	Calls      int           `json:"calls"` // ended in the window
	Unexpected int           `json:"unexpected_errors"`
	P50        time.Duration `json:"p50_ns"`
	P90        time.Duration `json:"p90_ns"`
	P99        time.Duration `json:"p99_ns"`
	// Means over the seconds whose reading succeeded; NaN-free: 0 with
	// RSSN (GoroutinesN) 0 when none did.
	RSSMean        float64 `json:"rss_mean_bytes"`
	RSSN           int     `json:"rss_readings"`
	GoroutinesMean float64 `json:"goroutines_mean"`
	GoroutinesN    int     `json:"goroutine_readings"`
}

// statsOf pools the latencies of the window's seconds (the percentiles of
// the window, not a mean of the seconds' percentiles) and averages its
// gauges.
func statsOf(samples []soakSample, w window) windowStats {
	st := windowStats{Window: w}
	var lat []time.Duration
	var rss, gor float64
	for _, s := range samples {
		if s.T < w.From || s.T >= w.To {
			continue
		}
		st.Calls += s.Ended
		st.Unexpected += s.Unexpected
		lat = append(lat, s.lat...)
		if s.RSS >= 0 {
			rss += float64(s.RSS)
			st.RSSN++
		}
		if s.Goroutines >= 0 {
			gor += float64(s.Goroutines)
			st.GoroutinesN++
		}
	}
	l := summarize(lat)
	st.P50, st.P90, st.P99 = l.P50, l.P90, l.P99
	if st.RSSN > 0 {
		st.RSSMean = rss / float64(st.RSSN)
	}
	if st.GoroutinesN > 0 {
		st.GoroutinesMean = gor / float64(st.GoroutinesN)
	}
	return st
}

// periods cuts the soak into consecutive windows of the verdicts' width
// (minutes, or quarters of a short soak), for the report's table.
func periods(samples []soakSample) []windowStats {
	n := len(samples)
	second, _ := soakWindows(n)
	w := max(second.To-second.From, 1)
	var out []windowStats
	for from := 0; from < n; from += w {
		out = append(out, statsOf(samples, window{From: from, To: min(from+w, n)}))
	}
	return out
}

// soakTotals counts the whole soak.
type soakTotals struct {
	Seconds    float64 `json:"seconds"`
	Scheduled  int     `json:"scheduled"`
	Started    int     `json:"started"`
	Dropped    int     `json:"dropped"`
	OK         int     `json:"ok"`
	Expected   int     `json:"expected_errors"`
	Unexpected int     `json:"unexpected_errors"`
	// Rate is the calls started per second of the schedule.
	Rate float64 `json:"rate_per_s"`
	// GatewayCPUPerCall is the gateway process's CPU time over the soak
	// divided by the calls started; 0 when it could not be read.
	GatewayCPUPerCall time.Duration `json:"gateway_cpu_per_call_ns"`
	Latency           latency       `json:"latency"` // over every call
	// MaxSendLag is the latest any call was sent after its scheduled
	// time: large values mean the harness itself fell behind.
	MaxSendLag time.Duration `json:"max_send_lag_ns"`
}

// totalsOf adds up the samples.
func totalsOf(res loadResult, d time.Duration) soakTotals {
	t := soakTotals{Seconds: d.Seconds(), Scheduled: res.Scheduled, Started: res.Started, Dropped: res.Dropped}
	var cpu time.Duration
	cpuOK := len(res.Samples) > 0
	var lat []time.Duration
	for _, s := range res.Samples {
		t.OK += s.OK
		t.Expected += s.Expected
		t.Unexpected += s.Unexpected
		lat = append(lat, s.lat...)
		t.MaxSendLag = max(t.MaxSendLag, s.MaxLag)
		if s.GatewayCPU < 0 {
			cpuOK = false
		}
		cpu += max(s.GatewayCPU, 0)
	}
	t.Latency = summarize(lat)
	if t.Seconds > 0 {
		t.Rate = float64(t.Started) / t.Seconds
	}
	if cpuOK && t.Started > 0 {
		t.GatewayCPUPerCall = cpu / time.Duration(t.Started)
	}
	return t
}

// auditCount is what the gateway's audit log held after the soak.
type auditCount struct {
	// Rows are the tools/call records (kind "invocation"): one per call
	// the gateway received; OKRows those with success.
	Rows   int `json:"rows"`
	OKRows int `json:"ok_rows"`
	// ByKind counts every record by kind, for the record.
	ByKind map[string]int `json:"by_kind"`
	// Err is why the log could not be read; the verdict then misses.
	Err string `json:"error,omitempty"`
}

// verdict is one of the soak's pass/miss judgements.
type verdict struct {
	What   string `json:"what"`
	Target string `json:"target"`
	Got    string `json:"got"`
	Pass   bool   `json:"pass"`
}

// soakVerdicts judges the soak as issue 18 asks: p99 stable, RSS and
// goroutines flat, every call audited, no unexpected error.
func soakVerdicts(t soakTotals, second, last windowStats, audit auditCount) []verdict {
	var vs []verdict

	p99 := verdict{What: "p99 stable", Target: fmt.Sprintf("last %s ≤ %.1f× second %s", last.Window, p99Factor, second.Window)}
	switch {
	case second.Calls == 0 || last.Calls == 0:
		p99.Got = "no calls ended in a window"
	default:
		r := float64(last.P99) / float64(second.P99)
		p99.Got = fmt.Sprintf("%s vs %s (%.2f×)", fmtDur(last.P99), fmtDur(second.P99), r)
		p99.Pass = r <= p99Factor
	}
	vs = append(vs, p99)

	flat := func(what string, early, late float64, earlyN, lateN int, unit func(float64) string) verdict {
		v := verdict{What: what + " flat", Target: fmt.Sprintf("last %s mean within ±%.0f%% of second %s", last.Window, 100*flatTolerance, second.Window)}
		if earlyN == 0 || lateN == 0 || early <= 0 {
			v.Got = "not measured"
			return v
		}
		d := late/early - 1
		v.Got = fmt.Sprintf("%s vs %s (%+.1f%%)", unit(late), unit(early), 100*d)
		v.Pass = math.Abs(d) <= flatTolerance+1e-9 // 110/100 − 1 is 0.1000…01 in floating point
		return v
	}
	vs = append(vs,
		flat("RSS", second.RSSMean, last.RSSMean, second.RSSN, last.RSSN, func(b float64) string { return fmtMB(int64(b)) }),
		flat("goroutines", second.GoroutinesMean, last.GoroutinesMean, second.GoroutinesN, last.GoroutinesN,
			func(g float64) string { return fmt.Sprintf("%.0f", g) }))

	calls := t.OK + t.Expected + t.Unexpected
	aud := verdict{What: "every call audited", Target: "audit rows = calls made"}
	if audit.Err != "" {
		aud.Got = "audit log not read: " + audit.Err
	} else {
		aud.Got = fmt.Sprintf("%d rows (%d ok) for %d calls (%d ok)", audit.Rows, audit.OKRows, calls, t.OK)
		aud.Pass = audit.Rows == calls && calls > 0
	}
	vs = append(vs, aud)

	vs = append(vs, verdict{What: "no unexpected errors", Target: "0",
		Got: fmt.Sprintf("%d (and %d expected from the failing upstream)", t.Unexpected, t.Expected), Pass: t.Unexpected == 0 && calls > 0})
	return vs
}

// allPass reports whether every verdict passed.
func allPass(vs []verdict) bool {
	return len(vs) > 0 && !slices.ContainsFunc(vs, func(v verdict) bool { return !v.Pass })
}
