package front_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

type peerKey struct{}

// mrtrCaller serves demo.ask like a classic server (it asks the caller's
// peer for input while serving the call) and demo.up like a server of the
// stateless revision (it returns input_required with its own state).
type mrtrCaller struct {
	front.Caller
	heldErr chan error       // what a held ask ended with, when it failed
	upCalls chan invoke.Call // the rounds demo.up received
}

func (c *mrtrCaller) CallTool(ctx context.Context, call invoke.Call) (*invoke.Result, error) {
	switch call.Name {
	case "demo.ask":
		p, _ := ctx.Value(peerKey{}).(*front.Peer)
		if p == nil {
			return nil, fmt.Errorf("no peer")
		}
		r, err := p.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object"}})
		if err != nil {
			c.heldErr <- err
			return nil, err
		}
		return textResult(fmt.Sprintf("hello %v", r.Content["name"])), nil
	case "demo.slow":
		p, _ := ctx.Value(peerKey{}).(*front.Peer)
		for i := range 3 {
			time.Sleep(200 * time.Millisecond)
			if err := p.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: call.Meta["progressToken"], Progress: float64(i)}); err != nil {
				return nil, err
			}
		}
		return textResult("slow done"), nil
	case "demo.up":
		c.upCalls <- call
		if call.RequestState == "" {
			var res mcp.CallToolResult
			if err := json.Unmarshal([]byte(`{"resultType":"input_required","requestState":"up-state-1",
				"inputRequests":{"q":{"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object"}}}}}`), &res); err != nil {
				return nil, err
			}
			return &invoke.Result{CallToolResult: &res}, nil
		}
		r, _ := call.InputResponses["q"].(*mcp.ElicitResult)
		if r == nil {
			return textResult("no answer"), nil
		}
		return textResult(fmt.Sprintf("up %s %v", call.RequestState, r.Content["name"])), nil
	}
	return nil, fmt.Errorf("unknown tool %s", call.Name)
}

func textResult(s string) *invoke.Result {
	return &invoke.Result{CallToolResult: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}}
}

func newMRTRFront(t *testing.T, timeout time.Duration) (*httptest.Server, *mrtrCaller) {
	t.Helper()
	cat := catalog.New(nil)
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Tools: []*mcp.Tool{
		{Name: "ask", InputSchema: map[string]any{"type": "object"}},
		{Name: "up", InputSchema: map[string]any{"type": "object"}},
		{Name: "slow", InputSchema: map[string]any{"type": "object"}},
	}}); err != nil {
		t.Fatal(err)
	}
	caller := &mrtrCaller{heldErr: make(chan error, 10), upCalls: make(chan invoke.Call, 10)}
	f := front.New(cat, caller, &front.Options{
		InputTimeout: timeout,
		WithPeer:     func(ctx context.Context, p *front.Peer) context.Context { return context.WithValue(ctx, peerKey{}, p) },
	})
	t.Cleanup(f.Close)
	srv := httptest.NewServer(f.StreamableHandler(nil))
	t.Cleanup(srv.Close)
	return srv, caller
}

// rpcReply is a JSON-RPC response, result or error.
type rpcReply struct {
	Result map[string]any `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call2026 sends one tools/call of the stateless revision.
func call2026(t *testing.T, url, tool string, extra map[string]any) rpcReply {
	t.Helper()
	params := map[string]any{"name": tool, "arguments": map[string]any{},
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
		}}
	for k, v := range extra {
		params[k] = v
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var data []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id":1`) {
				data = []byte(d)
				break
			}
		}
	} else {
		data, _ = readAll(resp)
	}
	var r rpcReply
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("status %d, body %q: %v", resp.StatusCode, data, err)
	}
	return r
}

func readAll(resp *http.Response) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(resp.Body)
	return b.Bytes(), err
}

func inputRequired(t *testing.T, r rpcReply) (asks map[string]any, state string) {
	t.Helper()
	if r.Error != nil || r.Result["resultType"] != "input_required" {
		t.Fatalf("want input_required, got %+v (error %+v)", r.Result, r.Error)
	}
	asks, _ = r.Result["inputRequests"].(map[string]any)
	state, _ = r.Result["requestState"].(string)
	if len(asks) == 0 || state == "" {
		t.Fatalf("input_required without input requests or state: %+v", r.Result)
	}
	return asks, state
}

func wantText(t *testing.T, r rpcReply, want string) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %d %s, want %q", r.Error.Code, r.Error.Message, want)
	}
	content, _ := r.Result["content"].([]any)
	var got string
	for _, c := range content {
		if m, ok := c.(map[string]any); ok {
			got += fmt.Sprint(m["text"])
		}
	}
	if got != want || r.Result["resultType"] == "input_required" {
		t.Fatalf("result %+v, want text %q", r.Result, want)
	}
}

func wantInvalidState(t *testing.T, r rpcReply, why string) {
	t.Helper()
	if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, why) {
		t.Fatalf("want -32602 with %q, got result %+v error %+v", why, r.Result, r.Error)
	}
}

func answer(asks map[string]any, name string) map[string]any {
	out := map[string]any{}
	for id := range asks {
		out[id] = map[string]any{"action": "accept", "content": map[string]any{"name": name}}
	}
	return out
}

// TestParkedCall: a classic server's request during a stateless caller's
// call becomes an input_required result; the state is checked (tampered,
// other tool, replayed, oversized), missing answers are asked again, and
// the answer reaches the held request.
func TestParkedCall(t *testing.T) {
	srv, _ := newMRTRFront(t, 0)
	asks, state := inputRequired(t, call2026(t, srv.URL, "demo.ask", nil))
	for id, a := range asks {
		if m, _ := a.(map[string]any); m["method"] != "elicitation/create" {
			t.Fatalf("input request %s = %+v, want an elicitation", id, a)
		}
	}

	wantInvalidState(t, call2026(t, srv.URL, "demo.ask", map[string]any{"requestState": state + "x", "inputResponses": answer(asks, "x")}), "altered")
	wantInvalidState(t, call2026(t, srv.URL, "demo.up", map[string]any{"requestState": state, "inputResponses": answer(asks, "x")}), "issued for")
	wantInvalidState(t, call2026(t, srv.URL, "demo.ask", map[string]any{"requestState": strings.Repeat("a", 300<<10)}), "bytes")

	// Wrong key: asked again, under a new state.
	asks2, state2 := inputRequired(t, call2026(t, srv.URL, "demo.ask", map[string]any{"requestState": state,
		"inputResponses": map[string]any{"wrong": map[string]any{"action": "decline"}}}))
	if len(asks2) != len(asks) || state2 == state {
		t.Fatalf("re-request: %d asks (want %d), state changed %v", len(asks2), len(asks), state2 != state)
	}
	wantInvalidState(t, call2026(t, srv.URL, "demo.ask", map[string]any{"requestState": state, "inputResponses": answer(asks, "x")}), "already answered")

	wantText(t, call2026(t, srv.URL, "demo.ask", map[string]any{"requestState": state2, "inputResponses": answer(asks2, "ada")}), "hello ada")
	wantInvalidState(t, call2026(t, srv.URL, "demo.ask", map[string]any{"requestState": state2, "inputResponses": answer(asks2, "ada")}), "no longer waiting")
}

// TestPassedThroughInput: input requests of an upstream of the stateless
// revision pass through with their ids, its state inside ours; the retry
// reaches it with its own state and the answers, once.
func TestPassedThroughInput(t *testing.T) {
	srv, caller := newMRTRFront(t, 0)
	asks, state := inputRequired(t, call2026(t, srv.URL, "demo.up", nil))
	<-caller.upCalls
	if _, ok := asks["q"]; !ok || len(asks) != 1 {
		t.Fatalf("input requests %+v, want the upstream's q", asks)
	}
	if strings.Contains(state, "up-state-1") {
		t.Fatalf("the upstream's state travels in clear: %s", state)
	}
	wantText(t, call2026(t, srv.URL, "demo.up", map[string]any{"requestState": state, "inputResponses": answer(asks, "ada")}), "up up-state-1 ada")
	if c := <-caller.upCalls; c.RequestState != "up-state-1" {
		t.Fatalf("upstream got state %q", c.RequestState)
	}
	wantInvalidState(t, call2026(t, srv.URL, "demo.up", map[string]any{"requestState": state, "inputResponses": answer(asks, "ada")}), "already answered")
}

// TestParkedCallTimeout: a caller that never comes back leaves nothing
// behind; the held upstream request is answered with an error.
func TestParkedCallTimeout(t *testing.T) {
	srv, caller := newMRTRFront(t, 50*time.Millisecond)
	before := runtime.NumGoroutine()
	for range 5 {
		inputRequired(t, call2026(t, srv.URL, "demo.ask", nil))
	}
	for range 5 {
		select {
		case err := <-caller.heldErr:
			if !strings.Contains(err.Error(), "did not answer") {
				t.Errorf("held request ended with %v", err)
			}
		case <-t.Context().Done():
			t.Fatal("a held request was never answered")
		}
	}
	// The parked calls' goroutines end with them; idle keep-alive
	// connections of the test client are closed so they do not count.
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second) // a safety net, not a speed requirement
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		t.Errorf("%d goroutines, %d before the calls", n, before)
	}
}

// TestStatelessProgress: progress of a stateless caller's call reaches it
// on the request's own stream. (The go-sdk client hands notifications to a
// goroutine its result can overtake, so only the arrival is checked.)
func TestStatelessProgress(t *testing.T) {
	srv, _ := newMRTRFront(t, 0)
	var got atomic.Int64
	c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { got.Add(1) },
	})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "demo.slow"}
	params.SetProgressToken("t")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	if got.Load() == 0 {
		t.Error("no progress notification reached the stateless client")
	}
}

// TestStatelessListChanged: a stateless client's subscriptions/listen stream
// hears that the tool list changed.
func TestStatelessListChanged(t *testing.T) {
	cat := catalog.New(nil)
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Tools: []*mcp.Tool{
		{Name: "echo", InputSchema: map[string]any{"type": "object"}},
	}}); err != nil {
		t.Fatal(err)
	}
	f := front.New(cat, &httpCaller{}, nil)
	t.Cleanup(f.Close)
	srv := httptest.NewServer(f.StreamableHandler(nil))
	t.Cleanup(srv.Close)
	changed := make(chan struct{}, 10)
	c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Tools: []*mcp.Tool{
		{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		{Name: "added", InputSchema: map[string]any{"type": "object"}},
	}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second): // a bound on a broken build
		t.Fatal("no tools/list_changed on the subscriptions/listen stream")
	}
}
