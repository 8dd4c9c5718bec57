package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/logtest"
)

// alive reports whether pid runs: it exists and is not a zombie (a killed
// process whose new parent has not reaped it yet is gone for our purpose).
func alive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) == 0 || fields[0] != "Z"
}

// TestNoOrphansOnSIGTERM is B2 at the gateway level: `switchboard serve`
// with 5 stdio upstreams, one of which ignores SIGTERM, gets SIGTERM; after
// shutdown_timeout + 1 s no upstream process remains.
func TestNoOrphansOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := switchboardBin(t)
	dir := t.TempDir()
	var yaml strings.Builder
	yaml.WriteString("servers:\n")
	for i := range 4 {
		fmt.Fprintf(&yaml, "  up%d:\n    transport: stdio\n    command: switchboard\n    args: [demo-server]\n    auto_start: true\n", i)
	}
	// An ignored signal stays ignored across exec, so this demo server
	// shrugs SIGTERM off.
	fmt.Fprintf(&yaml, "  stubborn:\n    transport: stdio\n    command: /bin/sh\n    args: [-c, \"trap '' TERM; exec %s demo-server\"]\n    auto_start: true\n", bin)
	yaml.WriteString("settings:\n  shutdown_timeout_seconds: 1\n")
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfgPath, []byte(yaml.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cmd := exec.Command(bin, "serve", "--config", cfgPath, "--store", filepath.Join(dir, "sb.db"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--log-level", "warn")
	var out logtest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, "the gateway to be ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	resp, err := http.Get(base + "/api/v1/aggregator/servers")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Servers []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
			PID    int    `json:"pid"`
		} `json:"servers"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Servers) != 5 {
		t.Fatalf("servers: %v %+v", err, list)
	}
	var pids []int
	for _, s := range list.Servers {
		if s.Status != "CONNECTED" || s.PID == 0 {
			t.Fatalf("%s is %s (pid %d)\n%s", s.Name, s.Status, s.PID, out.String())
		}
		pids = append(pids, s.PID)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the gateway did not exit after SIGTERM\n%s", out.String())
	}
	time.Sleep(time.Second + 500*time.Millisecond) // shutdown_timeout is already spent inside the exit
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("upstream pid %d outlived the gateway", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestChaos is B1 at the gateway level: 3 stdio upstreams, 2,000 calls at
// concurrency 8 through /mcp while a loop SIGKILLs random processes of two
// of them. The gateway never fails; every call is a success or a clean
// error; the killed servers come back; the never-killed one never fails.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 calls with kills")
	}
	// Seed 002 allows at most 10 restarts; within half a second the kills
	// never add up to a crash loop.
	yaml := "servers:" + demoServer("steady") + demoServer("victim1") + demoServer("victim2") +
		"settings:\n  restart_backoff_initial_ms: 50\n  restart_backoff_max_ms: 500\n  max_restart_attempts: 10\n  restart_window_seconds: 0.5\n  retry_base_ms: 20\n  retry_max_delay_ms: 100\n  circuit_cooldown_seconds: 1\n"
	g := startGateway(t, yaml, nil)
	cs := g.connect(t, "/mcp")

	ctx, stopKills := context.WithCancel(t.Context())
	var killer sync.WaitGroup
	var kills atomic.Int32
	killer.Go(func() {
		for ctx.Err() == nil {
			victim := []string{"victim1", "victim2"}[rand.IntN(2)]
			if st, err := g.app.Upstreams().Status(victim); err == nil && st.PID > 0 {
				if syscall.Kill(st.PID, syscall.SIGKILL) == nil {
					kills.Add(1)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(20+rand.IntN(80)) * time.Millisecond):
			}
		}
	})

	const total, workers = 2000, 8
	var next atomic.Int32
	var ok, clean atomic.Int32
	var steadyFailures atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for n := next.Add(1); n <= total; n = next.Add(1) {
				server := []string{"steady", "victim1", "victim2"}[n%3]
				text := fmt.Sprintf("call %d", n)
				cctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: server + ".echo", Arguments: map[string]any{"text": text}})
				cancel()
				switch {
				case err == nil && !res.IsError && res.Content[0].(*mcp.TextContent).Text == text:
					ok.Add(1)
				case err == nil && res.IsError && res.Meta[`switchboard/error`] != nil:
					clean.Add(1) // the gateway's own error: server down, naming it
					if server == "steady" {
						steadyFailures.Add(1)
					}
				case err != nil && strings.Contains(err.Error(), server):
					clean.Add(1)
					if server == "steady" {
						steadyFailures.Add(1)
					}
				default:
					t.Errorf("call %d to %s: unclean outcome: %v %+v", n, server, err, res)
				}
			}
		})
	}
	wg.Wait()
	stopKills()
	killer.Wait()
	t.Logf("%d calls: %d ok, %d clean errors; %d SIGKILLs", total, ok.Load(), clean.Load(), kills.Load())
	if kills.Load() == 0 {
		t.Fatal("the chaos loop killed nothing")
	}
	if steadyFailures.Load() != 0 {
		t.Errorf("%d calls to the never-killed server failed", steadyFailures.Load())
	}
	for _, v := range []string{"victim1", "victim2"} {
		waitFor(t, v+" to be CONNECTED again", func() bool { return g.serverByName(t, v)["status"] == "CONNECTED" })
	}
	// Calls killed under them may have opened victim1.echo's breaker; it
	// closes after its cooldown once the server answers again.
	waitFor(t, "victim1.echo to answer after the chaos", func() bool {
		text, _ := callText(t, cs, "victim1.echo", map[string]any{"text": "alive"})
		return text == "alive"
	})
}

// TestStatusEvents: every status change is an event on GET /api/v1/events.
func TestStatusEvents(t *testing.T) {
	g := startGateway(t, "servers:"+demoServer("demo"), nil)
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url()+"/api/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		buf := make([]byte, 0, 4096)
		chunk := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(chunk)
			buf = append(buf, chunk[:n]...)
			for {
				i := strings.IndexByte(string(buf), '\n')
				if i < 0 {
					break
				}
				lines <- string(buf[:i])
				buf = buf[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	if code, _ := g.rest(t, "POST", "/api/v1/aggregator/servers/demo/disconnect", nil); code != 200 {
		t.Fatal("disconnect failed")
	}
	if code, _ := g.rest(t, "POST", "/api/v1/aggregator/servers/demo/connect", nil); code != 202 {
		t.Fatal("connect failed")
	}
	var seen []string
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("stream ended; saw %v", seen)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var ev struct {
					Type string         `json:"type"`
					Data map[string]any `json:"data"`
				}
				if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "server.status_changed" {
					seen = append(seen, fmt.Sprint(ev.Data["to"]))
				}
			}
			if strings.Join(seen, ",") == "DISCONNECTED,CONNECTING,CONNECTED" {
				return
			}
		case <-deadline:
			t.Fatalf("status events seen: %v, want DISCONNECTED,CONNECTING,CONNECTED", seen)
		}
	}
}
