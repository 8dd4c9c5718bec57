package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

const headerCanary = "secret-canary-7f3a"

// serveFake serves the basic fake server over transport ("http" or "sse")
// and counts requests with and without the canary API key.
func serveFake(t *testing.T, transport string) (url string, withKey, withoutKey *atomic.Int64) {
	t.Helper()
	srv := newBasicServer()
	getServer := func(*http.Request) *mcp.Server { return srv }
	var h http.Handler
	switch transport {
	case config.TransportHTTP:
		h = mcp.NewStreamableHTTPHandler(getServer, nil)
	case config.TransportSSE:
		h = mcp.NewSSEHandler(getServer, nil)
	default:
		t.Fatalf("unknown transport %q", transport)
	}
	withKey, withoutKey = new(atomic.Int64), new(atomic.Int64)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") == headerCanary {
			withKey.Add(1)
		} else {
			withoutKey.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close) // registered before the Manager's Close, so it runs after it
	return ts.URL, withKey, withoutKey
}

func TestHTTPTransports(t *testing.T) {
	for _, transport := range []string{config.TransportHTTP, config.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			url, withKey, withoutKey := serveFake(t, transport)
			rec := newRecorder()
			logs := &logtest.Buffer{}
			m := newManager(t, rec, logs, nil)
			ctx := context.Background()
			if err := m.Add(&config.Server{
				Name:      "remote",
				Transport: transport,
				URL:       url,
				Headers:   map[string]string{"X-Api-Key": headerCanary},
			}); err != nil {
				t.Fatal(err)
			}
			if err := m.Connect(ctx, "remote"); err != nil {
				t.Fatalf("Connect: %v", err)
			}
			st, _ := m.Status("remote")
			if st.State != upstream.StateConnected || st.PID != 0 || st.Transport != transport {
				t.Errorf("status = %+v, want CONNECTED over %s without a pid", st, transport)
			}
			if ds := rec.discoveriesOf("remote"); len(ds) != 1 || !slices.Contains(toolNames(ds[0].Tools), "tool_5") {
				t.Fatalf("discoveries = %+v, want one with every tool", ds)
			}

			args := `{"z":1,"a":{"y":[1,2]}}`
			res, err := m.CallTool(ctx, "remote", &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(args)})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if got := textOf(t, res); got != args {
				t.Errorf("echo returned %s, want %s", got, args)
			}

			if _, err := m.CallTool(ctx, "remote", &mcp.CallToolParams{Name: "add_tool"}); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(t, "a re-discovery", func() bool { return len(rec.discoveriesOf("remote")) >= 2 })
			ds := rec.discoveriesOf("remote")
			if !slices.Contains(toolNames(ds[len(ds)-1].Tools), "added") {
				t.Errorf("re-discovery did not find the added tool: %q", toolNames(ds[len(ds)-1].Tools))
			}

			_, callErr := m.CallTool(ctx, "remote", &mcp.CallToolParams{Name: "no_such_tool"})
			if callErr == nil {
				t.Errorf("calling an unknown tool succeeded")
			}

			if _, err := m.Disconnect(ctx, "remote"); err != nil {
				t.Fatal(err)
			}
			if withKey.Load() == 0 || withoutKey.Load() != 0 {
				t.Errorf("requests with the key: %d, without: %d; want all with", withKey.Load(), withoutKey.Load())
			}
			st, _ = m.Status("remote")
			for what, s := range map[string]string{"logs": logs.String(), "status": fmt.Sprintf("%+v", st), "error": callErr.Error()} {
				if strings.Contains(s, headerCanary) {
					t.Errorf("the header value leaked into %s: %s", what, s)
				}
			}
		})
	}
}

func TestHTTPHeadersStayOnTheirHost(t *testing.T) {
	// A redirect to another host must not carry the credentials along.
	other, withKey, withoutKey := serveFake(t, config.TransportHTTP)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	m := newManager(t, nil, nil, nil)
	// 127.0.0.1 and localhost are different hosts to the client.
	u := strings.Replace(redirector.URL, "127.0.0.1", "localhost", 1)
	if err := m.Add(&config.Server{Name: "r", Transport: config.TransportHTTP, URL: u, Headers: map[string]string{"X-Api-Key": headerCanary}}); err != nil {
		t.Fatal(err)
	}
	_ = m.Connect(context.Background(), "r") // whether the redirected session works is not the point
	if withoutKey.Load() == 0 {
		t.Fatalf("no request was redirected to the other host; the test proves nothing")
	}
	if n := withKey.Load(); n != 0 {
		t.Errorf("%d requests reached the other host with the API key", n)
	}
}

func TestHTTPConnectFailures(t *testing.T) {
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := l.Addr().String()
	l.Close()

	unauthorized := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	t.Cleanup(unauthorized.Close)
	unauthURL := strings.Replace(unauthorized.URL, "http://", "http://user:pw-canary-1234@", 1) + "/mcp?token=query-canary-5678"

	tests := []struct {
		name, transport, url string
		reason               string
	}{
		{"http unreachable", config.TransportHTTP, "http://user:pw-canary-1234@" + deadAddr + "/mcp?token=query-canary-5678", "connection refused"},
		{"sse unreachable", config.TransportSSE, "http://user:pw-canary-1234@" + deadAddr + "/sse?token=query-canary-5678", "connection refused"},
		{"http unauthorized", config.TransportHTTP, unauthURL, "Unauthorized"},
		{"sse unauthorized", config.TransportSSE, unauthURL, "Unauthorized"},
		{"invalid url", config.TransportHTTP, "http://user:pw-canary-1234@[::1", "invalid url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &logtest.Buffer{}
			rec := newRecorder()
			m := newManager(t, rec, logs, nil)
			if err := m.Add(&config.Server{Name: "x", Transport: tt.transport, URL: tt.url, Headers: map[string]string{"X-Api-Key": headerCanary}}); err != nil {
				t.Fatal(err)
			}
			err := m.Connect(context.Background(), "x")
			var unavail *upstream.UnavailableError
			if !errors.As(err, &unavail) || unavail.State != upstream.StateError {
				t.Fatalf("Connect: err = %v, want UnavailableError in ERROR", err)
			}
			st, _ := m.Status("x")
			if st.State != upstream.StateError || !strings.Contains(st.LastError, tt.reason) {
				t.Errorf("status %s %q, want ERROR mentioning %q", st.State, st.LastError, tt.reason)
			}
			for _, secret := range []string{headerCanary, "pw-canary-1234", "query-canary-5678", "user:"} {
				for what, s := range map[string]string{"error": err.Error(), "status": fmt.Sprintf("%+v", st), "logs": logs.String()} {
					if strings.Contains(s, secret) {
						t.Errorf("%q leaked into %s: %s", secret, what, s)
					}
				}
			}
			for i := range 2 {
				if _, err := m.Disconnect(context.Background(), "x"); err != nil {
					t.Errorf("Disconnect #%d: %v", i+1, err)
				}
			}
		})
	}
}
