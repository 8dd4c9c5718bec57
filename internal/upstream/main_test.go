package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/fixture"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// serverEnv names the fake stdio server the test binary runs as, instead of
// the tests (the go-sdk cmd_test.go fork/exec trick). The child gets it
// through config Env, since it inherits nothing else from us.
const serverEnv = "UPSTREAM_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(conformanceClientEnv) != "" {
		os.Exit(runConformanceClient())
	}
	if name := os.Getenv(serverEnv); name != "" {
		run := fakeServers[name]
		if run == nil {
			log.Fatalf("unknown fake server %q", name)
		}
		run()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var fakeServers = map[string]func(){
	"basic":  runBasic,
	"legacy": runLegacy,
	"broken": runBroken,
	"silent": runSilent,
	"exit":   runExit,
	// relay serves newRelayServer over stdio, in the newest protocol or the legacy one.
	"relay":        func() { runRelay() },
	"relay-legacy": func() { runRelay(legacyProtocol) },
	// fixture is the conformance fixture (test_large_result, test_stdout_garbage).
	"fixture": func() {
		if err := fixture.RunStdio(context.Background(), nil); err != nil {
			log.Fatal(err)
		}
	},
}

// newBasicServer is the fake upstream used over every transport:
//   - echo returns its raw arguments as text, to prove they arrive untouched;
//   - add_tool registers the tool "added", which makes the server announce
//     tools/list_changed;
//   - env returns the process environment as a JSON object;
//   - crash writes a line to stderr and exits with status 3 mid-call;
//   - slow says so on stderr, then blocks until the call is cancelled;
//   - tool_1..tool_5 only make the tool list longer than one page.
func newBasicServer(protocolVersions ...string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "fake", Version: "v1"}, &mcp.ServerOptions{
		PageSize:                  2, // so that discovery has to follow cursors
		Instructions:              "a fake server for tests",
		SupportedProtocolVersions: protocolVersions,
	})
	obj := json.RawMessage(`{"type":"object"}`)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(string(req.Params.Arguments)), nil
	})
	s.AddTool(&mcp.Tool{Name: "add_tool", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.AddTool(&mcp.Tool{Name: "added", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("added"), nil
		})
		return text("ok"), nil
	})
	s.AddTool(&mcp.Tool{Name: "env", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		b, err := json.Marshal(env)
		if err != nil {
			return nil, err
		}
		return text(string(b)), nil
	})
	s.AddTool(&mcp.Tool{Name: "crash", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "fatal: boom")
		os.Exit(3)
		return nil, nil
	})
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: obj}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "slow call started")
		<-ctx.Done()
		return nil, ctx.Err()
	})
	for i := 1; i <= 5; i++ {
		s.AddTool(&mcp.Tool{Name: fmt.Sprintf("tool_%d", i), InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("ok"), nil
		})
	}
	s.AddResource(&mcp.Resource{Name: "readme", URI: "file:///readme", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "hello"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "doc", URITemplate: "file:///docs/{name}"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "doc"}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
	})
	return s
}

func runBasic() {
	fmt.Fprintln(os.Stderr, "fake server ready")
	if err := newBasicServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

// legacyProtocol is the newest version before subscriptions/listen
// (2026-07-28): list_changed then arrives unsolicited, as from the npm servers.
const legacyProtocol = "2025-11-25"

// runLegacy is runBasic limited to the legacy protocol.
func runLegacy() {
	if err := newBasicServer(legacyProtocol).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

// runBroken is runBasic with resources/list and prompts/list failing.
func runBroken() {
	s := newBasicServer()
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "resources/list" || method == "prompts/list" {
				return nil, fmt.Errorf("%s is broken", method)
			}
			return next(ctx, method, req)
		}
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

// runSilent never answers, so connecting to it can only time out.
func runSilent() {
	select {}
}

// runExit fails at startup the way a misconfigured server does.
func runExit() {
	fmt.Fprintln(os.Stderr, "error: missing API key")
	os.Exit(1)
}

// fakeStdio is the config of a fake server run from the test binary. It uses
// config.SelfCommand, so it also checks Options.SelfExecutable.
func fakeStdio(name, fake string) *config.Server {
	return &config.Server{
		Name:      name,
		Transport: config.TransportStdio,
		Command:   config.SelfCommand,
		// Under -race, a child would otherwise sleep 1s at exit (tsan's default).
		Env: map[string]string{serverEnv: fake, "GORACE": "atexit_sleep_ms=0"},
	}
}

// recorder collects what a Manager reports, for assertions.
type recorder struct {
	mu          sync.Mutex
	transitions []upstream.Transition
	discoveries []upstream.Discovery
	changed     chan struct{} // poked on every report
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) poke() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) onTransition(t upstream.Transition) {
	r.mu.Lock()
	r.transitions = append(r.transitions, t)
	r.mu.Unlock()
	r.poke()
}

func (r *recorder) onDiscovery(d upstream.Discovery) {
	r.mu.Lock()
	r.discoveries = append(r.discoveries, d)
	r.mu.Unlock()
	r.poke()
}

// steps returns the recorded transitions of server as "FROM>TO".
func (r *recorder) steps(server string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, t := range r.transitions {
		if t.Server == server {
			out = append(out, string(t.From)+">"+string(t.To))
		}
	}
	return out
}

func (r *recorder) discoveriesOf(server string) []upstream.Discovery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []upstream.Discovery
	for _, d := range r.discoveries {
		if d.Server == server {
			out = append(out, d)
		}
	}
	return out
}

// waitFor blocks until cond holds, re-checking on every report and on a
// short tick (for state that is not reported, like the PID). The deadline
// only keeps a broken test from hanging; nothing is asserted about timing.
func (r *recorder) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-r.changed:
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// newManager returns a Manager wired to rec and a debug log in logs, closed
// when the test ends.
func newManager(t *testing.T, rec *recorder, logs *logtest.Buffer, opts *upstream.Options) *upstream.Manager {
	t.Helper()
	var o upstream.Options
	if opts != nil {
		o = *opts
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o.SelfExecutable = exe
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = time.Second
	}
	if rec != nil {
		o.OnTransition = rec.onTransition
		o.OnDiscovery = rec.onDiscovery
	}
	if logs != nil {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	m := upstream.NewManager(&o)
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// textOf returns the text of a single-text tool result.
func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d content items, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("result content is %T, want text", res.Content[0])
	}
	return tc.Text
}

func toolNames(tools []*mcp.Tool) []string {
	var out []string
	for _, tl := range tools {
		out = append(out, tl.Name)
	}
	return out
}
