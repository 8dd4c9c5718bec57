package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// relayHooks tell a test what a relay server's slow tool is doing.
type relayHooks struct {
	started   func(marker string) // the slow call began
	cancelled func(marker string) // the slow call's context ended
}

// stderrHooks report through stderr, for a server that is a child process.
var stderrHooks = relayHooks{
	started:   func(m string) { fmt.Fprintln(os.Stderr, "slow started "+m) },
	cancelled: func(m string) { fmt.Fprintln(os.Stderr, "slow cancelled "+m) },
}

// newRelayServer is the fake upstream of the relay tests. Its tools take
// {"marker": "..."} and ask for input the multi round-trip way, which the SDK
// turns into server-to-client requests for a legacy client:
//   - work logs "log <marker>" and reports progress twice ("progress
//     <marker> i/2", with the request's token) and, with "sample": true,
//     asks for sampling of "sample <marker>" and returns the answer;
//   - elicit asks for a name ("name for <marker>") and returns "<action>
//     <name>";
//   - roots asks for the roots and returns their URIs, joined by spaces;
//   - slow reports through hooks when it starts and when it is cancelled;
//   - touch announces an update of the resource at {"uri": ...};
//   - subs returns the subscribed URIs, joined by spaces.
//
// Completion returns "<argument name>=<argument value>".
func newRelayServer(hooks relayHooks, protocols ...string) *mcp.Server {
	var (
		mu   sync.Mutex
		subs = map[string]bool{}
	)
	var s *mcp.Server
	s = mcp.NewServer(&mcp.Implementation{Name: "relay", Version: "v1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: protocols,
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			mu.Lock()
			defer mu.Unlock()
			subs[req.Params.URI] = true
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			mu.Lock()
			defer mu.Unlock()
			delete(subs, req.Params.URI)
			return nil
		},
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			a := req.Params.Argument
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{a.Name + "=" + a.Value}}}, nil
		},
	})
	obj := json.RawMessage(`{"type":"object"}`)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	type args struct {
		Marker string `json:"marker"`
		Sample bool   `json:"sample"`
		URI    string `json:"uri"`
	}
	parse := func(req *mcp.CallToolRequest) (args, error) {
		var a args
		err := json.Unmarshal(req.Params.Arguments, &a)
		return a, err
	}
	// tool adds a tool that asks for input once: ask returns the request
	// (nil: no input needed, use done's result), done turns the answer into
	// the result.
	tool := func(name string, ask func(context.Context, *mcp.CallToolRequest, args) (mcp.InputRequest, *mcp.CallToolResult, error), done func(args, mcp.InputResponse) string) {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a, err := parse(req)
			if err != nil {
				return nil, err
			}
			if answer, ok := req.Params.InputResponses["ask"]; ok {
				return text(done(a, answer)), nil
			}
			ir, res, err := ask(ctx, req, a)
			if err != nil || ir == nil {
				return res, err
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"ask": ir}}, nil
		})
	}

	tool("work", func(ctx context.Context, req *mcp.CallToolRequest, a args) (mcp.InputRequest, *mcp.CallToolResult, error) {
		if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "log " + a.Marker}); err != nil {
			return nil, nil, err
		}
		if token := req.Params.GetProgressToken(); token != nil {
			for i := 1; i <= 2; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: float64(i), Total: 2, Message: fmt.Sprintf("progress %s %d/2", a.Marker, i),
				}); err != nil {
					return nil, nil, err
				}
			}
		}
		if !a.Sample {
			return nil, text("done " + a.Marker), nil
		}
		return &mcp.CreateMessageParams{
			MaxTokens: 10,
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "sample " + a.Marker}}},
		}, nil, nil
	}, func(_ args, answer mcp.InputResponse) string {
		var c mcp.Content
		switch r := answer.(type) {
		case *mcp.CreateMessageResult:
			c = r.Content
		case *mcp.CreateMessageWithToolsResult:
			if len(r.Content) == 1 {
				c = r.Content[0]
			}
		}
		if tc, ok := c.(*mcp.TextContent); ok {
			return tc.Text
		}
		return fmt.Sprintf("unexpected sampling answer %T", answer)
	})

	tool("elicit", func(_ context.Context, _ *mcp.CallToolRequest, a args) (mcp.InputRequest, *mcp.CallToolResult, error) {
		return &mcp.ElicitParams{
			Message:         "name for " + a.Marker,
			RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`),
		}, nil, nil
	}, func(_ args, answer mcp.InputResponse) string {
		r, ok := answer.(*mcp.ElicitResult)
		if !ok {
			return fmt.Sprintf("unexpected elicitation answer %T", answer)
		}
		return fmt.Sprintf("%s %v", r.Action, r.Content["name"])
	})

	tool("roots", func(context.Context, *mcp.CallToolRequest, args) (mcp.InputRequest, *mcp.CallToolResult, error) {
		return &mcp.ListRootsParams{}, nil, nil
	}, func(_ args, answer mcp.InputResponse) string {
		r, ok := answer.(*mcp.ListRootsResult)
		if !ok {
			return fmt.Sprintf("unexpected roots answer %T", answer)
		}
		var uris []string
		for _, root := range r.Roots {
			uris = append(uris, root.URI)
		}
		return strings.Join(uris, " ")
	})

	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a, err := parse(req)
		if err != nil {
			return nil, err
		}
		hooks.started(a.Marker)
		<-ctx.Done()
		hooks.cancelled(a.Marker)
		return nil, ctx.Err()
	})
	s.AddTool(&mcp.Tool{Name: "touch", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a, err := parse(req)
		if err != nil {
			return nil, err
		}
		if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: a.URI}); err != nil {
			return nil, err
		}
		return text("touched"), nil
	})
	s.AddTool(&mcp.Tool{Name: "subs", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		defer mu.Unlock()
		uris := slices.Sorted(func(yield func(string) bool) {
			for u := range subs {
				if !yield(u) {
					return
				}
			}
		})
		return text(strings.Join(uris, " ")), nil
	})
	s.AddResource(&mcp.Resource{Name: "watched", URI: "file:///watched"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "w"}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
		})
	return s
}

func runRelay(protocols ...string) {
	if err := newRelayServer(stderrHooks, protocols...).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

// relayHTTP is a relay server served over sse or http, with counters of its
// sessions.
type relayHTTP struct {
	url       string
	srv       *mcp.Server
	mu        sync.Mutex
	inits     int                      // sessions initialized, ever
	started   map[string]chan struct{} // by marker: closed when the slow call starts
	cancelled map[string]chan struct{} // by marker: closed when the slow call is cancelled
}

func (h *relayHTTP) signal(m map[string]chan struct{}, marker string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.chanLocked(m, marker))
}

func (h *relayHTTP) chanLocked(m map[string]chan struct{}, marker string) chan struct{} {
	c := m[marker]
	if c == nil {
		c = make(chan struct{})
		m[marker] = c
	}
	return c
}

// wait returns the channel closed when the slow call of marker starts
// (started) or is cancelled.
func (h *relayHTTP) wait(started bool, marker string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if started {
		return h.chanLocked(h.started, marker)
	}
	return h.chanLocked(h.cancelled, marker)
}

func (h *relayHTTP) initialized() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inits
}

// live counts the server's open sessions.
func (h *relayHTTP) live() int {
	n := 0
	for range h.srv.Sessions() {
		n++
	}
	return n
}

// handler serves the relay server over transport.
func (h *relayHTTP) handler(t *testing.T, transport string, protocols ...string) http.Handler {
	t.Helper()
	h.started, h.cancelled = map[string]chan struct{}{}, map[string]chan struct{}{}
	h.srv = newRelayServer(relayHooks{
		started:   func(m string) { h.signal(h.started, m) },
		cancelled: func(m string) { h.signal(h.cancelled, m) },
	}, protocols...)
	h.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "initialize" { // after a failed server/discover: the server speaks the legacy protocol
				h.mu.Lock()
				h.inits++
				h.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	getServer := func(*http.Request) *mcp.Server { return h.srv }
	switch transport {
	case config.TransportHTTP:
		return mcp.NewStreamableHTTPHandler(getServer, nil)
	case config.TransportSSE:
		return mcp.NewSSEHandler(getServer, nil)
	}
	t.Fatalf("unknown transport %q", transport)
	return nil
}

// serveRelay serves a relay server over transport until the test ends.
func serveRelay(t *testing.T, transport string, protocols ...string) *relayHTTP {
	t.Helper()
	h := &relayHTTP{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h.handler(t, transport, protocols...)}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() }) // registered before the Manager's Close, so it runs after it
	h.url = "http://" + l.Addr().String()
	return h
}

// fakePeer is a downstream client that records what reaches it and answers
// requests with its ID in the answer.
type fakePeer struct {
	id   string
	caps *mcp.ClientCapabilities
	done chan struct{}

	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []string
	asked    []string // sampling prompts, elicitation messages, "roots"
	marks    []any    // callMark of the context of everything that reached it
	changed  chan struct{}
}

// callMark is a context key that tells a call's context (and those derived
// from it) apart.
type callMark struct{}

// allCaps declares everything a peer can be asked.
var allCaps = &mcp.ClientCapabilities{
	Sampling:    &mcp.SamplingCapabilities{},
	Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}},
	RootsV2:     &mcp.RootCapabilities{},
}

func newPeer(id string, caps *mcp.ClientCapabilities) *fakePeer {
	return &fakePeer{id: id, caps: caps, done: make(chan struct{}), changed: make(chan struct{}, 1)}
}

func (p *fakePeer) record(ctx context.Context, f func()) {
	p.mu.Lock()
	f()
	p.marks = append(p.marks, ctx.Value(callMark{}))
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

func (p *fakePeer) ID() string                            { return p.id }
func (p *fakePeer) Done() <-chan struct{}                 { return p.done }
func (p *fakePeer) Capabilities() *mcp.ClientCapabilities { return p.caps }
func (p *fakePeer) leave()                                { close(p.done) }
func (p *fakePeer) snapshot() (progress []*mcp.ProgressNotificationParams, logs, asked []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.progress), slices.Clone(p.logs), slices.Clone(p.asked)
}

// contexts returns the callMark of the context of everything that reached p.
func (p *fakePeer) contexts() []any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.marks)
}

func (p *fakePeer) NotifyProgress(ctx context.Context, n *mcp.ProgressNotificationParams) error {
	p.record(ctx, func() { p.progress = append(p.progress, n) })
	return nil
}

func (p *fakePeer) Log(ctx context.Context, n *mcp.LoggingMessageParams) error {
	p.record(ctx, func() { p.logs = append(p.logs, fmt.Sprint(n.Data)) })
	return nil
}

func (p *fakePeer) CreateMessage(ctx context.Context, r *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	prompt := ""
	if len(r.Messages) > 0 {
		if tc, ok := r.Messages[0].Content.(*mcp.TextContent); ok {
			prompt = tc.Text
		}
	}
	p.record(ctx, func() { p.asked = append(p.asked, prompt) })
	return &mcp.CreateMessageResult{Role: "assistant", Model: "fake", Content: &mcp.TextContent{Text: p.id + " answers " + prompt}}, nil
}

func (p *fakePeer) Elicit(ctx context.Context, r *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	p.record(ctx, func() { p.asked = append(p.asked, r.Message) })
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": p.id}}, nil
}

func (p *fakePeer) ListRoots(ctx context.Context, _ *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	p.record(ctx, func() { p.asked = append(p.asked, "roots") })
	return &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///" + p.id}}}, nil
}
