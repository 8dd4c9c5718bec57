package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"time"
)

// callResult is the tools/call figures of one scenario.
type callResult struct {
	Scenario   string     `json:"scenario"`
	Tool       string     `json:"tool"`
	Latency    latency    `json:"latency"`
	Throughput throughput `json:"throughput"`
}

// listResult is the tools/list figures of one scenario.
type listResult struct {
	Scenario string  `json:"scenario"`
	Tools    int     `json:"tools"`
	Latency  latency `json:"latency"`
}

// report is everything a run measured, in the order it is printed.
type report struct {
	Env      environment     `json:"environment"`
	Params   params          `json:"params"`
	Calls    []callResult    `json:"calls"`
	Lists    []listResult    `json:"lists"`
	Tools10k *tools10kResult `json:"tools10k,omitempty"`
	Goals    []goal          `json:"goals"`
	Profiles []string        `json:"profiles,omitempty"`
}

// gateway is a running gateway to benchmark through.
type gateway struct {
	base     string // http://host:port, for /metrics and the REST API
	endpoint string // the /mcp URL
	store    string // its SQLite file; "" when unknown
	pid      int    // 0 when it runs in this process
	stop     func()
}

// Roles of the processes whose CPU time is reported.
const (
	roleClient   = "client"
	roleGateway  = "gateway"
	roleUpstream = "upstream"
)

// cpuRoles names the processes of a scenario, to report the CPU each
// spends per call.
type cpuRoles struct {
	gateway  int // pid of the gateway process; 0 = no gateway
	upstream int // pid of the upstream; 0 = the gateway's children (stdio)
}

// sample returns the CPU time used so far by each role.
func (r cpuRoles) sample() map[string]time.Duration {
	m := map[string]time.Duration{}
	add := func(role string, pid int) {
		if d, ok := processCPU(pid); ok {
			m[role] += d
		}
	}
	add(roleClient, os.Getpid())
	if r.gateway != 0 {
		add(roleGateway, r.gateway)
	}
	if r.upstream != 0 {
		add(roleUpstream, r.upstream)
	} else if r.gateway != 0 {
		for _, pid := range childrenOf(r.gateway) {
			add(roleUpstream, pid)
		}
	}
	return m
}

// gatewayStarter starts a gateway serving the given config (servers only;
// the starter adds listen, store and logging).
type gatewayStarter interface {
	start(ctx context.Context, name, servers string) (*gateway, error)
}

// prepare makes the run's temp dir (which cleanup removes) and the binary
// to run: -bin, or ./cmd/switchboard built into the temp dir.
func prepare(ctx context.Context, o *options, logger *slog.Logger, stderr io.Writer) (bin, tmp string, cleanup func(), err error) {
	tmp, err = os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return "", "", nil, fmt.Errorf("creating a temp dir: %w", err)
	}
	var unset bool
	cleanup = func() {
		if unset {
			os.Unsetenv("SWITCHBOARD_LOG_DIRECTORY")
		}
		os.RemoveAll(tmp)
	}
	// The gateways' default log_directory (logs/mcp_servers) is relative to
	// the working directory: keep their stderr logs with the run's files.
	if os.Getenv("SWITCHBOARD_LOG_DIRECTORY") == "" {
		os.Setenv("SWITCHBOARD_LOG_DIRECTORY", filepath.Join(tmp, "logs"))
		unset = true
	}
	bin = o.bin
	if bin == "" {
		logger.Info("building switchboard")
		bin, err = buildBinary(ctx, tmp, stderr)
	} else if bin, err = filepath.Abs(bin); err != nil {
		err = fmt.Errorf("resolving -bin: %w", err)
	}
	if err != nil {
		cleanup()
		return "", "", nil, err
	}
	return bin, tmp, cleanup, nil
}

// benchmark runs the selected scenarios and returns their figures. Every
// process it starts is stopped before it returns.
func benchmark(ctx context.Context, o *options, logger *slog.Logger, stderr io.Writer) (*report, error) {
	bin, tmp, cleanup, err := prepare(ctx, o, logger, stderr)
	if err != nil {
		return nil, err
	}
	defer cleanup()

	ps := &procs{logger: logger}
	if o.verbose {
		ps.verbose = stderr
	}
	defer ps.closeAll()

	var gws gatewayStarter = &procGateways{procs: ps, bin: bin, dir: tmp}
	var prof *profiler
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return nil, fmt.Errorf("creating the profile dir: %w", err)
		}
		gws = &inProcessGateways{bin: bin, dir: tmp, logger: logger}
		prof = &profiler{dir: o.profileDir}
	}

	b := &bencher{o: o, logger: logger, ps: ps, bin: bin, gws: gws, prof: prof,
		rep:      &report{Env: currentEnvironment(), Params: o.params},
		callAccs: map[string]*callAcc{}, listAccs: map[string]*listAcc{}}
	for b.round = 1; b.round <= o.Rounds; b.round++ {
		if o.Rounds > 1 {
			logger.Info("round", "n", b.round, "of", o.Rounds)
		}
		if err := b.run(ctx); err != nil {
			return nil, err
		}
	}
	b.collect()
	b.rep.Goals = evaluate(b.rep)
	if b.rep.Goals == nil {
		b.rep.Goals = []goal{}
	}
	if prof != nil {
		b.rep.Profiles = prof.written
	}
	return b.rep, nil
}

// bencher holds what the scenarios share.
type bencher struct {
	o      *options
	logger *slog.Logger
	ps     *procs
	bin    string
	gws    gatewayStarter
	prof   *profiler
	rep    *report
	round  int

	callAccs map[string]*callAcc // by scenario, over the rounds
	listAccs map[string]*listAcc
	t10k     *tools10kAcc
}

// callAcc gathers one scenario's tools/call measurements over the rounds.
type callAcc struct {
	tool    string
	samples []time.Duration
	tputs   []throughput
}

// listAcc gathers one scenario's tools/list measurements over the rounds.
type listAcc struct {
	tools   int
	samples []time.Duration
}

// collect turns the rounds into the report: latency over all samples of
// all rounds, calls/s of the median round (whose CPU figures come along).
func (b *bencher) collect() {
	b.rep.Calls, b.rep.Lists = []callResult{}, []listResult{} // [] rather than null in JSON
	for _, s := range []string{scenarioDirect, scenarioHTTP, scenarioStdio, scenarioStdioAsync} {
		if a, ok := b.callAccs[s]; ok {
			b.rep.Calls = append(b.rep.Calls, callResult{Scenario: s, Tool: a.tool,
				Latency: summarize(a.samples), Throughput: medianThroughput(a.tputs)})
		}
	}
	for _, s := range []string{listDirect, listGateway} {
		if a, ok := b.listAccs[s]; ok {
			b.rep.Lists = append(b.rep.Lists, listResult{Scenario: s, Tools: a.tools, Latency: summarize(a.samples)})
		}
	}
	if b.t10k != nil {
		b.rep.Tools10k = b.t10k.collect()
	}
}

// medianThroughput returns the round with the median calls/s (the lower
// middle one for an even count), listing every round's figure when there
// were several.
func medianThroughput(ts []throughput) throughput {
	if len(ts) == 0 {
		return throughput{}
	}
	sorted := slices.Clone(ts)
	slices.SortStableFunc(sorted, func(a, b throughput) int { return cmp.Compare(a.PerSecond, b.PerSecond) })
	m := sorted[(len(sorted)-1)/2]
	if len(ts) > 1 {
		for _, t := range ts {
			m.Rounds = append(m.Rounds, t.PerSecond)
		}
	}
	return m
}

// name is a process or file name unique to the current round.
func (b *bencher) name(base string) string {
	if b.o.Rounds > 1 {
		return fmt.Sprintf("%s-r%d", base, b.round)
	}
	return base
}

func (b *bencher) want(s string) bool { return slices.Contains(b.o.Scenarios, s) }

// run goes through the scenarios one after the other, with only the
// processes of the current one running, so they do not compete for the CPU.
func (b *bencher) run(ctx context.Context) error {
	if b.want(scenarioDirect) || b.want(scenarioHTTP) {
		demo, endpoint, err := b.startDemo(ctx, b.name("demo"), 0)
		if err != nil {
			return err
		}
		if b.want(scenarioDirect) {
			if err := b.calls(ctx, scenarioDirect, endpoint, "echo", cpuRoles{upstream: demo.cmd.Process.Pid}); err != nil {
				return err
			}
		}
		if b.want(scenarioHTTP) {
			if err := b.viaGateway(ctx, "gateway-http", scenarioHTTP, httpServer(endpoint), demo.cmd.Process.Pid, b.calls); err != nil {
				return err
			}
		}
		b.ps.stop(demo)
	}
	if b.want(scenarioStdio) {
		if err := b.viaGateway(ctx, "gateway-stdio", scenarioStdio, stdioServer(b.bin), 0, b.calls); err != nil {
			return err
		}
	}
	if b.want(scenarioStdioAsync) {
		servers := "settings:\n  audit_durability: async\n" + stdioServer(b.bin)
		if err := b.viaGateway(ctx, "gateway-stdio-async", scenarioStdioAsync, servers, 0, b.calls); err != nil {
			return err
		}
	}
	if b.want(scenarioList) {
		demo, endpoint, err := b.startDemo(ctx, b.name("demo-1000"), b.o.ExtraTools)
		if err != nil {
			return err
		}
		if err := b.lists(ctx, listDirect, endpoint, "echo", cpuRoles{}); err != nil {
			return err
		}
		if err := b.viaGateway(ctx, "gateway-list", listGateway, httpServer(endpoint), demo.cmd.Process.Pid, b.lists); err != nil {
			return err
		}
		b.ps.stop(demo)
	}
	if b.want(scenarioTools10k) {
		if err := b.tools10k(ctx); err != nil {
			return err
		}
	}
	return nil
}

// gatewayTool is the demo's echo tool as the gateway names it.
const gatewayTool = "demo.echo"

// viaGateway starts a gateway (called name) with the single upstream
// "demo", runs measure through it, and stops it. upstreamPID is the
// upstream's process (0 = a child of the gateway).
func (b *bencher) viaGateway(ctx context.Context, name, scenario, servers string, upstreamPID int,
	measure func(ctx context.Context, scenario, endpoint, tool string, roles cpuRoles) error) error {
	b.logger.Info("starting gateway", "scenario", scenario)
	gw, err := b.gws.start(ctx, b.name(name), servers)
	if err != nil {
		return err
	}
	defer gw.stop()
	return measure(ctx, scenario, gw.endpoint, gatewayTool, cpuRoles{gateway: gw.pid, upstream: upstreamPID})
}

// startDemo starts demo-server over HTTP and waits until it listens.
func (b *bencher) startDemo(ctx context.Context, name string, extraTools int) (*proc, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	args := []string{"demo-server", "--http", addr}
	if extraTools > 0 {
		args = append(args, "--extra-tools", strconv.Itoa(extraTools))
	}
	p, err := b.ps.start(name, b.bin, args...)
	if err != nil {
		return nil, "", err
	}
	if err := waitFor(ctx, p, "to listen on "+addr, listening(addr)); err != nil {
		b.ps.stop(p)
		return nil, "", err
	}
	return p, "http://" + addr + "/mcp", nil
}

// calls measures tools/call latency and throughput over one session.
func (b *bencher) calls(ctx context.Context, scenario, endpoint, tool string, roles cpuRoles) error {
	var res callRound
	var err error
	pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
		res, err = b.measureCalls(ctx, scenario, endpoint, tool, roles)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", scenario, err)
	}
	a := b.callAccs[scenario]
	if a == nil {
		a = &callAcc{tool: tool}
		b.callAccs[scenario] = a
	}
	a.samples = append(a.samples, res.samples...)
	a.tputs = append(a.tputs, res.tput)
	return nil
}

// callRound is what one round measured of a tools/call scenario.
type callRound struct {
	samples []time.Duration
	tput    throughput
}

func (b *bencher) measureCalls(ctx context.Context, scenario, endpoint, tool string, roles cpuRoles) (callRound, error) {
	c, err := connect(ctx, endpoint, b.o.Concurrency)
	if err != nil {
		return callRound{}, err
	}
	defer c.close()
	if err := c.requireTool(ctx, tool); err != nil {
		return callRound{}, err
	}
	op := func(ctx context.Context) error { return c.callEcho(ctx, tool) }

	stopProf, err := b.prof.begin(scenario)
	if err != nil {
		return callRound{}, err
	}
	defer stopProf()

	b.logger.Info("measuring latency", "scenario", scenario, "calls", b.o.Calls, "warmup", b.o.Warmup)
	samples, err := measureLatency(ctx, b.o.Warmup, b.o.Calls, op)
	if err != nil {
		return callRound{}, err
	}
	b.logger.Info("measuring calls/s", "scenario", scenario, "workers", b.o.Concurrency, "duration", b.o.Duration)
	cpu := roles.sample
	if b.o.InProcess {
		cpu = nil // client and gateway share this process: no breakdown
	}
	tput, err := measureThroughput(ctx, b.o.Concurrency, b.o.ThroughputWarm, b.o.Duration, op, cpu)
	if err != nil {
		return callRound{}, err
	}
	if err := stopProf(); err != nil {
		return callRound{}, err
	}
	return callRound{samples: samples, tput: tput}, nil
}

// lists measures tools/list latency over one session. tool is only used to
// check the catalog is complete; roles are unused (latency only).
func (b *bencher) lists(ctx context.Context, scenario, endpoint, tool string, _ cpuRoles) error {
	var res listRound
	var err error
	pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
		res, err = b.measureLists(ctx, scenario, endpoint, tool)
	})
	if err != nil {
		return fmt.Errorf("tools/list %s: %w", scenario, err)
	}
	a := b.listAccs[scenario]
	if a == nil {
		a = &listAcc{tools: res.tools}
		b.listAccs[scenario] = a
	}
	a.samples = append(a.samples, res.samples...)
	return nil
}

// listRound is what one round measured of a tools/list scenario.
type listRound struct {
	tools   int
	samples []time.Duration
}

func (b *bencher) measureLists(ctx context.Context, scenario, endpoint, tool string) (listRound, error) {
	c, err := connect(ctx, endpoint, 1)
	if err != nil {
		return listRound{}, err
	}
	defer c.close()
	if err := c.requireTool(ctx, tool); err != nil {
		return listRound{}, err
	}
	n, err := c.listAll(ctx)
	if err != nil {
		return listRound{}, err
	}
	if want := b.o.ExtraTools + 5; n < want {
		return listRound{}, fmt.Errorf("listed %d tools, want at least %d", n, want)
	}
	op := func(ctx context.Context) error {
		_, err := c.listAll(ctx)
		return err
	}
	stopProf, err := b.prof.begin(scenario)
	if err != nil {
		return listRound{}, err
	}
	defer stopProf()
	b.logger.Info("measuring tools/list", "scenario", scenario, "tools", n, "calls", b.o.ListCalls)
	samples, err := measureLatency(ctx, max(b.o.Warmup/10, 1), b.o.ListCalls, op)
	if err != nil {
		return listRound{}, err
	}
	if err := stopProf(); err != nil {
		return listRound{}, err
	}
	return listRound{tools: n, samples: samples}, nil
}

// httpServer is the config of the upstream "demo" over Streamable HTTP.
func httpServer(endpoint string) string {
	return "servers:\n  demo:\n    transport: http\n    url: " + yamlString(endpoint) + "\n    auto_start: true\n"
}

// stdioServer is the config of the upstream "demo" as a child process.
func stdioServer(bin string) string {
	return "servers:\n  demo:\n    transport: stdio\n    command: " + yamlString(bin) +
		"\n    args: [demo-server]\n    auto_start: true\n"
}

// yamlString quotes s; a JSON string is a valid YAML double-quoted scalar.
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// slug turns a scenario name into a file name part.
func slug(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '/' || c == ' ' {
			b[i] = '-'
		}
	}
	return string(b)
}

// procGateways runs each gateway as its own `switchboard serve` process.
type procGateways struct {
	procs *procs
	bin   string
	dir   string
}

func (g *procGateways) start(ctx context.Context, name, servers string) (*gateway, error) {
	cfgPath := filepath.Join(g.dir, name+".yaml")
	if err := os.WriteFile(cfgPath, []byte(servers), 0o600); err != nil {
		return nil, fmt.Errorf("writing the gateway config: %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	store := filepath.Join(g.dir, name+".db")
	p, err := g.procs.start(name, g.bin, "serve", "--config", cfgPath, "--listen", addr,
		"--store", store, "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, p, "to be ready", httpOK("http://"+addr+"/readyz")); err != nil {
		g.procs.stop(p)
		return nil, err
	}
	return &gateway{base: "http://" + addr, endpoint: "http://" + addr + "/mcp", store: store, pid: p.cmd.Process.Pid,
		stop: func() { g.procs.stop(p) }}, nil
}
