package app_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFastPathAuditRows sends each call of the stateless revision twice:
// once as the front's fast path serves it (no progress token) and once as
// the SDK's path does (with one). The answers and the audit rows must be
// the same, but for what differs by nature between two calls (id, times,
// correlation): the fast path changes how a call is read and answered,
// never what is recorded of it. Secrets stay redacted on both paths.
func TestFastPathAuditRows(t *testing.T) {
	g := startGateway(t, fastSettings+"servers:\n  demo:\n    transport: stdio\n    command: switchboard\n    args: [demo-server]\n    auto_start: true\n", nil)
	waitFor(t, "demo.echo", func() bool {
		_, body := g.restAs(t, "", "GET", "/api/v1/tools", nil)
		return strings.Contains(fmtJSON(body), `"demo.echo"`)
	})
	calls := []struct{ tool, args string }{
		{"demo.echo", `{"text":"{\"auth\":{\"api_token\":\"s3cr3t\"}}"}`}, // the secret in the result
		{"demo.echo", `{"text":"hello","auth":{"api_token":"s3cr3t"}}`},   // refused by the tool's schema
		{"demo.add", `{"a":1,"b":2}`},
		{"demo.fail", `{"message":"bad"}`},
		{"demo.echo", `{"text":7}`},
		{"demo.echo", `[1]`}, // refused by the gateway before the pipeline: not audited, on either path
	}
	const audited = 5
	for i, c := range calls {
		var answers [2]map[string]any
		for j, progress := range []bool{false, true} {
			ct, msg := post2026(t, g.url(), c.tool, c.args, progress)
			// (A JSON-RPC error may be answered in JSON by either path.)
			if fast := strings.HasPrefix(ct, "application/json"); fast == progress && msg["error"] == nil {
				t.Fatalf("call %d (progress %v): answered as %s", i, progress, ct)
			}
			delete(msg, "id")
			answers[j] = msg
		}
		if d := cmp.Diff(answers[1], answers[0]); d != "" {
			t.Errorf("call %d %s %s: answers differ (-SDK +fast path):\n%s", i, c.tool, c.args, d)
		}
	}

	var rows []map[string]any
	waitFor(t, "every call in the audit log", func() bool {
		_, body := g.restAs(t, "", "GET", "/api/v1/audit?kind=invocation&limit=100", nil)
		recs, _ := body["records"].([]any)
		rows = rows[:0]
		for _, r := range recs {
			rows = append(rows, r.(map[string]any))
		}
		return len(rows) >= 2*audited
	})
	if len(rows) != 2*audited {
		t.Fatalf("%d audit rows for %d audited calls", len(rows), 2*audited)
	}
	var ok int
	// Newest first: each call's SDK row, then its fast row, from the last.
	for i := range audited {
		sdk, fast := rows[2*i], rows[2*i+1]
		for _, r := range []map[string]any{sdk, fast} {
			for _, k := range []string{"id", "invoked_at", "latency_ms", "correlation_id"} {
				delete(r, k)
			}
		}
		if d := cmp.Diff(sdk, fast); d != "" {
			t.Errorf("audit row %d differs (-SDK +fast path):\n%s", i, d)
		}
		if fast["success"] == true {
			ok++
		}
	}
	if ok != 2 {
		t.Errorf("%d successful calls audited, want 2 (the first echo and add)", ok)
	}
	_, body := g.restAs(t, "", "GET", "/api/v1/audit?kind=invocation&limit=100", nil)
	if raw := fmtJSON(body); strings.Contains(raw, "s3cr3t") || !strings.Contains(raw, `"echo"`) {
		t.Errorf("audit log holds the secret, or not the calls: %s", raw)
	}
}

func fmtJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// post2026 sends one tools/call of the stateless revision to /mcp and
// returns the answer's content type and JSON-RPC message.
func post2026(t *testing.T, base, tool, args string, progress bool) (string, map[string]any) {
	t.Helper()
	meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	if progress {
		meta += `,"progressToken":"p1"`
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,"_meta":{` + meta + `}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	var payload []byte
	if strings.HasPrefix(ct, "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id"`) {
				payload = []byte(d)
				break
			}
		}
	} else {
		payload, _ = io.ReadAll(resp.Body)
	}
	var msg map[string]any
	if err := json.Unmarshal(payload, &msg); err != nil {
		t.Fatalf("%s answer %q: %v", tool, payload, err)
	}
	return ct, msg
}
