package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// tinyParams keep the end-to-end runs short; they check the harness works,
// not the figures.
func tinyParams(scenarios ...string) params {
	return params{Rounds: 1, Calls: 20, Warmup: 2, Concurrency: 4, Duration: 200 * time.Millisecond,
		ThroughputWarm: 20 * time.Millisecond, ListCalls: 3, ExtraTools: 50, Scenarios: scenarios,
		Tools10kUpstreams: 2, Tools10kTools: 10, Tools10kLists: stableAfter + 2, Tools10kDirect: 2}
}

// buildOnce builds the switchboard binary for the end-to-end tests.
func buildOnce(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds switchboard and starts servers")
	}
	var out bytes.Buffer
	bin, err := buildBinary(t.Context(), t.TempDir(), &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return bin
}

func TestEndToEnd(t *testing.T) {
	bin := buildOnce(t)
	o := &options{bin: bin, params: tinyParams(scenarioDirect, scenarioHTTP, scenarioStdio, scenarioList, scenarioTools10k)}
	rep, err := benchmark(t.Context(), o, slog.New(slog.DiscardHandler), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range rep.Calls {
		got = append(got, c.Scenario)
		if c.Latency.N != o.Calls || c.Throughput.Calls == 0 || c.Throughput.Errors != 0 {
			t.Errorf("%s: %d timed calls, %d concurrent calls, %d errors; want %d, some, none",
				c.Scenario, c.Latency.N, c.Throughput.Calls, c.Throughput.Errors, o.Calls)
		}
	}
	for _, l := range rep.Lists {
		got = append(got, "list "+l.Scenario)
		if l.Tools != o.ExtraTools+5 || l.Latency.N != o.ListCalls {
			t.Errorf("list %s: %d tools in %d timed lists, want %d in %d", l.Scenario, l.Tools, l.Latency.N, o.ExtraTools+5, o.ListCalls)
		}
	}
	if want := "direct gateway/http gateway/stdio list direct list gateway"; strings.Join(got, " ") != want {
		t.Errorf("measured %q, want %q", strings.Join(got, " "), want)
	}
	if r := rep.Tools10k; r == nil {
		t.Error("no tools10k figures")
	} else {
		if r.Tools != 20 || r.DirectTools != 20 || r.Gateway.N != o.Tools10kLists-1 || r.Direct.N != o.Tools10kDirect-1 {
			t.Errorf("tools10k: %d tools through the gateway in %d timed lists, %d directly in %d; want 20 in %d, 20 in %d",
				r.Tools, r.Gateway.N, r.DirectTools, r.Direct.N, o.Tools10kLists-1, o.Tools10kDirect-1)
		}
		var after []int
		for _, p := range r.RSS {
			after = append(after, p.AfterLists)
			if p.Bytes <= 0 {
				t.Errorf("tools10k: RSS after %d lists is %d", p.AfterLists, p.Bytes)
			}
		}
		if runtime.GOOS == "linux" && fmt.Sprint(after) != fmt.Sprint([]int{0, stableAfter, o.Tools10kLists}) {
			t.Errorf("tools10k: RSS taken after %v lists, want after 0, %d and %d", after, stableAfter, o.Tools10kLists)
		}
	}
	if len(rep.Goals) != len(goalDefs) {
		t.Errorf("%d goals evaluated, want %d", len(rep.Goals), len(goalDefs))
	}
	if left := processesOf(t, bin); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}

func TestEndToEndProfile(t *testing.T) {
	bin := buildOnce(t)
	dir := t.TempDir()
	o := &options{bin: bin, profileDir: dir, params: tinyParams(scenarioStdio)}
	o.InProcess = true
	rep, err := benchmark(t.Context(), o, slog.New(slog.DiscardHandler), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gateway-stdio.cpu.pprof", "gateway-stdio.allocs-base.pprof", "gateway-stdio.allocs.pprof"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s not written (%v)", name, err)
		}
	}
	if len(rep.Profiles) != 3 {
		t.Errorf("report lists profiles %q, want 3", rep.Profiles)
	}
	if left := processesOf(t, bin); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}

// processesOf lists the pids running bin (Linux only; elsewhere nothing).
func processesOf(t *testing.T, bin string) []string {
	t.Helper()
	if runtime.GOOS != "linux" {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && exe == bin {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
