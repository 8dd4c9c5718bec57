package app_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite"

	"github.com/switchboard-mcp/switchboard/internal/logtest"
)

// TestAuditSurvivesSIGKILL is issue 13's durability criterion: calls through
// REST and MCP at concurrency 8, then SIGKILL of the gateway (a real child
// process); the SQLite file, reopened, holds a row for every call that was
// answered. With the default audit_durability (durable) none may be lost.
func TestAuditSurvivesSIGKILL(t *testing.T) {
	lost, answered := runKilledGateway(t, "")
	if answered < 50 {
		t.Fatalf("only %d calls answered before the kill: the load did not run", answered)
	}
	if lost != 0 {
		t.Fatalf("%d of %d answered calls have no audit row after SIGKILL", lost, answered)
	}
	t.Logf("%d answered calls, 0 audit rows lost", answered)
}

// runKilledGateway runs a gateway process with extra settings YAML, drives
// calls through it until it has answered a few hundred, SIGKILLs it and
// reports how many answered calls have no audit row.
func runKilledGateway(t *testing.T, settings string) (lost, answered int) {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	dbPath := filepath.Join(dir, "switchboard.db")
	yaml := "settings:\n  log_level: warn\n" + settings + "servers:" + demoServer("demo")
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cmd := exec.Command(os.Args[0], "serve", "--config", cfgPath, "--store", dbPath, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	cmd.Env = append(os.Environ(), gatewayEnv+"=1")
	logs := &logtest.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the demo upstream too
		<-waited
		if t.Failed() {
			t.Logf("gateway logs:\n%s", logs.String())
		}
	})
	g := &gateway{base: fmt.Sprintf("http://127.0.0.1:%d", port), logs: logs}
	waitFor(t, "gateway ready", func() bool {
		code, _, err := g.tryRest("", "GET", "/readyz", nil)
		return err == nil && code == 200
	})

	var (
		mu   sync.Mutex
		ids  []string // correlation ids of answered calls
		wg   sync.WaitGroup
		stop = make(chan struct{})
	)
	answer := func(id string) {
		mu.Lock()
		ids = append(ids, id)
		mu.Unlock()
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(ids)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for w := range 4 {
		wg.Go(func() { // REST
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("rest-%d-%d", w, i)
				b, _ := json.Marshal(map[string]any{"name": "demo.echo", "arguments": map[string]any{"text": id}, "correlation_id": id})
				resp, err := client.Post(g.base+"/api/v1/tools/call", "application/json", bytes.NewReader(b))
				if err != nil {
					return // the gateway is gone
				}
				var out struct {
					IsError bool `json:"isError"`
				}
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if err == nil && resp.StatusCode == 200 && !out.IsError {
					answer(id)
				}
			}
		})
		wg.Go(func() { // MCP, one session per worker
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { <-stop; cancel() }()
			c := mcp.NewClient(&mcp.Implementation{Name: "durability", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.base + "/mcp", MaxRetries: -1}, nil)
			if err != nil {
				return
			}
			defer cs.Close()
			for i := 0; ; i++ {
				id := fmt.Sprintf("mcp-%d-%d", w, i)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo.echo", Arguments: map[string]any{"text": id},
					Meta: mcp.Meta{"switchboard/correlation-id": id}})
				if err != nil {
					return
				}
				if !res.IsError {
					answer(id)
				}
			}
		})
	}
	// Kill in the middle of the load, once it has run a while.
	waitFor(t, "300 answered calls", func() bool { return count() >= 300 })
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-waited
	close(stop)
	wg.Wait()

	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT correlation_id FROM mcp_invocations")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		have[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if !have[id] {
			lost++
		}
	}
	return lost, len(ids)
}
