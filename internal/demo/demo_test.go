package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectServer connects a client to s over in-memory transports and closes
// both ends when the test ends.
func connectServer(t *testing.T, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "v0"}, nil)
	cs, err := c.Connect(t.Context(), ct, nil)
	if err != nil {
		ss.Close()
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

func connect(t *testing.T, opts *Options) *mcp.ClientSession {
	t.Helper()
	return connectServer(t, NewServer(opts))
}

// outcome is the part of a tool result the demo's contracts are about.
type outcome struct {
	IsError    bool
	Texts      []string
	Structured any
}

func summarize(t *testing.T, res *mcp.CallToolResult) outcome {
	t.Helper()
	o := outcome{IsError: res.IsError, Structured: res.StructuredContent}
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content %T, want *mcp.TextContent", c)
		}
		o.Texts = append(o.Texts, tc.Text)
	}
	return o
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, error) {
	t.Helper()
	return cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
}

func TestInitialize(t *testing.T) {
	cs := connect(t, nil)
	res := cs.InitializeResult()
	if diff := cmp.Diff(&mcp.Implementation{Name: Name, Title: "switchboard demo server", Version: Version}, res.ServerInfo); diff != "" {
		t.Errorf("server info (-want +got):\n%s", diff)
	}
	caps := res.Capabilities
	if caps.Tools == nil || caps.Resources == nil || caps.Prompts == nil {
		t.Errorf("capabilities %+v: want tools, resources and prompts", caps)
	}
	if res.Instructions == "" {
		t.Error("no instructions")
	}
}

func TestListTools(t *testing.T) {
	cs := connect(t, nil)
	type schema struct {
		Type       string         `json:"type"`
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	type shape struct {
		Props    []string
		Required []string
		ReadOnly bool
	}
	want := map[string]shape{
		ToolAdd:   {Props: []string{"a", "b"}, Required: []string{"a", "b"}, ReadOnly: true},
		ToolEcho:  {Props: []string{"text"}, Required: []string{"text"}, ReadOnly: true},
		ToolFail:  {Props: []string{"message", "mode"}, ReadOnly: true},
		ToolNow:   {ReadOnly: true},
		ToolSleep: {Props: []string{"ms"}, Required: []string{"ms"}, ReadOnly: true},
	}
	got := map[string]shape{}
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatalf("listing tools: %v", err)
		}
		if tool.Description == "" {
			t.Errorf("tool %q has no description", tool.Name)
		}
		if tool.Annotations == nil {
			t.Fatalf("tool %q has no annotations", tool.Name)
		}
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s schema
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("tool %q schema: %v", tool.Name, err)
		}
		if s.Type != "object" {
			t.Errorf("tool %q schema type %q, want object", tool.Name, s.Type)
		}
		got[tool.Name] = shape{
			Props:    slices.Sorted(maps.Keys(s.Properties)),
			Required: s.Required,
			ReadOnly: tool.Annotations.ReadOnlyHint,
		}
	}
	if len(got) != BuiltinTools {
		t.Errorf("got %d tools, want BuiltinTools = %d", len(got), BuiltinTools)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

func TestCallTool(t *testing.T) {
	cs := connect(t, nil)
	tests := []struct {
		name string
		tool string
		args any
		want outcome
	}{
		{"echo ascii", ToolEcho, map[string]any{"text": "hello"},
			outcome{Texts: []string{"hello"}, Structured: map[string]any{"text": "hello"}}},
		{"echo unicode and escapes", ToolEcho, map[string]any{"text": "héllo, 世界 👋\n\t\"q\" \\ <&>"},
			outcome{Texts: []string{"héllo, 世界 👋\n\t\"q\" \\ <&>"}, Structured: map[string]any{"text": "héllo, 世界 👋\n\t\"q\" \\ <&>"}}},
		{"echo empty", ToolEcho, map[string]any{"text": ""},
			outcome{Texts: []string{""}, Structured: map[string]any{"text": ""}}},
		{"echo whitespace", ToolEcho, map[string]any{"text": "  padded  "},
			outcome{Texts: []string{"  padded  "}, Structured: map[string]any{"text": "  padded  "}}},
		{"add integers", ToolAdd, map[string]any{"a": 1, "b": 2},
			outcome{Texts: []string{"3"}, Structured: map[string]any{"sum": 3.0}}},
		{"add fractions", ToolAdd, map[string]any{"a": 0.1, "b": 0.2},
			outcome{Texts: []string{"0.30000000000000004"}, Structured: map[string]any{"sum": 0.30000000000000004}}},
		{"add negative", ToolAdd, map[string]any{"a": -1.5, "b": 0.5},
			outcome{Texts: []string{"-1"}, Structured: map[string]any{"sum": -1.0}}},
		{"add overflow", ToolAdd, map[string]any{"a": 1e308, "b": 1e308},
			outcome{IsError: true, Texts: []string{"the sum of 1e+308 and 1e+308 overflows a 64-bit float"}}},
		{"sleep zero", ToolSleep, map[string]any{"ms": 0}, outcome{Texts: []string{"slept 0 ms"}}},
		{"sleep short", ToolSleep, map[string]any{"ms": 3}, outcome{Texts: []string{"slept 3 ms"}}},
		{"fail default", ToolFail, map[string]any{}, outcome{IsError: true, Texts: []string{"demo failure requested"}}},
		{"fail no arguments", ToolFail, nil, outcome{IsError: true, Texts: []string{"demo failure requested"}}},
		{"fail tool mode", ToolFail, map[string]any{"mode": "tool", "message": "boom"},
			outcome{IsError: true, Texts: []string{"boom"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := call(t, cs, tt.tool, tt.args)
			if err != nil {
				t.Fatalf("CallTool(%s, %v): %v", tt.tool, tt.args, err)
			}
			if diff := cmp.Diff(tt.want, summarize(t, res)); diff != "" {
				t.Errorf("CallTool(%s, %v) (-want +got):\n%s", tt.tool, tt.args, diff)
			}
		})
	}
}

// Invalid arguments are rejected by schema validation, as a tool error the
// model can read and correct, before the tool runs.
func TestCallToolInvalidArguments(t *testing.T) {
	cs := connect(t, nil)
	tests := []struct {
		name string
		tool string
		args any
	}{
		{"echo missing text", ToolEcho, map[string]any{}},
		{"echo text not a string", ToolEcho, map[string]any{"text": 1}},
		{"echo unknown property", ToolEcho, map[string]any{"text": "x", "txt": "y"}},
		{"add missing b", ToolAdd, map[string]any{"a": 1}},
		{"add string operand", ToolAdd, map[string]any{"a": "1", "b": 2}},
		{"now with argument", ToolNow, map[string]any{"tz": "UTC"}},
		{"sleep negative", ToolSleep, map[string]any{"ms": -1}},
		{"sleep fractional", ToolSleep, map[string]any{"ms": 1.5}},
		{"sleep too long", ToolSleep, map[string]any{"ms": MaxSleep.Milliseconds() + 1}},
		{"fail unknown mode", ToolFail, map[string]any{"mode": "panic"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := call(t, cs, tt.tool, tt.args)
			if err != nil {
				t.Fatalf("CallTool(%s, %v): %v, want an isError result", tt.tool, tt.args, err)
			}
			got := summarize(t, res)
			if !got.IsError || len(got.Texts) != 1 || got.Texts[0] == "" {
				t.Errorf("CallTool(%s, %v) = %+v, want isError with a message", tt.tool, tt.args, got)
			}
		})
	}
}

func TestUnknownTool(t *testing.T) {
	cs := connect(t, nil)
	_, err := call(t, cs, "nope", map[string]any{})
	if jerr := asWireError(t, err); jerr.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("unknown tool: code %d, want %d", jerr.Code, jsonrpc.CodeInvalidParams)
	}
}

func asWireError(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) {
		t.Fatalf("error %v (%T), want a *jsonrpc.Error", err, err)
	}
	return jerr
}

func TestFailProtocol(t *testing.T) {
	cs := connect(t, nil)
	res, err := call(t, cs, ToolFail, map[string]any{"mode": "protocol", "message": "kaboom"})
	if err == nil {
		t.Fatalf("fail(protocol) = %+v, want a JSON-RPC error", summarize(t, res))
	}
	jerr := asWireError(t, err)
	if diff := cmp.Diff(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "kaboom"}, jerr); diff != "" {
		t.Errorf("fail(protocol) error (-want +got):\n%s", diff)
	}
	// A protocol error ends the call, not the session.
	if _, err := call(t, cs, ToolEcho, map[string]any{"text": "still here"}); err != nil {
		t.Errorf("echo after protocol error: %v", err)
	}
}

func TestNow(t *testing.T) {
	cs := connect(t, nil)
	before := time.Now()
	res, err := call(t, cs, ToolNow, map[string]any{})
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	got := summarize(t, res)
	if got.IsError || len(got.Texts) != 1 || got.Structured != nil {
		t.Fatalf("now = %+v, want one text", got)
	}
	text := got.Texts[0]
	ts, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		t.Fatalf("now = %q: %v", text, err)
	}
	if !strings.HasSuffix(text, "Z") {
		t.Errorf("now = %q, want UTC (suffix Z)", text)
	}
	if ts.Before(before) || ts.After(after) {
		t.Errorf("now = %v, want within [%v, %v]", ts, before, after)
	}
}

// recordCalls adds an outermost middleware to s that reports each tools/call
// as it starts and the result it ends with.
func recordCalls(s *mcp.Server) (started chan string, ended chan *mcp.CallToolResult) {
	started = make(chan string, 10)
	ended = make(chan *mcp.CallToolResult, 10)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			started <- toolName(req)
			res, err := next(ctx, method, req)
			r, _ := res.(*mcp.CallToolResult)
			if err != nil {
				r = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "protocol error: " + err.Error()}}}
			}
			ended <- r
			return res, err
		}
	})
	return started, ended
}

// Cancelling a sleep call ends it on the server long before MaxSleep: if the
// tool ignored its ctx, this test would hang until the test binary times out.
func TestSleepCancelled(t *testing.T) {
	s := NewServer(nil)
	started, ended := recordCalls(s)
	cs := connectServer(t, s)

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolSleep, Arguments: map[string]any{"ms": MaxSleep.Milliseconds()}})
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client CallTool: %v, want context.Canceled", err)
	}
	var got outcome
	select {
	case res := <-ended:
		got = summarize(t, res)
	case <-time.After(30 * time.Second):
		t.Fatal("sleep still running on the server after its call was cancelled")
	}
	if !got.IsError || len(got.Texts) != 1 || !strings.Contains(got.Texts[0], "interrupted") {
		t.Errorf("server result of cancelled sleep = %+v, want an isError result saying interrupted", got)
	}
}

func TestResources(t *testing.T) {
	cs := connect(t, nil)
	ctx := t.Context()

	lr, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range lr.Resources {
		uris = append(uris, r.URI+" "+r.MIMEType)
	}
	if diff := cmp.Diff([]string{"demo://readme text/markdown"}, uris); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	lt, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var templates []string
	for _, r := range lt.ResourceTemplates {
		templates = append(templates, r.URITemplate)
	}
	if diff := cmp.Diff([]string{"demo://echo/{text}"}, templates); diff != "" {
		t.Errorf("resource templates (-want +got):\n%s", diff)
	}

	tests := []struct {
		uri  string
		want *mcp.ResourceContents
	}{
		{"demo://readme", &mcp.ResourceContents{URI: "demo://readme", MIMEType: "text/markdown", Text: readme}},
		{"demo://echo/hello", &mcp.ResourceContents{URI: "demo://echo/hello", MIMEType: "text/plain", Text: "hello"}},
		{"demo://echo/h%C3%A9llo%20w%C3%B6rld%21", &mcp.ResourceContents{URI: "demo://echo/h%C3%A9llo%20w%C3%B6rld%21", MIMEType: "text/plain", Text: "héllo wörld!"}},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: tt.uri})
			if err != nil {
				t.Fatalf("ReadResource(%s): %v", tt.uri, err)
			}
			if diff := cmp.Diff([]*mcp.ResourceContents{tt.want}, res.Contents); diff != "" {
				t.Errorf("ReadResource(%s) (-want +got):\n%s", tt.uri, diff)
			}
		})
	}
	if !strings.Contains(readme, "switchboard") {
		t.Errorf("readme does not mention switchboard:\n%s", readme)
	}

	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://nope"})
	if jerr := asWireError(t, err); jerr.Code != mcp.CodeResourceNotFound {
		t.Errorf("ReadResource(demo://nope): code %d, want %d", jerr.Code, mcp.CodeResourceNotFound)
	}
}

func TestPrompt(t *testing.T) {
	cs := connect(t, nil)
	ctx := t.Context()

	lp, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lp.Prompts) != 1 {
		t.Fatalf("got %d prompts, want 1", len(lp.Prompts))
	}
	p := lp.Prompts[0]
	if diff := cmp.Diff([]*mcp.PromptArgument{{Name: "name", Description: "Who to greet.", Required: true}}, p.Arguments); p.Name != PromptGreet || diff != "" {
		t.Errorf("prompt %q arguments (-want +got):\n%s", p.Name, diff)
	}

	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: PromptGreet, Arguments: map[string]string{"name": "Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Say hello to Ada."}}}
	if diff := cmp.Diff(want, res.Messages); diff != "" {
		t.Errorf("GetPrompt(greet, Ada) (-want +got):\n%s", diff)
	}

	for _, args := range []map[string]string{nil, {"name": ""}} {
		_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: PromptGreet, Arguments: args})
		if jerr := asWireError(t, err); jerr.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("GetPrompt(greet, %v): code %d, want %d", args, jerr.Code, jsonrpc.CodeInvalidParams)
		}
	}
}

func TestExtraTools(t *testing.T) {
	const n = 1000
	cs := connect(t, &Options{ExtraTools: n})
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatalf("listing tools: %v", err)
		}
		if tool.Description == "" {
			t.Errorf("tool %q has no description", tool.Name)
		}
		names = append(names, tool.Name)
	}
	if len(names) != 1005 {
		t.Fatalf("listed %d tools, want 1005", len(names))
	}
	for _, want := range []string{ToolEcho, "tool_0001", "tool_0500", "tool_1000"} {
		if !slices.Contains(names, want) {
			t.Errorf("tool %q not listed", want)
		}
	}
	if slices.Contains(names, "tool_1001") || slices.Contains(names, "tool_0000") {
		t.Error("tools outside tool_0001..tool_1000 listed")
	}

	tests := []struct {
		name string
		args any
		want outcome
	}{
		{"object", map[string]any{"input": "x", "n": 1},
			outcome{Texts: []string{`{"input":"x","n":1}`}, Structured: map[string]any{"input": "x", "n": 1.0}}},
		{"no arguments", nil, outcome{Texts: []string{`{}`}, Structured: map[string]any{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := call(t, cs, "tool_0042", tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(t, res)); diff != "" {
				t.Errorf("tool_0042(%v) (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestErrorRate(t *testing.T) {
	t.Run("always", func(t *testing.T) {
		cs := connect(t, &Options{ErrorRate: 1, ExtraTools: 1})
		for _, tc := range []struct {
			tool string
			args any
		}{
			{ToolEcho, map[string]any{"text": "x"}},
			{ToolAdd, map[string]any{"a": 1, "b": 2}},
			{ToolFail, map[string]any{}},
			{"tool_0001", map[string]any{}},
			{ToolEcho, map[string]any{"text": "again"}},
		} {
			res, err := call(t, cs, tc.tool, tc.args)
			if err == nil {
				t.Errorf("%s = %+v, want a protocol error", tc.tool, summarize(t, res))
				continue
			}
			if jerr := asWireError(t, err); jerr.Code != jsonrpc.CodeInternalError {
				t.Errorf("%s: code %d, want %d", tc.tool, jerr.Code, jsonrpc.CodeInternalError)
			}
		}
		// Only tools/call is affected.
		if _, err := cs.ListTools(t.Context(), nil); err != nil {
			t.Errorf("ListTools: %v", err)
		}
		if _, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: ReadmeURI}); err != nil {
			t.Errorf("ReadResource: %v", err)
		}
	})

	// With a fixed seed the sequence is deterministic, so a rate of one half
	// must produce both outcomes in 100 calls, and the same pattern twice.
	t.Run("seeded half", func(t *testing.T) {
		pattern := func() string {
			cs := connect(t, &Options{ErrorRate: 0.5, Seed: 42})
			var b strings.Builder
			for range 100 {
				if _, err := call(t, cs, ToolEcho, map[string]any{"text": "x"}); err != nil {
					asWireError(t, err)
					b.WriteByte('E')
				} else {
					b.WriteByte('.')
				}
			}
			return b.String()
		}
		first := pattern()
		if !strings.Contains(first, "E") || !strings.Contains(first, ".") {
			t.Errorf("error pattern %s: want both errors and successes", first)
		}
		if second := pattern(); second != first {
			t.Errorf("same seed, different patterns:\n%s\n%s", first, second)
		}
	})

	t.Run("never", func(t *testing.T) {
		cs := connect(t, &Options{ErrorRate: 0})
		for range 20 {
			if _, err := call(t, cs, ToolEcho, map[string]any{"text": "x"}); err != nil {
				t.Fatalf("echo with ErrorRate 0: %v", err)
			}
		}
	})
}

func TestLatency(t *testing.T) {
	const latency = 30 * time.Millisecond
	cs := connect(t, &Options{Latency: latency, ExtraTools: 1})
	for _, tool := range []string{ToolEcho, "tool_0001"} {
		start := time.Now()
		if _, err := call(t, cs, tool, map[string]any{"text": "x"}); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		// A lower bound only: the timer guarantees it, so it cannot flake.
		if elapsed := time.Since(start); elapsed < latency {
			t.Errorf("%s answered after %v, want at least the injected %v", tool, elapsed, latency)
		}
	}
}

// The test's Exit blocks like os.Exit never returns. If the server exited
// before the answer was sent, the second call would never be answered.
func TestCrashAfter(t *testing.T) {
	exited := make(chan int, 10)
	release := make(chan struct{})
	cs := connect(t, &Options{CrashAfter: 2, Exit: func(code int) {
		exited <- code
		<-release
	}})
	// Registered after connect, so it runs before the session cleanup, which
	// waits for handlers and would otherwise wait for Exit forever.
	t.Cleanup(func() { close(release) })

	if _, err := call(t, cs, ToolEcho, map[string]any{"text": "one"}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	select {
	case code := <-exited:
		t.Fatalf("Exit(%d) after the first call, want after the second", code)
	default:
	}
	// Bounded, so that an answer lost to an early exit fails the test
	// instead of hanging it.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEcho, Arguments: map[string]any{"text": "two"}})
	if err != nil {
		t.Fatalf("second call: %v, want its answer before the exit", err)
	}
	if diff := cmp.Diff([]string{"two"}, summarize(t, res).Texts); diff != "" {
		t.Errorf("second call (-want +got):\n%s", diff)
	}
	select {
	case code := <-exited:
		if code != CrashExitCode {
			t.Errorf("Exit(%d), want Exit(%d)", code, CrashExitCode)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Exit not called after the second call")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		opts *Options
		want []string // substrings of the error, nil for valid
	}{
		{"nil", nil, nil},
		{"zero", &Options{}, nil},
		{"all set", &Options{ErrorRate: 1, Latency: time.Second, CrashAfter: 3, ExtraTools: 1000, Seed: 7}, nil},
		{"rate above one", &Options{ErrorRate: 1.5}, []string{"error rate 1.5"}},
		{"everything wrong", &Options{ErrorRate: -0.1, Latency: -1, CrashAfter: -1, ExtraTools: -2},
			[]string{"error rate -0.1", "latency -1ns", "crash-after -1", "extra tools -2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.want == nil {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error mentioning %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

// NewServer cannot fail, so it clamps what Validate would reject.
func TestNewServerClamps(t *testing.T) {
	cs := connect(t, &Options{ErrorRate: -3, Latency: -time.Hour, CrashAfter: -1, ExtraTools: -5})
	n := 0
	for _, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != BuiltinTools {
		t.Errorf("listed %d tools, want %d", n, BuiltinTools)
	}
	if _, err := call(t, cs, ToolEcho, map[string]any{"text": "x"}); err != nil {
		t.Errorf("echo: %v", err)
	}
}

func TestExtraToolName(t *testing.T) {
	var got []string
	for _, i := range []int{1, 42, 1000, 12345} {
		got = append(got, ExtraToolName(i))
	}
	if diff := cmp.Diff([]string{"tool_0001", "tool_0042", "tool_1000", "tool_12345"}, got); diff != "" {
		t.Errorf("ExtraToolName (-want +got):\n%s", diff)
	}
}

// Concurrent calls share the RNG and the crash counter; run with -race.
func TestConcurrentCalls(t *testing.T) {
	exited := make(chan int, 1)
	cs := connect(t, &Options{ErrorRate: 0.3, Seed: 1, CrashAfter: 40, Exit: func(code int) { exited <- code }})
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			text := fmt.Sprint(i)
			res, err := call(t, cs, ToolEcho, map[string]any{"text": text})
			var jerr *jsonrpc.Error
			switch {
			case errors.As(err, &jerr):
				// An injected fault.
			case err != nil:
				t.Errorf("echo(%q): %v, want a result or a *jsonrpc.Error", text, err)
			case len(res.Content) != 1:
				t.Errorf("echo(%q): %d contents, want 1", text, len(res.Content))
			default:
				if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != text {
					t.Errorf("echo(%q) = %#v", text, res.Content[0])
				}
			}
		})
	}
	wg.Wait()
	select {
	case code := <-exited:
		if code != CrashExitCode {
			t.Errorf("Exit(%d), want %d", code, CrashExitCode)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Exit not called after the 40th call")
	}
}
