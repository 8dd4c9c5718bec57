//go:build unix

package upstream

import (
	"errors"
	"os/exec"
	"syscall"
)

// setProcessGroup puts the child in its own process group, so that whatever
// it spawns (npx → node, uvx → python) can be stopped with it and a terminal
// signal sent to the gateway does not reach it directly.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
}

// terminateGroup asks the process group led by pid to exit: SIGTERM, and
// SIGCONT so that a stopped process can act on it. A group that is gone
// already is not an error worth reporting.
func terminateGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGTERM) // ESRCH: nothing left to signal
		_ = syscall.Kill(-pid, syscall.SIGCONT)
	}
}

// killProcessGroup kills whatever is left of the group led by pid. A group
// that is already gone is not an error.
func killProcessGroup(pid int) error {
	if pid <= 0 {
		return nil
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
