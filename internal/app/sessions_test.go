package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/logtest"
)

const sessionInitBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`

// mcpPost sends one MCP POST (session "" starts one) with key as bearer
// ("" for none) and returns the status, the session id answered and the
// body.
func mcpPost(ctx context.Context, client *http.Client, url, key, session, body string) (int, string, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b), err
}

// mcpDelete ends session and returns the status.
func mcpDelete(ctx context.Context, client *http.Client, url, key, session string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Mcp-Session-Id", session)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// metricValue reads one series of the gateway's /metrics ("" key: none
// needed), e.g. `go_goroutines` or `x_total{limit="identity"}`.
func metricValue(t *testing.T, base, key, series string) float64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %q", series, v)
			}
			return f
		}
	}
	return 0 // a counter never incremented has no series
}

// procStatusKB reads a field of /proc/<pid>/status (VmRSS, VmHWM) in kB.
func procStatusKB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestSessionFloodBounded is the acceptance of bounded sessions: one
// identity (local mode) sends 10,000 initialize and never a DELETE to a
// real `switchboard serve` (the production binary: a race-instrumented one
// would measure the race detector) with the default caps. The peak RSS
// stays under 250 MB, the live sessions stay at the per-identity cap, and
// once the survivors are ended the goroutines are back to the baseline.
func TestSessionFloodBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	const (
		flood       = 10000
		workers     = 8
		perIdentity = 1000 // the default front.max_sessions_per_identity
		maxPeakKB   = 250 << 10
	)
	bin := switchboardBin(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfgPath, []byte("servers: {}\n"), 0o644); err != nil {
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
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("gateway output:\n%s", out.String())
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, "the gateway to be ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	pid := cmd.Process.Pid
	// The baseline has the metrics client's connection only; the
	// workers' own (a goroutine each on the server) are closed before the
	// final count.
	baseRSS := procStatusKB(t, pid, "VmRSS")
	baseG := metricValue(t, base, "", "go_goroutines")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	t.Cleanup(client.CloseIdleConnections)
	var wg sync.WaitGroup

	start := time.Now()
	ids := make([]string, flood)
	var next atomic.Int64
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < flood; i = int(next.Add(1)) - 1 {
				code, id, body, err := mcpPost(t.Context(), client, base+"/mcp", "", "", sessionInitBody)
				if err != nil || code != http.StatusOK || id == "" {
					t.Errorf("initialize %d: %d %v %s", i, code, err, body)
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	took := time.Since(start)
	peak, rss := procStatusKB(t, pid, "VmHWM"), procStatusKB(t, pid, "VmRSS")
	live := metricValue(t, base, "", "switchboard_mcp_sessions")
	evicted := metricValue(t, base, "", `switchboard_mcp_session_evictions_total{limit="identity"}`)
	floodG := metricValue(t, base, "", "go_goroutines")
	t.Logf("%d initialize in %v: RSS %d -> %d kB (peak %d kB), goroutines %v -> %v, live %v, evicted %v",
		flood, took.Round(time.Millisecond), baseRSS, rss, peak, baseG, floodG, live, evicted)
	if peak >= maxPeakKB {
		t.Errorf("peak RSS %d kB, want < %d kB", peak, maxPeakKB)
	}
	if live != perIdentity || evicted != flood-perIdentity {
		t.Errorf("live %v, evicted %v; want %d, %d", live, evicted, perIdentity, flood-perIdentity)
	}
	// An evicted session's goroutine is gone: one per live session
	// remains, and one per worker connection. Goroutines of the last
	// evictions and of the scrape's own connection end an instant later:
	// wait for the count to settle rather than read it once.
	// The gateway's own background goroutines (health probes, timers)
	// come and go by a few: goroutineSlack absorbs them, far below the
	// thousands a leak of the evicted sessions would leave.
	for deadline := time.Now().Add(10 * time.Second); floodG > baseG+perIdentity+workers+goroutineSlack; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("goroutines %v after the flood, want at most %v (baseline + one per live session and connection + %d)", floodG, baseG+perIdentity+workers+goroutineSlack, goroutineSlack)
			break
		}
		floodG = metricValue(t, base, "", "go_goroutines")
	}

	// End every session as clients should have: the evicted answer 404,
	// the live 204, and then nothing of them is left.
	var ended, gone atomic.Int64
	next.Store(0)
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < flood; i = int(next.Add(1)) - 1 {
				code, err := mcpDelete(t.Context(), client, base+"/mcp", "", ids[i])
				switch {
				case err != nil:
					t.Errorf("DELETE: %v", err)
					return
				case code == http.StatusNoContent:
					ended.Add(1)
				case code == http.StatusNotFound:
					gone.Add(1)
				default:
					t.Errorf("DELETE: status %d", code)
				}
			}
		})
	}
	wg.Wait()
	if got := [2]int64{ended.Load(), gone.Load()}; got != [2]int64{perIdentity, flood - perIdentity} {
		t.Errorf("DELETE answers (204, 404) = %v, want [%d %d]", got, perIdentity, flood-perIdentity)
	}
	client.CloseIdleConnections()
	var g float64
	waitFor(t, "goroutines back to the baseline", func() bool {
		g = metricValue(t, base, "", "go_goroutines")
		return g <= baseG+goroutineSlack
	})
	if n := metricValue(t, base, "", "switchboard_mcp_sessions"); n != 0 {
		t.Errorf("live sessions %v after every DELETE", n)
	}
	t.Logf("after every DELETE: goroutines %v, RSS %d kB", g, procStatusKB(t, pid, "VmRSS"))
}

// goroutineSlack is how far the gateway's goroutine count moves by itself
// between two reads: background work (health probes, timers, the scrape's
// own connection) starts and ends regardless of sessions.
const goroutineSlack = 8

// TestSessionCapPerIdentity: with two API keys, one identity's cap evicts
// and refuses only its own sessions; the refusal names the setting; the
// metrics count it all.
func TestSessionCapPerIdentity(t *testing.T) {
	const admin = "admin-bootstrap-key"
	g := startGateway(t, "auth:\n  mode: keys\nfront:\n  max_sessions_per_identity: 2\nservers: {}\n",
		map[string]string{"SWITCHBOARD_ADMIN_KEY": admin})
	keys := map[string]string{}
	for _, agent := range []string{"alice", "bob"} {
		code, body := g.restAs(t, admin, "POST", "/api/v1/keys", map[string]any{"agent_id": agent})
		if code != 201 && code != 200 {
			t.Fatalf("create key: %d %v", code, body)
		}
		keys[agent], _ = body["key"].(string)
	}
	url, client, ctx := g.url()+"/mcp", &http.Client{}, t.Context()
	open := func(who string) string {
		t.Helper()
		code, id, body, err := mcpPost(ctx, client, url, keys[who], "", sessionInitBody)
		if err != nil || code != http.StatusOK || id == "" {
			t.Fatalf("initialize as %s: %d %v %s", who, code, err, body)
		}
		return id
	}
	status := func(who, id string) int {
		t.Helper()
		code, _, _, err := mcpPost(ctx, client, url, keys[who], id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	a1, a2, b1 := open("alice"), open("alice"), open("bob")
	a3 := open("alice") // alice's cap: a1 goes, bob's session stays
	b2 := open("bob")
	got := map[string]int{"a1": status("alice", a1), "a2": status("alice", a2), "a3": status("alice", a3),
		"b1": status("bob", b1), "b2": status("bob", b2)}
	if d := cmp.Diff(map[string]int{"a1": 404, "a2": 200, "a3": 200, "b1": 200, "b2": 200}, got); d != "" {
		t.Errorf("ping per session (-want +got):\n%s", d)
	}

	// Alice listens on both her sessions: none is idle, a third is refused.
	for _, id := range []string{a2, a3} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+keys["alice"])
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET stream: %v %v", err, resp)
		}
		t.Cleanup(func() { resp.Body.Close() })
	}
	code, _, body, err := mcpPost(ctx, client, url, keys["alice"], "", sessionInitBody)
	var refusal struct {
		Error struct {
			Message string
			Data    map[string]any
		}
	}
	if err != nil || json.Unmarshal([]byte(body), &refusal) != nil {
		t.Fatalf("initialize over the cap: %v %s", err, body)
	}
	if code != http.StatusTooManyRequests || refusal.Error.Data["setting"] != "front.max_sessions_per_identity" ||
		!strings.Contains(refusal.Error.Message, "front.max_sessions_per_identity") {
		t.Errorf("initialize over a busy cap: %d %s; want 429 naming front.max_sessions_per_identity", code, body)
	}
	open("bob") // bob evicts his own idle b1, never alice's streaming ones
	if st := status("bob", b1); st != http.StatusNotFound {
		t.Errorf("bob's oldest: %d, want 404", st)
	}

	metrics := map[string]float64{}
	for _, s := range []string{"switchboard_mcp_sessions", `switchboard_mcp_session_evictions_total{limit="identity"}`,
		`switchboard_mcp_sessions_refused_total{limit="identity"}`} {
		metrics[s] = metricValue(t, g.url(), admin, s)
	}
	want := map[string]float64{"switchboard_mcp_sessions": 4, `switchboard_mcp_session_evictions_total{limit="identity"}`: 2,
		`switchboard_mcp_sessions_refused_total{limit="identity"}`: 1}
	if d := cmp.Diff(want, metrics); d != "" {
		t.Errorf("metrics (-want +got):\n%s", d)
	}
}
