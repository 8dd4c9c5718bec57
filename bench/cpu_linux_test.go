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

func TestProcessRSS(t *testing.T) {
	if n, ok := processRSS(os.Getpid()); !ok || n <= 0 {
		t.Errorf("processRSS(self) = %d, %v; want a positive size", n, ok)
	}
	if _, ok := processRSS(-1); ok {
		t.Error("processRSS(-1) reported a size")
	}
}

func TestParseVmRSS(t *testing.T) {
	tests := []struct {
		name, status string
		want         int64
		ok           bool
	}{
		{"kB", "Name:\tx\nVmHWM:\t  9 kB\nVmRSS:\t   12345 kB\nRssAnon:\t 1 kB\n", 12345 * 1024, true},
		{"missing (a kernel thread)", "Name:\tkthreadd\nState:\tS\n", 0, false},
		{"other unit", "VmRSS:\t12 MB\n", 0, false},
		{"not a number", "VmRSS:\tx kB\n", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseVmRSS(tt.status)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: parseVmRSS = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
