package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// fastRestart restarts at once and practically never declares a crash loop.
var fastRestart = upstream.RestartPolicy{BackoffInitial: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, MaxAttempts: 1000, Window: time.Minute}

// waitStatus waits until cond holds for the server's status and returns it.
func waitStatus(t *testing.T, rec *recorder, m *upstream.Manager, name, what string, cond func(upstream.Status) bool) upstream.Status {
	t.Helper()
	var st upstream.Status
	rec.waitFor(t, what, func() bool {
		st, _ = m.Status(name)
		return cond(st)
	})
	return st
}

func isState(s upstream.State) func(upstream.Status) bool {
	return func(st upstream.Status) bool { return st.State == s }
}

func TestRestartAfterCrash(t *testing.T) {
	rec := newRecorder()
	var errorStatus []upstream.Status // as seen when entering ERROR
	var m *upstream.Manager
	var mu sync.Mutex
	o := &upstream.Options{Restart: fastRestart}
	o.OnTransition = func(tr upstream.Transition) {
		rec.onTransition(tr)
		if tr.To == upstream.StateError {
			st, _ := m.Status(tr.Server)
			mu.Lock()
			errorStatus = append(errorStatus, st)
			mu.Unlock()
		}
	}
	m = newManager(t, nil, nil, o)
	ctx := context.Background()
	if err := m.Add(fakeStdio("victim", "basic")); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "victim"); err != nil {
		t.Fatal(err)
	}
	first, _ := m.Status("victim")
	if first.StartedAt.IsZero() || first.Restarts != 0 || first.LastExit != "" {
		t.Errorf("after connect: StartedAt %v, Restarts %d, LastExit %q; want a start time, 0, \"\"", first.StartedAt, first.Restarts, first.LastExit)
	}
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, rec, m, "victim", "a restart", func(st upstream.Status) bool {
		return st.State == upstream.StateConnected && st.PID != 0 && st.PID != first.PID
	})
	if st.Restarts != 1 || st.LastExit != "signal: killed" || !st.NextRestartAt.IsZero() || !st.StartedAt.After(first.StartedAt) {
		t.Errorf("after the restart: Restarts %d, LastExit %q, NextRestartAt %v, StartedAt %v; want 1, \"signal: killed\", zero, after %v",
			st.Restarts, st.LastExit, st.NextRestartAt, st.StartedAt, first.StartedAt)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errorStatus) != 1 {
		t.Fatalf("entered ERROR %d times, want 1", len(errorStatus))
	}
	if e := errorStatus[0]; e.NextRestartAt.IsZero() || e.PID != 0 || !strings.Contains(e.LastError, "process exited: signal: killed") {
		t.Errorf("in ERROR: NextRestartAt %v, PID %d, LastError %q; want a restart scheduled, no pid, the reason", e.NextRestartAt, e.PID, e.LastError)
	}
	if diff := cmp.Diff([]string{
		"DISCONNECTED>CONNECTING", "CONNECTING>CONNECTED", "CONNECTED>ERROR", "ERROR>CONNECTING", "CONNECTING>CONNECTED",
	}, rec.steps("victim")); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
	if res, err := m.CallTool(ctx, "victim", &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{}`)}); err != nil || textOf(t, res) != "{}" {
		t.Errorf("call after the restart: %v", err)
	}
}

// TestCrashLoop is acceptance test B3.
func TestCrashLoop(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, rec, nil, &upstream.Options{Restart: upstream.RestartPolicy{
		MaxAttempts: 3, Window: time.Minute, BackoffInitial: time.Millisecond, BackoffMax: 5 * time.Millisecond,
	}})
	ctx := context.Background()
	if err := m.Add(fakeStdio("loop", "exit")); err != nil {
		t.Fatal(err)
	}
	var unavail *upstream.UnavailableError
	if err := m.Connect(ctx, "loop"); !errors.As(err, &unavail) || !strings.Contains(unavail.Reason, "missing API key") {
		t.Fatalf("Connect: %v, want the first failure", err)
	}
	const reason = "crash loop: 3 restarts in 60s"
	st := waitStatus(t, rec, m, "loop", "the crash loop", func(st upstream.Status) bool { return st.LastError == reason })
	if st.State != upstream.StateError || st.Restarts != 3 || !st.NextRestartAt.IsZero() || st.LastExit != "exit status 1" {
		t.Errorf("status = %s, %d restarts, next %v, last exit %q; want ERROR, 3, none, exit status 1", st.State, st.Restarts, st.NextRestartAt, st.LastExit)
	}
	want := []string{"DISCONNECTED>CONNECTING", "CONNECTING>ERROR"}
	for range 3 {
		want = append(want, "ERROR>CONNECTING", "CONNECTING>ERROR")
	}
	// Restarts are 1-5ms apart: had another been scheduled, it would show.
	time.Sleep(100 * time.Millisecond)
	if diff := cmp.Diff(want, rec.steps("loop")); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
	if _, err := m.CallTool(ctx, "loop", &mcp.CallToolParams{Name: "echo"}); !errors.As(err, &unavail) || unavail.Reason != reason {
		t.Errorf("call in a crash loop: %v, want UnavailableError with the crash loop reason", err)
	}

	// An operator's Connect starts over, with a fresh count.
	if err := m.Connect(ctx, "loop"); err == nil {
		t.Fatal("Connect succeeded for a server that exits at once")
	}
	waitStatus(t, rec, m, "loop", "the second crash loop", func(st upstream.Status) bool {
		return st.LastError == reason && st.Restarts == 6
	})
}

func TestConfigProblemsAreNotRetried(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, rec, nil, &upstream.Options{Restart: fastRestart})
	if err := m.Add(&config.Server{Name: "npx", Transport: config.TransportStdio, Command: "switchboard-test-npx-missing"}); err != nil {
		t.Fatal(err)
	}
	err := m.Connect(context.Background(), "npx")
	var unavail *upstream.UnavailableError
	if !errors.As(err, &unavail) || unavail.Reason != "command not found: switchboard-test-npx-missing" {
		t.Fatalf("Connect: %v, want exactly \"command not found: switchboard-test-npx-missing\"", err)
	}
	st, _ := m.Status("npx")
	if st.State != upstream.StateError || !st.NextRestartAt.IsZero() {
		t.Errorf("status %s, next restart %v; want ERROR with none scheduled", st.State, st.NextRestartAt)
	}
	time.Sleep(50 * time.Millisecond) // 10 backoffs: a retry would show
	if diff := cmp.Diff([]string{"DISCONNECTED>CONNECTING", "CONNECTING>ERROR"}, rec.steps("npx")); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
}

// TestNoOrphans is acceptance test B2.
func TestNoOrphans(t *testing.T) {
	const shutdown = time.Second
	m := upstream.NewManager(&upstream.Options{SelfExecutable: selfExe(t), ShutdownTimeout: shutdown})
	ctx := context.Background()
	t.Cleanup(func() { _ = m.Close(ctx) }) // if the test stops early; Close is idempotent
	names := []string{"a", "b", "c", "d", "stubborn"}
	for _, name := range names {
		fake := "basic"
		if name == "stubborn" {
			fake = "stubborn"
		}
		if err := m.Add(fakeStdio(name, fake)); err != nil {
			t.Fatal(err)
		}
		if err := m.Connect(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	var groups []int
	for _, name := range names {
		st, _ := m.Status(name)
		groups = append(groups, st.PID) // each leads its own group
	}
	rec := newRecorder()
	var grandchild int
	rec.waitFor(t, "the grandchild's pid", func() bool {
		grandchild = grandchildPID(t, m.Stderr("stubborn"))
		return grandchild != 0
	})
	if !procAlive(grandchild) {
		t.Fatalf("grandchild %d is not running; the test proves nothing", grandchild)
	}

	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- m.Close(ctx) }()
	// The acceptance criterion is a point in time, not a speed: by then
	// nothing may be left.
	time.Sleep(time.Until(start.Add(shutdown + time.Second)))
	for i, pgid := range groups {
		if groupAlive(pgid) {
			t.Errorf("process group %d of %s still has processes %s after Close began", pgid, names[i], shutdown+time.Second)
		}
	}
	if procAlive(grandchild) {
		t.Errorf("grandchild %d is still running", grandchild)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestChaos is acceptance test B1 at the upstream level: calls keep flowing
// while upstream processes are killed at random.
func TestChaos(t *testing.T) {
	const (
		calls       = 2000
		concurrency = 8
		kills       = 15
	)
	rec := newRecorder()
	m := newManager(t, rec, nil, &upstream.Options{Restart: fastRestart})
	ctx := context.Background()
	victims := []string{"victim-1", "victim-2"}
	servers := append(slices.Clone(victims), "steady")
	for _, name := range servers {
		if err := m.Add(fakeStdio(name, "basic")); err != nil {
			t.Fatal(err)
		}
		if err := m.Connect(ctx, name); err != nil {
			t.Fatal(err)
		}
	}

	var next atomic.Int64
	var killed atomic.Int64
	errs := make(map[string][]error)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= calls {
					return
				}
				server := servers[i%int64(len(servers))]
				args := fmt.Sprintf(`{"i":%d}`, i)
				res, err := m.CallTool(ctx, server, &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(args)})
				if err == nil && (len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != args) {
					err = fmt.Errorf("wrong result for %s", args)
				}
				if err != nil {
					mu.Lock()
					errs[server] = append(errs[server], err)
					mu.Unlock()
				}
			}
		})
	}
	killerDone := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(killerDone)
		for killed.Load() < kills {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(5+rand.IntN(20)) * time.Millisecond):
			}
			st, _ := m.Status(victims[rand.IntN(len(victims))])
			if st.PID != 0 && syscall.Kill(st.PID, syscall.SIGKILL) == nil {
				killed.Add(1)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-killerDone

	for _, name := range victims {
		waitStatus(t, rec, m, name, name+" to be CONNECTED again", isState(upstream.StateConnected))
	}
	if n := len(errs["steady"]); n > 0 {
		t.Errorf("%d calls to the server that was never killed failed, first: %v", n, errs["steady"][0])
	}
	failed := 0
	for _, name := range victims {
		for _, err := range errs[name] {
			failed++
			var unavail *upstream.UnavailableError
			if !errors.As(err, &unavail) && !strings.HasPrefix(err.Error(), fmt.Sprintf("calling tool \"echo\" on server %q: ", name)) {
				t.Errorf("call to %s failed with an unclean error %T: %v", name, err, err)
			}
		}
	}
	restarts := 0
	for _, name := range victims {
		st, _ := m.Status(name)
		restarts += st.Restarts
	}
	t.Logf("%d calls, %d kills, %d restarts, %d failed calls to the killed servers (all clean)", calls, killed.Load(), restarts, failed)
	if killed.Load() == 0 {
		t.Errorf("nothing was killed; the test proves nothing")
	}
}

// healthHTTP serves the basic server at /mcp and a health URL at /health
// that fails while unhealthy is set; while hung is set, MCP requests are
// accepted and never answered.
type healthHTTP struct {
	unhealthy, hung atomic.Bool
	url             string
}

func newHealthHTTP(t *testing.T) *healthHTTP {
	h := &healthHTTP{}
	release := make(chan struct{})
	srv := newBasicServer()
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			if h.unhealthy.Load() {
				http.Error(w, "sick", http.StatusServiceUnavailable)
			}
			return
		}
		if h.hung.Load() && r.Method == http.MethodPost {
			_, _ = io.Copy(io.Discard, r.Body) // so that net/http notices the client leave
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close) // before the Manager's Close, so it runs after it
	t.Cleanup(func() { close(release) })
	h.url = ts.URL
	return h
}

// healthRecorder collects OnHealth reports.
type healthRecorder struct {
	mu      sync.Mutex
	reports []upstream.HealthReport
}

func (h *healthRecorder) on(r upstream.HealthReport) {
	h.mu.Lock()
	h.reports = append(h.reports, r)
	h.mu.Unlock()
}

func (h *healthRecorder) all() []upstream.HealthReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.reports)
}

// TestHealthHTTP is acceptance test B4, first part.
func TestHealthHTTP(t *testing.T) {
	up := newHealthHTTP(t)
	rec := newRecorder()
	hr := &healthRecorder{}
	m := newManager(t, rec, nil, &upstream.Options{Restart: fastRestart, OnHealth: hr.on})
	srv := &config.Server{
		Name: "remote", Transport: config.TransportHTTP, URL: up.url + "/mcp", HealthCheckURL: up.url + "/health",
		HealthCheck: &config.HealthCheck{Interval: config.Seconds(20 * time.Millisecond), Timeout: config.Seconds(20 * time.Millisecond)},
	}
	if err := m.Add(srv); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(context.Background(), "remote"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, rec, m, "remote", "a passing check", func(st upstream.Status) bool { return st.Health.LastCheckOK })

	up.unhealthy.Store(true)
	st := waitStatus(t, rec, m, "remote", "ERROR", isState(upstream.StateError))
	want := "health check failed 3 times in a row: GET health_check_url: 503 Service Unavailable"
	if st.LastError != want {
		t.Errorf("LastError = %q, want %q", st.LastError, want)
	}
	if st.Health.ConsecutiveFailures != 3 || st.Health.Method != "http" || st.Health.ChecksFailed < 3 {
		t.Errorf("health = %+v, want 3 consecutive http failures", st.Health)
	}
	reports := hr.all()
	if n := len(reports); n < 4 || !reports[0].OK || reports[n-1].OK || reports[n-1].Health.ConsecutiveFailures != 3 {
		t.Errorf("OnHealth reports %+v, want passes, then 3 failures", reports)
	}

	up.unhealthy.Store(false)
	st = waitStatus(t, rec, m, "remote", "CONNECTED with a passing check", func(st upstream.Status) bool {
		return st.State == upstream.StateConnected && st.Health.LastCheckOK && st.Health.LastCheck.After(st.ConnectedAt)
	})
	if st.Restarts == 0 {
		t.Errorf("recovered without a restart: %+v", st)
	}
}

// TestHealthHung is acceptance test B4, second part: a server that accepts
// requests and never answers is caught by the ping timeout.
func TestHealthHung(t *testing.T) {
	hc := &config.HealthCheck{Interval: config.Seconds(20 * time.Millisecond), Timeout: config.Seconds(20 * time.Millisecond)}
	t.Run("stdio stopped", func(t *testing.T) {
		rec := newRecorder()
		m := newManager(t, rec, nil, &upstream.Options{Restart: fastRestart, ShutdownTimeout: 200 * time.Millisecond})
		srv := fakeStdio("frozen", "basic")
		srv.HealthCheck = hc
		if err := m.Add(srv); err != nil {
			t.Fatal(err)
		}
		if err := m.Connect(context.Background(), "frozen"); err != nil {
			t.Fatal(err)
		}
		st, _ := m.Status("frozen")
		if err := syscall.Kill(st.PID, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		st = waitStatus(t, rec, m, "frozen", "ERROR", isState(upstream.StateError))
		if want := "health check failed 3 times in a row: no answer within 20ms"; st.LastError != want {
			t.Errorf("LastError = %q, want %q", st.LastError, want)
		}
		old := st
		st = waitStatus(t, rec, m, "frozen", "a restart", isState(upstream.StateConnected))
		if procAlive(old.PID) {
			t.Errorf("the hung process %d is still alive after the restart", old.PID)
		}
		if st.LastExit != "signal: terminated" && st.LastExit != "signal: killed" {
			t.Errorf("LastExit = %q, want it stopped by a signal", st.LastExit)
		}
	})
	t.Run("http never answers", func(t *testing.T) {
		up := newHealthHTTP(t)
		rec := newRecorder()
		m := newManager(t, rec, nil, &upstream.Options{Restart: fastRestart})
		srv := &config.Server{Name: "hung", Transport: config.TransportHTTP, URL: up.url + "/mcp", HealthCheck: hc}
		if err := m.Add(srv); err != nil {
			t.Fatal(err)
		}
		if err := m.Connect(context.Background(), "hung"); err != nil {
			t.Fatal(err)
		}
		up.hung.Store(true)
		st := waitStatus(t, rec, m, "hung", "ERROR", isState(upstream.StateError))
		if want := "health check failed 3 times in a row: no answer within 20ms"; st.LastError != want {
			t.Errorf("LastError = %q, want %q", st.LastError, want)
		}
		up.hung.Store(false)
		waitStatus(t, rec, m, "hung", "a reconnect", isState(upstream.StateConnected))
	})
}

func TestHealthMethods(t *testing.T) {
	tests := []struct {
		name    string
		check   *config.HealthCheck
		wantErr string // "" = healthy
	}{
		{name: "ping", check: &config.HealthCheck{Method: "ping"}},
		{name: "tool call", check: &config.HealthCheck{Method: "tool_call", Tool: "echo", Args: map[string]any{"x": 1}}},
		{name: "tool call isError", check: &config.HealthCheck{Method: "tool_call", Tool: "tool_error"}, wantErr: `tool "tool_error" returned an error: not today`},
		{name: "tool call fails", check: &config.HealthCheck{Method: "tool_call", Tool: "fail"}, wantErr: `calling tool "fail": `},
		// Seed 002 writes the namespaced name; the server's own is called.
		{name: "namespaced tool", check: &config.HealthCheck{Method: "tool_call", Tool: "s.echo", Args: map[string]any{"x": 1}}},
		{name: "namespaced with __", check: &config.HealthCheck{Method: "tool_call", Tool: "s__echo", Args: map[string]any{"x": 1}}},
		{name: "namespaced unknown tool", check: &config.HealthCheck{Method: "tool_call", Tool: "s.nope"}, wantErr: `calling tool "s.nope": `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			hr := &healthRecorder{}
			m := newManager(t, rec, nil, &upstream.Options{OnHealth: hr.on, Restart: upstream.RestartPolicy{Disabled: true}})
			tt.check.Interval = config.Seconds(10 * time.Millisecond)
			// A bound on a broken build, not a speed requirement: a probe
			// on a loaded machine must not time out instead of failing.
			tt.check.Timeout = config.Seconds(30 * time.Second)
			srv := fakeStdio("s", "flaky")
			srv.HealthCheck = tt.check
			if err := m.Add(srv); err != nil {
				t.Fatal(err)
			}
			if err := m.Connect(context.Background(), "s"); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(t, "a probe", func() bool { return len(hr.all()) > 0 })
			r := hr.all()[0]
			if r.Server != "s" || r.Method != tt.check.Method || r.At.IsZero() || r.OK != (tt.wantErr == "") || !strings.HasPrefix(r.Error, tt.wantErr) {
				t.Errorf("report = %+v, want method %s, error %q", r, tt.check.Method, tt.wantErr)
			}
		})
	}
}

func TestPassiveHealth(t *testing.T) {
	// Probes would fail (the tool does not exist), but calls that succeed
	// count as passing checks, so no probe runs while they keep coming.
	rec := newRecorder()
	m := newManager(t, rec, nil, &upstream.Options{Restart: upstream.RestartPolicy{Disabled: true}})
	srv := fakeStdio("busy", "basic")
	srv.HealthCheck = &config.HealthCheck{Method: "tool_call", Tool: "no_such_tool", Interval: config.Seconds(200 * time.Millisecond)}
	if err := m.Add(srv); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Connect(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	var st upstream.Status
	rec.waitFor(t, "a passive check", func() bool {
		if _, err := m.CallTool(ctx, "busy", &mcp.CallToolParams{Name: "echo"}); err != nil {
			t.Fatal(err)
		}
		st, _ = m.Status("busy")
		return st.Health.LastCheckPassive
	})
	if !st.Health.LastCheckOK || st.Health.ConsecutiveFailures != 0 || st.State != upstream.StateConnected {
		t.Errorf("status %s, health %+v; want CONNECTED with a passing passive check", st.State, st.Health)
	}
}

func TestDegraded(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, rec, nil, &upstream.Options{DegradedErrorRate: 0.5, DegradedWindowCalls: 4})
	ctx := context.Background()
	if err := m.Add(fakeStdio("f", "flaky")); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	call := func(tool string) {
		t.Helper()
		_, _ = m.CallTool(ctx, "f", &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(`{}`)})
	}
	// The caller's mistakes and tool-level errors are not the server's failures.
	for _, tool := range []string{"no_such_tool", "tool_error", "no_such_tool", "tool_error"} {
		call(tool)
	}
	st, _ := m.Status("f")
	if st.Health.ErrorRate != 0 || st.Health.WindowCalls != 4 || st.State != upstream.StateConnected {
		t.Fatalf("after invalid calls: %s, error rate %v over %d; want CONNECTED, 0 over 4", st.State, st.Health.ErrorRate, st.Health.WindowCalls)
	}

	for _, tool := range []string{"fail", "fail", "echo", "fail"} {
		call(tool)
	}
	st = waitStatus(t, rec, m, "f", "DEGRADED", isState(upstream.StateDegraded))
	if st.LastError != "75% of the last 4 calls failed" || st.Health.ErrorRate != 0.75 {
		t.Errorf("degraded: %q, rate %v", st.LastError, st.Health.ErrorRate)
	}
	// A DEGRADED server still serves.
	if _, err := m.CallTool(ctx, "f", &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("call while DEGRADED: %v", err)
	}
	for range 3 {
		call("echo")
	}
	waitStatus(t, rec, m, "f", "CONNECTED again", isState(upstream.StateConnected))
	if diff := cmp.Diff([]string{
		"DISCONNECTED>CONNECTING", "CONNECTING>CONNECTED", "CONNECTED>DEGRADED", "DEGRADED>CONNECTED",
	}, rec.steps("f")); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
}

// TestDrain is acceptance test B5.
func TestDrain(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, rec, nil, nil)
	ctx := context.Background()
	if err := m.Add(fakeStdio("slow", "flaky")); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "slow"); err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	args, _ := json.Marshal(map[string]string{"path": gate})
	const slow = 5
	results := make(chan error, slow)
	for range slow {
		go func() {
			_, err := m.CallTool(ctx, "slow", &mcp.CallToolParams{Name: "wait_file", Arguments: json.RawMessage(args)})
			results <- err
		}()
	}
	waitStatus(t, rec, m, "slow", "5 calls in flight", func(st upstream.Status) bool { return st.InFlight == slow })

	type disconnected struct {
		pending int
		err     error
	}
	done := make(chan disconnected, 1)
	go func() {
		n, err := m.Disconnect(ctx, "slow")
		done <- disconnected{n, err}
	}()
	st := waitStatus(t, rec, m, "slow", "draining", func(st upstream.Status) bool { return st.Draining })
	if st.State != upstream.StateDisconnected || st.InFlight != slow || st.PID == 0 {
		t.Errorf("while draining: %s, %d in flight, pid %d; want DISCONNECTED, 5, running", st.State, st.InFlight, st.PID)
	}
	_, err := m.CallTool(ctx, "slow", &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{}`)})
	var unavail *upstream.UnavailableError
	if !errors.As(err, &unavail) || unavail.State != upstream.StateDisconnected || !strings.Contains(unavail.Reason, "draining") {
		t.Errorf("new call while draining: %v, want UnavailableError DISCONNECTED draining", err)
	}
	select {
	case d := <-done:
		t.Fatalf("Disconnect returned %+v before the calls finished", d)
	default:
	}

	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for range slow {
		if err := <-results; err != nil {
			t.Errorf("a call in flight failed: %v", err)
		}
	}
	d := <-done
	if d.err != nil || d.pending != slow {
		t.Errorf("Disconnect = %d, %v; want 5 pending", d.pending, d.err)
	}
	st, _ = m.Status("slow")
	if st.State != upstream.StateDisconnected || st.Draining || st.PID != 0 || st.InFlight != 0 {
		t.Errorf("after the drain: %+v", st)
	}
	if pending, err := m.Disconnect(ctx, "slow"); pending != 0 || err != nil {
		t.Errorf("second Disconnect = %d, %v; want 0, nil", pending, err)
	}
}

func TestConnectDuringDrain(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, rec, nil, nil)
	ctx := context.Background()
	if err := m.Add(fakeStdio("s", "flaky")); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	args, _ := json.Marshal(map[string]string{"path": gate})
	call := make(chan error, 1)
	go func() {
		_, err := m.CallTool(ctx, "s", &mcp.CallToolParams{Name: "wait_file", Arguments: json.RawMessage(args)})
		call <- err
	}()
	waitStatus(t, rec, m, "s", "a call in flight", func(st upstream.Status) bool { return st.InFlight == 1 })
	disc := make(chan int, 1)
	go func() {
		n, _ := m.Disconnect(ctx, "s")
		disc <- n
	}()
	waitStatus(t, rec, m, "s", "draining", func(st upstream.Status) bool { return st.Draining })
	conn := make(chan error, 1)
	go func() { conn <- m.Connect(ctx, "s") }()
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-call; err != nil {
		t.Errorf("call in flight: %v", err)
	}
	if n := <-disc; n != 1 {
		t.Errorf("Disconnect pending = %d, want 1", n)
	}
	if err := <-conn; err != nil {
		t.Fatalf("Connect during the drain: %v", err)
	}
	if diff := cmp.Diff([]string{
		"DISCONNECTED>CONNECTING", "CONNECTING>CONNECTED", "CONNECTED>DISCONNECTED", "DISCONNECTED>CONNECTING", "CONNECTING>CONNECTED",
	}, rec.steps("s")); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
}

func TestStartOnDemandAndIdle(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, rec, nil, nil)
	ctx := context.Background()
	srv := fakeStdio("lazy", "basic")
	srv.StartOnDemand = true
	srv.IdleTimeout = config.Seconds(50 * time.Millisecond)
	if err := m.Add(srv); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Status("lazy"); st.State != upstream.StateDisconnected || !st.OnDemand || !st.Callable() {
		t.Fatalf("after Add: %s, on demand %v; want DISCONNECTED, on demand", st.State, st.OnDemand)
	}
	echo := func() {
		t.Helper()
		res, err := m.CallTool(ctx, "lazy", &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"a":1}`)})
		if err != nil || textOf(t, res) != `{"a":1}` {
			t.Fatalf("call to an on-demand server: %v", err)
		}
	}
	echo()
	st, _ := m.Status("lazy")
	if st.State != upstream.StateConnected || st.OnDemand {
		t.Errorf("after the call: %s, on demand %v; want CONNECTED", st.State, st.OnDemand)
	}

	// The state changes first, then the process stops.
	st = waitStatus(t, rec, m, "lazy", "an idle stop", func(st upstream.Status) bool {
		return st.State == upstream.StateDisconnected && st.PID == 0
	})
	if st.LastError != "idle" || !st.OnDemand || st.LastExit != "exit status 0" {
		t.Errorf("idle stop: %+v; want reason idle, on demand, a clean exit", st)
	}
	echo()
	if diff := cmp.Diff([]string{
		"DISCONNECTED>CONNECTING", "CONNECTING>CONNECTED", "CONNECTED>DISCONNECTED", "DISCONNECTED>CONNECTING", "CONNECTING>CONNECTED",
	}, rec.steps("lazy")); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}

	// An operator's Disconnect is not idleness: without start_on_demand,
	// calls no longer start it.
	plain := fakeStdio("plain", "basic")
	plain.IdleTimeout = config.Seconds(50 * time.Millisecond)
	if err := m.Add(plain); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, rec, m, "plain", "an idle stop", func(st upstream.Status) bool { return st.LastError == "idle" && st.OnDemand })
	if _, err := m.Disconnect(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	var unavail *upstream.UnavailableError
	if _, err := m.CallTool(ctx, "plain", &mcp.CallToolParams{Name: "echo"}); !errors.As(err, &unavail) || unavail.State != upstream.StateDisconnected {
		t.Errorf("call after Disconnect: %v, want UnavailableError DISCONNECTED", err)
	}
}

func TestRediscover(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, rec, nil, nil)
	ctx := context.Background()
	if err := m.Add(fakeStdio("d", "basic")); err != nil {
		t.Fatal(err)
	}
	var unavail *upstream.UnavailableError
	if _, err := m.Rediscover(ctx, "d"); !errors.As(err, &unavail) {
		t.Errorf("Rediscover of a disconnected server: %v, want UnavailableError", err)
	}
	if _, err := m.Rediscover(ctx, "nope"); !errors.Is(err, upstream.ErrNotFound) {
		t.Errorf("Rediscover of an unknown server: %v, want ErrNotFound", err)
	}
	if err := m.Connect(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CallTool(ctx, "d", &mcp.CallToolParams{Name: "add_tool"}); err != nil {
		t.Fatal(err)
	}
	d, err := m.Rediscover(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(toolNames(d.Tools), "added") || len(d.Resources) != 1 || len(d.Prompts) != 1 || d.Server != "d" {
		t.Errorf("Rediscover = %+v, want every list, with the added tool", d)
	}
	if got, _ := m.Discovery("d"); !slices.Contains(toolNames(got.Tools), "added") {
		t.Errorf("Discovery() after Rediscover lacks the added tool")
	}
	if ds := rec.discoveriesOf("d"); !slices.Contains(toolNames(ds[len(ds)-1].Tools), "added") {
		t.Errorf("Rediscover was not published to OnDiscovery")
	}
}

func TestStderrLogFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs", "mcp_servers")
	m := newManager(t, nil, nil, &upstream.Options{LogDirectory: dir})
	ctx := context.Background()
	if err := m.Add(fakeStdio("logged", "basic")); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "logged"); err != nil {
		t.Fatal(err)
	}
	st, _ := m.Status("logged")
	if _, err := m.Disconnect(ctx, "logged"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "logged.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var text []string
	for _, l := range lines {
		_, rest, ok := strings.Cut(l, " ") // a timestamp first
		if !ok {
			t.Fatalf("line without a timestamp: %q", l)
		}
		text = append(text, rest)
	}
	want := []string{
		fmt.Sprintf("--- switchboard: process started (pid %d)", st.PID),
		"fake server ready",
		fmt.Sprintf("--- switchboard: process %d exited: exit status 0", st.PID),
	}
	if diff := cmp.Diff(want, text); diff != "" {
		t.Errorf("log file (-want +got):\n%s", diff)
	}
}

// TestRecoveryTimes is report B7: it measures, and logs, how long recovery
// takes with the settings shown. Nothing is asserted about the figures.
func TestRecoveryTimes(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	def := config.DefaultSettings()
	var o upstream.Options
	o.ApplySettings(def) // the defaults: backoff 500ms..30s
	o.ShutdownTimeout = time.Second
	o.LogDirectory = t.TempDir() // the default is relative to the working directory: the source tree
	rec := newRecorder()
	m := newManager(t, rec, nil, &o)
	ctx := context.Background()

	if err := m.Add(fakeStdio("kill", "basic")); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "kill"); err != nil {
		t.Fatal(err)
	}
	var total time.Duration
	const rounds = 3
	for range rounds {
		st, _ := m.Status("kill")
		start := time.Now()
		if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, rec, m, "kill", "a restart", func(s upstream.Status) bool {
			return s.State == upstream.StateConnected && s.PID != st.PID
		})
		total += time.Since(start)
	}
	t.Logf("B7: SIGKILL to CONNECTED: %v on average over %d kills (restart_backoff_initial_ms %d, max %d, equal jitter; stdio fake server)",
		(total / rounds).Round(time.Millisecond), rounds, def.RestartBackoffInitialMS, def.RestartBackoffMaxMS)

	const interval, timeout = 200 * time.Millisecond, 100 * time.Millisecond
	srv := fakeStdio("hang", "basic")
	srv.HealthCheck = &config.HealthCheck{Interval: config.Seconds(interval), Timeout: config.Seconds(timeout)}
	if err := m.Add(srv); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "hang"); err != nil {
		t.Fatal(err)
	}
	st, _ := m.Status("hang")
	start := time.Now()
	if err := syscall.Kill(st.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, rec, m, "hang", "ERROR", isState(upstream.StateError))
	t.Logf("B7: hang (SIGSTOP) to ERROR: %v (health_check interval %v, timeout %v, ping, 3 failures)",
		time.Since(start).Round(time.Millisecond), interval, timeout)
}

func selfExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
