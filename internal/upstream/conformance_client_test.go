package upstream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/testdeps"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// conformanceClientEnv makes the test binary the client under test of the
// official conformance suite (`conformance client --command BINARY`),
// instead of running the tests: the suite starts a mock server per
// scenario and runs the command with the server's URL appended. The value
// is the protocol_version the connector is configured with: "auto", or
// "pinned" for the revision the suite runs the scenario at
// (MCP_CONFORMANCE_PROTOCOL_VERSION).
const conformanceClientEnv = "UPSTREAM_TEST_CONFORMANCE_CLIENT"

// conformancePeerEnv says which kind of caller the driver's calls are made
// for: "classic" (default), a client with a session of its own, whose
// answers the connector's multi round-trip fetches from the peer; or
// "stateless", a caller of the new revision, to which the connector returns
// an input_required result as it is, and which repeats the call with the
// answers and the server's requestState itself (as the front does for a
// 2026-07-28 client).
const conformancePeerEnv = "UPSTREAM_TEST_CONFORMANCE_PEER"

// conformanceServer is the name of the suite's mock server in the Manager.
const conformanceServer = "conformance"

// conformanceContext is the part of MCP_CONFORMANCE_CONTEXT the driver
// reads: the tool calls a scenario wants made, with their arguments.
type conformanceContext struct {
	ToolCalls []struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"toolCalls"`
}

// runConformanceClient drives the gateway's upstream connector against the
// suite's mock server at the URL in the last argument, the way the gateway
// uses it for a client: connect and discover, then call every tool, read
// every resource and get every prompt with a [upstream.Peer] in the context
// that answers sampling, elicitation and roots, so that a server's input
// requests (multi round-trip, or requests of its own on a classic session)
// go through the connector's own code. Scenarios are not told apart, except
// that the schema echo of json-schema-2020-12-preservation needs the focal
// tool's schema as its argument. It returns the exit status: 1 when the
// connector could not connect or the invocation is wrong, else 0 (a failed
// call is the scenario's to judge, and is logged).
func runConformanceClient() int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if len(os.Args) < 2 {
		logger.Error("usage: the server URL is the last argument")
		return 1
	}
	url := os.Args[len(os.Args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	version := config.ProtocolAuto
	if os.Getenv(conformanceClientEnv) == "pinned" {
		version = os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION")
	}
	var cc conformanceContext
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &cc); err != nil {
			logger.Error("MCP_CONFORMANCE_CONTEXT", "error", err)
			return 1
		}
	}
	logger.Info("conformance client", "scenario", scenario, "url", url, "protocol_version", version, "peer", os.Getenv(conformancePeerEnv))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := upstream.NewManager(&upstream.Options{
		Logger:         logger,
		ConnectTimeout: 20 * time.Second,
		Restart:        upstream.RestartPolicy{Disabled: true}, // one scenario, one try
		Implementation: &mcp.Implementation{Name: "switchboard-conformance", Version: "test"},
	})
	defer func() {
		if err := m.Close(context.Background()); err != nil {
			logger.Error("close", "error", err)
		}
	}()
	if err := m.Add(&config.Server{Name: conformanceServer, Transport: config.TransportHTTP, URL: url, ProtocolVersion: version}); err != nil {
		logger.Error("add", "error", err)
		return 1
	}
	if err := m.Connect(ctx, conformanceServer); err != nil {
		logger.Error("connect", "error", err)
		return 1
	}
	disc, err := m.Discovery(conformanceServer)
	if err != nil {
		logger.Error("discovery", "error", err)
		return 1
	}
	if st, err := m.Status(conformanceServer); err == nil {
		logger.Info("connected", "state", st.State, "protocol", st.ProtocolVersion, "tools", len(disc.Tools),
			"resources", len(disc.Resources), "prompts", len(disc.Prompts))
	}

	peer := newConformancePeer(logger, os.Getenv(conformancePeerEnv) == "stateless")
	defer close(peer.done)
	ctx = upstream.WithPeer(ctx, peer)
	for _, tool := range disc.Tools {
		for _, args := range toolArguments(scenario, tool, disc.Tools, cc) {
			res, err := callTool(ctx, m, peer, &mcp.CallToolParams{Name: tool.Name, Arguments: args})
			logResult(logger, "tools/call "+tool.Name, res, err)
		}
	}
	for _, r := range disc.Resources {
		res, err := m.ReadResource(ctx, conformanceServer, &mcp.ReadResourceParams{URI: r.URI})
		logResult(logger, "resources/read "+r.URI, res, err)
	}
	for _, p := range disc.Prompts {
		args := map[string]string{}
		for _, a := range p.Arguments {
			if a.Required {
				args[a.Name] = "conformance"
			}
		}
		res, err := m.GetPrompt(ctx, conformanceServer, &mcp.GetPromptParams{Name: p.Name, Arguments: args})
		logResult(logger, "prompts/get "+p.Name, res, err)
	}
	return 0
}

// callTool calls a tool for peer. A stateless peer answers a result that
// asks for input and repeats the call with the answers and the server's
// requestState, a new request each round, as a client of the new revision
// does; for a classic peer the connector has done that already.
func callTool(ctx context.Context, m *upstream.Manager, peer *conformancePeer, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	p := *params
	for round := 1; ; round++ {
		res, err := m.CallTool(ctx, conformanceServer, &p)
		if err != nil || !res.NeedsInput() || !peer.stateless {
			return res, err
		}
		if round == 10 {
			return nil, fmt.Errorf("still asked for input after %d rounds", round)
		}
		answers := mcp.InputResponseMap{}
		for id, ask := range res.InputRequests {
			a, err := peer.answer(ctx, ask)
			if err != nil {
				return nil, fmt.Errorf("input request %q: %w", id, err)
			}
			answers[id] = a
		}
		p.InputResponses, p.RequestState = answers, res.RequestState
	}
}

func logResult(logger *slog.Logger, what string, res any, err error) {
	if err != nil {
		logger.Warn(what, "error", err)
		return
	}
	b, _ := json.Marshal(res) // only for the log
	logger.Info(what, "result", string(b))
}

// toolArguments returns the argument sets to call tool with: those the
// scenario's context gives for it, else one set built from its input
// schema. json-schema-2020-12-preservation asks for the focal tool's
// schema, as the connector discovered it, to be echoed back.
func toolArguments(scenario string, tool *mcp.Tool, all []*mcp.Tool, cc conformanceContext) []any {
	var out []any
	for _, c := range cc.ToolCalls {
		if c.Name == tool.Name {
			out = append(out, c.Arguments)
		}
	}
	if len(out) > 0 {
		return out
	}
	if scenario == "json-schema-2020-12-preservation" && tool.Name == "json_schema_echo" {
		i := slices.IndexFunc(all, func(t *mcp.Tool) bool { return t.Name == "json_schema_2020_12_tool" })
		if i >= 0 {
			return []any{map[string]any{"schema": all[i].InputSchema}}
		}
	}
	return []any{fromSchema(tool.InputSchema, true)}
}

// fromSchema builds a value that satisfies a JSON schema well enough for a
// mock server: an object's required properties (all of them when all is
// set, as for an elicitation form), each its default, its first enum
// value, or a value of its type.
func fromSchema(schema any, requiredOnly bool) any {
	var s struct {
		Type       any                        `json:"type"`
		Default    any                        `json:"default"`
		Enum       []any                      `json:"enum"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	b, err := json.Marshal(schema)
	if err != nil || json.Unmarshal(b, &s) != nil {
		return map[string]any{}
	}
	if s.Default != nil {
		return s.Default
	}
	if len(s.Enum) > 0 {
		return s.Enum[0]
	}
	typ, _ := s.Type.(string)
	if types, ok := s.Type.([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	switch typ {
	case "string":
		return "conformance"
	case "integer", "number":
		return 1
	case "boolean":
		return true
	case "array":
		return []any{}
	case "null":
		return nil
	}
	obj := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		if requiredOnly && !slices.Contains(s.Required, name) {
			continue
		}
		var prop any
		if json.Unmarshal(s.Properties[name], &prop) == nil {
			obj[name] = fromSchema(prop, true)
		}
	}
	return obj
}

// conformancePeer is the downstream client of the driver's calls: it can be
// asked everything, and answers like an agreeable user: elicitations are
// accepted with the form's defaults (or plausible values), sampling gets a
// fixed text, roots one directory.
type conformancePeer struct {
	log       *slog.Logger
	done      chan struct{}
	stateless bool // an [upstream.StatelessPeer]
}

func newConformancePeer(log *slog.Logger, stateless bool) *conformancePeer {
	return &conformancePeer{log: log, done: make(chan struct{}), stateless: stateless}
}

func (p *conformancePeer) ID() string            { return "conformance-peer" }
func (p *conformancePeer) Done() <-chan struct{} { return p.done }
func (p *conformancePeer) Stateless() bool       { return p.stateless }

// answer answers one input request of a result, as the peer's methods do.
func (p *conformancePeer) answer(ctx context.Context, ask mcp.InputRequest) (mcp.InputResponse, error) {
	switch r := ask.(type) {
	case *mcp.ElicitParams:
		return p.Elicit(ctx, r)
	case *mcp.CreateMessageParams:
		return p.CreateMessage(ctx, r)
	case *mcp.ListRootsParams:
		return p.ListRoots(ctx, r)
	}
	return nil, fmt.Errorf("unsupported input request %T", ask)
}
func (p *conformancePeer) Capabilities() *mcp.ClientCapabilities {
	return &mcp.ClientCapabilities{
		Sampling:    &mcp.SamplingCapabilities{},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		RootsV2:     &mcp.RootCapabilities{},
	}
}

func (p *conformancePeer) NotifyProgress(_ context.Context, n *mcp.ProgressNotificationParams) error {
	p.log.Info("peer: progress", "token", n.ProgressToken, "progress", n.Progress)
	return nil
}

func (p *conformancePeer) Log(_ context.Context, n *mcp.LoggingMessageParams) error {
	p.log.Info("peer: log message", "level", n.Level, "data", fmt.Sprint(n.Data))
	return nil
}

func (p *conformancePeer) CreateMessage(_ context.Context, r *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	p.log.Info("peer: sampling", "messages", len(r.Messages))
	return &mcp.CreateMessageResult{Role: "assistant", Model: "conformance-model", Content: &mcp.TextContent{Text: "This is a response from the conformance peer."}}, nil
}

func (p *conformancePeer) Elicit(_ context.Context, r *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	p.log.Info("peer: elicitation", "message", r.Message, "mode", r.Mode)
	if r.Mode == "url" || r.URL != "" {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}
	content, _ := fromSchema(r.RequestedSchema, false).(map[string]any)
	return &mcp.ElicitResult{Action: "accept", Content: content}, nil
}

func (p *conformancePeer) ListRoots(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	p.log.Info("peer: roots")
	return &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///conformance/workspace", Name: "workspace"}}}, nil
}

// clientScenarios lists what the suite's requirements of revision ask of
// a client: the scored scenarios, then those it runs without scoring
// (extensions, added after the release), from `conformance list`.
func clientScenarios(t *testing.T, node, suite, revision string) (scored, unscored []string) {
	t.Helper()
	out, err := exec.Command(node, suite, "list", "--client", "--requirements", revision).CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Client scenarios"):
			section = "client"
		case line == "" || !strings.HasPrefix(line, " "):
			section = ""
		case section == "client" && strings.HasPrefix(line, "  - "):
			scored = append(scored, strings.TrimPrefix(line, "  - "))
		case strings.HasPrefix(line, "    - ") && strings.HasSuffix(line, " [client]"):
			unscored = append(unscored, strings.TrimSuffix(strings.TrimPrefix(line, "    - "), " [client]"))
		}
	}
	if len(scored) == 0 {
		t.Fatalf("conformance list names no client scenario for %s:\n%s", revision, out)
	}
	return scored, unscored
}

// conformanceMode is one configuration of the driver: the connector's
// protocol_version ("auto", or "pinned" to the scenario's revision) and
// the kind of caller (conformancePeerEnv).
type conformanceMode struct{ version, peer string }

func (m conformanceMode) String() string { return m.version + "/" + m.peer }

// checkCounts is the outcome of one scenario run: the suite's checks by
// status, and the names of the failed and warned ones.
type checkCounts struct {
	passed, failed, warned int
	bad                    []string // "NAME: message" of FAILURE and WARNING checks
	err                    error    // the run itself failed
}

func (c checkCounts) String() string {
	if c.err != nil {
		return "error"
	}
	s := fmt.Sprintf("%d/%d", c.passed, c.failed)
	if c.warned > 0 {
		s += fmt.Sprintf(" (%d warn)", c.warned)
	}
	return s
}

// runClientScenario runs one scenario of the suite at revision with this
// test binary as the client under test, and reads its checks.json.
func runClientScenario(ctx context.Context, node, suite, exe, dir, revision, scenario string, mode conformanceMode) checkCounts {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// What --requirements does for each of its scenarios: the revision's
	// wire, whatever the scenario's own window.
	cmd := exec.CommandContext(ctx, node, suite, "client", "--command", exe, "--scenario", scenario,
		"--spec-version", revision, "--force", "--timeout", "30000", "-o", dir)
	cmd.Env = append(os.Environ(),
		conformanceClientEnv+"="+mode.version,
		conformancePeerEnv+"="+mode.peer,
		"GORACE=atexit_sleep_ms=0") // a -race child would otherwise sleep 1s at exit
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return checkCounts{err: fmt.Errorf("timed out: %w\n%s", ctx.Err(), out)}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	if len(files) != 1 {
		return checkCounts{err: fmt.Errorf("%d checks.json files (exit %v):\n%s", len(files), err, out)}
	}
	var c checkCounts
	b, rerr := os.ReadFile(files[0])
	var checks []struct {
		Name, Status, ErrorMessage string
	}
	if rerr == nil {
		rerr = json.Unmarshal(b, &checks)
	}
	if rerr != nil {
		return checkCounts{err: rerr}
	}
	for _, ch := range checks {
		switch ch.Status {
		case "SUCCESS":
			c.passed++
		case "FAILURE":
			c.failed++
			c.bad = append(c.bad, ch.Name+": "+ch.ErrorMessage)
		case "WARNING":
			c.warned++
			c.bad = append(c.bad, "warning "+ch.Name+": "+ch.ErrorMessage)
		}
	}
	// The driver is this binary, built with -race when the tests are: the
	// connector's races and panics in it fail the run as well.
	stderr, _ := os.ReadFile(filepath.Join(filepath.Dir(files[0]), "stderr.txt"))
	for _, bad := range []string{"WARNING: DATA RACE", "panic:"} {
		if strings.Contains(string(stderr), bad) {
			c.err = errors.Join(c.err, fmt.Errorf("the driver's stderr has %q:\n%s", bad, stderr))
		}
	}
	return c
}

// knownClientFailures are the checks that fail by design in one mode, with
// the reason; the test requires exactly these to fail there.
var knownClientFailures = map[string]struct {
	checks []string
	why    string
}{}

// TestConformanceClient runs the client scenarios of the official suite
// (0.2.0-alpha.12) that the requirements of 2026-07-28 and of 2025-11-25
// name, scored or not, with the gateway's upstream connector as the client
// under test (this test binary, see runConformanceClient), in several
// configurations: protocol_version auto and pinned to the revision, and
// callers of both eras. The authorization scenarios (auth/*) need an OAuth
// client, which this driver does not configure: internal/cli's
// TestProbeConformance runs them through `switchboard servers probe`, which
// drives this connector with one. No other check may fail or warn, except
// knownClientFailures, and every scenario must pass a check. The table of
// results is logged.
func TestConformanceClient(t *testing.T) {
	if testing.Short() {
		t.Skip("the client conformance scenarios take half a minute")
	}
	node := testdeps.NPMModule(t, "node/bin/node")
	suite := testdeps.NPMModule(t, "conformance-next/dist/index.js")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(exe, " \t\"'$`\\") {
		t.Fatalf("the suite runs --command through a shell, split on spaces; this binary's path %q does not survive that", exe)
	}
	revisions := []struct {
		name  string
		modes []conformanceMode
	}{
		{"2026-07-28", []conformanceMode{{"pinned", "classic"}, {"pinned", "stateless"}, {"auto", "classic"}, {"auto", "stateless"}}},
		{"2025-11-25", []conformanceMode{{"pinned", "classic"}, {"auto", "classic"}, {"auto", "stateless"}}},
	}
	for _, rev := range revisions {
		t.Run(rev.name, func(t *testing.T) {
			scored, unscored := clientScenarios(t, node, suite, rev.name)
			var run, left []string
			for _, s := range append(slices.Clone(scored), unscored...) {
				if strings.HasPrefix(s, "auth/") {
					left = append(left, s)
				} else {
					run = append(run, s)
				}
			}
			t.Logf("left out (authorization: internal/cli TestProbeConformance runs them): %d scenarios: %s", len(left), strings.Join(left, " "))

			// Two runs at a time: each is a node process and a driver.
			type job struct {
				scenario string
				mode     conformanceMode
			}
			results := map[job]checkCounts{}
			var mu sync.Mutex
			jobs := make(chan job)
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					for j := range jobs {
						dir := filepath.Join(t.TempDir(), "out")
						c := runClientScenario(t.Context(), node, suite, exe, dir, rev.name, j.scenario, j.mode)
						mu.Lock()
						results[j] = c
						mu.Unlock()
					}
				})
			}
			for _, s := range run {
				for _, m := range rev.modes {
					jobs <- job{s, m}
				}
			}
			close(jobs)
			wg.Wait()

			var table strings.Builder
			fmt.Fprintf(&table, "passed/failed checks, requirements %s (* not scored)\n%-38s", rev.name, "scenario")
			for _, m := range rev.modes {
				fmt.Fprintf(&table, " %-18s", m)
			}
			table.WriteString("\n")
			for _, s := range run {
				name := s
				if !slices.Contains(scored, s) {
					name += " *"
				}
				fmt.Fprintf(&table, "%-38s", name)
				for _, m := range rev.modes {
					c := results[job{s, m}]
					fmt.Fprintf(&table, " %-18s", c)
					key := fmt.Sprintf("%s %s %s", rev.name, m, s)
					switch known := knownClientFailures[key]; {
					case c.err != nil:
						t.Errorf("%s: %v", key, c.err)
					case c.passed == 0:
						t.Errorf("%s: no check passed", key)
					case !slices.Equal(failedNames(c), known.checks):
						t.Errorf("%s: failed or warned %q, want %q %s\n%s", key, failedNames(c), known.checks, known.why, strings.Join(c.bad, "\n"))
					}
				}
				table.WriteString("\n")
			}
			t.Log(table.String())
		})
	}
}

// failedNames are the names of the failed and warned checks of c, sorted.
func failedNames(c checkCounts) []string {
	var out []string
	for _, b := range c.bad {
		name, _, _ := strings.Cut(strings.TrimPrefix(b, "warning "), ":")
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
