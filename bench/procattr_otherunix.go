//go:build unix && !linux

package main

import "syscall"

// setDeathSignal does nothing: only Linux has a parent-death signal. The
// harness still stops every server on a normal exit and on Ctrl-C.
func setDeathSignal(*syscall.SysProcAttr) {}
