package front_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

// outcomeCaller answers each tool with one kind of outcome, and records
// every call it receives, so that two fronts can be compared on what the
// upstream sees as well as on what the client gets.
type outcomeCaller struct {
	front.Caller
	mu    sync.Mutex
	calls []invoke.Call
}

func (c *outcomeCaller) CallTool(ctx context.Context, call invoke.Call) (*invoke.Result, error) {
	c.mu.Lock()
	c.calls = append(c.calls, call)
	c.mu.Unlock()
	res := func(r *mcp.CallToolResult) (*invoke.Result, error) { return &invoke.Result{CallToolResult: r}, nil }
	switch call.Name {
	case "demo.text":
		return res(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "args " + string(call.Arguments)}}})
	case "demo.empty":
		return res(&mcp.CallToolResult{})
	case "demo.structured":
		return res(&mcp.CallToolResult{Meta: mcp.Meta{"k": "v"}, StructuredContent: map[string]any{"n": 1.5},
			Content: []mcp.Content{&mcp.TextContent{Text: `{"n":1.5}`}, &mcp.ImageContent{Data: []byte{1, 2}, MIMEType: "image/png"}}})
	case "demo.toolerror":
		return res(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}})
	case "demo.denied":
		return nil, &invoke.Error{Code: invoke.CodeDenied, Message: "not allowed", Server: "demo"}
	case "demo.badargs":
		return nil, &invoke.Error{Code: invoke.CodeInvalidArgument, Message: "arguments: want an object"}
	case "demo.rpcerror":
		return nil, &jsonrpc.Error{Code: -32042, Message: "upstream says no", Data: json.RawMessage(`{"x":1}`)}
	case "demo.plainerror":
		return nil, errors.New("socket closed")
	case "demo.ask":
		p, _ := ctx.Value(peerKey{}).(*front.Peer)
		if p == nil {
			return nil, errors.New("no peer")
		}
		r, err := p.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object"}})
		if err != nil {
			return nil, err
		}
		return res(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(r.Content)}}})
	case "demo.upinput":
		var r mcp.CallToolResult
		if err := json.Unmarshal([]byte(`{"resultType":"input_required","requestState":"up-1",
			"inputRequests":{"q":{"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object"}}}}}`), &r); err != nil {
			return nil, err
		}
		return res(&r)
	case "demo.upcomplete":
		var r mcp.CallToolResult
		if err := json.Unmarshal([]byte(`{"resultType":"complete","content":[{"type":"text","text":"done"}]}`), &r); err != nil {
			return nil, err
		}
		return res(&r)
	}
	return nil, fmt.Errorf("unknown tool %s", call.Name)
}

func (c *outcomeCaller) last(t *testing.T) invoke.Call {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.calls) == 0 {
		t.Fatal("the caller received no call")
	}
	return c.calls[len(c.calls)-1]
}

var outcomeTools = []string{"text", "empty", "structured", "toolerror", "denied", "badargs", "rpcerror",
	"plainerror", "ask", "upinput", "upcomplete", "headers"}

// newOutcomeFront serves outcomeCaller's tools at /mcp, with the fast path
// on or off.
func newOutcomeFront(t *testing.T, fast bool) (*httptest.Server, *outcomeCaller, *front.Front) {
	t.Helper()
	cat := catalog.New(nil)
	var tools []*mcp.Tool
	for _, n := range outcomeTools {
		schema := map[string]any{"type": "object"}
		if n == "headers" {
			schema["properties"] = map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}}
		}
		tools = append(tools, &mcp.Tool{Name: n, InputSchema: schema})
	}
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Tools: tools}); err != nil {
		t.Fatal(err)
	}
	caller := &outcomeCaller{}
	f := front.New(cat, caller, &front.Options{
		WithPeer: func(ctx context.Context, p *front.Peer) context.Context { return context.WithValue(ctx, peerKey{}, p) },
	})
	if !fast {
		front.DisableFastPath(f)
	}
	t.Cleanup(f.Close)
	srv := httptest.NewServer(f.StreamableHandler(nil))
	t.Cleanup(srv.Close)
	return srv, caller, f
}

// rawCall is one HTTP request of the stateless revision.
type rawCall struct {
	body    string
	headers map[string]string // over the defaults; "" deletes one
}

func meta2026(extra string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}` + extra + `}`
}

func toolCall(id, name, rest string) rawCall {
	return rawCall{body: `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + name + `",` + rest + `}}`,
		headers: map[string]string{"Mcp-Name": name}}
}

// post sends c and returns the status, the content type and the JSON-RPC
// message of the answer (from the JSON body, or the SSE stream's message
// event).
func post(t *testing.T, url string, c rawCall) (int, string, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/mcp", strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	for k, v := range c.headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	var payload []byte
	if strings.HasPrefix(ct, "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id"`) {
				payload = []byte(d)
				break
			}
		}
	} else {
		payload, _ = io.ReadAll(resp.Body)
	}
	var msg map[string]any
	if json.Unmarshal(payload, &msg) != nil {
		msg = map[string]any{"raw": strings.TrimSpace(string(payload))}
	}
	return resp.StatusCode, ct, msg
}

// normalize replaces the sealed requestState of the gateway's own input
// requests, which differs on every call, by a placeholder.
func normalize(msg map[string]any) map[string]any {
	if r, ok := msg["result"].(map[string]any); ok {
		if s, ok := r["requestState"].(string); ok && s != "up-1" {
			r["requestState"] = "<sealed>"
		}
		if asks, ok := r["inputRequests"].(map[string]any); ok {
			keys := make(map[string]any, len(asks))
			for _, v := range asks {
				keys[fmt.Sprint(len(keys))] = v
			}
			r["inputRequests"] = keys
		}
	}
	return msg
}

// TestFastCallEquivalence sends the same requests to a front with the
// tools/call fast path and to one without it: the client must get the same
// JSON-RPC answer and the upstream the same call, and the fast path must
// have served exactly the requests it is meant to (it answers in JSON, the
// SDK in an SSE stream).
func TestFastCallEquivalence(t *testing.T) {
	fastSrv, fastCaller, fastFront := newOutcomeFront(t, true)
	sdkSrv, sdkCaller, _ := newOutcomeFront(t, false)

	served := func(name string) rawCall {
		return toolCall("7", "demo."+name, `"arguments":{"a":[1,"x"]},`+meta2026(""))
	}
	cases := []struct {
		name string
		call rawCall
		fast bool // the fast path serves it
	}{
		{"text", served("text"), true},
		{"no content", served("empty"), true},
		{"structured", served("structured"), true},
		{"tool error", served("toolerror"), true},
		{"denied", served("denied"), true},
		{"bad arguments", served("badargs"), true},
		{"upstream rpc error", served("rpcerror"), true},
		{"gateway error", served("plainerror"), true},
		{"elicitation parked", served("ask"), true},
		{"upstream input required", served("upinput"), true},
		{"upstream complete", served("upcomplete"), true},
		{"string id", toolCall(`"abc"`, "demo.text", `"arguments":{},`+meta2026("")), true},
		{"no arguments", toolCall("1", "demo.text", meta2026("")), true},
		{"null arguments", toolCall("1", "demo.text", `"arguments":null,`+meta2026("")), true},
		{"arguments not an object", toolCall("1", "demo.text", `"arguments":[1],`+meta2026("")), true},
		{"client info", toolCall("1", "demo.text", `"arguments":{},`+meta2026(`,"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}`)), true},
		{"gateway meta", toolCall("1", "demo.text", `"arguments":{},`+meta2026(`,"switchboard/idempotency-key":"k1","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"`)), true},

		// Everything below goes on to the SDK.
		{"progress token", toolCall("1", "demo.text", `"arguments":{},`+meta2026(`,"progressToken":"p"`)), false},
		{"log level", toolCall("1", "demo.text", `"arguments":{},`+meta2026(`,"io.modelcontextprotocol/logLevel":"debug"`)), false},
		{"x-mcp-header tool", toolCall("1", "demo.headers", `"arguments":{"region":"eu"},`+meta2026("")), false},
		{"unknown tool", toolCall("1", "demo.nope", `"arguments":{},`+meta2026("")), false},
		{"other separator", toolCall("1", "demo_text", `"arguments":{},`+meta2026("")), false},
		{"name header mismatch", rawCall{body: toolCall("1", "demo.text", `"arguments":{},`+meta2026("")).body,
			headers: map[string]string{"Mcp-Name": "demo.empty"}}, false},
		{"no name header", rawCall{body: toolCall("1", "demo.text", `"arguments":{},`+meta2026("")).body}, false},
		{"meta version mismatch", toolCall("1", "demo.text", `"arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}`), false},
		{"no capabilities", toolCall("1", "demo.text", `"arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`), false},
		{"no meta", toolCall("1", "demo.text", `"arguments":{}`), false},
		{"retry with state", toolCall("1", "demo.text", `"arguments":{},"requestState":"x",`+meta2026("")), false},
		{"fractional id", toolCall("1.5", "demo.text", `"arguments":{},`+meta2026("")), false},
		{"null id", toolCall("null", "demo.text", `"arguments":{},`+meta2026("")), false},
		{"batch", rawCall{body: "[" + served("text").body + "]", headers: map[string]string{"Mcp-Name": "demo.text"}}, false},
		{"not JSON", rawCall{body: `{"jsonrpc":`, headers: map[string]string{"Mcp-Name": "demo.text"}}, false},
		{"wrong jsonrpc version", rawCall{body: strings.Replace(served("text").body, `"2.0"`, `"1.0"`, 1),
			headers: map[string]string{"Mcp-Name": "demo.text"}}, false},
		{"unsupported version", rawCall{body: served("text").body,
			headers: map[string]string{"Mcp-Name": "demo.text", "Mcp-Protocol-Version": "2099-01-01"}}, false},
		{"extra params key", toolCall("1", "demo.text", `"arguments":{},"task":{"ttl":1},`+meta2026("")), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := front.FastServed(fastFront)
			fastStatus, fastCT, fastMsg := post(t, fastSrv.URL, tc.call)
			sdkStatus, _, sdkMsg := post(t, sdkSrv.URL, tc.call)
			if gotFast := front.FastServed(fastFront) > before; gotFast != tc.fast {
				t.Fatalf("served by the fast path = %v (status %d, %s), want %v", gotFast, fastStatus, fastCT, tc.fast)
			}
			if tc.fast && !strings.HasPrefix(fastCT, "application/json") {
				t.Errorf("fast path answered with %q, want application/json", fastCT)
			}
			if fastStatus != sdkStatus {
				t.Errorf("status: fast path %d, SDK %d", fastStatus, sdkStatus)
			}
			if d := cmp.Diff(normalize(sdkMsg), normalize(fastMsg)); d != "" {
				t.Errorf("answer differs (-SDK +fast path):\n%s", d)
			}
			if !tc.fast {
				return
			}
			f, s := fastCaller.last(t), sdkCaller.last(t)
			if f.Name != s.Name || !bytes.Equal(f.Arguments, s.Arguments) || f.Identity.ID != s.Identity.ID {
				t.Errorf("upstream call differs: fast path %s %s, SDK %s %s", f.Name, f.Arguments, s.Name, s.Arguments)
			}
			if d := cmp.Diff(s.Meta, f.Meta); d != "" {
				t.Errorf("upstream _meta differs (-SDK +fast path):\n%s", d)
			}
		})
	}
}

// TestFastCallParkedRetry answers an elicitation the fast path parked: the
// retry (which carries requestState) goes through the SDK and finds the
// call the fast path started.
func TestFastCallParkedRetry(t *testing.T) {
	srv, _, _ := newOutcomeFront(t, true)
	_, ct, first := post(t, srv.URL, toolCall("1", "demo.ask", `"arguments":{},`+meta2026("")))
	if !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("first round not served by the fast path: %s", ct)
	}
	res, _ := first["result"].(map[string]any)
	asks, _ := res["inputRequests"].(map[string]any)
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || len(asks) != 1 || state == "" {
		t.Fatalf("first round = %v, want input_required with one ask", first)
	}
	var id string
	for k := range asks {
		id = k
	}
	answers, _ := json.Marshal(map[string]any{id: map[string]any{"action": "accept", "content": map[string]any{"name": "ada"}}})
	stateJSON, _ := json.Marshal(state)
	_, _, second := post(t, srv.URL, toolCall("2", "demo.ask",
		`"arguments":{},"inputResponses":`+string(answers)+`,"requestState":`+string(stateJSON)+`,`+meta2026("")))
	res, _ = second["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) != 1 || !strings.Contains(fmt.Sprint(content[0]), "ada") || res["resultType"] != "complete" {
		t.Fatalf("second round = %v, want the answer relayed", second)
	}
}

// BenchmarkStatelessToolCall measures one tools/call of the stateless
// revision through the front's HTTP handler, answered in memory: through
// the SDK's per-request session (sdk, as before issue 18) and through the
// fast path. The difference is what the front costs per call; the
// allocations are exact.
//
//	go test ./internal/front -run '^$' -bench StatelessToolCall -benchmem
func BenchmarkStatelessToolCall(b *testing.B) {
	for _, fast := range []bool{false, true} {
		name := "sdk"
		if fast {
			name = "fast"
		}
		b.Run(name, func(b *testing.B) {
			cat := catalog.New(nil)
			if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true,
				Tools: []*mcp.Tool{{Name: "text", InputSchema: map[string]any{"type": "object",
					"properties": map[string]any{"text": map[string]any{"type": "string"}}}}}}); err != nil {
				b.Fatal(err)
			}
			f := front.New(cat, &outcomeCaller{}, nil)
			if !fast {
				front.DisableFastPath(f)
			}
			b.Cleanup(f.Close)
			h := f.StreamableHandler(&front.HTTPOptions{Guarded: true})
			body := toolCall("1", "demo.text", `"arguments":{"text":"switchboard bench"},`+meta2026("")).body
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
				req.Header.Set("Mcp-Method", "tools/call")
				req.Header.Set("Mcp-Name", "demo.text")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "switchboard bench") {
					b.Fatalf("answer %d %s", w.Code, w.Body.String())
				}
			}
		})
	}
}
