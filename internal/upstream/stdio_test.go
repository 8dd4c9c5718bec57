package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

func TestStdioConnectDiscoverCall(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, rec, nil, nil)
	ctx := context.Background()
	if err := m.Add(fakeStdio("fake", "basic")); err != nil {
		t.Fatal(err)
	}
	st, err := m.Status("fake")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != upstream.StateDisconnected {
		t.Fatalf("state after Add = %s, want DISCONNECTED", st.State)
	}
	if err := m.Connect(ctx, "fake"); err != nil {
		t.Fatalf("Connect: %v", err)
	}

	st, err = m.Status("fake")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != upstream.StateConnected || st.PID == 0 || st.LastError != "" {
		t.Errorf("status = %s pid %d error %q, want CONNECTED with a pid and no error", st.State, st.PID, st.LastError)
	}
	if st.ServerInfo == nil || st.ServerInfo.Name != "fake" || st.Instructions != "a fake server for tests" || st.ProtocolVersion == "" {
		t.Errorf("status does not describe the session: %+v", st)
	}

	// Discovery followed the cursors (page size 2) and listed every kind.
	ds := rec.discoveriesOf("fake")
	if len(ds) != 1 {
		t.Fatalf("got %d discoveries, want 1", len(ds))
	}
	wantTools := []string{"add_tool", "crash", "echo", "env", "slow", "tool_1", "tool_2", "tool_3", "tool_4", "tool_5"}
	got := toolNames(ds[0].Tools)
	slices.Sort(got)
	if diff := cmp.Diff(wantTools, got); diff != "" {
		t.Errorf("discovered tools (-want +got):\n%s", diff)
	}
	if len(ds[0].Resources) != 1 || len(ds[0].Templates) != 1 || len(ds[0].Prompts) != 1 {
		t.Errorf("discovered %d resources, %d templates, %d prompts; want 1 of each",
			len(ds[0].Resources), len(ds[0].Templates), len(ds[0].Prompts))
	}
	if d, err := m.Discovery("fake"); err != nil || len(d.Tools) != len(wantTools) {
		t.Errorf("Discovery() = %d tools, %v; want %d", len(d.Tools), err, len(wantTools))
	}

	// Discovery was reported before the state became CONNECTED.
	if diff := cmp.Diff([]string{"DISCONNECTED>CONNECTING", "CONNECTING>CONNECTED"}, rec.steps("fake")); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}

	// Arguments pass through as raw JSON: key order and nesting survive,
	// which they would not if they were decoded into a map and re-encoded.
	args := `{"zeta":1,"alpha":[true,null,"x"],"mid":{"b":2,"a":1}}`
	res, err := m.CallTool(ctx, "fake", &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if got := textOf(t, res); got != args {
		t.Errorf("echo returned %s, want %s", got, args)
	}

	rr, err := m.ReadResource(ctx, "fake", &mcp.ReadResourceParams{URI: "file:///readme"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "hello" {
		t.Errorf("ReadResource = %+v, %v; want hello", rr, err)
	}
	gp, err := m.GetPrompt(ctx, "fake", &mcp.GetPromptParams{Name: "greet"})
	if err != nil || len(gp.Messages) != 1 {
		t.Errorf("GetPrompt = %+v, %v; want one message", gp, err)
	}

	// A JSON-RPC error from the server is an ordinary error, not unavailability.
	_, err = m.CallTool(ctx, "fake", &mcp.CallToolParams{Name: "no_such_tool"})
	var unavail *upstream.UnavailableError
	if err == nil || errors.As(err, &unavail) {
		t.Errorf("calling an unknown tool: err = %v, want a plain error", err)
	}

	if lines := m.Stderr("fake"); !slices.Contains(lines, "fake server ready") {
		t.Errorf("Stderr = %q, want it to contain the server's startup line", lines)
	}

	// Connecting a connected server is a no-op.
	if err := m.Connect(ctx, "fake"); err != nil {
		t.Fatalf("second Connect: %v", err)
	}
	if n := len(rec.steps("fake")); n != 2 {
		t.Errorf("second Connect made transitions: %q", rec.steps("fake"))
	}

	pid := st.PID
	if _, err := m.Disconnect(ctx, "fake"); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	st, _ = m.Status("fake")
	if st.State != upstream.StateDisconnected || st.PID != 0 {
		t.Errorf("after Disconnect: state %s pid %d, want DISCONNECTED pid 0", st.State, st.PID)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d still exists after Disconnect (kill 0: %v)", pid, err)
	}
	if _, err := m.CallTool(ctx, "fake", &mcp.CallToolParams{Name: "echo"}); !errors.As(err, &unavail) || unavail.State != upstream.StateDisconnected {
		t.Errorf("CallTool after Disconnect: err = %v, want UnavailableError DISCONNECTED", err)
	}
	if diff := cmp.Diff([]string{"DISCONNECTED>CONNECTING", "CONNECTING>CONNECTED", "CONNECTED>DISCONNECTED"}, rec.steps("fake")); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
}

func TestStdioChildEnvironment(t *testing.T) {
	const canary = "UPSTREAM_TEST_CANARY"
	t.Setenv(canary, "canary-value")
	t.Setenv("UPSTREAM_TEST_SHARED", "from-gateway")

	tests := []struct {
		name        string
		passthrough []string
		env         map[string]string
		want        map[string]string // "" means must be absent
	}{
		{
			name: "nothing leaks by default",
			want: map[string]string{canary: "", "UPSTREAM_TEST_SHARED": ""},
		},
		{
			name:        "passthrough copies named vars",
			passthrough: []string{canary},
			want:        map[string]string{canary: "canary-value", "UPSTREAM_TEST_SHARED": ""},
		},
		{
			name:        "env entries appear and win over passthrough",
			passthrough: []string{"UPSTREAM_TEST_SHARED"},
			env:         map[string]string{"UPSTREAM_TEST_SHARED": "from-config", "EXTRA": "x"},
			want:        map[string]string{canary: "", "UPSTREAM_TEST_SHARED": "from-config", "EXTRA": "x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, nil, nil, nil)
			srv := fakeStdio("envtest", "basic")
			srv.EnvPassthrough = tt.passthrough
			for k, v := range tt.env {
				srv.Env[k] = v
			}
			if err := m.Add(srv); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := m.Connect(ctx, "envtest"); err != nil {
				t.Fatal(err)
			}
			res, err := m.CallTool(ctx, "envtest", &mcp.CallToolParams{Name: "env"})
			if err != nil {
				t.Fatal(err)
			}
			var env map[string]string
			if err := json.Unmarshal([]byte(textOf(t, res)), &env); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for k := range tt.want {
				got[k] = env[k]
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("child env (-want +got):\n%s", diff)
			}
			if env["PATH"] == "" {
				t.Errorf("child env has no PATH; base env was not copied")
			}
		})
	}
}

func TestStdioKilledChild(t *testing.T) {
	rec := newRecorder()
	// Without restarts, so that the crashed server stays in ERROR until an
	// operator connects it (restarts: lifecycle_test.go).
	m := newManager(t, rec, nil, &upstream.Options{Restart: upstream.RestartPolicy{Disabled: true}})
	ctx := context.Background()
	for _, name := range []string{"victim", "bystander"} {
		if err := m.Add(fakeStdio(name, "basic")); err != nil {
			t.Fatal(err)
		}
		if err := m.Connect(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := m.Status("victim")
	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "victim to enter ERROR", func() bool {
		st, _ := m.Status("victim")
		return st.State == upstream.StateError
	})

	st, _ = m.Status("victim")
	if !strings.Contains(st.LastError, "process exited: signal: killed") {
		t.Errorf("LastError = %q, want it to say the process was killed", st.LastError)
	}
	if st.PID != 0 {
		t.Errorf("PID = %d after the process died, want 0", st.PID)
	}
	_, err := m.CallTool(ctx, "victim", &mcp.CallToolParams{Name: "echo"})
	var unavail *upstream.UnavailableError
	if !errors.As(err, &unavail) || unavail.Server != "victim" || unavail.State != upstream.StateError {
		t.Fatalf("CallTool on the dead server: err = %v, want UnavailableError in ERROR", err)
	}
	if !strings.Contains(err.Error(), `server "victim" is ERROR: process exited`) {
		t.Errorf("error text = %q", err)
	}
	if _, err := m.Session("victim"); !errors.As(err, &unavail) {
		t.Errorf("Session on the dead server: err = %v, want UnavailableError", err)
	}

	res, err := m.CallTool(ctx, "bystander", &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"ok":true}`)})
	if err != nil || textOf(t, res) != `{"ok":true}` {
		t.Errorf("the other upstream stopped working: %v", err)
	}

	// An explicit Connect brings the server back.
	if err := m.Connect(ctx, "victim"); err != nil {
		t.Fatalf("reconnect: %v", err)
	}
	if diff := cmp.Diff([]string{
		"DISCONNECTED>CONNECTING", "CONNECTING>CONNECTED", "CONNECTED>ERROR", "ERROR>CONNECTING", "CONNECTING>CONNECTED",
	}, rec.steps("victim")); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
}

func TestStdioCrashDuringCall(t *testing.T) {
	m := newManager(t, nil, nil, nil)
	ctx := context.Background()
	if err := m.Add(fakeStdio("crashy", "basic")); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "crashy"); err != nil {
		t.Fatal(err)
	}
	_, err := m.CallTool(ctx, "crashy", &mcp.CallToolParams{Name: "crash"})
	var unavail *upstream.UnavailableError
	if !errors.As(err, &unavail) || unavail.State != upstream.StateError {
		t.Fatalf("CallTool of a crashing tool: err = %v, want UnavailableError in ERROR", err)
	}
	for _, want := range []string{"process exited: exit status 3", "stderr: fatal: boom"} {
		if !strings.Contains(unavail.Reason, want) {
			t.Errorf("reason %q does not contain %q", unavail.Reason, want)
		}
	}
}

func TestBrokenListsDoNotFailConnect(t *testing.T) {
	rec := newRecorder()
	logs := &logtest.Buffer{}
	m := newManager(t, rec, logs, nil)
	if err := m.Add(fakeStdio("partial", "broken")); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(context.Background(), "partial"); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	d, _ := m.Discovery("partial")
	if len(d.Tools) == 0 || len(d.Resources) != 0 || len(d.Prompts) != 0 || len(d.Templates) != 1 {
		t.Errorf("discovered %d tools, %d resources, %d templates, %d prompts; want tools and templates only",
			len(d.Tools), len(d.Resources), len(d.Templates), len(d.Prompts))
	}
	for _, want := range []string{"resources/list is broken", "prompts/list is broken"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs do not mention %q:\n%s", want, logs)
		}
	}
}

func TestDisconnectAbortsCalls(t *testing.T) {
	// A call that never ends is aborted once the drain times out.
	rec := newRecorder()
	m := newManager(t, rec, nil, &upstream.Options{DrainTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	if err := m.Add(fakeStdio("busy", "basic")); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.CallTool(ctx, "busy", &mcp.CallToolParams{Name: "slow"})
		done <- err
	}()
	rec.waitFor(t, "the slow call to start", func() bool { return slices.Contains(m.Stderr("busy"), "slow call started") })
	pending, err := m.Disconnect(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	if pending != 1 {
		t.Errorf("Disconnect reported %d pending calls, want 1", pending)
	}
	err = <-done
	var unavail *upstream.UnavailableError
	if !errors.As(err, &unavail) || unavail.State != upstream.StateDisconnected {
		t.Errorf("call in flight during Disconnect: err = %v, want UnavailableError DISCONNECTED", err)
	}
}

func TestStdioListChanged(t *testing.T) {
	// The go-sdk client receives list_changed differently per protocol:
	// on a subscriptions/listen stream (2026-07-28) or unsolicited (legacy).
	tests := []struct {
		fake     string
		protocol string // "" = the newest
	}{
		{fake: "basic"},
		{fake: "legacy", protocol: legacyProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.fake, func(t *testing.T) {
			rec := newRecorder()
			m := newManager(t, rec, nil, nil)
			ctx := context.Background()
			if err := m.Add(fakeStdio("dyn", tt.fake)); err != nil {
				t.Fatal(err)
			}
			if err := m.Connect(ctx, "dyn"); err != nil {
				t.Fatal(err)
			}
			st, _ := m.Status("dyn")
			if tt.protocol != "" && st.ProtocolVersion != tt.protocol {
				t.Fatalf("negotiated %s, want %s", st.ProtocolVersion, tt.protocol)
			}
			if _, err := m.CallTool(ctx, "dyn", &mcp.CallToolParams{Name: "add_tool"}); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(t, "a re-discovery", func() bool { return len(rec.discoveriesOf("dyn")) >= 2 })
			ds := rec.discoveriesOf("dyn")
			last := ds[len(ds)-1]
			if !slices.Contains(toolNames(last.Tools), "added") {
				t.Errorf("re-discovered tools %q do not include the added tool", toolNames(last.Tools))
			}
			if len(last.Resources) != 1 || len(last.Templates) != 1 || len(last.Prompts) != 1 {
				t.Errorf("re-discovery lost resources, templates or prompts: %+v", last)
			}
			if d, _ := m.Discovery("dyn"); !slices.Contains(toolNames(d.Tools), "added") {
				t.Errorf("Discovery() was not updated: %q", toolNames(d.Tools))
			}
			if _, err := m.CallTool(ctx, "dyn", &mcp.CallToolParams{Name: "added"}); err != nil {
				t.Errorf("calling the added tool: %v", err)
			}
		})
	}
}

func TestStdioConnectFailures(t *testing.T) {
	tests := []struct {
		name    string
		srv     *config.Server
		opts    *upstream.Options
		reasons []string // substrings of Status.LastError
		exact   bool     // LastError is reasons[0]
	}{
		{
			name:    "exits at startup",
			srv:     fakeStdio("x", "exit"),
			reasons: []string{"initializing", "process exited: exit status 1", "stderr: error: missing API key"},
		},
		{
			name:    "never answers",
			srv:     fakeStdio("x", "silent"),
			opts:    &upstream.Options{ConnectTimeout: 200 * time.Millisecond, ShutdownTimeout: 100 * time.Millisecond},
			reasons: []string{"connect timed out after 200ms"},
		},
		{
			name:    "command not on PATH",
			srv:     &config.Server{Name: "x", Transport: config.TransportStdio, Command: "switchboard-no-such-command"},
			reasons: []string{"command not found: switchboard-no-such-command"},
			exact:   true,
		},
		{
			name:    "command path does not exist",
			srv:     &config.Server{Name: "x", Transport: config.TransportStdio, Command: "/nonexistent/upstream-server"},
			reasons: []string{"command not found: /nonexistent/upstream-server"},
			exact:   true,
		},
		{
			name:    "relative command path does not exist in cwd",
			srv:     &config.Server{Name: "x", Transport: config.TransportStdio, Command: "./bin/server", Cwd: t.TempDir()},
			reasons: []string{"command not found: ./bin/server"},
			exact:   true,
		},
		{
			name:    "not executable",
			srv:     &config.Server{Name: "x", Transport: config.TransportStdio, Command: notExecutable(t)},
			reasons: []string{"starting process", "permission denied"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			var o upstream.Options
			if tt.opts != nil {
				o = *tt.opts
			}
			// Only the first attempt is under test; restarts: lifecycle_test.go.
			o.Restart.Disabled = true
			m := newManager(t, rec, nil, &o)
			if err := m.Add(tt.srv); err != nil {
				t.Fatal(err)
			}
			err := m.Connect(context.Background(), "x")
			var unavail *upstream.UnavailableError
			if !errors.As(err, &unavail) || unavail.State != upstream.StateError {
				t.Fatalf("Connect: err = %v, want UnavailableError in ERROR", err)
			}
			st, _ := m.Status("x")
			if st.State != upstream.StateError || st.PID != 0 {
				t.Errorf("status %s pid %d, want ERROR pid 0", st.State, st.PID)
			}
			for _, want := range tt.reasons {
				if !strings.Contains(st.LastError, want) {
					t.Errorf("LastError %q does not contain %q", st.LastError, want)
				}
			}
			if tt.exact && st.LastError != tt.reasons[0] {
				t.Errorf("LastError = %q, want exactly %q", st.LastError, tt.reasons[0])
			}
			if st.LastError != unavail.Reason {
				t.Errorf("Connect reason %q != LastError %q", unavail.Reason, st.LastError)
			}
			if diff := cmp.Diff([]string{"DISCONNECTED>CONNECTING", "CONNECTING>ERROR"}, rec.steps("x")); diff != "" {
				t.Errorf("transitions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDisconnectAbortsConnect(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, rec, nil, &upstream.Options{ConnectTimeout: time.Hour, ShutdownTimeout: 100 * time.Millisecond})
	ctx := context.Background()
	if err := m.Add(fakeStdio("slow", "silent")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Connect(ctx, "slow") }()
	rec.waitFor(t, "CONNECTING", func() bool {
		st, _ := m.Status("slow")
		return st.State == upstream.StateConnecting && st.PID != 0
	})
	st, _ := m.Status("slow")
	if _, err := m.Disconnect(ctx, "slow"); err != nil {
		t.Fatal(err)
	}
	err := <-done
	var unavail *upstream.UnavailableError
	if !errors.As(err, &unavail) || unavail.State != upstream.StateDisconnected || !errors.Is(err, context.Canceled) {
		t.Errorf("aborted Connect: err = %v, want UnavailableError DISCONNECTED wrapping context.Canceled", err)
	}
	if err := syscall.Kill(st.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d still exists after the aborted connect (kill 0: %v)", st.PID, err)
	}
	if diff := cmp.Diff([]string{"DISCONNECTED>CONNECTING", "CONNECTING>DISCONNECTED"}, rec.steps("slow")); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
}

func TestConnectReturnsWhenCallerGivesUp(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, rec, nil, &upstream.Options{ConnectTimeout: time.Hour, ShutdownTimeout: 100 * time.Millisecond})
	if err := m.Add(fakeStdio("slow", "silent")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Connect(ctx, "slow"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Connect with a cancelled ctx: err = %v, want context.Canceled", err)
	}
	// Close (in Cleanup) stops whatever the attempt left running.
}

func TestLifecycleIdempotent(t *testing.T) {
	m := newManager(t, nil, nil, nil)
	ctx := context.Background()
	if err := m.Add(fakeStdio("a", "basic")); err != nil {
		t.Fatal(err)
	}
	if err := m.Add(fakeStdio("a", "basic")); !errors.Is(err, upstream.ErrExists) {
		t.Errorf("duplicate Add: err = %v, want ErrExists", err)
	}
	for i := range 2 {
		if _, err := m.Disconnect(ctx, "a"); err != nil {
			t.Errorf("Disconnect #%d of a disconnected server: %v", i+1, err)
		}
	}
	if err := m.Connect(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	st, _ := m.Status("a")
	if err := m.Remove(ctx, "a"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if err := syscall.Kill(st.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d still exists after Remove (kill 0: %v)", st.PID, err)
	}
	if err := m.Remove(ctx, "a"); !errors.Is(err, upstream.ErrNotFound) {
		t.Errorf("second Remove: err = %v, want ErrNotFound", err)
	}
	for _, err := range []error{
		m.Connect(ctx, "a"),
		func() error { _, err := m.Disconnect(ctx, "a"); return err }(),
		func() error { _, err := m.Status("a"); return err }(),
		func() error { _, err := m.Session("a"); return err }(),
		func() error { _, err := m.CallTool(ctx, "a", &mcp.CallToolParams{Name: "echo"}); return err }(),
	} {
		if !errors.Is(err, upstream.ErrNotFound) {
			t.Errorf("call on a removed server: err = %v, want ErrNotFound", err)
		}
	}
	// The name is free again.
	if err := m.Add(fakeStdio("a", "basic")); err != nil {
		t.Errorf("Add after Remove: %v", err)
	}
	if err := m.Connect(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	st, _ = m.Status("a")
	for i := range 2 {
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close #%d: %v", i+1, err)
		}
	}
	if err := syscall.Kill(st.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d still exists after Close (kill 0: %v)", st.PID, err)
	}
	if got := m.Statuses(); len(got) != 0 {
		t.Errorf("Statuses after Close = %v, want none", got)
	}
	if err := m.Add(fakeStdio("b", "basic")); !errors.Is(err, upstream.ErrClosed) {
		t.Errorf("Add after Close: err = %v, want ErrClosed", err)
	}
}

func TestStatusesSorted(t *testing.T) {
	m := newManager(t, nil, nil, nil)
	for _, name := range []string{"zulu", "alpha", "mike"} {
		if err := m.Add(fakeStdio(name, "basic")); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, st := range m.Statuses() {
		got = append(got, st.Name+":"+string(st.State))
	}
	want := []string{"alpha:DISCONNECTED", "mike:DISCONNECTED", "zulu:DISCONNECTED"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Statuses (-want +got):\n%s", diff)
	}
	cfg, err := m.Config("mike")
	if err != nil || cfg.Command != config.SelfCommand {
		t.Errorf("Config(mike) = %+v, %v", cfg, err)
	}
	if _, err := m.Config("nope"); !errors.Is(err, upstream.ErrNotFound) {
		t.Errorf("Config(nope): err = %v, want ErrNotFound", err)
	}
}

// notExecutable returns the path of a file that exists but cannot be run.
func notExecutable(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
