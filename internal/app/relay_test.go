package app_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixture"
)

// relayClient is a go-sdk client that answers sampling and elicitation and
// records what the gateway relays to it.
type relayClient struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
	samples  int
	elicits  int
}

func (rc *relayClient) options(tag string) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			rc.mu.Lock()
			rc.samples++
			rc.mu.Unlock()
			return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant",
				Content: &mcp.TextContent{Text: "sampled by " + tag}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			rc.mu.Lock()
			rc.elicits++
			rc.mu.Unlock()
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			rc.mu.Lock()
			rc.progress = append(rc.progress, req.Params)
			rc.mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			rc.mu.Lock()
			rc.logs = append(rc.logs, req.Params)
			rc.mu.Unlock()
		},
	}
}

// TestEverythingRelay is G3: server-everything's sampling, elicitation and
// progress tools work end to end through the gateway from a go-sdk client
// of either revision (2026-07-28 gets them as input_required results, the
// classic server asking with requests of its own), with the upstream over
// stdio and over Streamable HTTP.
func TestEverythingRelay(t *testing.T) {
	js := everythingPath(t)
	httpPort := startEverythingHTTP(t, "streamableHttp")
	yaml := fmt.Sprintf(`
servers:
  evs:
    transport: stdio
    command: node
    args: [%q, stdio]
    auto_start: true
  evh:
    transport: http
    url: http://127.0.0.1:%d/mcp
    auto_start: true
`, js, httpPort)
	g := startGateway(t, yaml, nil)
	for _, tc := range []struct{ server, revision string }{
		{"evs", "2026-07-28"}, {"evh", "2026-07-28"}, {"evs", "2025-11-25"}, {"evh", "2025-11-25"},
	} {
		server := tc.server
		t.Run(server+"/"+tc.revision, func(t *testing.T) {
			rc := &relayClient{}
			c := mcp.NewClient(&mcp.Implementation{Name: "relay-test", Version: "1"}, rc.options(server))
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.url() + "/mcp"},
				&mcp.ClientSessionOptions{ProtocolVersion: tc.revision})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: server + ".trigger-sampling-request",
				Arguments: map[string]any{"prompt": "hi", "maxTokens": 10}})
			if err != nil || res.IsError {
				t.Fatalf("sampling: %v %+v", err, res)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "sampled by "+server) {
				t.Errorf("sampling result = %q, want the client's answer", text)
			}

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: server + ".trigger-elicitation-request", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("elicitation: %v %+v", err, res)
			}

			params := &mcp.CallToolParams{Name: server + ".trigger-long-running-operation",
				Arguments: map[string]any{"duration": 1, "steps": 3}}
			params.SetProgressToken("tok-" + server)
			if res, err = cs.CallTool(ctx, params); err != nil || res.IsError {
				t.Fatalf("long-running: %v %+v", err, res)
			}
			// The gateway relays every notification before the result, but
			// the go-sdk client hands notifications to a handler goroutine
			// that its response can overtake: give the client a moment.
			waitFor(t, "3 progress notifications", func() bool {
				rc.mu.Lock()
				defer rc.mu.Unlock()
				return len(rc.progress) >= 3
			})
			rc.mu.Lock()
			defer rc.mu.Unlock()
			if rc.samples != 1 || rc.elicits != 1 {
				t.Errorf("client answered %d sampling and %d elicitation requests, want 1 and 1", rc.samples, rc.elicits)
			}
			if len(rc.progress) < 3 {
				t.Fatalf("got %d progress notifications, want 3", len(rc.progress))
			}
			for _, p := range rc.progress {
				if p.ProgressToken != "tok-"+server {
					t.Errorf("progress token = %v, want the caller's own", p.ProgressToken)
				}
			}
		})
	}
}

// TestFiftyClientsShareOneUpstream is G2: 50 concurrent go-sdk clients
// sharing one upstream each receive exactly their own progress notifications
// and log messages, and each sampling request is answered by the client
// whose call raised it. Half of them speak 2025-11-25 (sessions, setLevel),
// half 2026-07-28 (stateless; no setLevel in that revision, so their log
// messages are not counted).
func TestFiftyClientsShareOneUpstream(t *testing.T) {
	fx := httptest.NewServer(fixture.Handler(nil))
	t.Cleanup(fx.Close)
	g := startGateway(t, fmt.Sprintf("servers:\n  fx:\n    transport: http\n    url: %s/mcp\n    auto_start: true\n", fx.URL), nil)

	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			tag := fmt.Sprintf("client-%02d", i)
			var (
				mu       sync.Mutex
				progress []any
				logs     int
				prompts  []string
			)
			c := mcp.NewClient(&mcp.Implementation{Name: tag, Version: "1"}, &mcp.ClientOptions{
				CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					text := ""
					if len(req.Params.Messages) > 0 {
						if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
							text = tc.Text
						}
					}
					mu.Lock()
					prompts = append(prompts, text)
					mu.Unlock()
					return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "answer of " + tag}}, nil
				},
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					progress = append(progress, req.Params.ProgressToken)
					mu.Unlock()
				},
				LoggingMessageHandler: func(context.Context, *mcp.LoggingMessageRequest) {
					mu.Lock()
					logs++
					mu.Unlock()
				},
			})
			legacy := i%2 == 0
			var opts *mcp.ClientSessionOptions
			if legacy {
				opts = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
			}
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.url() + "/mcp"}, opts)
			if err != nil {
				errs <- fmt.Errorf("%s: connect: %w", tag, err)
				return
			}
			defer cs.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
			defer cancel()
			if legacy {
				if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
					errs <- fmt.Errorf("%s: setLevel: %w", tag, err)
					return
				}
			}
			p := &mcp.CallToolParams{Name: "fx.test_tool_with_progress", Arguments: map[string]any{}}
			p.SetProgressToken(tag)
			if _, err := cs.CallTool(ctx, p); err != nil {
				errs <- fmt.Errorf("%s: progress tool: %w", tag, err)
				return
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx.test_tool_with_logging", Arguments: map[string]any{}}); err != nil {
				errs <- fmt.Errorf("%s: logging tool: %w", tag, err)
				return
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx.test_sampling", Arguments: map[string]any{"prompt": "prompt of " + tag}})
			if err != nil || res.IsError {
				errs <- fmt.Errorf("%s: sampling tool: %v %+v", tag, err, res)
				return
			}
			// The go-sdk client runs notification handlers on a goroutine its
			// responses can overtake; the gateway sent them before the
			// results, so they are at most a moment behind.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				mu.Lock()
				done := len(progress) >= 3 && (logs >= 3 || !legacy)
				mu.Unlock()
				if done {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "answer of "+tag) {
				errs <- fmt.Errorf("%s: sampling answered by someone else: %q", tag, text)
			}
			if len(prompts) != 1 || !strings.Contains(prompts[0], "prompt of "+tag) {
				errs <- fmt.Errorf("%s: was asked to sample %q", tag, prompts)
			}
			if len(progress) != 3 {
				errs <- fmt.Errorf("%s: %d progress notifications, want 3", tag, len(progress))
			}
			for _, tok := range progress {
				if tok != tag {
					errs <- fmt.Errorf("%s: received progress of %v", tag, tok)
				}
			}
			if legacy && logs != 3 {
				errs <- fmt.Errorf("%s: %d log messages, want 3", tag, logs)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
