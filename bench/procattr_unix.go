//go:build unix

package main

import (
	"errors"
	"os/exec"
	"syscall"
)

// setProcAttr starts the child in its own process group, so that a Ctrl-C
// in the terminal reaches only the harness (which then stops the servers in
// order) and the whole group can be killed at the end.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
}

// terminate asks the child's process group to exit.
func terminate(cmd *exec.Cmd) {
	signalGroup(cmd, syscall.SIGTERM)
}

// kill kills whatever is left of the child's process group.
func kill(cmd *exec.Cmd) {
	signalGroup(cmd, syscall.SIGKILL)
}

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil || cmd.Process.Pid <= 0 {
		return
	}
	// The group id is the child's pid (Setpgid with Pgid 0). A group that
	// is already gone is fine.
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = cmd.Process.Signal(sig)
	}
}
