package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// holdServer is an upstream whose "hold" calls wait until released, so
// that a test knows which calls are in flight when a large reply comes.
type holdServer struct {
	srv      *mcp.Server
	entered  chan struct{} // one value per hold call that started
	release  chan struct{} // closed to let every hold call answer
	writeRaw func(string)  // writes a line between the messages (stdio only)
}

func newHoldServer() *holdServer {
	h := &holdServer{entered: make(chan struct{}, 100), release: make(chan struct{})}
	h.srv = mcp.NewServer(&mcp.Implementation{Name: "hold", Version: "v1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	h.srv.AddTool(&mcp.Tool{Name: "hold", InputSchema: obj}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		h.entered <- struct{}{}
		select {
		case <-h.release:
			return text("released"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	h.srv.AddTool(&mcp.Tool{Name: "big", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ Bytes int }
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		return text(strings.Repeat("x", args.Bytes)), nil
	})
	h.srv.AddTool(&mcp.Tool{Name: "garbage", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if h.writeRaw != nil {
			h.writeRaw("npm WARN deprecated: this line is not JSON-RPC")
		}
		return text("ok"), nil
	})
	return h
}

// awaitHolds waits until n hold calls are running on the server.
func (h *holdServer) awaitHolds(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-h.entered:
		case <-t.Context().Done():
			t.Fatal("hold calls did not arrive")
		}
	}
}

// lockedWriter serializes the SDK's message writes and a test's stray
// lines, as a process's stdout does.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return l.w.Close() }

// callHolds starts n hold calls on call, and returns a function that
// waits for them and fails the test unless each was answered "released".
func callHolds(t *testing.T, h *holdServer, n int, call func(ctx context.Context, name string, args any) (*mcp.CallToolResult, error)) func() {
	t.Helper()
	errs := make(chan error, n)
	for range n {
		go func() {
			res, err := call(t.Context(), "hold", map[string]any{})
			if err == nil && (len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "released") {
				err = fmt.Errorf("unexpected result %+v", res)
			}
			errs <- err
		}()
	}
	// If the test fails first, the held calls still end (an httptest
	// server's Close waits for its handlers).
	var once sync.Once
	release := func() { once.Do(func() { close(h.release) }) }
	t.Cleanup(release)
	h.awaitHolds(t, n)
	return func() {
		t.Helper()
		release()
		for range n {
			if err := <-errs; err != nil {
				t.Errorf("a call in flight failed: %v", err)
			}
		}
	}
}

// TestLineFilterConnection runs the SDK client and server over pipes with
// the stdio filter between them: a large reply and a stray line fail or
// lose only what they are, and the calls in flight meanwhile answer.
func TestLineFilterConnection(t *testing.T) {
	const limit = 1 << 20
	h := newHoldServer()
	toClientR, toClientW := io.Pipe()
	toServerR, toServerW := io.Pipe()
	out := &lockedWriter{w: toClientW}
	h.writeRaw = func(line string) { _, _ = out.Write([]byte(line + "\n")) }
	ss, err := h.srv.Connect(t.Context(), &mcp.IOTransport{Reader: toServerR, Writer: out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	filtered := newLineFilter(toClientR, limit, newReplyLog(slog.New(slog.DiscardHandler)))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v1"}, nil).
		Connect(t.Context(), &mcp.IOTransport{Reader: filtered, Writer: toServerW, MaxLineLength: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	call := func(ctx context.Context, name string, args any) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	}

	wait := callHolds(t, h, 4, call)
	_, err = call(t.Context(), "big", map[string]any{"bytes": 2 * limit})
	if !IsResultTooLarge(err) {
		t.Fatalf("big call: err = %v, want result too large", err)
	}
	if res, err := call(t.Context(), "garbage", map[string]any{}); err != nil || res.IsError {
		t.Fatalf("garbage call: %+v, %v; want ok (the stray line is dropped)", res, err)
	}
	wait()
	if res, err := call(t.Context(), "big", map[string]any{"bytes": limit / 2}); err != nil || len(res.Content[0].(*mcp.TextContent).Text) != limit/2 {
		t.Fatalf("a reply within the limit after it: %v", err)
	}
}

// TestBoundedRepliesHTTP checks that on sse and http upstreams a reply over
// max_result_bytes fails its call alone: the calls in flight on the same
// session answer and the session stays up, in each way a reply can come:
// in the event stream of a POST, as a JSON body, and (legacy sse) on the
// session's one stream.
func TestBoundedRepliesHTTP(t *testing.T) {
	tests := []struct {
		name      string
		transport string
		json      bool
		limit     int // the server's max_result_bytes; 0 = the default
		size      int // of the big reply
	}{
		{name: "streamable, event stream", transport: config.TransportHTTP, size: 20 << 20},
		{name: "streamable, JSON", transport: config.TransportHTTP, json: true, limit: 1 << 20, size: 2 << 20},
		{name: "legacy sse", transport: config.TransportSSE, limit: 1 << 20, size: 2 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHoldServer()
			get := func(*http.Request) *mcp.Server { return h.srv }
			var handler http.Handler
			if tt.transport == config.TransportSSE {
				handler = mcp.NewSSEHandler(get, nil)
			} else {
				handler = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{JSONResponse: tt.json})
			}
			ts := httptest.NewServer(handler)
			t.Cleanup(ts.Close)

			var transitions []Transition
			var mu sync.Mutex
			m := NewManager(&Options{
				Logger: slog.New(slog.DiscardHandler),
				OnTransition: func(tr Transition) {
					mu.Lock()
					transitions = append(transitions, tr)
					mu.Unlock()
				},
			})
			t.Cleanup(func() { _ = m.Close(context.Background()) })
			if err := m.Add(&config.Server{Name: "remote", Transport: tt.transport, URL: ts.URL, MaxResultBytes: tt.limit}); err != nil {
				t.Fatal(err)
			}
			if err := m.Connect(t.Context(), "remote"); err != nil {
				t.Fatal(err)
			}
			before, _ := m.Status("remote")
			call := func(ctx context.Context, name string, args any) (*mcp.CallToolResult, error) {
				return m.CallTool(ctx, "remote", &mcp.CallToolParams{Name: name, Arguments: args})
			}

			wait := callHolds(t, h, 4, call)
			_, err := call(t.Context(), "big", map[string]any{"bytes": tt.size})
			var tl *ResultTooLargeError
			if !errors.As(err, &tl) {
				t.Fatalf("big call: err = %v, want a ResultTooLargeError", err)
			}
			limit := tt.limit
			if limit == 0 {
				limit = config.DefaultMaxResultBytes
			}
			if tl.Limit != int64(limit) || tl.Size <= int64(tt.size) {
				t.Errorf("error = %+v, want a size over %d and the limit %d", tl, tt.size, limit)
			}
			wait()
			if res, err := call(t.Context(), "big", map[string]any{"bytes": 1000}); err != nil || res.IsError {
				t.Fatalf("a call after it: %+v, %v", res, err)
			}
			after, _ := m.Status("remote")
			mu.Lock()
			n := len(transitions)
			mu.Unlock()
			if after.State != StateConnected || !after.ConnectedAt.Equal(before.ConnectedAt) || n != 2 || after.Health.ErrorRate != 0 {
				t.Errorf("status after = %s since %v (was %v), %d transitions, error rate %v; want the same session, CONNECTED, and no failure counted",
					after.State, after.ConnectedAt, before.ConnectedAt, n, after.Health.ErrorRate)
			}
		})
	}
}

// TestMalformedReplyHTTP checks that a JSON body that is not JSON-RPC
// fails only the call it answers.
func TestMalformedReplyHTTP(t *testing.T) {
	h := newHoldServer()
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		msg, _ := jsonrpc.DecodeMessage(body)
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/call" && strings.Contains(string(req.Params), `"name":"garbage"`) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, "<html>502 Bad Gateway</html>")
			return
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	m := NewManager(&Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	if err := m.Add(&config.Server{Name: "remote", Transport: config.TransportHTTP, URL: ts.URL}); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(t.Context(), "remote"); err != nil {
		t.Fatal(err)
	}
	call := func(ctx context.Context, name string, args any) (*mcp.CallToolResult, error) {
		return m.CallTool(ctx, "remote", &mcp.CallToolParams{Name: name, Arguments: args})
	}
	wait := callHolds(t, h, 4, call)
	_, err := call(t.Context(), "garbage", map[string]any{})
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) || rpc.Code != codeMalformedReply || !strings.Contains(err.Error(), "malformed reply") {
		t.Fatalf("garbage call: err = %v, want a malformed reply error", err)
	}
	wait()
	if st, _ := m.Status("remote"); st.State != StateConnected {
		t.Errorf("state = %s, want CONNECTED", st.State)
	}
}
