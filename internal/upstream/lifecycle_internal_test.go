package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

func TestBackoff(t *testing.T) {
	lc := lifecycle{backoffInitial: 100 * time.Millisecond, backoffMax: time.Second}
	tests := []struct {
		n      int
		lo, hi time.Duration
	}{
		{0, 50 * time.Millisecond, 100 * time.Millisecond},
		{1, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 400 * time.Millisecond, 800 * time.Millisecond},
		{4, 500 * time.Millisecond, time.Second}, // capped
		{1000, 500 * time.Millisecond, time.Second},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			for range 100 {
				if d := lc.backoff(tt.n); d < tt.lo || d > tt.hi {
					t.Fatalf("backoff(%d) = %v, want within [%v, %v]", tt.n, d, tt.lo, tt.hi)
				}
			}
		})
	}
}

func TestCallStats(t *testing.T) {
	// A window of 4 calls, DEGRADED over 0.5.
	c := newCallStats(4)
	steps := []struct {
		failed  bool
		changed bool // the DEGRADED condition flipped
		rate    float64
		n       int
	}{
		{true, false, 1, 1}, // over 0.5, but the window is not full
		{true, false, 1, 2},
		{false, false, 2.0 / 3, 3},
		{false, false, 0.5, 4}, // F F S S: 0.5 is not over 0.5
		{true, false, 0.5, 4},  // replaces an F
		{true, false, 0.5, 4},  // replaces an F
		{true, true, 0.75, 4},  // replaces an S: F F F S
		{false, false, 0.75, 4},
		{false, true, 0.5, 4}, // S F F S
	}
	for i, st := range steps {
		if got := c.record(st.failed, 0.5); got != st.changed {
			t.Errorf("step %d: changed = %v, want %v", i, got, st.changed)
		}
		if rate, n := c.rate(); rate != st.rate || n != st.n {
			t.Errorf("step %d: rate %v over %d, want %v over %d", i, rate, n, st.rate, st.n)
		}
	}
}

func TestCallFailed(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	timedOut, cancel2 := context.WithTimeout(context.Background(), 0)
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"success", context.Background(), nil, false},
		{"transport failure", context.Background(), errors.New("broken pipe"), true},
		{"unavailable", context.Background(), &UnavailableError{Server: "s", State: StateError}, true},
		{"internal error", context.Background(), &relayError{msg: "x", err: &jsonrpc.Error{Code: jsonrpc.CodeInternalError}}, true},
		{"invalid params", context.Background(), &relayError{msg: "x", err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams}}, false},
		{"method not found", context.Background(), &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound}, false},
		{"caller gave up", cancelled, context.Canceled, false},
		{"deadline: the server is slow", timedOut, context.DeadlineExceeded, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := callFailed(tt.ctx, tt.err); got != tt.want {
				t.Errorf("callFailed = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLogFileRotation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	l := newLogFile(dir, "srv", slog.New(slog.DiscardHandler))
	l.max = 100 // bytes: two lines of 35 (a 24-byte timestamp, a space, 9 bytes, a newline)
	for i := range 10 {
		l.line(fmt.Sprintf("line %04d", i))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.line("after close") // dropped, no panic
	read := func(name string) []string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			_, text, _ := strings.Cut(line, " ")
			out = append(out, text)
		}
		return out
	}
	want := map[string][]string{
		"srv.log":   {"line 0008", "line 0009"},
		"srv.log.1": {"line 0006", "line 0007"},
		"srv.log.2": {"line 0004", "line 0005"},
	}
	for name, lines := range want {
		if diff := cmp.Diff(lines, read(name)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "srv.log.3")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a fourth file exists: %v", err)
	}
	if l := newLogFile("", "srv", nil); l != nil {
		t.Errorf("newLogFile without a directory = %v, want nil", l)
	}
	var none *logFile
	none.line("discarded") // a nil logFile is a no-op
	none.marker("discarded")
}

func TestLogFileFailure(t *testing.T) {
	// The directory cannot be created: lines are dropped, once warned.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	l := newLogFile(filepath.Join(file, "logs"), "srv", slog.New(slog.NewTextHandler(&logs, nil)))
	for range 3 {
		l.line("x")
	}
	if n := strings.Count(logs.String(), "upstream stderr log file"); n != 1 {
		t.Errorf("warned %d times, want once:\n%s", n, logs.String())
	}
}

func TestPreflight(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "server")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		command string
		cwd     string
		want    string // "" = ok
	}{
		{"on PATH", "sh", "", ""},
		{"not on PATH", "npx-switchboard-missing", "", "command not found: npx-switchboard-missing"},
		{"absolute, exists", exe, "", ""},
		{"absolute, missing", filepath.Join(dir, "nope"), "", "command not found: " + filepath.Join(dir, "nope")},
		{"relative to cwd, exists", "./server", dir, ""},
		{"relative to cwd, missing", "./nope", dir, "command not found: ./nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(tt.command)
			cmd.Dir = tt.cwd
			err := preflight(cmd, tt.command)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("preflight = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestApplySettingsAndLifecycle(t *testing.T) {
	s := config.DefaultSettings()
	s.RestartOnFailure = false
	s.LogDirectory = "logs"
	s.MaxResultBytes = 8 << 20
	var o Options
	o.ApplySettings(s)
	want := Options{
		ConnectTimeout:      10 * time.Second,
		ShutdownTimeout:     5 * time.Second,
		Restart:             RestartPolicy{Disabled: true, MaxAttempts: 3, Window: 5 * time.Minute, BackoffInitial: 500 * time.Millisecond, BackoffMax: 30 * time.Second},
		HealthInterval:      30 * time.Second,
		HealthTimeout:       5 * time.Second,
		DegradedErrorRate:   0.5,
		DegradedWindowCalls: 20,
		LogDirectory:        "logs",
		MaxResultBytes:      8 << 20,
	}
	if diff := cmp.Diff(want, o); diff != "" { // funcs compare equal only when nil
		t.Errorf("ApplySettings (-want +got):\n%s", diff)
	}

	// A server's own values win over the defaults.
	yes, two := true, 2
	srv := &config.Server{
		Name: "s", Transport: config.TransportHTTP, URL: "https://e/mcp", HealthCheckURL: "https://e/health",
		RestartOnFailure: &yes, MaxRestartAttempts: &two, StartupTimeout: config.Seconds(time.Minute), MaxResultBytes: 1 << 20,
		HealthCheck: &config.HealthCheck{Interval: config.Seconds(time.Second), Timeout: config.Seconds(2 * time.Second)},
	}
	o.DrainTimeout = time.Second
	lc := resolveLifecycle(srv, &o)
	got := []any{lc.restart, lc.maxRestarts, lc.startup, lc.shutdown, lc.health.method, lc.health.interval, lc.health.timeout, lc.maxResult}
	wantLC := []any{true, 2, time.Minute, 5 * time.Second, "http", time.Second, time.Second /* capped at the interval */, 1 << 20}
	if diff := cmp.Diff(wantLC, got); diff != "" {
		t.Errorf("lifecycle (-want +got):\n%s", diff)
	}
	// Without its own, a server gets the setting.
	if lc := resolveLifecycle(&config.Server{Name: "t", Transport: config.TransportStdio}, &o); lc.maxResult != 8<<20 {
		t.Errorf("maxResult = %d, want the setting %d", lc.maxResult, 8<<20)
	}
}
