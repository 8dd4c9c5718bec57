package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
)

// fakeServers knows one server, "demo". The embedded interface makes it
// compile as the API's interface grows; methods not overridden here panic.
type fakeServers struct {
	api.Servers
	registered *config.Server
}

var demo = api.Server{ID: "id-1", Name: "demo", Status: "CONNECTED", TransportType: "STDIO", ToolCount: 1, PID: 42,
	ConnectionConfig: map[string]any{"command": "demo"}}

func (f *fakeServers) List(context.Context) ([]api.Server, error) { return []api.Server{demo}, nil }
func (f *fakeServers) Get(_ context.Context, id string) (api.Server, error) {
	if id == "demo" || id == "id-1" {
		return demo, nil
	}
	return api.Server{}, &api.Error{Status: 404, Code: api.CodeServerNotFound, Message: "server " + id + " not found"}
}
func (f *fakeServers) Register(_ context.Context, def *config.Server, _ bool) (api.Server, error) {
	f.registered = def
	return api.Server{Name: def.Name, TransportType: strings.ToUpper(def.Transport)}, nil
}
func (f *fakeServers) Remove(context.Context, string) error { return nil }
func (f *fakeServers) Connect(context.Context, string, bool) (api.Server, error) {
	return demo, nil
}
func (f *fakeServers) Disconnect(context.Context, string) (api.Server, int, error) {
	return api.Server{Name: "demo", Status: "DISCONNECTED"}, 2, nil
}
func (f *fakeServers) Discover(context.Context, string) (api.Server, error) { return demo, nil }
func (f *fakeServers) Rename(_ context.Context, _, name string) (api.Server, error) {
	return api.Server{Name: name}, nil
}
func (f *fakeServers) History(context.Context, string, int) ([]api.ConnectionEvent, error) {
	return []api.ConnectionEvent{{From: "CONNECTING", To: "CONNECTED"}}, nil
}
func (f *fakeServers) Logs(_ context.Context, _ string, max int) ([]string, error) {
	return []string{"line 1", "line 2", "line 3"}[:min(max, 3)], nil
}
func (f *fakeServers) Capabilities(context.Context, string) (api.Capabilities, error) {
	return api.Capabilities{Server: "demo"}, nil
}

// fakeCaller echoes the arguments it got, or reports a tool error.
type fakeCaller struct{}

func (fakeCaller) CallTool(_ context.Context, c invoke.Call) (*invoke.Result, error) {
	tool := catalog.Tool{Name: c.Name, OriginalName: "echo", Server: "demo"}
	switch c.Name {
	case "demo.echo":
		return &invoke.Result{CallToolResult: &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: string(c.Arguments)}, &mcp.ImageContent{MIMEType: "image/png", Data: []byte{1}}}}, Tool: tool}, nil
	case "demo.fail":
		return &invoke.Result{CallToolResult: &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}}, Tool: tool}, nil
	}
	return nil, &invoke.Error{Code: invoke.CodeToolNotFound, Message: "unknown tool " + c.Name}
}

const testKey = "sbk_test"

// newTestAPI serves the real API handler behind a stand-in for the app's
// authentication: the bearer testKey is the admin, anything else is 401.
func newTestAPI(t *testing.T, bus *telemetry.Bus) (*Client, *fakeServers) {
	t.Helper()
	cat := catalog.New(nil)
	servers := &fakeServers{}
	h := api.New(servers, cat, fakeCaller{}, &api.Options{Events: bus})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"missing_credentials","message":"authentication required"}}`))
			return
		}
		h.ServeHTTP(w, r.WithContext(authz.WithIdentity(r.Context(), authz.LocalAdmin())))
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL+"/", &Options{APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	return c, servers
}

func TestNew(t *testing.T) {
	tests := []struct {
		url     string
		wantErr bool
	}{
		{"http://127.0.0.1:8080", false},
		{"https://gw.example.com/prefix/", false},
		{"127.0.0.1:8080", true},
		{"ftp://x", true},
		{"http://", true},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			_, err := New(tc.url, nil)
			if (err != nil) != tc.wantErr {
				t.Errorf("New(%q) = %v, want error %v", tc.url, err, tc.wantErr)
			}
		})
	}
}

func TestServers(t *testing.T) {
	c, fake := newTestAPI(t, nil)
	ctx := t.Context()
	list, err := c.Servers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]api.Server{demo}, list.Servers); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}
	if _, err := c.RegisterServer(ctx, RegisterRequest{Name: "fs", TransportType: "stdio",
		ConnectionConfig: ConnectionConfig{Command: "npx", Args: []string{"-y", "x"}, Env: map[string]string{"K": "V"}}}); err != nil {
		t.Fatal(err)
	}
	if got := fake.registered; got.Name != "fs" || got.Command != "npx" || got.Env["K"] != "V" || len(got.Args) != 2 {
		t.Errorf("registered %+v", got)
	}
	dr, err := c.DisconnectServer(ctx, "demo")
	if err != nil || dr.PendingRequests != 2 || dr.Status != "DISCONNECTED" {
		t.Errorf("disconnect = %+v, %v", dr, err)
	}
	logs, err := c.ServerLogs(ctx, "demo", 2)
	if diff := cmp.Diff(ServerLogs{Server: "demo", Lines: []string{"line 1", "line 2"}}, logs); err != nil || diff != "" {
		t.Errorf("logs: %v (-want +got):\n%s", err, diff)
	}
	h, err := c.ServerHistory(ctx, "demo", 5)
	if err != nil || len(h.History) != 1 || h.History[0].To != "CONNECTED" {
		t.Errorf("history = %+v, %v", h, err)
	}
}

func TestErrors(t *testing.T) {
	c, _ := newTestAPI(t, nil)
	anon, _ := New(c.URL(), nil)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	gone, _ := New(downURL, nil)
	tests := []struct {
		name        string
		call        func() error
		status      int
		code        string
		unsupported bool
	}{
		{"unknown server", func() error { _, err := c.Server(t.Context(), "nope"); return err }, 404, "server_not_found", false},
		{"no route", func() error { return c.do(t.Context(), "GET", "/api/v1/no-such-route", nil, nil, nil) }, 404, "not_found", true},
		{"not configured", func() error { _, err := c.Keys(t.Context()); return err }, 501, "not_configured", true},
		{"tool not found", func() error {
			_, err := c.CallTool(t.Context(), CallRequest{Name: "demo.nope"})
			return err
		}, 404, "tool_not_found", false},
		{"no key", func() error { _, err := anon.Servers(t.Context()); return err }, 401, "missing_credentials", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if ae.Status != tc.status || ae.Code != tc.code || ae.Unsupported() != tc.unsupported {
				t.Errorf("got %d %s unsupported=%v (%q); want %d %s unsupported=%v", ae.Status, ae.Code, ae.Unsupported(), ae.Message,
					tc.status, tc.code, tc.unsupported)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		_, err := gone.Servers(t.Context())
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("err = %v, want ErrUnreachable", err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "cannot reach the gateway at "+downURL+": ") ||
			!strings.HasSuffix(msg, "(is it running? set --url or SWITCHBOARD_URL)") || strings.Contains(msg, "\n") {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("canceled is not unreachable", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := gone.Servers(ctx)
		if errors.Is(err, ErrUnreachable) || !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("not the API's shape", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad gateway from a proxy", http.StatusBadGateway)
		}))
		defer srv.Close()
		pc, _ := New(srv.URL, nil)
		_, err := pc.Servers(t.Context())
		var ae *Error
		if !errors.As(err, &ae) || ae.Status != 502 || !strings.Contains(ae.Message, "bad gateway from a proxy") {
			t.Errorf("err = %#v", err)
		}
	})
}

func TestCallTool(t *testing.T) {
	c, _ := newTestAPI(t, nil)
	res, err := c.CallTool(t.Context(), CallRequest{Name: "demo.echo", Arguments: json.RawMessage(`{"text":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("{\"text\":\"hi\"}\n[image image/png]", res.Text()); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}
	if res.IsError || res.Metadata.RoutedTo != "demo" || res.Metadata.Tool != "demo.echo" {
		t.Errorf("result %+v", res)
	}
	res, err = c.CallTool(t.Context(), CallRequest{Name: "demo.fail"})
	if err != nil || !res.IsError || res.Text() != "boom" {
		t.Errorf("fail = %+v, %v", res, err)
	}
}

func TestEvents(t *testing.T) {
	bus := telemetry.NewBus()
	c, _ := newTestAPI(t, bus)
	ctx, cancel := context.WithCancel(t.Context())
	evs, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Events returns once subscribed, so this publish cannot be missed.
	bus.Publish("server.discovered", map[string]any{"server": "demo", "tools": 5})
	bus.Publish("server.status_changed", map[string]any{"server": "demo", "from": "CONNECTING", "to": "CONNECTED"})
	var got []any
	for range 2 {
		ev := <-evs
		switch ev.Type {
		case "server.discovered":
			var d Discovered
			if err := ev.Decode(&d); err != nil {
				t.Fatal(err)
			}
			got = append(got, d)
		case "server.status_changed":
			var s StatusChanged
			if err := ev.Decode(&s); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		if ev.Seq == 0 || ev.At.IsZero() {
			t.Errorf("event without seq or time: %+v", ev)
		}
	}
	want := []any{Discovered{Server: "demo", Tools: 5}, StatusChanged{Server: "demo", From: "CONNECTING", To: "CONNECTED"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	cancel()
	for range evs {
	}
	// The channel closed: the reader goroutine has ended.
}

func TestEventsNotEnabled(t *testing.T) {
	c, _ := newTestAPI(t, nil)
	_, err := c.Events(t.Context())
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("err = %v, want a 404 *Error", err)
	}
}
