// Package demo is the built-in demo MCP server: a small, real MCP server that
// the default gateway config runs as an upstream (`switchboard demo-server`),
// and that tests and benchmarks use as a predictable peer. Its fault injection
// ([Options.ErrorRate], [Options.Latency], [Options.CrashAfter]) lets the
// gateway's retry, breaker and supervisor paths be exercised against a real
// process instead of a mock.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Name is the implementation name announced in initialize ("switchboard-demo").
// Tests and the gateway recognise the demo upstream by it.
const Name = "switchboard-demo"

// Version is the implementation version announced in initialize. It changes
// only when the demo's tool contracts change, so golden files can pin it.
const Version = "1.0.0"

// Names of the built-in tools, resources and prompts. They are contracts used
// by tests, docs and the default config, so they are exported once here.
const (
	ToolEcho  = "echo"
	ToolAdd   = "add"
	ToolNow   = "now"
	ToolSleep = "sleep"
	ToolFail  = "fail"

	// BuiltinTools is how many tools NewServer registers besides
	// [Options.ExtraTools]: tools/list returns BuiltinTools+ExtraTools tools.
	BuiltinTools = 5

	ReadmeURI        = "demo://readme"
	EchoTemplateURI  = "demo://echo/{text}"
	echoResourceBase = "demo://echo/"

	PromptGreet = "greet"
)

// CrashExitCode is the process exit status used by [Options.CrashAfter], so a
// supervisor test can tell an injected crash from a real failure.
const CrashExitCode = 3

// MaxSleep bounds the sleep tool, so a stray call cannot pin a session forever.
const MaxSleep = 10 * time.Minute

const methodCallTool = "tools/call"

// crashGrace is how long the server waits, after the handler of the crashing
// tools/call has returned, before it exits: the SDK writes the answer only
// after the handler returns, so exiting at once would lose it.
const crashGrace = 100 * time.Millisecond

// Options configure fault injection. Zero value = a well-behaved server.
//
// Options are read when a server is built and not retained: changing them
// afterwards has no effect on that server.
type Options struct {
	ErrorRate float64       // 0..1: probability that a tools/call returns a protocol error (JSON-RPC error, not isError)
	Latency   time.Duration // added to every tools/call
	// CrashAfter > 0 makes the process exit (os.Exit(3)) right after answering
	// the Nth tools/call, counted over all sessions of one server. Use the Exit
	// field so tests can intercept it.
	CrashAfter int
	ExtraTools int // register this many extra tools "tool_0001".."tool_NNNN" (for the 1,000-tool benchmark), each with a small object schema and a description; calling one echoes its args
	// Writable adds the tool "write", which appends its text to an
	// in-memory journal and returns the journal's length: a side-effecting
	// tool (neither read-only nor idempotent) for the retry and approval
	// tests. It is not among the BuiltinTools.
	Writable bool
	Seed     int64          // RNG seed for ErrorRate (0 = time-based)
	Exit     func(code int) // nil = os.Exit
	Logger   *slog.Logger   // nil = discard; never gets tool arguments
}

// Validate reports every invalid option at once. NewServer and Handler do
// not fail: they clamp out-of-range values (see [NewServer]). RunStdio and
// ServeHTTP return Validate's error, so a typo on the command line is
// reported rather than silently clamped.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	var errs []error
	if math.IsNaN(o.ErrorRate) || o.ErrorRate < 0 || o.ErrorRate > 1 {
		errs = append(errs, fmt.Errorf("error rate %v is not within [0, 1]", o.ErrorRate))
	}
	if o.Latency < 0 {
		errs = append(errs, fmt.Errorf("latency %v is negative", o.Latency))
	}
	if o.CrashAfter < 0 {
		errs = append(errs, fmt.Errorf("crash-after %d is negative", o.CrashAfter))
	}
	if o.ExtraTools < 0 {
		errs = append(errs, fmt.Errorf("extra tools %d is negative", o.ExtraTools))
	}
	return errors.Join(errs...)
}

// normalize copies opts, fills defaults and clamps out-of-range values.
func normalize(opts *Options) Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case math.IsNaN(o.ErrorRate) || o.ErrorRate < 0:
		o.ErrorRate = 0
	case o.ErrorRate > 1:
		o.ErrorRate = 1
	}
	o.Latency = max(o.Latency, 0)
	o.CrashAfter = max(o.CrashAfter, 0)
	o.ExtraTools = max(o.ExtraTools, 0)
	if o.Exit == nil {
		o.Exit = os.Exit
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// NewServer builds the demo server with the given options (nil = defaults).
//
// Out-of-range options are clamped (ErrorRate to [0, 1], negative values to
// zero); use [Options.Validate] to reject them instead. The returned server
// may serve any number of sessions; fault injection state (the RNG and the
// CrashAfter counter) is shared by all of them.
func NewServer(opts *Options) *mcp.Server {
	o := normalize(opts)
	s := mcp.NewServer(&mcp.Implementation{
		Name:    Name,
		Title:   "switchboard demo server",
		Version: Version,
	}, &mcp.ServerOptions{
		Instructions: "A demo MCP server bundled with switchboard. Its tools are safe to call: " +
			"echo, add, now, sleep and fail (which fails on purpose, to test error handling).",
		Logger: o.Logger,
	})
	s.AddReceivingMiddleware(newFaults(&o).middleware)
	addTools(s)
	addExtraTools(s, o.ExtraTools)
	if o.Writable {
		addWriteTool(s)
	}
	addResources(s)
	addPrompts(s)
	return s
}

// faults injects the configured latency, errors and crash into tools/call.
// It is middleware rather than per-tool code so that every tool, including
// the raw ExtraTools, is covered.
type faults struct {
	errorRate  float64
	latency    time.Duration
	crashAfter int64
	exit       func(int)
	logger     *slog.Logger

	calls atomic.Int64 // answered tools/call requests

	mu  sync.Mutex // guards rng: *rand.Rand is not safe for concurrent use
	rng *rand.Rand
}

func newFaults(o *Options) *faults {
	seed := uint64(o.Seed)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return &faults{
		errorRate:  o.ErrorRate,
		latency:    o.Latency,
		crashAfter: int64(o.CrashAfter),
		exit:       o.Exit,
		logger:     o.Logger,
		rng:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// middleware applies, in order: latency (to every call, including failed
// ones, as a slow upstream would), the injected protocol error (the tool does
// not run), the tool itself, and finally the crash once the answer is on its
// way.
func (f *faults) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != methodCallTool {
			return next(ctx, method, req)
		}
		res, err := f.call(ctx, method, req, next)
		if n := f.calls.Add(1); n == f.crashAfter {
			f.logger.Warn("demo: crashing as configured", "calls", n, "exit_code", CrashExitCode)
			// The process is about to exit, so this timer needs no owner: it
			// exists only to let the SDK write the answer first.
			time.AfterFunc(crashGrace, func() { f.exit(CrashExitCode) })
		}
		return res, err
	}
}

func (f *faults) call(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	if f.latency > 0 {
		t := time.NewTimer(f.latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("injected latency: %w", ctx.Err())
		case <-t.C:
		}
	}
	if f.errorRate > 0 && f.roll() < f.errorRate {
		f.logger.Debug("demo: injecting protocol error", "tool", toolName(req))
		return nil, &jsonrpc.Error{
			Code:    jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("demo: injected fault (error rate %v)", f.errorRate),
		}
	}
	return next(ctx, method, req)
}

func (f *faults) roll() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64()
}

func toolName(req mcp.Request) string {
	if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
		return p.Name
	}
	return ""
}

// Tool inputs and outputs. Their JSON names are the contract stated in the
// input schemas below.
type (
	echoIn struct {
		Text string `json:"text"`
	}
	echoOut struct {
		Text string `json:"text"`
	}
	addIn struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	addOut struct {
		Sum float64 `json:"sum"`
	}
	sleepIn struct {
		MS int64 `json:"ms"`
	}
	failIn struct {
		Mode    string `json:"mode"`
		Message string `json:"message"`
	}
)

// Input schemas are written out, rather than inferred from the structs, so
// the wire contract (names, enums, bounds, defaults) reads in one place.
var (
	echoSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"text": {"type": "string", "description": "The text to return unchanged."}
	},
	"required": ["text"],
	"additionalProperties": false
}`)
	addSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"a": {"type": "number", "description": "First addend."},
		"b": {"type": "number", "description": "Second addend."}
	},
	"required": ["a", "b"],
	"additionalProperties": false
}`)
	nowSchema = json.RawMessage(`{
	"type": "object",
	"properties": {},
	"additionalProperties": false
}`)
	sleepSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"ms": {"type": "integer", "minimum": 0, "maximum": ` + strconv.FormatInt(MaxSleep.Milliseconds(), 10) + `, "description": "How long to sleep, in milliseconds."}
	},
	"required": ["ms"],
	"additionalProperties": false
}`)
	failSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"mode": {"type": "string", "enum": ["tool", "protocol"], "default": "tool",
			"description": "\"tool\": a tool result with isError=true; \"protocol\": a JSON-RPC error response."},
		"message": {"type": "string", "default": "demo failure requested",
			"description": "The error message to return."}
	},
	"additionalProperties": false
}`)
	extraSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"input": {"type": "string", "description": "Any text; returned with the other arguments."}
	}
}`)
)

func ptr[T any](v T) *T { return &v }

// readOnly annotates the demo tools: none of them changes anything or reaches
// outside the process, which is what lets gateway policies treat them as safe.
func readOnly(title string, idempotent bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{
		Title:           title,
		ReadOnlyHint:    true,
		IdempotentHint:  idempotent,
		DestructiveHint: ptr(false),
		OpenWorldHint:   ptr(false),
	}
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

func addTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolEcho,
		Title:       "Echo",
		Description: "Returns the given text exactly as received. Use it to check that a round trip through the gateway preserves arguments.",
		InputSchema: echoSchema,
		Annotations: readOnly("Echo", true),
	}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
		return textResult(in.Text), echoOut(in), nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolAdd,
		Title:       "Add",
		Description: "Adds two numbers a and b and returns their sum.",
		InputSchema: addSchema,
		Annotations: readOnly("Add", true),
	}, func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
		sum := in.A + in.B
		if math.IsInf(sum, 0) {
			// A plain error becomes an isError result without structured content.
			return nil, addOut{}, fmt.Errorf("the sum of %v and %v overflows a 64-bit float", in.A, in.B)
		}
		return textResult(strconv.FormatFloat(sum, 'g', -1, 64)), addOut{Sum: sum}, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolNow,
		Title:       "Current time",
		Description: "Returns the server's current time in UTC, formatted as RFC 3339 with nanoseconds.",
		InputSchema: nowSchema,
		Annotations: readOnly("Current time", false),
	}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return textResult(time.Now().UTC().Format(time.RFC3339Nano)), nil, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:  ToolSleep,
		Title: "Sleep",
		Description: "Waits ms milliseconds, then returns \"slept N ms\". Use it to test timeouts and cancellation; " +
			"a cancelled call returns early with an error.",
		InputSchema: sleepSchema,
		Annotations: readOnly("Sleep", true),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
		d := time.Duration(in.MS) * time.Millisecond
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("sleep of %d ms interrupted: %w", in.MS, ctx.Err())
		case <-t.C:
			return textResult(fmt.Sprintf("slept %d ms", in.MS)), nil, nil
		}
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:  ToolFail,
		Title: "Fail",
		Description: "Always fails, on purpose, to test error handling. mode \"tool\" (default) returns a tool result " +
			"with isError=true; mode \"protocol\" returns a JSON-RPC error. message is the error text.",
		InputSchema: failSchema,
		Annotations: readOnly("Fail", true),
	}, func(_ context.Context, _ *mcp.CallToolRequest, in failIn) (*mcp.CallToolResult, any, error) {
		if in.Mode == "protocol" {
			// The typed AddTool passes a *jsonrpc.Error through as a protocol
			// error; any other error would become an isError result.
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: in.Message}
		}
		return toolError(in.Message), nil, nil
	})
}

// ExtraToolName returns the name of the i-th extra tool (1-based), as
// registered by [Options.ExtraTools].
func ExtraToolName(i int) string {
	return fmt.Sprintf("tool_%04d", i)
}

// ToolWrite is the side-effecting tool of [Options.Writable].
const ToolWrite = "write"

// addWriteTool registers ToolWrite.
func addWriteTool(s *mcp.Server) {
	var mu sync.Mutex
	var journal []string
	type writeIn struct {
		Text string `json:"text" jsonschema:"the text to append"`
	}
	type writeOut struct {
		Entries int `json:"entries"`
	}
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolWrite,
		Description: "Appends text to the demo server's in-memory journal and returns how many entries it holds. Not idempotent: each call adds an entry.",
		Annotations: &mcp.ToolAnnotations{Title: "Write", ReadOnlyHint: false, IdempotentHint: false, DestructiveHint: ptr(false)},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, writeOut, error) {
		mu.Lock()
		journal = append(journal, in.Text)
		n := len(journal)
		mu.Unlock()
		return nil, writeOut{Entries: n}, nil
	})
}

// addExtraTools registers n synthetic tools. They are raw tools, like the
// gateway's proxied ones, and share one schema value and handler, so a
// 1,000-tool server stays cheap to build.
func addExtraTools(s *mcp.Server, n int) {
	h := func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		if !json.Valid(args) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "arguments are not valid JSON"}
		}
		res := textResult(string(args))
		if strings.HasPrefix(strings.TrimSpace(string(args)), "{") {
			res.StructuredContent = args
		}
		return res, nil
	}
	for i := 1; i <= n; i++ {
		s.AddTool(&mcp.Tool{
			Name:        ExtraToolName(i),
			Description: fmt.Sprintf("Synthetic demo tool %d of %d, for catalog-scale tests. Returns its arguments as JSON.", i, n),
			InputSchema: extraSchema,
			Annotations: readOnly("", true),
		}, h)
	}
}

const readme = `# switchboard demo server

A small MCP server bundled with switchboard, used by the default configuration,
the examples, the tests and the benchmarks.

Tools: echo, add, now, sleep, fail. Resources: demo://readme (this text) and
demo://echo/{text}, which returns the text. Prompt: greet.

Started with fault injection (error rate, latency, crash after N calls), it
stands in for an unreliable upstream.
`

func addResources(s *mcp.Server) {
	s.AddResource(&mcp.Resource{
		URI:         ReadmeURI,
		Name:        "readme",
		Title:       "About the demo server",
		Description: "What the demo server offers and what it is for.",
		MIMEType:    "text/markdown",
		Size:        int64(len(readme)),
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
			{URI: ReadmeURI, MIMEType: "text/markdown", Text: readme},
		}}, nil
	})

	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: EchoTemplateURI,
		Name:        "echo",
		Title:       "Echo resource",
		Description: "Returns the text embedded in the URI (percent-decoded).",
		MIMEType:    "text/plain",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		raw, ok := strings.CutPrefix(uri, echoResourceBase)
		if !ok {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		text, err := url.PathUnescape(raw)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("decoding %q: %v", uri, err)}
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
			{URI: uri, MIMEType: "text/plain", Text: text},
		}}, nil
	})
}

func addPrompts(s *mcp.Server) {
	s.AddPrompt(&mcp.Prompt{
		Name:        PromptGreet,
		Title:       "Greet",
		Description: "Asks the model to greet someone by name.",
		Arguments: []*mcp.PromptArgument{
			{Name: "name", Description: "Who to greet.", Required: true},
		},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		name := req.Params.Arguments["name"]
		if name == "" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `prompt "greet": argument "name" is required`}
		}
		return &mcp.GetPromptResult{
			Description: "Greet " + name,
			Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Say hello to " + name + "."}},
			},
		}, nil
	})
}
