package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Files of a soak report.
const (
	soakJSON = "soak.json"
	soakMD   = "soak.md"
	soakSVG  = "soak.svg"
)

// writeSoakFiles writes soak.json, soak.md and soak.svg into dir.
func writeSoakFiles(dir string, r *soakReport) error {
	var j bytes.Buffer
	enc := json.NewEncoder(&j)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encoding %s: %w", soakJSON, err)
	}
	var md, svg bytes.Buffer
	if err := writeSoakMarkdown(&md, r); err != nil {
		return err
	}
	if err := writeSoakSVG(&svg, r); err != nil {
		return err
	}
	for name, b := range map[string][]byte{soakJSON: j.Bytes(), soakMD: md.Bytes(), soakSVG: svg.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("writing the soak report: %w", err)
		}
	}
	return nil
}

// writeSoakMarkdown writes the report people read: the setup, the totals,
// the verdicts and a table per period.
func writeSoakMarkdown(w io.Writer, r *soakReport) error {
	var b strings.Builder
	e, p, t := r.Env, r.Params, r.Totals
	fmt.Fprintf(&b, "# switchboard soak, %s\n\n", e.Date)
	fmt.Fprintf(&b, "%s/%s, %d CPUs (GOMAXPROCS %d), %s; load average %s at the start, %s at the end.\n\n",
		e.OS, e.Arch, e.CPUs, e.GOMAXPROCS, e.GoVersion, orDash(e.LoadAvg), orDash(r.LoadAtEnd))
	fmt.Fprintf(&b, "**Setup.** One `switchboard serve` (its default pipeline: audit durable to its SQLite store) in front of %d stdio demo servers%s. "+
		"Open-loop load of %.0f tools/call per second for %s, spread round-robin over the upstreams' `echo` and over %d go-sdk clients "+
		"(Streamable HTTP to `/mcp`); at most %d calls in flight, calls due beyond that are dropped and counted. Every answer is checked to be the echo. "+
		"Latency is from sending a call to its answer, filed in the second the call ended.\n\n",
		len(r.Upstreams), describeUpstreams(r.Upstreams), p.Rate, p.Duration, p.Clients, p.MaxInFlight)

	if r.Interrupted {
		fmt.Fprintf(&b, "**Interrupted** after %d of %d seconds: the figures cover the seconds that ran, and the soak does not pass.\n\n",
			len(r.Samples), int(r.Params.Duration/time.Second))
	}
	verdict := "**PASS**"
	if !r.Pass {
		verdict = "**MISS**"
	}
	fmt.Fprintf(&b, "## Verdicts: %s\n\n", verdict)
	b.WriteString("| verdict | target | got | |\n|---|---|---|---|\n")
	for _, v := range r.Verdicts {
		pm := "MISS"
		if v.Pass {
			pm = "PASS"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", v.What, v.Target, v.Got, pm)
	}
	if len(r.Samples) < 3*fullWindow {
		fmt.Fprintf(&b, "\nThe soak is shorter than %d minutes: the windows compared are its second and last quarters, not minutes.\n", 3*fullWindow/60)
	}

	b.WriteString("\n## Totals\n\n")
	fmt.Fprintf(&b, "- calls: %d scheduled, %d sent (%.1f/s), %d dropped (in-flight bound); every call sent at most %s after its scheduled time\n",
		t.Scheduled, t.Started, t.Rate, t.Dropped, fmtDur(t.MaxSendLag))
	fmt.Fprintf(&b, "- answers: %d ok, %d expected errors (the failing upstream), %d unexpected errors\n", t.OK, t.Expected, t.Unexpected)
	fmt.Fprintf(&b, "- latency over all calls: p50 %s, p90 %s, p99 %s, max %s\n", fmtDur(t.Latency.P50), fmtDur(t.Latency.P90), fmtDur(t.Latency.P99), fmtDur(t.Latency.Max))
	if t.GatewayCPUPerCall > 0 {
		fmt.Fprintf(&b, "- gateway CPU per call: %s (the gateway process only, whole soak)\n", fmtDur(t.GatewayCPUPerCall))
	}
	if r.Audit.Err != "" {
		fmt.Fprintf(&b, "- audit log: not read (%s)\n", r.Audit.Err)
	} else {
		fmt.Fprintf(&b, "- audit log (read after the gateway stopped): %d tools/call records, %d of them successful; records by kind: %s\n",
			r.Audit.Rows, r.Audit.OKRows, fmtKinds(r.Audit.ByKind))
	}
	fmt.Fprintf(&b, "- goroutines: %s\n", r.Goroutines)

	b.WriteString("\n## Over time\n\n")
	b.WriteString("| period | calls | p50 | p90 | p99 | RSS mean | goroutines mean | unexpected errors |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Periods {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %d |\n", s.Window, s.Calls, fmtDur(s.P50), fmtDur(s.P90), fmtDur(s.P99),
			meanMB(s.RSSMean, s.RSSN), meanCount(s.GoroutinesMean, s.GoroutinesN), s.Unexpected)
	}
	fmt.Fprintf(&b, "\nPer second: `%s` (samples); plot: `%s` (latency percentiles, RSS and goroutines over time).\n", soakJSON, soakSVG)

	if len(r.Errors) > 0 {
		b.WriteString("\n## First unexpected errors\n\n")
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "- `%s`\n", strings.ReplaceAll(e, "`", "'"))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// describeUpstreams says which upstreams are slow and which one fails.
func describeUpstreams(ups []soakUpstream) string {
	var slow, failing []string
	for _, u := range ups {
		if u.Latency > 0 {
			slow = append(slow, fmt.Sprintf("%s %s", u.Name, u.Latency))
		}
		if u.ErrorRate > 0 {
			failing = append(failing, fmt.Sprintf("%s fails %.0f%% of its calls", u.Name, 100*u.ErrorRate))
		}
	}
	var parts []string
	if len(slow) > 0 {
		parts = append(parts, "slow: "+strings.Join(slow, ", "))
	}
	parts = append(parts, failing...)
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

func fmtKinds(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func meanMB(v float64, n int) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f MB", v/mb)
}

func meanCount(v float64, n int) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", v)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
