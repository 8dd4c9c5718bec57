package front_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

// httpCaller echoes a call's arguments as the tool's text result. If gate is
// set, every call reports on arrived and then waits for gate to close, so a
// test can hold several calls in flight at once. Only tools are served: the
// embedded nil Caller panics on anything else.
type httpCaller struct {
	front.Caller
	arrived chan struct{}
	gate    chan struct{}
}

func (c *httpCaller) CallTool(ctx context.Context, call invoke.Call) (*invoke.Result, error) {
	if c.gate != nil {
		c.arrived <- struct{}{}
		select {
		case <-c.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &invoke.Result{CallToolResult: &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: string(call.Arguments)}},
	}}, nil
}

// httpFixture is a gateway front with the tool demo.echo, served on a
// loopback httptest server at /mcp and /sse.
type httpFixture struct {
	cat *catalog.Catalog
	srv *httptest.Server
}

func newHTTPFixture(t *testing.T, caller front.Caller, opts *front.HTTPOptions) *httpFixture {
	t.Helper()
	cat := catalog.New(nil)
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Tools: []*mcp.Tool{
		{Name: "echo", InputSchema: map[string]any{"type": "object"}},
	}}); err != nil {
		t.Fatal(err)
	}
	f := front.New(cat, caller, nil)
	t.Cleanup(f.Close)
	mux := http.NewServeMux()
	mux.Handle("/mcp", f.StreamableHandler(opts))
	mux.Handle("/sse", f.SSEHandler(opts))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.CloseClientConnections() // hanging SSE streams
		srv.Close()
	})
	return &httpFixture{cat: cat, srv: srv}
}

// streamCtx bounds a test's stream reads so a broken server fails the test
// instead of hanging it. It is a safety net, not a speed requirement.
func streamCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

type rawRequest struct {
	method string
	path   string
	host   string
	header map[string]string
	body   string
}

// roundTrip sends r; it is safe to call from any goroutine.
func (fx *httpFixture) roundTrip(ctx context.Context, r rawRequest) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, r.method, fx.srv.URL+r.path, strings.NewReader(r.body))
	if err != nil {
		return nil, err
	}
	if r.method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	} else {
		req.Header.Set("Accept", "text/event-stream")
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	if r.host != "" {
		req.Host = r.host
	}
	return fx.srv.Client().Do(req)
}

// do sends r and returns the response with its body read to the end.
func (fx *httpFixture) do(t *testing.T, r rawRequest) (*http.Response, string) {
	t.Helper()
	resp := fx.open(t, r)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", r.method, r.path, err)
	}
	return resp, string(b)
}

// open sends r and returns the response with its body unread; it is
// closed at the end of the test.
func (fx *httpFixture) open(t *testing.T, r rawRequest) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(streamCtx(t))
	resp, err := fx.roundTrip(ctx, r)
	if err != nil {
		cancel()
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return resp
}

const (
	initializeBody  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	initializedBody = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	toolsListBody   = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
)

func echoCall(id int, marker string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"demo.echo","arguments":{"marker":%q}}}`, id, marker)
}

// initSession opens a Streamable HTTP session by hand and returns its id.
func (fx *httpFixture) initSession(t *testing.T) string {
	t.Helper()
	resp, body := fx.do(t, rawRequest{method: http.MethodPost, path: "/mcp", body: initializeBody})
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: status %d, session %q, body %s", resp.StatusCode, id, body)
	}
	t.Cleanup(func() {
		// End the session (404 if the test already did) so none outlives
		// the test. t's context is done by now.
		if resp, err := fx.roundTrip(context.Background(), rawRequest{method: http.MethodDelete, path: "/mcp",
			header: map[string]string{"Mcp-Session-Id": id}}); err == nil {
			resp.Body.Close()
		}
	})
	resp, body = fx.do(t, rawRequest{method: http.MethodPost, path: "/mcp", body: initializedBody,
		header: map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": "2025-11-25"}})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: status %d, body %s", resp.StatusCode, body)
	}
	return id
}

// openSSESession opens a legacy SSE session and returns the endpoint the
// client must POST to. The stream stays open until the test ends.
func (fx *httpFixture) openSSESession(t *testing.T) string {
	t.Helper()
	resp := fx.open(t, rawRequest{method: http.MethodGet, path: "/sse"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /sse: status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if ep, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return ep
		}
	}
	t.Fatalf("GET /sse: no endpoint event (%v)", sc.Err())
	return ""
}

// TestHTTPGuard is G4: one row per transport rule, raw HTTP against a real
// server, so the test controls every header.
func TestHTTPGuard(t *testing.T) {
	fx := newHTTPFixture(t, &httpCaller{}, &front.HTTPOptions{
		AllowedOrigins: []string{"https://app.example.com"},
		AllowedHosts:   []string{"gateway.example.com"},
		MaxBodyBytes:   1 << 10,
	})
	serverHost := strings.TrimPrefix(fx.srv.URL, "http://")
	big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 2<<10) + `"}}`

	// session: "" none, "live" a fresh initialized session, "deleted" a
	// session ended by DELETE. "{session}" in headers and "{endpoint}" as
	// path are replaced by it (for /sse, the session's POST endpoint).
	tests := []struct {
		name    string
		session string
		req     rawRequest
		want    int
		body    string // if set, the body must contain it
	}{
		// Rule 1: Origin.
		{"origin foreign POST", "", rawRequest{method: "POST", path: "/mcp", body: initializeBody,
			header: map[string]string{"Origin": "https://evil.example"}}, 403, ""},
		{"origin foreign GET", "live", rawRequest{method: "GET", path: "/mcp",
			header: map[string]string{"Origin": "https://evil.example", "Mcp-Session-Id": "{session}"}}, 403, ""},
		{"origin null", "", rawRequest{method: "POST", path: "/mcp", body: initializeBody,
			header: map[string]string{"Origin": "null"}}, 403, ""},
		{"origin absent, browser cross-site load", "", rawRequest{method: "GET", path: "/sse",
			header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403, ""},
		{"origin foreign on sse GET", "", rawRequest{method: "GET", path: "/sse",
			header: map[string]string{"Origin": "https://evil.example"}}, 403, ""},
		{"origin foreign on sse POST", "live", rawRequest{method: "POST", path: "{endpoint}", body: toolsListBody,
			header: map[string]string{"Origin": "https://evil.example"}}, 403, ""},
		{"origin absent (non-browser client)", "", rawRequest{method: "POST", path: "/mcp", body: initializeBody}, 200, ""},
		{"origin same-origin", "", rawRequest{method: "POST", path: "/mcp", body: initializeBody,
			header: map[string]string{"Origin": fx.srv.URL}}, 200, ""},
		// Another local port is another site: a dev server or any local
		// web app the user runs must not drive the gateway.
		{"origin loopback other port", "", rawRequest{method: "POST", path: "/mcp", body: initializeBody,
			header: map[string]string{"Origin": "http://localhost:5173"}}, 403, `"code":"cross_origin"`},
		{"origin loopback ipv6 other port", "", rawRequest{method: "POST", path: "/mcp", body: initializeBody,
			header: map[string]string{"Origin": "http://[::1]:5173"}}, 403, `"code":"cross_origin"`},
		{"origin same port other loopback name", "", rawRequest{method: "POST", path: "/mcp", body: initializeBody,
			header: map[string]string{"Origin": "http://localhost:" + portOf(serverHost)}}, 403, `"code":"cross_origin"`},
		{"link to the endpoint from another site (navigation)", "", rawRequest{method: "GET", path: "/sse",
			header: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}}, 200, ""},
		{"origin configured", "", rawRequest{method: "POST", path: "/mcp", body: initializeBody,
			header: map[string]string{"Origin": "https://APP.example.com:443"}}, 200, ""},

		// Rule 2: Host on a loopback listener (DNS rebinding).
		{"host foreign", "", rawRequest{method: "POST", path: "/mcp", host: "evil.example", body: initializeBody}, 403, ""},
		{"host foreign with port", "", rawRequest{method: "POST", path: "/mcp", host: "evil.example:" + portOf(serverHost), body: initializeBody}, 403, ""},
		{"host foreign on sse", "", rawRequest{method: "GET", path: "/sse", host: "evil.example"}, 403, ""},
		{"host localhost", "", rawRequest{method: "POST", path: "/mcp", host: "localhost:" + portOf(serverHost), body: initializeBody}, 200, ""},
		{"host configured", "", rawRequest{method: "POST", path: "/mcp", host: "gateway.example.com", body: initializeBody}, 200, ""},

		// Rule 3: a legacy POST without Mcp-Session-Id must be a lone initialize.
		{"no session: request", "", rawRequest{method: "POST", path: "/mcp", body: toolsListBody}, 400, ""},
		{"no session: request with version header", "", rawRequest{method: "POST", path: "/mcp", body: toolsListBody,
			header: map[string]string{"Mcp-Protocol-Version": "2025-11-25"}}, 400, ""},
		{"no session: notification", "", rawRequest{method: "POST", path: "/mcp", body: initializedBody}, 400, ""},
		{"no session: response", "", rawRequest{method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","id":7,"result":{}}`}, 400, ""},
		{"no session: batch holding initialize", "", rawRequest{method: "POST", path: "/mcp",
			body: "[" + initializeBody + "," + initializedBody + "]"}, 400, ""},
		{"no session: malformed", "", rawRequest{method: "POST", path: "/mcp", body: `{"jsonrpc":`}, 400, ""},
		{"no session: empty", "", rawRequest{method: "POST", path: "/mcp", body: ``}, 400, ""},
		// Stateless-protocol requests carry no session id and go on to the
		// SDK. The front speaks only legacy versions, so the SDK answers
		// UnsupportedProtocolVersion (-32022) with the versions it does
		// speak, and an SDK client falls back to initialize.
		{"no session: 2026-07-28 discover reaches the SDK", "", rawRequest{method: "POST", path: "/mcp",
			body:   `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			header: map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}}, 200, `"supportedVersions":["2026-07-28",`},
		{"no session: 2026-07-28 by header only", "", rawRequest{method: "POST", path: "/mcp", body: toolsListBody,
			header: map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}}, 400, `"code":-32602`},
		{"no session: 2026-07-28 tools/list", "", rawRequest{method: "POST", path: "/mcp",
			body:   `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			header: map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}}, 200, `"cacheScope":`},
		{"no session: 2026-07-28 Mcp-Method disagrees", "", rawRequest{method: "POST", path: "/mcp",
			body:   `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			header: map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/list"}}, 400, `"code":-32020`},
		{"no session: 2026-07-28 header and _meta disagree", "", rawRequest{method: "POST", path: "/mcp",
			body:   `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			header: map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}}, 400, `"code":-32020`},
		{"no session: GET of the stateless revision", "", rawRequest{method: "GET", path: "/mcp",
			header: map[string]string{"Mcp-Protocol-Version": "2026-07-28"}}, 405, ""},
		{"POST without Accept", "", rawRequest{method: "POST", path: "/mcp", body: initializeBody,
			header: map[string]string{"Accept": "-"}}, 400, "Accept must list"},
		{"POST accepting only JSON", "", rawRequest{method: "POST", path: "/mcp", body: initializeBody,
			header: map[string]string{"Accept": "application/json"}}, 400, "Accept must list"},
		{"no session: 2026-07-28 by _meta only", "", rawRequest{method: "POST", path: "/mcp",
			body: `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`}, 400, `"code":-32020`},
		{"with session: request", "live", rawRequest{method: "POST", path: "/mcp", body: toolsListBody,
			header: map[string]string{"Mcp-Session-Id": "{session}", "Mcp-Protocol-Version": "2025-11-25"}}, 200, ""},
		{"sse: POST without sessionid", "", rawRequest{method: "POST", path: "/sse", body: toolsListBody}, 400, ""},

		// Rule 4: unknown or terminated session.
		{"unknown session POST", "", rawRequest{method: "POST", path: "/mcp", body: toolsListBody,
			header: map[string]string{"Mcp-Session-Id": "no-such-session"}}, 404, ""},
		{"unknown session GET", "", rawRequest{method: "GET", path: "/mcp",
			header: map[string]string{"Mcp-Session-Id": "no-such-session"}}, 404, ""},
		{"DELETE ends the session", "live", rawRequest{method: "DELETE", path: "/mcp",
			header: map[string]string{"Mcp-Session-Id": "{session}"}}, 204, ""},
		{"deleted session POST", "deleted", rawRequest{method: "POST", path: "/mcp", body: toolsListBody,
			header: map[string]string{"Mcp-Session-Id": "{session}", "Mcp-Protocol-Version": "2025-11-25"}}, 404, ""},
		{"deleted session DELETE", "deleted", rawRequest{method: "DELETE", path: "/mcp",
			header: map[string]string{"Mcp-Session-Id": "{session}"}}, 404, ""},
		{"sse: unknown session", "", rawRequest{method: "POST", path: "/sse?sessionid=nope", body: toolsListBody}, 404, ""},

		// Rule 5: unsupported MCP-Protocol-Version.
		{"unsupported version with session", "live", rawRequest{method: "POST", path: "/mcp", body: toolsListBody,
			header: map[string]string{"Mcp-Session-Id": "{session}", "Mcp-Protocol-Version": "1999-01-01"}}, 400, ""},
		{"unsupported future version with session", "live", rawRequest{method: "POST", path: "/mcp",
			body:   `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			header: map[string]string{"Mcp-Session-Id": "{session}", "Mcp-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"}}, 400, `"code":-32022`},
		{"unsupported version on initialize", "", rawRequest{method: "POST", path: "/mcp", body: initializeBody,
			header: map[string]string{"Mcp-Protocol-Version": "1999-01-01"}}, 400, ""},

		// Rule 6: body limit.
		{"body too large without session", "", rawRequest{method: "POST", path: "/mcp", body: big}, 413, ""},
		{"body too large with session", "live", rawRequest{method: "POST", path: "/mcp", body: big,
			header: map[string]string{"Mcp-Session-Id": "{session}", "Mcp-Protocol-Version": "2025-11-25"}}, 413, ""},
		{"sse: body too large", "live", rawRequest{method: "POST", path: "{endpoint}", body: big}, 413, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			var session string
			switch {
			case tt.session == "":
			case req.path == "{endpoint}":
				session = fx.openSSESession(t)
				req.path = session
			default:
				session = fx.initSession(t)
				if tt.session == "deleted" {
					resp, body := fx.do(t, rawRequest{method: "DELETE", path: "/mcp",
						header: map[string]string{"Mcp-Session-Id": session}})
					if resp.StatusCode != http.StatusNoContent {
						t.Fatalf("DELETE: status %d, body %s", resp.StatusCode, body)
					}
				}
			}
			h := map[string]string{}
			for k, v := range req.header {
				h[k] = strings.ReplaceAll(v, "{session}", session)
			}
			req.header = h
			resp := fx.open(t, req)
			var body string
			if resp.StatusCode != http.StatusOK || req.method != http.MethodGet {
				// Bodies are finite except a successful GET's stream.
				b, _ := io.ReadAll(resp.Body)
				body = string(b)
			}
			if resp.StatusCode != tt.want || !strings.Contains(body, tt.body) {
				t.Errorf("status = %d, want %d with %q; body: %s", resp.StatusCode, tt.want, tt.body, body)
			}
			if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && tt.want == 200 {
				// Leave nothing behind: end sessions the row created.
				fx.do(t, rawRequest{method: "DELETE", path: "/mcp", header: map[string]string{"Mcp-Session-Id": sid}})
			}
		})
	}
}

func portOf(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}

// TestHTTPGuardSessionlessBody checks the 400 the guard writes is a
// JSON-RPC error naming the missing header, with the request's id.
func TestHTTPGuardSessionlessBody(t *testing.T) {
	fx := newHTTPFixture(t, &httpCaller{}, nil)
	resp, body := fx.do(t, rawRequest{method: "POST", path: "/mcp", body: toolsListBody})
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status = %d, want 400", resp.StatusCode)
	}
	type rpcError struct {
		Code    int
		Message string
	}
	var got struct {
		JSONRPC string
		ID      json.RawMessage
		Error   rpcError
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	got.Error.Message = strings.Split(got.Error.Message, " header")[0]
	want := struct {
		JSONRPC string
		ID      json.RawMessage
		Error   rpcError
	}{"2.0", json.RawMessage("2"), rpcError{-32600, "Bad Request: Mcp-Session-Id"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

// TestHTTPGuardPublicListener covers a listener that is not loopback, which
// a loopback httptest server cannot: loopback origins lose their pass and
// the Host check is off (the Origin check still applies).
func TestHTTPGuardPublicListener(t *testing.T) {
	f := front.New(catalog.New(nil), &httpCaller{}, nil)
	t.Cleanup(f.Close)
	h := f.StreamableHandler(&front.HTTPOptions{AllowedOrigins: []string{"https://app.example.com"}})
	public := &net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 443}

	// A GET without a session id that gets past the guard is the SDK's 400;
	// the guard's refusals are 403.
	tests := []struct {
		name, host, origin string
		want               int
	}{
		{"loopback origin", "gw.example.com", "http://localhost:3000", 403},
		{"foreign origin", "gw.example.com", "https://evil.example", 403},
		{"same origin", "gw.example.com", "https://gw.example.com", 400},
		{"configured origin", "gw.example.com", "https://app.example.com", 400},
		{"any host, no origin", "anything.example", "", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "https://"+tt.host+"/mcp", nil)
			req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.Addr(public)))
			req.Header.Set("Accept", "text/event-stream")
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Errorf("status = %d, want %d; body: %s", rec.Code, tt.want, rec.Body)
			}
		})
	}
}

// TestHTTPClientHappyPath runs the go-sdk client over both endpoints with
// the guard in place.
func TestHTTPClientHappyPath(t *testing.T) {
	fx := newHTTPFixture(t, &httpCaller{}, nil)
	tests := []struct {
		name      string
		transport mcp.Transport
		opts      *mcp.ClientSessionOptions
		version   string
	}{
		// The SDK's client asks for the newest revision, served statelessly.
		{"streamable", &mcp.StreamableClientTransport{Endpoint: fx.srv.URL + "/mcp", HTTPClient: fx.srv.Client(), MaxRetries: -1}, nil, "2026-07-28"},
		{"streamable 2025-11-25", &mcp.StreamableClientTransport{Endpoint: fx.srv.URL + "/mcp", HTTPClient: fx.srv.Client(), MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}, "2025-11-25"},
		{"sse", &mcp.SSEClientTransport{Endpoint: fx.srv.URL + "/sse", HTTPClient: fx.srv.Client()}, nil, "2025-11-25"},
	}
	type outcome struct {
		Version string
		Tools   []string
		Text    string
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := streamCtx(t)
			c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
			cs, err := c.Connect(ctx, tt.transport, tt.opts)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			var got outcome
			got.Version = cs.InitializeResult().ProtocolVersion
			lt, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			for _, tool := range lt.Tools {
				got.Tools = append(got.Tools, tool.Name)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo.echo", Arguments: map[string]any{"marker": "hi"}})
			if err != nil {
				t.Fatalf("tools/call: %v", err)
			}
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					got.Text += tc.Text
				}
			}
			want := outcome{Version: tt.version, Tools: []string{"demo.echo"}, Text: `{"marker":"hi"}`}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("session (-want +got):\n%s", diff)
			}
		})
	}
}

type sseEvent struct{ ID, Data string }

// readEvents reads SSE events from r until stop returns true or r ends.
func readEvents(r io.Reader, stop func(sseEvent) bool) ([]sseEvent, error) {
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur != (sseEvent{}) {
				out = append(out, cur)
				if stop != nil && stop(cur) {
					return out, nil
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data += strings.TrimPrefix(line, "data: ")
		}
	}
	return out, sc.Err()
}

// TestHTTPConcurrentStreams holds a session's standalone GET stream and two
// POST streams open at once: both calls must be in flight together, and a
// server notification must reach the GET stream meanwhile.
func TestHTTPConcurrentStreams(t *testing.T) {
	caller := &httpCaller{arrived: make(chan struct{}, 2), gate: make(chan struct{})}
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(caller.gate) }) })
	fx := newHTTPFixture(t, caller, nil)
	sid := fx.initSession(t)
	hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	ctx := streamCtx(t)

	get := fx.open(t, rawRequest{method: http.MethodGet, path: "/mcp", header: hdr})
	if get.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: status %d", get.StatusCode)
	}

	type result struct {
		status int
		body   string
		err    error
	}
	markers := []string{"first-call", "second-call"}
	results := make([]chan result, len(markers))
	for i, m := range markers {
		results[i] = make(chan result, 1)
		go func() {
			resp, err := fx.roundTrip(ctx, rawRequest{method: http.MethodPost, path: "/mcp", header: hdr, body: echoCall(10+i, m)})
			if err != nil {
				results[i] <- result{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			results[i] <- result{resp.StatusCode, string(b), err}
		}()
	}
	for range markers {
		select {
		case <-caller.arrived:
		case <-ctx.Done():
			t.Fatal("the two calls were never in flight together")
		}
	}

	// Both POST streams are open; a catalog change makes the server notify
	// on the standalone stream.
	if _, err := fx.cat.Set(catalog.Entry{Server: "more", Available: true, Tools: []*mcp.Tool{
		{Name: "other", InputSchema: map[string]any{"type": "object"}},
	}}); err != nil {
		t.Fatal(err)
	}
	events, err := readEvents(get.Body, func(e sseEvent) bool {
		return strings.Contains(e.Data, "notifications/tools/list_changed")
	})
	if err != nil || len(events) == 0 || !strings.Contains(events[len(events)-1].Data, "list_changed") {
		t.Fatalf("GET stream: no list_changed notification (events %v, err %v)", events, err)
	}

	release.Do(func() { close(caller.gate) })
	for i, m := range markers {
		r := <-results[i]
		if r.err != nil || r.status != http.StatusOK || !strings.Contains(r.body, m) {
			t.Errorf("call %d: status %d, err %v, body %s (want 200 with %q)", i, r.status, r.err, r.body, m)
		}
	}
}

// TestHTTPResumeIsolation: a session resumes its own stream with
// Last-Event-ID, and another session presenting the same id gets none of
// those events.
func TestHTTPResumeIsolation(t *testing.T) {
	fx := newHTTPFixture(t, &httpCaller{}, nil)
	a, b := fx.initSession(t), fx.initSession(t)
	const secret = "only-for-session-a"

	resp, body := fx.do(t, rawRequest{method: http.MethodPost, path: "/mcp", body: echoCall(5, secret),
		header: map[string]string{"Mcp-Session-Id": a, "Mcp-Protocol-Version": "2025-11-25"}})
	events, err := readEvents(strings.NewReader(body), nil)
	if resp.StatusCode != http.StatusOK || err != nil || len(events) < 2 || events[0].ID == "" {
		t.Fatalf("call: status %d, events %v, err %v; want a priming event then the result", resp.StatusCode, events, err)
	}
	after := events[0].ID // the priming event: everything after it is the call's

	type replay struct {
		Status    int
		HasSecret bool
	}
	resume := func(session string) replay {
		resp, body := fx.do(t, rawRequest{method: http.MethodGet, path: "/mcp", header: map[string]string{
			"Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25", "Last-Event-ID": after}})
		return replay{resp.StatusCode, strings.Contains(body, secret)}
	}
	got := map[string]replay{"owner": resume(a), "other session": resume(b)}
	want := map[string]replay{
		"owner":         {Status: http.StatusOK, HasSecret: true},
		"other session": {Status: http.StatusBadRequest, HasSecret: false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resume with Last-Event-ID %q (-want +got):\n%s", after, diff)
	}
}

// TestHTTPSessionTimeout: an idle session expires, after which its id is
// unknown (404). Runs in a synctest bubble, so no real waiting.
func TestHTTPSessionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := front.New(catalog.New(nil), &httpCaller{}, nil)
		defer f.Close()
		h := f.StreamableHandler(&front.HTTPOptions{SessionTimeout: time.Minute})
		post := func(body, session string) *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if session != "" {
				req.Header.Set("Mcp-Session-Id", session)
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		sid := post(initializeBody, "").Header().Get("Mcp-Session-Id")
		var got []int
		got = append(got, post(initializedBody, sid).Code, post(toolsListBody, sid).Code)
		// Each request restarts the idle clock: 118s of use outlives the
		// 60s timeout.
		for range 2 {
			time.Sleep(59 * time.Second)
			got = append(got, post(toolsListBody, sid).Code)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		got = append(got, post(toolsListBody, sid).Code)
		if diff := cmp.Diff([]int{202, 200, 200, 200, 404}, got); diff != "" {
			t.Errorf("statuses (-want +got):\n%s", diff)
		}
	})
}

func TestHTTPStateless(t *testing.T) {
	fx := newHTTPFixture(t, &httpCaller{}, &front.HTTPOptions{Stateless: true})
	// A bare tools/call with no session at all: any replica could answer it.
	resp, body := fx.do(t, rawRequest{method: "POST", path: "/mcp", body: echoCall(1, "no-session")})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "no-session") {
		t.Fatalf("stateless call without a session: %d %s", resp.StatusCode, body)
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		t.Errorf("stateless answer carries a session id %q", id)
	}
	// A go-sdk client works as usual.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: fx.srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "demo.echo", Arguments: map[string]any{"text": "sdk"}})
	if err != nil || res.IsError {
		t.Fatalf("sdk client on a stateless endpoint: %v %+v", err, res)
	}
}
