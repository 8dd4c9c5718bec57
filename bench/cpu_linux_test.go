package main

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestProcessCPU(t *testing.T) {
	start, ok := processCPU(os.Getpid())
	if !ok {
		t.Fatal("cannot read this process's CPU time")
	}
	// Spin until the kernel has charged at least one more tick.
	x := 0
	for {
		now, ok := processCPU(os.Getpid())
		if !ok {
			t.Fatal("cannot read this process's CPU time")
		}
		if now > start {
			break
		}
		for i := range 1_000_000 {
			x += i
		}
	}
	_ = x
	if _, ok := processCPU(-1); ok {
		t.Error("processCPU(-1) reported a CPU time")
	}
}

func TestChildrenOf(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if got := childrenOf(os.Getpid()); !slices.Contains(got, cmd.Process.Pid) {
		t.Errorf("childrenOf(self) = %v, want it to contain %d", got, cmd.Process.Pid)
	}
}
