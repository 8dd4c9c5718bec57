package app_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/fixture"
	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

// statelessCall sends one tools/call of the 2026-07-28 revision to base/mcp
// as the holder of key, and returns the JSON-RPC result or error.
func statelessCall(t *testing.T, client *http.Client, base, key, tool string, extra map[string]any) (result map[string]any, rpcErr map[string]any) {
	t.Helper()
	params := map[string]any{"name": tool, "arguments": map[string]any{"message": "who?"},
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
		}}
	for k, v := range extra {
		params[k] = v
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var data []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id":7`) {
				data = []byte(d)
				break
			}
		}
	} else {
		data, _ = io.ReadAll(resp.Body)
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(data, &msg); err != nil {
		t.Fatalf("%s: status %d, body %q", base, resp.StatusCode, data)
	}
	return msg.Result, msg.Error
}

// TestStatelessCallsAcrossReplicas: two replicas on one PostgreSQL, no
// sticky routing. A client of the 2026-07-28 revision makes 200 calls, each
// needing one elicitation round, sending the first request of each to one
// replica and its retry to the other. Half go to a server of the new
// revision (its state travels inside the gateway's requestState), half to
// a classic server (the call stays parked on the first replica, and the
// second passes the retry to it). All complete; a replayed state is refused
// on either replica. The classic server's calls run one at a time: its
// requests over stdio name no call, so concurrent callers of one shared
// session cannot be told apart (the gateway refuses to guess; see
// docs/protocol.md).
func TestStatelessCallsAcrossReplicas(t *testing.T) {
	dsn := storetest.StartPostgres(t)
	cfg := filepath.Join(t.TempDir(), "switchboard.yaml")
	yaml := fmt.Sprintf(`auth:
  mode: keys
servers:
  new:
    transport: stdio
    command: switchboard
    env: {%[1]s: "1"}
    protocol_version: 2026-07-28
    auto_start: true
  classic:
    transport: stdio
    command: switchboard
    env: {%[1]s: classic}
    auto_start: true
`, fixtureEnv)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	reps := []*replica{startReplica(t, dsn, cfg), startReplica(t, dsn, cfg)}
	for _, r := range reps {
		since(t, "both servers connected on "+r.base, func() bool {
			_, body := r.restAs(t, clusterAdmin, "GET", "/api/v1/aggregator/servers", nil)
			return strings.Count(fmt.Sprint(body), "CONNECTED") >= 2
		})
	}
	client := &http.Client{}
	const calls = 200
	var (
		mu       sync.Mutex
		classic  sync.Mutex // one classic call at a time
		failures []string
		replayed map[string]any
	)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range calls {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			first, second := reps[i%2], reps[(i+1)%2]
			tool := "new." + fixture.ToolElicitation
			if i%4 >= 2 {
				tool = "classic." + fixture.ToolElicitation
				classic.Lock()
				defer classic.Unlock()
			}
			fail := func(format string, a ...any) {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("call %d (%s): ", i, tool)+fmt.Sprintf(format, a...))
				mu.Unlock()
			}
			res, rpcErr := statelessCall(t, client, first.base, clusterAdmin, tool, nil)
			if rpcErr != nil || res["resultType"] != "input_required" {
				fail("round 1: %v %v", res, rpcErr)
				return
			}
			answers := map[string]any{}
			for id := range res["inputRequests"].(map[string]any) {
				answers[id] = map[string]any{"action": "accept", "content": map[string]any{"username": "ada", "email": fmt.Sprintf("ada%d@example.com", i)}}
			}
			retry := map[string]any{"requestState": res["requestState"], "inputResponses": answers}
			res2, rpcErr := statelessCall(t, client, second.base, clusterAdmin, tool, retry)
			want := fmt.Sprintf(`User response: action=accept, content={"email":"ada%d@example.com","username":"ada"}`, i)
			if rpcErr != nil || fmt.Sprint(res2["content"]) != fmt.Sprint([]any{map[string]any{"type": "text", "text": want}}) {
				fail("round 2: %v %v", res2, rpcErr)
				return
			}
			if i == 0 {
				// The same state again, on the replica that did not serve it.
				_, rpcErr := statelessCall(t, client, first.base, clusterAdmin, tool, retry)
				mu.Lock()
				replayed = rpcErr
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d calls across two replicas, %d failed", calls, len(failures))
	if replayed == nil || replayed["code"] != float64(-32602) {
		t.Errorf("replayed requestState on the other replica: error %v, want -32602", replayed)
	}
}
