package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callTimeout bounds one request, so a stuck server fails the run instead
// of hanging it.
const callTimeout = 30 * time.Second

// echoText is what every tools/call sends and expects back.
const echoText = "switchboard bench"

var echoArgs = json.RawMessage(`{"text":"` + echoText + `"}`)

// client is one MCP session, the unit every scenario measures over.
type client struct {
	session *mcp.ClientSession
	http    *http.Transport
}

// connect opens one Streamable HTTP session to endpoint. The HTTP client
// keeps enough idle connections for every concurrent caller: the default
// (2 per host) would make the client open and close connections under load
// and measure that instead of the server.
func connect(ctx context.Context, endpoint string, conns int) (*client, error) {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns + 8,
		MaxIdleConnsPerHost: conns + 8,
		IdleConnTimeout:     90 * time.Second,
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "switchboard-bench", Version: "dev"}, nil)
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: tr},
		MaxRetries: -1, // a dropped stream is a failure to report, not to hide
	}, nil)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("connecting to %s: %w", endpoint, err)
	}
	return &client{session: s, http: tr}, nil
}

func (c *client) close() {
	_ = c.session.Close()
	c.http.CloseIdleConnections()
}

// callEcho makes one tools/call of the echo tool and checks the answer is
// the echo, so a benchmark of fast errors cannot pass for a fast gateway.
func (c *client) callEcho(ctx context.Context, tool string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: echoArgs})
	if err != nil {
		return fmt.Errorf("calling %s: %w", tool, err)
	}
	if res.IsError {
		return fmt.Errorf("calling %s: tool error: %s", tool, contentText(res.Content))
	}
	if got := contentText(res.Content); got != echoText {
		return fmt.Errorf("calling %s: got %q, want %q", tool, got, echoText)
	}
	return nil
}

// listAll lists every tool, following pagination, as a client that wants
// the whole catalog must.
func (c *client) listAll(ctx context.Context) (int, error) {
	n, _, err := c.listPages(ctx)
	return n, err
}

// listPages is listAll that also counts the pages.
func (c *client) listPages(ctx context.Context) (tools, pages int, err error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	params := &mcp.ListToolsParams{}
	for {
		res, err := c.session.ListTools(ctx, params)
		if err != nil {
			return tools, pages, fmt.Errorf("listing tools: %w", err)
		}
		tools += len(res.Tools)
		pages++
		if res.NextCursor == "" {
			return tools, pages, nil
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

func contentText(cs []mcp.Content) string {
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

// latency is the distribution of sequential request times.
type latency struct {
	N    int           `json:"n"`
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	Max  time.Duration `json:"max_ns"`
	Mean time.Duration `json:"mean_ns"`
}

// summarize computes the distribution of ds (which it sorts).
// Percentiles use the nearest-rank method: p50 of 2,000 samples is the
// 1,000th smallest, p99 the 1,980th.
func summarize(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return latency{
		N:    len(ds),
		P50:  percentile(ds, 50),
		P90:  percentile(ds, 90),
		P99:  percentile(ds, 99),
		Max:  ds[len(ds)-1],
		Mean: sum / time.Duration(len(ds)),
	}
}

// percentile returns the nearest-rank p-th percentile of sorted ds.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	rank = max(rank, 1)
	return sorted[rank-1]
}

// measureLatency runs warmup calls of op, then n timed ones, one at a
// time, and returns their durations.
func measureLatency(ctx context.Context, warmup, n int, op func(context.Context) error) ([]time.Duration, error) {
	for range warmup {
		if err := op(ctx); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	ds := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		err := op(ctx)
		d := time.Since(start)
		if err != nil {
			return nil, err
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// throughput is the rate of completed calls with concurrent callers.
type throughput struct {
	Workers   int     `json:"workers"`
	Calls     int64   `json:"calls"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"calls_per_s"`
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
	// CPUPerCall is the CPU time each process role (client, gateway,
	// upstream) spent per completed call during the window; empty where it
	// cannot be measured (not Linux, or -profile).
	CPUPerCall map[string]time.Duration `json:"cpu_per_call_ns,omitempty"`
	// CoresBusy is the CPU time of all roles divided by the window: near the
	// number of CPUs means the run was CPU-bound.
	CoresBusy float64 `json:"cores_busy,omitempty"`
	// Rounds lists the calls/s of every round when there were several;
	// the figures above are those of the median round.
	Rounds []float64 `json:"rounds_calls_per_s,omitempty"`
}

// maxErrorFraction is the share of failed calls above which a throughput
// figure is rejected rather than reported.
const maxErrorFraction = 0.01

// measureThroughput runs op from workers goroutines; after warm it counts
// the calls that complete during d. Calls in flight when the window closes
// are allowed to finish (not cancelled), so the server sees no
// cancellation storm at the end. cpu, if not nil, samples the processes'
// CPU times at both ends of the window.
func measureThroughput(ctx context.Context, workers int, warm, d time.Duration, op func(context.Context) error, cpu func() map[string]time.Duration) (throughput, error) {
	if cpu == nil {
		cpu = func() map[string]time.Duration { return nil }
	}
	var (
		ok, failed atomic.Int64
		stop       atomic.Bool
		errOnce    sync.Once
		firstErr   error
		wg         sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				if err := op(ctx); err != nil {
					if ctx.Err() != nil {
						return
					}
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
					continue
				}
				ok.Add(1)
			}
		})
	}
	defer wg.Wait()
	defer stop.Store(true)

	if err := sleep(ctx, warm); err != nil {
		return throughput{}, err
	}
	cpu0, c0, f0, t0 := cpu(), ok.Load(), failed.Load(), time.Now()
	if err := sleep(ctx, d); err != nil {
		return throughput{}, err
	}
	c1, f1, t1, cpu1 := ok.Load(), failed.Load(), time.Now(), cpu()
	stop.Store(true)
	wg.Wait()

	secs := t1.Sub(t0).Seconds()
	r := throughput{Workers: workers, Calls: c1 - c0, Seconds: secs, PerSecond: float64(c1-c0) / secs, Errors: f1 - f0}
	if firstErr != nil {
		r.FirstErr = firstErr.Error()
	}
	r.CPUPerCall, r.CoresBusy = perCall(cpu0, cpu1, r.Calls, secs)
	if total := r.Calls + r.Errors; total == 0 || float64(r.Errors) > maxErrorFraction*float64(total) {
		return r, fmt.Errorf("%d of %d concurrent calls failed; first: %v", r.Errors, total, firstErr)
	}
	return r, nil
}

// perCall divides the CPU each role used between two samples by the calls
// completed meanwhile, and the total by the window's seconds.
func perCall(before, after map[string]time.Duration, calls int64, secs float64) (map[string]time.Duration, float64) {
	if calls <= 0 || secs <= 0 || len(after) == 0 {
		return nil, 0
	}
	out := make(map[string]time.Duration, len(after))
	var total time.Duration
	for role, end := range after {
		used := end - before[role]
		total += used
		out[role] = used / time.Duration(calls)
	}
	return out, total.Seconds() / secs
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// errNoTool is returned when the session does not offer the tool to call,
// typically because the gateway failed to connect its upstream.
var errNoTool = errors.New("tool not listed")

// requireTool checks the session lists name.
func (c *client) requireTool(ctx context.Context, name string) error {
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing tools: %w", err)
		}
		if t.Name == name {
			return nil
		}
	}
	return fmt.Errorf("%w: %q", errNoTool, name)
}
