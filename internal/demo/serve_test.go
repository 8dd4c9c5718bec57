package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveEnv makes the test binary act as `switchboard demo-server` over stdio;
// its value is the JSON of stdioOptions.
const serveEnv = "SWITCHBOARD_DEMO_TEST_SERVE"

// stdioOptions are the Options a re-executed test binary can receive.
type stdioOptions struct {
	CrashAfter int
	ExtraTools int
}

func TestMain(m *testing.M) {
	if v, ok := os.LookupEnv(serveEnv); ok {
		os.Unsetenv(serveEnv)
		var so stdioOptions
		if err := json.Unmarshal([]byte(v), &so); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := RunStdio(context.Background(), &Options{CrashAfter: so.CrashAfter, ExtraTools: so.ExtraTools}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startStdio runs the test binary as a stdio demo server and connects to it.
func startStdio(t *testing.T, so stdioOptions) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	v, err := json.Marshal(so)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveEnv+"="+string(v))
	cmd.Stderr = os.Stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "v0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to the stdio demo server: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cmd
}

func TestRunStdio(t *testing.T) {
	cs, cmd := startStdio(t, stdioOptions{ExtraTools: 3})
	n := 0
	for _, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != BuiltinTools+3 {
		t.Errorf("listed %d tools, want %d", n, BuiltinTools+3)
	}
	res, err := call(t, cs, ToolEcho, map[string]any{"text": "über stdio"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"über stdio"}, summarize(t, res).Texts); diff != "" {
		t.Errorf("echo (-want +got):\n%s", diff)
	}
	// Closing stdin is a client disconnect: RunStdio returns nil, exit 0.
	if err := cs.Close(); err != nil {
		t.Errorf("closing session: %v", err)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("server process state %v, want exit status 0", cmd.ProcessState)
	}
}

// With the real os.Exit: both answers arrive, then the process exits with 3.
func TestRunStdioCrashAfter(t *testing.T) {
	cs, cmd := startStdio(t, stdioOptions{CrashAfter: 2})
	for _, text := range []string{"one", "two"} {
		res, err := call(t, cs, ToolEcho, map[string]any{"text": text})
		if err != nil {
			t.Fatalf("echo(%s): %v", text, err)
		}
		if diff := cmp.Diff([]string{text}, summarize(t, res).Texts); diff != "" {
			t.Errorf("echo(%s) (-want +got):\n%s", text, diff)
		}
	}
	cs.Wait() // the server hangs up by exiting
	cs.Close()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != CrashExitCode {
		t.Errorf("server process state %v, want exit status %d", cmd.ProcessState, CrashExitCode)
	}
}

func TestRunStdioInvalidOptions(t *testing.T) {
	// Validation comes first, so stdin is never read.
	err := RunStdio(t.Context(), &Options{ErrorRate: 2})
	if err == nil || !strings.Contains(err.Error(), "error rate 2") {
		t.Errorf("RunStdio(ErrorRate: 2) = %v, want an error rate error", err)
	}
}

func TestServeHTTP(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addrc := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- ServeHTTP(ctx, "127.0.0.1:0", &Options{ExtraTools: 2}, func(addr string) { addrc <- addr })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-served:
		t.Fatalf("ServeHTTP returned before listening: %v", err)
	}

	transports := []struct {
		name      string
		transport mcp.Transport
	}{
		{"streamable", &mcp.StreamableClientTransport{Endpoint: "http://" + addr + StreamablePath, MaxRetries: -1}},
		{"sse", &mcp.SSEClientTransport{Endpoint: "http://" + addr + SSEPath}},
	}
	var sessions []*mcp.ClientSession
	t.Cleanup(func() {
		for _, cs := range sessions {
			cs.Close()
		}
	})
	for _, tt := range transports {
		t.Run(tt.name, func(t *testing.T) {
			c := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "v0"}, nil)
			cs, err := c.Connect(ctx, tt.transport, nil)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			// Left open past this subtest, so that shutdown meets live streams.
			sessions = append(sessions, cs)
			if got := cs.InitializeResult().ServerInfo.Name; got != Name {
				t.Errorf("server name %q, want %q", got, Name)
			}
			n := 0
			for _, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
			if n != BuiltinTools+2 {
				t.Errorf("listed %d tools, want %d", n, BuiltinTools+2)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEcho, Arguments: map[string]any{"text": "via " + tt.name + " ✓"}})
			if err != nil {
				t.Fatal(err)
			}
			want := outcome{Texts: []string{"via " + tt.name + " ✓"}, Structured: map[string]any{"text": "via " + tt.name + " ✓"}}
			if diff := cmp.Diff(want, summarize(t, res)); diff != "" {
				t.Errorf("echo (-want +got):\n%s", diff)
			}
		})
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeHTTP after cancel = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ServeHTTP did not return after ctx was cancelled")
	}
	if resp, err := http.Get("http://" + addr + StreamablePath); err == nil {
		resp.Body.Close()
		t.Errorf("GET after shutdown: %s, want a connection error", resp.Status)
	}
}

func TestServeHTTPErrors(t *testing.T) {
	t.Run("invalid options", func(t *testing.T) {
		err := ServeHTTP(t.Context(), "127.0.0.1:0", &Options{Latency: -time.Second}, nil)
		if err == nil || !strings.Contains(err.Error(), "latency") {
			t.Errorf("ServeHTTP(Latency: -1s) = %v, want a latency error", err)
		}
	})
	t.Run("bad address", func(t *testing.T) {
		called := false
		err := ServeHTTP(t.Context(), "127.0.0.1:not-a-port", nil, func(string) { called = true })
		if err == nil || called {
			t.Errorf("ServeHTTP(bad addr) = %v, ready called %v; want an error and no ready", err, called)
		}
	})
}

func TestHandler(t *testing.T) {
	h := Handler(nil)
	tests := []struct {
		name   string
		method string
		path   string
		header map[string]string
		want   int
	}{
		{"unknown path", http.MethodGet, "/nope", nil, http.StatusNotFound},
		{"cross-origin post", http.MethodPost, StreamablePath, map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}, http.StatusForbidden},
		{"sse bad method", http.MethodPut, SSEPath, nil, http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader("{}"))
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Errorf("%s %s: status %d, want %d", tt.method, tt.path, rec.Code, tt.want)
			}
		})
	}
}
