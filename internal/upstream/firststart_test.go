package upstream_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// fakeRunner writes an executable script called name into a temp dir that
// acts like a package runner on its first start: it starts a "download"
// (a sleep in its process group, whose pid it writes to child.pid), waits
// until the file gate exists, then execs the test binary as the basic fake
// server. It returns the script's path and its directory.
func fakeRunner(t *testing.T, name string) (path, dir string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, name)
	script := fmt.Sprintf(`#!/bin/sh
sleep 1000 &
echo $! > %[1]q/child.pid
while [ ! -e %[1]q/gate ]; do sleep 0.02; done
kill $!
exec %[2]q
`, dir, selfExe(t))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

func runnerServer(command string) *config.Server {
	return &config.Server{Name: "pkg", Transport: config.TransportStdio, Command: command,
		Args: []string{"-y", "@example/server"}, Env: map[string]string{serverEnv: "basic"}}
}

// TestFirstStartAllowance: a package runner still "downloading" after the
// startup timeout keeps its start, showing the progress in Status.Detail,
// and connects; the same slow command under another name times out.
func TestFirstStartAllowance(t *testing.T) {
	const base = time.Second // the allowance is 4 s
	tests := []struct {
		command string
		want    upstream.State
	}{
		{"npx", upstream.StateConnected},
		{"slow-server", upstream.StateError},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			path, dir := fakeRunner(t, tt.command)
			rec := newRecorder()
			m := newManager(t, rec, nil, &upstream.Options{ConnectTimeout: base, Restart: upstream.RestartPolicy{Disabled: true}})
			if err := m.Add(runnerServer(path)); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- m.Connect(context.Background(), "pkg") }()
			// Release the "download" once the start has outlived the
			// plain startup timeout (or has ended).
			var detail string
			waitStatus(t, rec, m, "pkg", "the start to outlive the startup timeout", func(st upstream.Status) bool {
				if st.State == upstream.StateConnecting && st.Detail != "" {
					detail = st.Detail
				}
				switch st.State {
				case upstream.StateConnecting:
					return time.Since(st.Since) > base*3/2
				case upstream.StateDisconnected:
					return false // Connect has not begun
				}
				return true
			})
			if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			err := <-done
			st, _ := m.Status("pkg")
			if st.State != tt.want {
				t.Fatalf("state %s (Connect: %v), want %s", st.State, err, tt.want)
			}
			if st.Detail != "" {
				t.Errorf("Detail %q after the start, want none", st.Detail)
			}
			if tt.want == upstream.StateConnected {
				if !strings.HasPrefix(detail, "installing packages, ") || !strings.HasSuffix(detail, " s") {
					t.Errorf("Detail while connecting = %q, want \"installing packages, N s\"", detail)
				}
				return
			}
			if detail != "" {
				t.Errorf("Detail %q for a command that is no package runner", detail)
			}
			if !strings.Contains(st.LastError, "connect timed out after 1s") {
				t.Errorf("LastError %q, want a timeout after the plain startup timeout", st.LastError)
			}
		})
	}
}

// TestFirstStartTimeoutBacksOff: a package runner's first start that times
// out has its whole process group killed (the download with it) and is
// restarted no sooner than the time it was given, not in a tight loop.
func TestFirstStartTimeoutBacksOff(t *testing.T) {
	path, dir := fakeRunner(t, "npx")
	rec := newRecorder()
	m := newManager(t, rec, nil, &upstream.Options{ConnectTimeout: 200 * time.Millisecond, Restart: fastRestart})
	if err := m.Add(runnerServer(path)); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(context.Background(), "pkg"); err == nil {
		t.Fatal("Connect succeeded; the fake runner never serves")
	}
	st, _ := m.Status("pkg")
	if st.State != upstream.StateError || !strings.Contains(st.LastError, "connect timed out after 800ms") {
		t.Fatalf("state %s %q, want ERROR: connect timed out after 800ms (4 × 200ms)", st.State, st.LastError)
	}
	// fastRestart's backoff is at most 20ms; a timed-out start waits for
	// as long as it was given (planned a moment before Since was taken).
	if st.NextRestartAt.IsZero() || st.NextRestartAt.Sub(st.Since) < 700*time.Millisecond {
		t.Errorf("next restart %v after the failure, want about 800ms, not fastRestart's backoff", st.NextRestartAt.Sub(st.Since))
	}
	raw, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the download's process to be killed", func() bool { return !procAlive(pid) })
}
