//go:build !unix

package upstream

import "os/exec"

// setProcessGroup is a no-op where process groups do not exist.
func setProcessGroup(*exec.Cmd) {}

// terminateGroup is a no-op where process groups and SIGTERM do not exist;
// the process is killed at the end of the shutdown timeout.
func terminateGroup(int) {}

// killProcessGroup is a no-op where process groups do not exist; closing
// the session still stops the direct child.
func killProcessGroup(int) error { return nil }
