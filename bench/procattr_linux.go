package main

import "syscall"

// setDeathSignal makes the kernel kill the child if the harness dies
// without cleaning up (kill -9), so no server outlives a benchmark. The
// gateway's own stdio upstream then sees its stdin close and exits too.
func setDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
