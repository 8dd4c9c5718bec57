//go:build unix && !linux

package upstream

import "syscall"

// setDeathSignal is Linux only (Pdeathsig).
func setDeathSignal(*syscall.SysProcAttr) {}
