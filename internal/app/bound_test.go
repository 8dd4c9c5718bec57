package app_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/fixture"
)

// sizeRE matches the size in a result_too_large message.
var sizeRE = regexp.MustCompile(`\d+ bytes exceeds`)

// TestOversizedReplyFailsAlone is issue 13's acceptance for bounded
// replies, through the whole gateway: a 20 MiB reply (over the default
// max_result_bytes of 16 MiB) from a stdio and from a Streamable HTTP
// upstream fails its call alone, with 502 result_too_large over REST and
// the same message in an isError result over MCP, while four calls beside
// it on the same upstream answer; the stdio process is not restarted. A
// stray line on the stdio upstream's stdout is dropped, and a reply cut
// short fails only its call.
func TestOversizedReplyFailsAlone(t *testing.T) {
	fx := httptest.NewServer(fixture.Handler(nil))
	t.Cleanup(fx.Close)
	yaml := fmt.Sprintf(`servers:
  fxs:
    transport: stdio
    command: switchboard
    env: {%s: "1"}
    auto_start: true
  fxh:
    transport: http
    url: %s/mcp
    auto_start: true
`, fixtureEnv, fx.URL)
	g := startGateway(t, yaml, nil)
	cs := g.connect(t, "/mcp")
	pid := g.serverByName(t, "fxs")["pid"]
	if pid == nil {
		t.Fatalf("fxs has no pid: %v", g.serverByName(t, "fxs"))
	}

	// besides runs call alongside four small REST calls to server, and
	// fails the test unless the four answer 200.
	besides := func(t *testing.T, server string, call func()) {
		t.Helper()
		var wg sync.WaitGroup
		codes := make(chan int, 4)
		for range 4 {
			wg.Go(func() {
				code, _ := g.rest(t, "POST", "/api/v1/tools/call", map[string]any{"name": server + "." + fixture.ToolLargeResult, "arguments": map[string]any{"bytes": 64 << 10}})
				codes <- code
			})
		}
		call()
		wg.Wait()
		close(codes)
		for code := range codes {
			if code != http.StatusOK {
				t.Errorf("a call beside it answered %d, want 200", code)
			}
		}
	}
	errorOf := func(body map[string]any) (code, msg string) {
		e, _ := body["error"].(map[string]any)
		code, _ = e["code"].(string)
		msg, _ = e["message"].(string)
		return code, msg
	}

	for _, server := range []string{"fxs", "fxh"} {
		t.Run(server, func(t *testing.T) {
			big := map[string]any{"name": server + "." + fixture.ToolLargeResult, "arguments": map[string]any{"bytes": 20 << 20}}
			var restMsg string
			besides(t, server, func() {
				status, body := g.rest(t, "POST", "/api/v1/tools/call", big)
				code, msg := errorOf(body)
				if status != http.StatusBadGateway || code != "result_too_large" || !strings.Contains(msg, "result too large: upstream reply of") ||
					!strings.Contains(msg, "exceeds max_result_bytes (16777216)") {
					t.Errorf("REST: %d %s %q, want 502 result_too_large", status, code, msg)
				}
				restMsg = msg
			})
			besides(t, server, func() {
				text, res := callText(t, cs, big["name"].(string), big["arguments"])
				meta, _ := res.Meta["switchboard/error"].(map[string]any)
				// The same message, but for the reply's size (its id differs).
				if !res.IsError || sizeRE.ReplaceAllString(text, "N") != sizeRE.ReplaceAllString(restMsg, "N") || meta["code"] != "result_too_large" {
					t.Errorf("MCP: isError %v, text %q, meta %v; want the REST message %q and code result_too_large", res.IsError, text, meta, restMsg)
				}
			})
			if text, _ := callText(t, cs, server+"."+fixture.ToolSimpleText, nil); text == "" {
				t.Error("a call after it got no text")
			}
			s := g.serverByName(t, server)
			if s["status"] != "CONNECTED" || s["restarts"] != float64(0) || (server == "fxs" && s["pid"] != pid) {
				t.Errorf("after: status %v, restarts %v, pid %v (was %v); want the same CONNECTED upstream", s["status"], s["restarts"], s["pid"], pid)
			}
		})
	}

	t.Run("garbage on stdout", func(t *testing.T) {
		besides(t, "fxs", func() {
			status, body := g.rest(t, "POST", "/api/v1/tools/call", map[string]any{"name": "fxs." + fixture.ToolStdoutGarbage, "arguments": map[string]any{}})
			if status != http.StatusOK {
				t.Errorf("a stray line: %d %v, want 200 (the line is dropped)", status, body)
			}
		})
		besides(t, "fxs", func() {
			status, body := g.rest(t, "POST", "/api/v1/tools/call", map[string]any{"name": "fxs." + fixture.ToolStdoutGarbage, "arguments": map[string]any{"corrupt_reply": true}})
			if code, msg := errorOf(body); status != http.StatusInternalServerError || code != "upstream_error" || !strings.Contains(msg, "malformed reply") {
				t.Errorf("a reply cut short: %d %s %q, want 500 upstream_error, malformed reply", status, code, msg)
			}
		})
		if s := g.serverByName(t, "fxs"); s["status"] != "CONNECTED" || s["pid"] != pid {
			t.Errorf("after: status %v, pid %v (was %v); want the same CONNECTED process", s["status"], s["pid"], pid)
		}
	})
}
