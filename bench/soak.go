package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite" // reads the gateway's audit log after the soak

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/demo"
)

// soakParams are the knobs of a soak (go run ./bench -soak).
type soakParams struct {
	Duration    time.Duration `json:"-"`
	DurationS   float64       `json:"duration_s"`
	Rate        float64       `json:"rate_per_s"`
	Upstreams   int           `json:"upstreams"`
	Slow        int           `json:"slow_upstreams"`
	ErrorRate   float64       `json:"failing_error_rate"`
	Clients     int           `json:"clients"`
	MaxInFlight int           `json:"max_in_flight"`
	Out         string        `json:"-"`
}

// Slow upstreams answer after a latency spread evenly over this range.
const (
	slowMin = 20 * time.Millisecond
	slowMax = 50 * time.Millisecond
)

// faultText is what the demo server's injected protocol errors say; a
// failed call to the failing upstream that carries it is expected.
const faultText = "injected fault"

// breakerText is in the gateway's answer to a call it did not send because
// the tool's circuit breaker is open.
const breakerText = "is OPEN: failing fast without calling server"

// soakUpstream is one of the soak's demo servers.
type soakUpstream struct {
	Name      string        `json:"name"`
	Latency   time.Duration `json:"latency_ns,omitempty"`
	ErrorRate float64       `json:"error_rate,omitempty"`
}

// soakUpstreams lays out the upstreams: the first p.Slow slow (20–50 ms),
// the last one failing at p.ErrorRate (when there are two or more), the
// rest plain.
func soakUpstreams(p soakParams) []soakUpstream {
	ups := make([]soakUpstream, p.Upstreams)
	for i := range ups {
		ups[i].Name = fmt.Sprintf("u%02d", i+1)
	}
	for i := range min(p.Slow, p.Upstreams) {
		l := slowMin
		if p.Slow > 1 {
			l += time.Duration(i) * (slowMax - slowMin) / time.Duration(p.Slow-1)
		}
		ups[i].Latency = l.Round(time.Millisecond)
	}
	if p.ErrorRate > 0 && p.Upstreams > 1 {
		ups[len(ups)-1].ErrorRate = p.ErrorRate
	}
	return ups
}

// soakServers is the gateway config of the upstreams, each a stdio demo
// server; nothing else is set, so the gateway runs its default pipeline
// (audit durable to the --store SQLite file).
func soakServers(bin string, ups []soakUpstream) string {
	var b strings.Builder
	b.WriteString("servers:\n")
	for _, u := range ups {
		args := []string{"demo-server"}
		if u.Latency > 0 {
			args = append(args, "--latency", u.Latency.String())
		}
		if u.ErrorRate > 0 {
			args = append(args, "--error-rate", strconv.FormatFloat(u.ErrorRate, 'g', -1, 64))
		}
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = yamlString(a)
		}
		fmt.Fprintf(&b, "  %s:\n    transport: stdio\n    command: %s\n    args: [%s]\n    auto_start: true\n",
			u.Name, yamlString(bin), strings.Join(quoted, ", "))
	}
	return b.String()
}

// soakReport is everything a soak measured; soak.json holds it.
type soakReport struct {
	Env       environment    `json:"environment"`
	LoadAtEnd string         `json:"loadavg_at_end,omitempty"`
	Params    soakParams     `json:"params"`
	Upstreams []soakUpstream `json:"upstreams"`
	Totals    soakTotals     `json:"totals"`
	Second    windowStats    `json:"second_window"`
	Last      windowStats    `json:"last_window"`
	Periods   []windowStats  `json:"periods"`
	Audit     auditCount     `json:"audit"`
	Verdicts  []verdict      `json:"verdicts"`
	Pass      bool           `json:"pass"`
	// Interrupted is set when the soak was stopped (Ctrl-C) before its
	// end: the figures cover the seconds it ran, and it does not pass.
	Interrupted bool         `json:"interrupted,omitempty"`
	Errors      []string     `json:"unexpected_errors_first,omitempty"`
	Goroutines  string       `json:"goroutines_source"`
	Samples     []soakSample `json:"samples"`
}

// runSoak runs the soak and writes its report into p.Out (a new temp dir
// when empty); it prints the report to stdout.
func runSoak(ctx context.Context, o *options, logger *slog.Logger, stdout, stderr io.Writer) error {
	p := o.soak
	if p.Out == "" {
		dir, err := os.MkdirTemp("", "switchboard-soak-")
		if err != nil {
			return fmt.Errorf("creating the report dir: %w", err)
		}
		p.Out = dir
	} else if err := os.MkdirAll(p.Out, 0o755); err != nil {
		return fmt.Errorf("creating the report dir: %w", err)
	}
	bin, tmp, cleanup, err := prepare(ctx, o, logger, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	ps := &procs{logger: logger}
	if o.verbose {
		ps.verbose = stderr
	}
	defer ps.closeAll()

	rep, err := soak(ctx, p, bin, &procGateways{procs: ps, bin: bin, dir: tmp}, logger)
	if err != nil {
		return err
	}
	if err := writeSoakFiles(p.Out, rep); err != nil {
		return err
	}
	if err := writeSoakMarkdown(stdout, rep); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "\nWritten: %s, %s, %s\n", filepath.Join(p.Out, soakMD), filepath.Join(p.Out, soakJSON), filepath.Join(p.Out, soakSVG)); err != nil {
		return err
	}
	if rep.Interrupted {
		return fmt.Errorf("soak interrupted after %d s (%w); the report covers what ran", len(rep.Samples), context.Cause(ctx))
	}
	return nil
}

// soak starts the gateway and its upstreams, runs the load, stops the
// gateway and reads its audit log.
func soak(ctx context.Context, p soakParams, bin string, gws *procGateways, logger *slog.Logger) (*soakReport, error) {
	ups := soakUpstreams(p)
	rep := &soakReport{Env: currentEnvironment(), Params: p, Upstreams: ups,
		Goroutines: "go_goroutines of the gateway's GET /metrics, scraped every second in the background; each second takes the latest scrape if it is at most 2 s old"}

	logger.Info("starting gateway", "scenario", "soak", "upstreams", len(ups))
	gw, err := gws.start(ctx, "gateway-soak", soakServers(bin, ups))
	if err != nil {
		return nil, err
	}
	stopped := false
	stopGateway := func() {
		if !stopped {
			stopped = true
			gw.stop()
		}
	}
	defer stopGateway()
	if err := waitCatalog(ctx, gw.base, len(ups), len(ups)*demo.BuiltinTools); err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}

	pool := make([]*client, p.Clients)
	defer func() {
		for _, c := range pool {
			if c != nil {
				c.close()
			}
		}
	}()
	for i := range pool {
		if pool[i], err = connect(ctx, gw.endpoint, p.MaxInFlight/p.Clients+2); err != nil {
			return nil, err
		}
	}
	for _, u := range ups {
		if err := pool[0].requireTool(ctx, u.Name+".echo"); err != nil {
			return nil, err
		}
	}

	call := func(ctx context.Context, seq int) (outcome, error) {
		u := ups[seq%len(ups)]
		err := pool[seq%len(pool)].callText(ctx, u.Name+".echo", "soak "+strconv.Itoa(seq))
		return classify(u, err), err
	}
	// Goroutines come from the gateway's /metrics, scraped in the
	// background: an overloaded gateway answering a scrape late must not
	// delay the RSS and CPU readings, nor lose the second's goroutines
	// when it answers within goroutinesFresh.
	gors := &goroutineWatcher{url: gw.base + "/metrics", client: &http.Client{Timeout: scrapeTimeout}}
	wctx, stopWatch := context.WithCancel(ctx)
	var watchDone sync.WaitGroup
	watchDone.Go(func() { gors.run(wctx) })
	defer func() { stopWatch(); watchDone.Wait() }()
	if err := waitScrape(ctx, gors); err != nil {
		logger.Warn("the gateway's go_goroutines cannot be read: the goroutines verdict will miss", "error", err)
	}
	read := func() gaugeReading {
		g := gaugeReading{RSS: -1, Goroutines: gors.latest(time.Now()), CPU: -1}
		if n, ok := processRSS(gw.pid); ok {
			g.RSS = n
		}
		if d, ok := processCPU(gw.pid); ok {
			g.CPU = d
		}
		return g
	}

	spec := loadSpec{Rate: p.Rate, Duration: p.Duration, MaxInFlight: p.MaxInFlight}
	logger.Info("soak", "duration", p.Duration, "rate", p.Rate, "upstreams", len(ups), "clients", p.Clients)
	res := runOpenLoop(ctx, spec, call, read)
	// Interrupted (Ctrl-C), the soak still reports what it saw.
	ctx = context.WithoutCancel(ctx)
	stopWatch()
	watchDone.Wait()

	// The audit log is read once the gateway has stopped, so every record
	// it was going to write is in the file.
	for _, c := range pool {
		c.close()
	}
	pool = nil
	stopGateway()
	rep.Audit = countAudit(ctx, gw.store)

	d := p.Duration
	if res.Interrupted {
		rep.Interrupted = true
		d = time.Duration(len(res.Samples)) * time.Second
	}
	rep.Totals = totalsOf(res, d)
	n := len(res.Samples)
	second, last := soakWindows(n)
	rep.Second, rep.Last = statsOf(res.Samples, second), statsOf(res.Samples, last)
	rep.Periods = periods(res.Samples)
	rep.Verdicts = soakVerdicts(rep.Totals, rep.Second, rep.Last, rep.Audit)
	rep.Pass = allPass(rep.Verdicts) && !rep.Interrupted
	rep.Errors = res.Errors
	rep.Samples = res.Samples
	rep.LoadAtEnd = currentEnvironment().LoadAvg
	return rep, nil
}

// classify sorts a call's end: an error of the failing upstream carrying
// the demo's injected fault is expected, and so is the gateway failing fast
// on that upstream while its circuit breaker is open after a run of those
// faults (the pipeline doing its job, not a fault of the gateway); any
// other error is not.
func classify(u soakUpstream, err error) outcome {
	switch {
	case err == nil:
		return outcomeOK
	case u.ErrorRate > 0 && strings.Contains(err.Error(), faultText):
		return outcomeExpected
	case u.ErrorRate > 0 && strings.Contains(err.Error(), breakerText) &&
		strings.Contains(err.Error(), fmt.Sprintf("server %q", u.Name)):
		return outcomeExpected
	default:
		return outcomeUnexpected
	}
}

// callText makes one tools/call of an echo tool with text and checks the
// answer is that text.
func (c *client) callText(ctx context.Context, tool, text string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]string{"text": text}})
	if err != nil {
		return fmt.Errorf("calling %s: %w", tool, err)
	}
	if res.IsError {
		return fmt.Errorf("calling %s: tool error: %s", tool, contentText(res.Content))
	}
	if got := contentText(res.Content); got != text {
		return fmt.Errorf("calling %s: got %q, want %q", tool, got, text)
	}
	return nil
}

// How the goroutines are scraped: each scrape may take scrapeTimeout; a
// second's reading is the latest scrape that ended at most goroutinesFresh
// before it (else none).
const (
	scrapeTimeout   = 5 * time.Second
	goroutinesFresh = 2 * time.Second
	scrapeEvery     = time.Second
)

// goroutineWatcher scrapes the gateway's go_goroutines in the background.
type goroutineWatcher struct {
	url    string
	client *http.Client

	mu    sync.Mutex
	value int
	at    time.Time // when value was read; zero = never
}

// run scrapes every scrapeEvery (or back to back when a scrape is slower)
// until ctx ends.
func (w *goroutineWatcher) run(ctx context.Context) {
	for ctx.Err() == nil {
		start := time.Now()
		if n, err := scrapeGoroutines(ctx, w.client, w.url); err == nil {
			w.mu.Lock()
			w.value, w.at = n, time.Now()
			w.mu.Unlock()
		}
		if sleep(ctx, scrapeEvery-time.Since(start)) != nil {
			return
		}
	}
}

// waitScrape waits until w has read the goroutines once, so the first
// second of the load has its reading too.
func waitScrape(ctx context.Context, w *goroutineWatcher) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for w.latest(time.Now()) < 0 {
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("no scrape of %s succeeded: %w", w.url, err)
		}
	}
	return nil
}

// latest is the last scraped count if it is fresh at now, else -1.
func (w *goroutineWatcher) latest(now time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at.IsZero() || now.Sub(w.at) > goroutinesFresh {
		return -1
	}
	return w.value
}

// scrapeGoroutines reads go_goroutines from a Prometheus text exposition.
func scrapeGoroutines(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseGoroutines(resp.Body)
}

// parseGoroutines finds the sample of go_goroutines (a gauge without
// labels) in a Prometheus text exposition.
func parseGoroutines(r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "go_goroutines ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("go_goroutines: bad value %q", f[0])
		}
		return int(v), nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no go_goroutines in the metrics")
}

// countAudit counts the records of the gateway's SQLite audit log.
func countAudit(ctx context.Context, path string) auditCount {
	a := auditCount{ByKind: map[string]int{}}
	if path == "" {
		a.Err = "the gateway's store is unknown"
		return a
	}
	if _, err := os.Stat(path); err != nil {
		a.Err = err.Error()
		return a
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		a.Err = err.Error()
		return a
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT kind, success, COUNT(*) FROM mcp_invocations GROUP BY kind, success`)
	if err != nil {
		a.Err = err.Error()
		return a
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var success bool
		var n int
		if err := rows.Scan(&kind, &success, &n); err != nil {
			a.Err = err.Error()
			return a
		}
		a.ByKind[kind] += n
		if kind == audit.KindInvocation {
			a.Rows += n
			if success {
				a.OKRows += n
			}
		}
	}
	if err := rows.Err(); err != nil {
		a.Err = err.Error()
	}
	return a
}
