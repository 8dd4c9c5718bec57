package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// healthFailures is how many failed probes in a row put a server in ERROR.
const healthFailures = 3

// lifecycle is a server's configuration resolved against the Manager's
// defaults: every value the supervisor needs, in one place.
type lifecycle struct {
	startup, shutdown, drain time.Duration

	restart        bool
	maxRestarts    int
	window         time.Duration
	backoffInitial time.Duration
	backoffMax     time.Duration

	onDemand bool
	idle     time.Duration // 0 = never stop for idleness

	health         healthConfig
	degradedRate   float64
	degradedWindow int

	maxResult int // bytes of one message from the server

	// runner is the package runner the command is ("npx", "docker run"),
	// whose first start gets firstStartFactor times the startup timeout;
	// "" for other commands and transports.
	runner string
}

// firstStartFactor is how many startup timeouts a package runner's start
// may take until the server first connects: npx, uvx or docker run
// download the server on their first start, which routinely takes longer
// than a start, and killing them mid-download breaks their cache.
const firstStartFactor = 4

// packageRunner reports which package runner command (with args) is: one
// that may download the server before running it. The command is matched by
// its base name, so /usr/local/bin/npx counts; "" means none.
func packageRunner(command string, args []string) string {
	base := filepath.Base(command)
	base = strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(base), ".exe"), ".cmd")
	switch base {
	case "npx", "pnpx", "bunx", "uvx":
		return base
	}
	sub := ""
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			sub = a
			break
		}
	}
	switch {
	case (base == "pnpm" || base == "yarn" || base == "bun") && (sub == "dlx" || sub == "x"),
		(base == "docker" || base == "podman") && sub == "run",
		base == "pipx" && sub == "run":
		return base + " " + sub
	case base == "uv" && sub == "tool":
		return "uv tool"
	}
	return ""
}

type healthConfig struct {
	method            string
	tool              string
	args              map[string]any
	url               string
	interval, timeout time.Duration
}

// resolveLifecycle applies the server's overrides to the Manager's defaults
// (o has its defaults filled in).
func resolveLifecycle(cfg *config.Server, o *Options) lifecycle {
	lc := lifecycle{
		startup:        cfg.StartupTimeout.Or(o.ConnectTimeout),
		shutdown:       cfg.ShutdownTimeout.Or(o.ShutdownTimeout),
		drain:          o.DrainTimeout,
		restart:        !o.Restart.Disabled,
		maxRestarts:    o.Restart.MaxAttempts,
		window:         o.Restart.Window,
		backoffInitial: o.Restart.BackoffInitial,
		backoffMax:     o.Restart.BackoffMax,
		onDemand:       cfg.StartOnDemand,
		idle:           cfg.IdleTimeout.Duration(),
		degradedRate:   o.DegradedErrorRate,
		degradedWindow: o.DegradedWindowCalls,
		maxResult:      o.MaxResultBytes,
		health: healthConfig{
			method:   cfg.HealthMethod(),
			url:      cfg.HealthCheckURL,
			interval: o.HealthInterval,
			timeout:  o.HealthTimeout,
		},
	}
	if cfg.Transport == config.TransportStdio {
		lc.runner = packageRunner(cfg.Command, cfg.Args)
	}
	if cfg.RestartOnFailure != nil {
		lc.restart = *cfg.RestartOnFailure
	}
	if cfg.MaxResultBytes > 0 {
		lc.maxResult = cfg.MaxResultBytes
	}
	if cfg.MaxRestartAttempts != nil && *cfg.MaxRestartAttempts > 0 {
		lc.maxRestarts = *cfg.MaxRestartAttempts
	}
	if h := cfg.HealthCheck; h != nil {
		lc.health.tool = h.Tool
		lc.health.args = h.Args
		lc.health.interval = h.Interval.Or(lc.health.interval)
		lc.health.timeout = h.Timeout.Or(lc.health.timeout)
	}
	lc.health.timeout = min(lc.health.timeout, lc.health.interval)
	return lc
}

// backoff is the delay before restart number n+1 of a run of failures:
// exponential from backoffInitial, capped at backoffMax, with "equal jitter"
// (a random point in the upper half), so that servers that failed together
// do not restart together.
func (lc *lifecycle) backoff(n int) time.Duration {
	d := lc.backoffInitial
	for i := 0; i < n && d < lc.backoffMax; i++ {
		d *= 2
	}
	d = min(d, lc.backoffMax)
	half := d / 2
	return half + rand.N(d-half+1)
}

// callStats is the outcome of a session's recent calls, for DEGRADED.
// Relayed calls record into it concurrently; the supervisor reads it.
type callStats struct {
	mu     sync.Mutex
	ring   []bool // failed?, circular
	next   int
	n      int // filled entries
	failed int // failed entries
	over   bool
}

func newCallStats(window int) *callStats {
	return &callStats{ring: make([]bool, window)}
}

// record adds a call's outcome and reports whether the DEGRADED condition
// (a full window with more than rate failed) changed.
func (c *callStats) record(failed bool, rate float64) (changed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == len(c.ring) {
		if c.ring[c.next] {
			c.failed--
		}
	} else {
		c.n++
	}
	c.ring[c.next] = failed
	if failed {
		c.failed++
	}
	c.next = (c.next + 1) % len(c.ring)
	over := c.n == len(c.ring) && float64(c.failed)/float64(c.n) > rate
	changed = over != c.over
	c.over = over
	return changed
}

// rate returns the failed share of the calls in the window and their number.
func (c *callStats) rate() (float64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		return 0, 0
	}
	return float64(c.failed) / float64(c.n), c.n
}

// callFailed says whether a relayed call's error counts against the
// server's error rate: not when the caller gave up, nor when the server
// rejected the request as invalid (the caller's mistake, not the server's),
// nor when the reply was over max_result_bytes (the server answered; the
// answer was too large for this gateway).
func callFailed(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(ctx.Err(), context.Canceled) || IsResultTooLarge(err) || isUserAuthRequired(err) {
		return false
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		switch rpcErr.Code {
		case jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
			return false
		}
	}
	return true
}

// probe is a health probe in progress, owned by the supervisor.
type probe struct {
	done chan probeResult // capacity 1
}

type probeResult struct {
	ok         bool
	err        string // redacted
	authReason string // the server needs authorizing (see [AuthRequired]); redacted
	rt         time.Duration
	at         time.Time
}

// startProbe checks the health of sess in a goroutine, bounded by the
// health timeout.
func (s *supervisor) startProbe(sess *session) *probe {
	p := &probe{done: make(chan probeResult, 1)}
	go func() {
		ctx, cancel := context.WithTimeout(sess.ctx, s.lc.health.timeout)
		defer cancel()
		start := time.Now()
		err := s.check(ctx, sess)
		res := probeResult{ok: err == nil, rt: time.Since(start), at: start}
		if err != nil {
			res.err = err.Error()
			var ap *authProblem
			if errors.As(err, &ap) {
				res.authReason = ap.reason
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				res.err = fmt.Sprintf("no answer within %s", s.lc.health.timeout)
			}
		}
		p.done <- res
	}()
	return p
}

// healthTool is the name health_check.tool calls on the server. Seed 002
// names health check tools by their namespaced name ("git.status" on server
// git): a name the server does not offer that starts with the server's prefix
// and a dot (or "__") is taken without it when the rest is one of the
// server's tools.
func (s *supervisor) healthTool() string {
	tool := s.lc.health.tool
	s.mu.RLock()
	tools := s.disc.Tools
	s.mu.RUnlock()
	offered := func(name string) bool {
		for _, t := range tools {
			if t != nil && t.Name == name {
				return true
			}
		}
		return false
	}
	if offered(tool) {
		return tool
	}
	prefix := s.cfg.EffectivePrefix()
	for _, sep := range []string{".", "__"} {
		if rest, ok := strings.CutPrefix(tool, prefix+sep); ok && prefix != "" && offered(rest) {
			return rest
		}
	}
	return tool
}

// authProblem is a probe's failure because the server needs authorizing.
type authProblem struct{ msg, reason string }

func (e *authProblem) Error() string { return e.msg }

// check runs one probe; its error is redacted.
func (s *supervisor) check(ctx context.Context, sess *session) error {
	err := s.checkOnce(ctx, sess)
	if reason := authReason(err); reason != "" {
		return &authProblem{msg: sess.redact.Error(err), reason: sess.redact.String(reason)}
	}
	return err
}

func (s *supervisor) checkOnce(ctx context.Context, sess *session) error {
	h := s.lc.health
	switch h.method {
	case config.HealthToolCall:
		tool := s.healthTool()
		res, err := sess.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: h.args})
		if err != nil {
			if authReason(err) != "" {
				return err
			}
			return fmt.Errorf("calling tool %q: %s", tool, sess.redact.Error(err))
		}
		if res.IsError {
			return fmt.Errorf("tool %q returned an error: %s", tool, sess.redact.String(resultText(res)))
		}
		return nil
	case config.HealthHTTP:
		return s.checkHTTP(ctx)
	default:
		if err := sess.cs.Ping(ctx, nil); err != nil {
			if authReason(err) != "" {
				return err
			}
			return fmt.Errorf("ping: %s", sess.redact.Error(err))
		}
		return nil
	}
}

// checkHTTP GETs the health URL with the server's headers (sent only to the
// host of the server's URL, as for its MCP requests) and wants a 2xx.
func (s *supervisor) checkHTTP(ctx context.Context) error {
	hu, err := url.Parse(s.lc.health.url)
	if err != nil || hu.Host == "" {
		return errors.New("invalid health_check_url")
	}
	endpoint, err := url.Parse(s.cfg.URL)
	if err != nil {
		endpoint = hu
	}
	headers := s.cfg.ResolvedHeaders()
	red := newRedactor(hu, s.lc.health.url, headers)
	client := httpClient(s.opts.HTTPClient, endpoint, headers)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.lc.health.url, nil)
	if err != nil {
		return errors.New("invalid health_check_url")
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET health_check_url: %s", red.Error(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // to reuse the connection
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET health_check_url: %s", resp.Status)
	}
	return nil
}

// resultText is the text content of a tool result, shortened for a reason.
func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	const maxLen = 200
	if b.Len() > maxLen {
		return b.String()[:maxLen] + "..."
	}
	if b.Len() == 0 {
		return "isError without text"
	}
	return b.String()
}
