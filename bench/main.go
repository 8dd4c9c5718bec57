// Command bench measures what the gateway costs a client: the latency and
// throughput of tools/call, the latency of a 1,000-tool tools/list, and a
// 10,000-tool catalog (20 stdio upstreams) with the gateway's memory,
// directly against the demo MCP server and through switchboard, with the
// upstream reached over Streamable HTTP and over stdio; it checks the
// figures against issue 18's goals. With -soak it runs sustained open-loop
// load through one gateway instead and writes a report with a plot.
//
// Run it from the module root:
//
//	go run ./bench                      # build the binary, measure, print a table
//	go run ./bench -json > bench.json   # the same figures, machine-readable
//	go run ./bench -profile /tmp/prof   # gateway in-process, CPU profiles per scenario
//	go run ./bench -soak -soak-out DIR  # 10 minutes at 300 calls/s: DIR/soak.{md,json,svg}
//
// Every server is a separate process on loopback (except the gateway with
// -profile), started in its own process group and killed at the end, also on
// Ctrl-C. See bench/README.md for how to read the figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/demo"
)

// Scenario names, as printed and as accepted by -scenarios.
const (
	scenarioDirect   = "direct"
	scenarioHTTP     = "gateway/http"
	scenarioStdio    = "gateway/stdio"
	scenarioList     = "list"
	listDirect       = "direct"
	listGateway      = "gateway"
	defaultScenarios = scenarioDirect + "," + scenarioHTTP + "," + scenarioStdio + "," + scenarioList + "," + scenarioTools10k
	// scenarioStdioAsync is gateway/stdio with audit_durability: async,
	// run on request, to show what the durable default costs.
	scenarioStdioAsync = "gateway/stdio-async"
	allScenarios       = defaultScenarios + "," + scenarioStdioAsync
)

// params are the knobs of one run; they are printed with the results so a
// figure can always be traced back to how it was measured.
type params struct {
	Rounds         int           `json:"rounds"`
	Calls          int           `json:"calls"`
	Warmup         int           `json:"warmup_calls"`
	Concurrency    int           `json:"concurrency"`
	Duration       time.Duration `json:"-"`
	DurationS      float64       `json:"duration_s"`
	ThroughputWarm time.Duration `json:"-"`
	ThroughputWS   float64       `json:"throughput_warmup_s"`
	ListCalls      int           `json:"list_calls"`
	ExtraTools     int           `json:"extra_tools"`
	// The tools10k scenario: upstreams × tools each, listings through the
	// gateway (memory taken after 20 and after the last) and directly.
	Tools10kUpstreams int      `json:"tools10k_upstreams"`
	Tools10kTools     int      `json:"tools10k_tools_per_upstream"`
	Tools10kLists     int      `json:"tools10k_lists"`
	Tools10kDirect    int      `json:"tools10k_direct_lists"`
	Scenarios         []string `json:"scenarios"`
	InProcess         bool     `json:"gateway_in_process"`
}

// options are the command line.
type options struct {
	params
	bin        string
	jsonOut    bool
	profileDir string
	verbose    bool
	// soakMode runs the soak (-soak) instead of the scenarios.
	soakMode bool
	soak     soakParams
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process exit, so that deferred cleanup (stopping
// every child process) always happens before the process ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if o.soakMode {
		if err := runSoak(ctx, o, logger, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		return 0
	}
	rep, err := benchmark(ctx, o, logger, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	if o.jsonOut {
		err = writeJSON(stdout, rep)
	} else {
		err = writeTable(stdout, rep)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	var o options
	var scenarios string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./bench [flags]\n       go run ./bench -soak [-soak-duration 10m] [-soak-rate 300] [-soak-out DIR]\n\n"+
			"Measures tools/call and tools/list directly and through the gateway and checks issue 18's goals;\n"+
			"with -soak, runs sustained open-loop load through one gateway and writes a report with verdicts and a plot.\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.bin, "bin", "", "switchboard binary to run (default: go build ./cmd/switchboard into a temp dir)")
	fs.IntVar(&o.Rounds, "rounds", 1, "run every scenario this many times, interleaved; latency is over all rounds' calls, calls/s the median round (use 3+ on a busy machine)")
	fs.IntVar(&o.Calls, "calls", 2000, "sequential tools/call per scenario for the latency figures")
	fs.IntVar(&o.Warmup, "warmup", 200, "calls (and tools/list calls / 10) discarded before measuring latency")
	fs.IntVar(&o.Concurrency, "concurrency", 32, "goroutines calling concurrently on the one session for calls/s")
	fs.DurationVar(&o.Duration, "duration", 5*time.Second, "how long calls/s is measured, after -throughput-warmup")
	fs.DurationVar(&o.ThroughputWarm, "throughput-warmup", time.Second, "concurrent calls run this long before calls/s is measured")
	fs.IntVar(&o.ListCalls, "list-calls", 300, "sequential tools/list per scenario for the list latency figures")
	fs.IntVar(&o.ExtraTools, "extra-tools", 995, "extra tools of the upstream for tools/list (plus its 5 own tools)")
	fs.IntVar(&o.Tools10kUpstreams, "tools10k-upstreams", 20, "tools10k: stdio demo servers behind the gateway")
	fs.IntVar(&o.Tools10kTools, "tools10k-tools", 500, "tools10k: tools of each upstream (the demo's 5 plus extra ones)")
	fs.IntVar(&o.Tools10kLists, "tools10k-lists", 100, "tools10k: full tools/list through the gateway (the first one checks the count and is not timed); RSS is taken after start, after 20 and after the last")
	fs.IntVar(&o.Tools10kDirect, "tools10k-direct-lists", 20, "tools10k: full tools/list against one upstream with all the tools (the first one is not timed)")
	fs.StringVar(&scenarios, "scenarios", defaultScenarios, "comma-separated scenarios to run, of "+allScenarios)
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as JSON instead of a table")
	fs.StringVar(&o.profileDir, "profile", "", "run the gateway in-process and write CPU and allocation profiles of each gateway scenario to this directory (figures are then not comparable with a normal run)")
	fs.BoolVar(&o.verbose, "v", false, "copy the servers' stderr to ours")
	fs.BoolVar(&o.soakMode, "soak", false, "run the soak instead of the scenarios: open-loop tools/call through one gateway in front of -soak-upstreams stdio demo servers")
	fs.DurationVar(&o.soak.Duration, "soak-duration", 10*time.Minute, "soak: how long calls are started")
	fs.Float64Var(&o.soak.Rate, "soak-rate", 300, "soak: calls started per second (open loop)")
	fs.StringVar(&o.soak.Out, "soak-out", "", "soak: directory for soak.json, soak.md and soak.svg (default: a new temp dir, printed at the end)")
	fs.IntVar(&o.soak.Upstreams, "soak-upstreams", 20, "soak: stdio demo servers behind the gateway")
	fs.IntVar(&o.soak.Slow, "soak-slow", 5, "soak: how many of them answer slowly (20 to 50 ms)")
	fs.Float64Var(&o.soak.ErrorRate, "soak-error-rate", 0.05, "soak: share of the calls the last upstream fails (0 = none fails)")
	fs.IntVar(&o.soak.Clients, "soak-clients", 8, "soak: go-sdk client sessions the calls are spread over")
	fs.IntVar(&o.soak.MaxInFlight, "soak-max-inflight", 256, "soak: calls in flight at most; a call due beyond that is dropped and counted")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.Rounds < 1 || o.Calls < 1 || o.Warmup < 0 || o.Concurrency < 1 || o.Duration <= 0 || o.ThroughputWarm < 0 ||
		o.ListCalls < 1 || o.ExtraTools < 0 {
		return nil, errors.New("-rounds, -calls, -concurrency, -duration and -list-calls must be positive; -warmup, -throughput-warmup and -extra-tools not negative")
	}
	if o.Tools10kUpstreams < 1 || o.Tools10kTools < demo.BuiltinTools || o.Tools10kLists < 2 || o.Tools10kDirect < 2 {
		return nil, fmt.Errorf("-tools10k-upstreams must be positive, -tools10k-tools at least %d (the demo's own tools), -tools10k-lists and -tools10k-direct-lists at least 2 (the first is not timed)", demo.BuiltinTools)
	}
	for s := range strings.SplitSeq(scenarios, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(strings.Split(allScenarios, ","), s) {
			return nil, fmt.Errorf("unknown scenario %q: want some of %s", s, allScenarios)
		}
		if !slices.Contains(o.Scenarios, s) {
			o.Scenarios = append(o.Scenarios, s)
		}
	}
	if len(o.Scenarios) == 0 {
		return nil, errors.New("-scenarios is empty")
	}
	if o.soakMode {
		sp := &o.soak
		if sp.Duration < time.Second || sp.Rate <= 0 || sp.Upstreams < 1 || sp.Slow < 0 || sp.Slow >= max(sp.Upstreams, 2) ||
			sp.ErrorRate < 0 || sp.ErrorRate > 1 || sp.Clients < 1 || sp.MaxInFlight < 1 {
			return nil, errors.New("-soak-duration must be at least 1s; -soak-rate, -soak-upstreams, -soak-clients and -soak-max-inflight positive; " +
				"-soak-slow not negative and below -soak-upstreams; -soak-error-rate within [0, 1]")
		}
		if o.profileDir != "" {
			return nil, errors.New("-soak runs the gateway as its own process: drop -profile")
		}
		sp.DurationS = sp.Duration.Seconds()
	}
	if o.profileDir != "" && o.Rounds > 1 {
		return nil, errors.New("-profile takes one round: drop -rounds")
	}
	o.DurationS = o.Duration.Seconds()
	o.ThroughputWS = o.ThroughputWarm.Seconds()
	o.InProcess = o.profileDir != ""
	return &o, nil
}

// environment describes the machine, because the figures mean little
// without it (2 cores shared by client, gateway and upstream).
type environment struct {
	Date       string `json:"date"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	LoadAvg    string `json:"loadavg,omitempty"` // at the start, Linux only
}

func currentEnvironment() environment {
	env := environment{
		Date:       time.Now().Format(time.DateTime),
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			env.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return env
}
