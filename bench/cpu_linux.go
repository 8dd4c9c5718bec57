package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat. It is 100 on
// every Linux architecture Go supports (USER_HZ, not the kernel's HZ).
const userHZ = 100

// processCPU returns the user+system CPU time pid has used so far.
func processCPU(pid int) (time.Duration, bool) {
	f, ok := statFields(pid)
	if !ok || len(f) < 15 {
		return 0, false
	}
	// Fields after the command name: state is f[0], ppid f[1], utime f[11], stime f[12].
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+s) * time.Second / userHZ, true
}

// childrenOf returns the pids whose parent is pid (the gateway's stdio
// upstreams).
func childrenOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := strconv.Itoa(pid)
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := statFields(child); ok && len(f) > 1 && f[1] == want {
			out = append(out, child)
		}
	}
	return out
}

// statFields returns the fields of /proc/PID/stat after the command name
// (which may contain spaces and parentheses).
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(s[i+1:]), true
}

// processRSS returns the resident memory of pid (VmRSS of
// /proc/PID/status), in bytes.
func processRSS(pid int) (int64, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	return parseVmRSS(string(b))
}

// parseVmRSS reads the VmRSS line ("VmRSS:    12345 kB") of a
// /proc/PID/status text.
func parseVmRSS(status string) (int64, bool) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, false
		}
		return kb * 1024, true
	}
	return 0, false
}
