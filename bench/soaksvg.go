package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// The soak plot: three panels over the same time axis (latency
// percentiles, the gateway's RSS, its goroutines), hand-written SVG so the
// harness needs no plotting dependency.
const (
	svgWidth   = 960
	svgLeft    = 80  // room for the y labels
	svgRight   = 150 // room for the legend
	svgTop     = 72
	svgGap     = 70 // between panels: the x labels and the next title
	plotWidth  = svgWidth - svgLeft - svgRight
	latHeight  = 260
	gaugeHight = 150
)

// series is one line of a panel; NaN values leave a gap.
type series struct {
	name  string
	color string
	ys    []float64
}

// panel is one chart of the plot.
type panel struct {
	title, unit string
	height      int
	lines       []series
}

// writeSoakSVG draws the soak's samples.
func writeSoakSVG(w io.Writer, r *soakReport) error {
	n := len(r.Samples)
	lat := func(pick func(soakSample) float64) []float64 {
		ys := make([]float64, n)
		for i, s := range r.Samples {
			ys[i] = math.NaN()
			if s.Ended > 0 {
				ys[i] = pick(s)
			}
		}
		return ys
	}
	ms := func(f func(soakSample) int64) func(soakSample) float64 {
		return func(s soakSample) float64 { return float64(f(s)) / 1e6 }
	}
	rss, gor := make([]float64, n), make([]float64, n)
	for i, s := range r.Samples {
		rss[i], gor[i] = math.NaN(), math.NaN()
		if s.RSS >= 0 {
			rss[i] = float64(s.RSS) / mb
		}
		if s.Goroutines >= 0 {
			gor[i] = float64(s.Goroutines)
		}
	}
	panels := []panel{
		{title: "tools/call latency (calls ended in each second)", unit: "ms", height: latHeight, lines: []series{
			{"p50", "#1f77b4", lat(ms(func(s soakSample) int64 { return int64(s.P50) }))},
			{"p90", "#ff7f0e", lat(ms(func(s soakSample) int64 { return int64(s.P90) }))},
			{"p99", "#d62728", lat(ms(func(s soakSample) int64 { return int64(s.P99) }))},
		}},
		{title: "gateway resident memory (VmRSS)", unit: "MB", height: gaugeHight, lines: []series{{"RSS", "#2ca02c", rss}}},
		{title: "gateway goroutines (go_goroutines)", unit: "", height: gaugeHight, lines: []series{{"goroutines", "#9467bd", gor}}},
	}
	height := svgTop + 45 // below the last panel: its x labels and axis title
	for i, p := range panels {
		height += p.height
		if i > 0 {
			height += svgGap
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgWidth, height)
	title := fmt.Sprintf("switchboard soak %s: %.0f calls/s over %d upstreams for %s", r.Env.Date, r.Params.Rate, len(r.Upstreams), r.Params.Duration)
	verdict := "PASS"
	if !r.Pass {
		verdict = "MISS"
	}
	if r.Interrupted {
		verdict += fmt.Sprintf(" (interrupted after %d s)", n)
	}
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s — %s</text>`+"\n", svgLeft, esc(title), verdict)

	y := svgTop
	for _, p := range panels {
		drawPanel(&b, p, y, n, r.Second.Window, r.Last.Window)
		y += p.height + svgGap
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// drawPanel draws one panel whose plot area starts at y (its title above).
func drawPanel(b *strings.Builder, p panel, top, n int, second, last window) {
	h := float64(p.height)
	ymax := 0.0
	for _, l := range p.lines {
		for _, v := range l.ys {
			if !math.IsNaN(v) {
				ymax = math.Max(ymax, v)
			}
		}
	}
	step := niceStep(ymax)
	ymax = math.Max(step, math.Ceil(ymax/step)*step)
	xspan := float64(max(n, 1))
	px := func(t float64) float64 { return svgLeft + t/xspan*plotWidth }
	py := func(v float64) float64 { return float64(top) + h - v/ymax*h }

	title := p.title
	if p.unit != "" {
		title += " [" + p.unit + "]"
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", svgLeft, top-10, esc(title))
	// The compared windows, shaded, so a reader sees what the verdicts read.
	for _, w := range []struct {
		win   window
		label string
	}{{second, "2nd window"}, {last, "last window"}} {
		if w.win.To <= w.win.From {
			continue
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#eeeeee"/>`+"\n",
			px(float64(w.win.From)), top, px(float64(w.win.To))-px(float64(w.win.From)), p.height)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" fill="#888888" font-size="10">%s</text>`+"\n", px(float64(w.win.From))+3, top+12, w.label)
	}
	// Y grid and labels.
	for v := 0.0; v <= ymax+step/2; v += step {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>`+"\n", svgLeft, py(v), svgLeft+plotWidth, py(v))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", svgLeft-6, py(v)+4, fmtTick(v, step))
	}
	// X ticks: time from the start, m:ss.
	xstep := niceTimeStep(float64(n))
	for t := 0.0; t <= float64(n)+xstep/2; t += xstep {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333333"/>`+"\n", px(t), py(0), px(t), py(0)+5)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(t), py(0)+18, fmtClock(int(t)))
	}
	fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="middle" fill="#555555">time since the start of the load [m:ss]</text>`+"\n",
		svgLeft+plotWidth/2, py(0)+34)
	// Axes.
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="#333333"/>`+"\n", svgLeft, top, svgLeft, py(0))
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#333333"/>`+"\n", svgLeft, py(0), svgLeft+plotWidth, py(0))
	// Lines: each sample at the middle of its second; NaN breaks the line.
	for i, l := range p.lines {
		var d strings.Builder
		pen := false
		for t, v := range l.ys {
			if math.IsNaN(v) {
				pen = false
				continue
			}
			cmd := "L"
			if !pen {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, px(float64(t)+0.5), py(v))
			pen = true
		}
		if d.Len() > 0 {
			fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.5"><title>%s</title></path>`+"\n",
				strings.TrimSpace(d.String()), l.color, esc(l.name))
		}
		// Legend, right of the plot.
		ly := top + 14 + 18*i
		lx := svgLeft + plotWidth + 16
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", lx, ly-4, lx+22, ly-4, l.color)
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", lx+28, ly, esc(l.name))
	}
}

// niceStep is a 1, 2 or 5 × 10^k step that cuts 0..max into about five.
func niceStep(max float64) float64 {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		return 1
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch norm := raw / mag; {
	case norm <= 1:
		return mag
	case norm <= 2:
		return 2 * mag
	case norm <= 5:
		return 5 * mag
	default:
		return 10 * mag
	}
}

// niceTimeStep is a tick step in seconds for a span of n seconds: whole
// seconds, then 5/10/15/30 s, then whole minutes.
func niceTimeStep(n float64) float64 {
	for _, s := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600} {
		if n/s <= 10 {
			return s
		}
	}
	return math.Ceil(n/10/3600) * 3600
}

// fmtTick prints a y label with as many decimals as the step needs.
func fmtTick(v, step float64) string {
	if step >= 1 {
		return fmt.Sprintf("%.0f", v)
	}
	decimals := int(math.Ceil(-math.Log10(step)))
	return fmt.Sprintf("%.*f", decimals, v)
}

// fmtClock prints seconds as m:ss.
func fmtClock(s int) string { return fmt.Sprintf("%d:%02d", s/60, s%60) }

func esc(s string) string { return html.EscapeString(s) }
