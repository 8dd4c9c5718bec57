package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Goal metrics.
const (
	metricDeltaP50 = "delta_p50" // gateway p50 − direct p50, in ns
	metricRatio    = "ratio"     // gateway calls/s ÷ direct calls/s
)

// goal is one acceptance target (issue A6) and how the run fared.
type goal struct {
	Scenario string  `json:"scenario"`
	What     string  `json:"what"`
	Metric   string  `json:"metric"`
	Limit    float64 `json:"limit"` // ns for delta_p50 (at most), a factor for ratio (at least)
	Got      float64 `json:"got"`
	Pass     bool    `json:"pass"`
}

// goalDefs are the targets, in the order they are printed.
var goalDefs = []struct {
	kind, scenario, what, metric string
	limit                        float64
}{
	{"calls", scenarioHTTP, "p50 latency added", metricDeltaP50, float64(250 * time.Microsecond)},
	{"calls", scenarioHTTP, "calls/s vs direct", metricRatio, 0.75},
	{"calls", scenarioStdio, "p50 latency added", metricDeltaP50, float64(100 * time.Microsecond)},
	{"calls", scenarioStdio, "calls/s vs direct HTTP", metricRatio, 1.25},
	{"list", listGateway, "tools/list p50 latency added", metricDeltaP50, float64(2 * time.Millisecond)},
}

// evaluate checks each goal whose two sides were measured.
func evaluate(r *report) []goal {
	var goals []goal
	for _, d := range goalDefs {
		var got float64
		var ok bool
		switch d.kind {
		case "calls":
			var direct, gw callResult
			direct, ok = findCall(r, scenarioDirect)
			if ok {
				gw, ok = findCall(r, d.scenario)
			}
			if !ok {
				continue
			}
			if d.metric == metricRatio {
				got = ratio(gw.Throughput.PerSecond, direct.Throughput.PerSecond)
			} else {
				got = float64(gw.Latency.P50 - direct.Latency.P50)
			}
		case "list":
			var direct, gw listResult
			direct, ok = findList(r, listDirect)
			if ok {
				gw, ok = findList(r, d.scenario)
			}
			if !ok {
				continue
			}
			got = float64(gw.Latency.P50 - direct.Latency.P50)
		}
		pass := got <= d.limit
		if d.metric == metricRatio {
			pass = got >= d.limit
		}
		goals = append(goals, goal{Scenario: d.scenario, What: d.what, Metric: d.metric, Limit: d.limit, Got: got, Pass: pass})
	}
	return goals
}

func findCall(r *report, scenario string) (callResult, bool) {
	for _, c := range r.Calls {
		if c.Scenario == scenario {
			return c, true
		}
	}
	return callResult{}, false
}

func findList(r *report, scenario string) (listResult, bool) {
	for _, l := range r.Lists {
		if l.Scenario == scenario {
			return l, true
		}
	}
	return listResult{}, false
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func writeJSON(w io.Writer, r *report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// writeTable prints the report for people: figures, differences to the
// direct baseline, and the goals.
func writeTable(w io.Writer, r *report) error {
	var b strings.Builder
	e, p := r.Env, r.Params
	fmt.Fprintf(&b, "switchboard bench  %s  %s/%s  %d CPUs (GOMAXPROCS %d)  %s", e.Date, e.OS, e.Arch, e.CPUs, e.GOMAXPROCS, e.GoVersion)
	if e.LoadAvg != "" {
		fmt.Fprintf(&b, "  load %s", e.LoadAvg)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "client: go-sdk mcp.Client, Streamable HTTP, one session per scenario; latency: %d sequential calls after %d warm-up;\n", p.Calls, p.Warmup)
	fmt.Fprintf(&b, "calls/s: %d concurrent callers on the session for %s after %s warm-up", p.Concurrency, p.Duration, p.ThroughputWarm)
	if p.Rounds > 1 {
		fmt.Fprintf(&b, "; %d rounds: latency over all of them, calls/s and CPU of the median round", p.Rounds)
	}
	b.WriteString("\n")
	if p.InProcess {
		b.WriteString("NOTE: -profile: the gateway ran inside the harness process, sharing its CPU with the client; do not compare these figures with a normal run\n")
	}

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(r.Calls) > 0 {
		direct, haveDirect := findCall(r, scenarioDirect)
		fmt.Fprintf(tw, "\n%-16s\tp50\tp90\tp99\tΔp50\tΔp99\tcalls/s\t÷ direct\terrors\t\n", "tools/call echo")
		for _, c := range r.Calls {
			dp50, dp99, rel := "—", "—", "—"
			if haveDirect && c.Scenario != scenarioDirect {
				dp50 = fmtDelta(c.Latency.P50 - direct.Latency.P50)
				dp99 = fmtDelta(c.Latency.P99 - direct.Latency.P99)
				rel = fmt.Sprintf("%.2f×", ratio(c.Throughput.PerSecond, direct.Throughput.PerSecond))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%d\t\n", pad(c.Scenario),
				fmtDur(c.Latency.P50), fmtDur(c.Latency.P90), fmtDur(c.Latency.P99), dp50, dp99,
				c.Throughput.PerSecond, rel, c.Throughput.Errors)
		}
	}
	if cpuMeasured(r.Calls) {
		fmt.Fprintf(tw, "\n%-16s\tclient\tgateway\tupstream\ttotal\tcores busy\t\n", "CPU per call")
		for _, c := range r.Calls {
			m := c.Throughput.CPUPerCall
			cell := func(role string) string {
				if d, ok := m[role]; ok {
					return fmtDur(d)
				}
				return "—"
			}
			var total time.Duration
			for _, d := range m {
				total += d
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\t\n", pad(c.Scenario),
				cell(roleClient), cell(roleGateway), cell(roleUpstream), fmtDur(total), c.Throughput.CoresBusy)
		}
	}
	if len(r.Lists) > 0 {
		direct, haveDirect := findList(r, listDirect)
		fmt.Fprintf(tw, "\n%-16s\ttools\tp50\tp90\tp99\tΔp50\tΔp99\t\n", "tools/list")
		for _, l := range r.Lists {
			dp50, dp99 := "—", "—"
			if haveDirect && l.Scenario != listDirect {
				dp50 = fmtDelta(l.Latency.P50 - direct.Latency.P50)
				dp99 = fmtDelta(l.Latency.P99 - direct.Latency.P99)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", pad(l.Scenario), l.Tools,
				fmtDur(l.Latency.P50), fmtDur(l.Latency.P90), fmtDur(l.Latency.P99), dp50, dp99)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(r.Goals) > 0 {
		gw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(gw, "\ngoal\t\ttarget\tgot\t")
		for _, g := range r.Goals {
			target, got := fmtGoal(g)
			verdict := "MISS"
			if g.Pass {
				verdict = "PASS"
			}
			fmt.Fprintf(gw, "%s\t%s\t%s\t%s\t%s\n", g.Scenario, g.What, target, got, verdict)
		}
		if err := gw.Flush(); err != nil {
			return err
		}
	}
	for _, f := range r.Profiles {
		if strings.HasSuffix(f, ".cpu.pprof") {
			fmt.Fprintf(&b, "\nprofile: go tool pprof -top -tagfocus=side=gateway %s", f)
		}
	}
	if len(r.Profiles) > 0 {
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func cpuMeasured(calls []callResult) bool {
	for _, c := range calls {
		if len(c.Throughput.CPUPerCall) > 0 {
			return true
		}
	}
	return false
}

// fmtGoal renders a goal's target and result in its unit.
func fmtGoal(g goal) (target, got string) {
	if g.Metric == metricRatio {
		return fmt.Sprintf("≥ %.2f×", g.Limit), fmt.Sprintf("%.2f×", g.Got)
	}
	return "≤ " + fmtDur(time.Duration(g.Limit)), fmtDelta(time.Duration(g.Got))
}

// fmtDur prints a duration with three significant digits in µs or ms.
func fmtDur(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	switch {
	case us < 1000:
		return fmt.Sprintf("%.0fµs", us)
	case us < 10_000:
		return fmt.Sprintf("%.2fms", us/1000)
	case us < 100_000:
		return fmt.Sprintf("%.1fms", us/1000)
	default:
		return fmt.Sprintf("%.0fms", us/1000)
	}
}

// fmtDelta is fmtDur with an explicit sign.
func fmtDelta(d time.Duration) string {
	if d < 0 {
		return "−" + fmtDur(-d)
	}
	return "+" + fmtDur(d)
}

// pad left-aligns a row name in the right-aligned table.
func pad(s string) string { return fmt.Sprintf("%-16s", s) }
