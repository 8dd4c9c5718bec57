//go:build unix

package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"
)

// groupAlive reports whether any process of the group led by pid exists.
func groupAlive(pid int) bool {
	return !errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH)
}

func TestProcsStopTheWholeGroup(t *testing.T) {
	ps := &procs{logger: slog.New(slog.DiscardHandler)}
	t.Cleanup(ps.closeAll)
	// The shell forks two children into its group; stopping it must stop them.
	p, err := ps.start("sleepers", "/bin/sh", "-c", "sleep 300 & sleep 300 & wait")
	if err != nil {
		t.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	if !groupAlive(pid) {
		t.Fatal("process group not running after start")
	}
	ps.closeAll()
	// The killed grandchildren are reparented and stay in the group as
	// zombies until their new parent reaps them, which is not ours to wait
	// for: allow for that, bounded.
	for deadline := time.Now().Add(10 * time.Second); groupAlive(pid) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if groupAlive(pid) {
		t.Error("process group still has members after closeAll")
	}
	if len(ps.live) != 0 {
		t.Errorf("%d processes still tracked after closeAll", len(ps.live))
	}
}

func TestWaitForReportsEarlyExit(t *testing.T) {
	ps := &procs{logger: slog.New(slog.DiscardHandler)}
	t.Cleanup(ps.closeAll)
	p, err := ps.start("quitter", "/bin/sh", "-c", "echo cannot listen >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	err = waitFor(t.Context(), p, "to listen", func(context.Context) bool { return false })
	if err == nil || !strings.Contains(err.Error(), "exited early") || !strings.Contains(err.Error(), "cannot listen") {
		t.Errorf("got %v, want an early-exit error quoting the output", err)
	}
}
