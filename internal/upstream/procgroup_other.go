//go:build !unix

package upstream

import "os/exec"

// setProcessGroup is a no-op where process groups do not exist.
func setProcessGroup(*exec.Cmd) {}

// killProcessGroup is a no-op where process groups do not exist; the SDK's
// close still stops the direct child.
func killProcessGroup(int) error { return nil }
