package upstream

import "syscall"

// setDeathSignal has the kernel SIGKILL the child if the gateway dies
// without stopping it (SIGKILL, a crash): a stdio server must not outlive
// the gateway. It covers the direct child only; its own children see their
// stdin close and are expected to exit.
//
// Linux sends the signal when the thread that started the child exits. Go
// ends threads only when a goroutine locked to one (runtime.LockOSThread)
// exits without unlocking, which this program does not do.
func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
