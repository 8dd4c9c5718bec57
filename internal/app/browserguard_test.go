package app_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBrowserGuard is the browser door of issue 13: in local mode (no auth,
// loopback) a web page the user opens must not drive any route of the
// gateway: not by a cross-site request, not through a DNS-rebound host name,
// not from another local port, not with a body a browser sends without a
// preflight. The dashboard keeps working from its own origin.
func TestBrowserGuard(t *testing.T) {
	g := startGateway(t, "servers:"+demoServer("demo"), nil)
	own := g.url()
	port := own[strings.LastIndex(own, ":")+1:]
	pwned := filepath.Join(t.TempDir(), "PWNED")
	register := `{"name":"pwn","transport_type":"STDIO","auto_connect":true,"connection_config":{"command":"sh","args":["-c","id > ` + pwned + `"]}}`
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`

	type req struct {
		method, path, body string
		header             map[string]string
	}
	routes := []req{
		{"POST", "/api/v1/aggregator/servers", register, nil},
		{"GET", "/api/v1/audit", "", nil},
		{"GET", "/api/v1/aggregator/servers", "", nil},
		{"POST", "/api/v1/tools/call", `{"name":"demo.echo","arguments":{"text":"x"}}`, nil},
		{"POST", "/mcp", initialize, map[string]string{"Accept": "application/json, text/event-stream"}},
		{"POST", "/servers/demo/mcp", initialize, map[string]string{"Accept": "application/json, text/event-stream"}},
		{"GET", "/sse", "", nil},
		{"GET", "/ui/", "", nil},
		{"GET", "/metrics", "", nil},
		{"GET", "/healthz", "", nil},
	}
	attacks := []struct {
		name   string
		host   string
		header map[string]string
		want   int
		code   string
	}{
		{"foreign origin", "", map[string]string{"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"}, 403, "cross_origin"},
		{"foreign host (DNS rebinding)", "evil.example:" + port, nil, 403, "invalid_host"},
		{"rebinding with same-origin Origin", "evil.example:" + port, map[string]string{"Origin": "http://evil.example:" + port}, 403, "invalid_host"},
		{"other local port", "", map[string]string{"Origin": "http://localhost:9999", "Sec-Fetch-Site": "same-site"}, 403, "cross_origin"},
		{"null origin", "", map[string]string{"Origin": "null"}, 403, "cross_origin"},
		{"no-cors load from another site", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, 403, "cross_origin"},
	}
	do := func(t *testing.T, r req, host string, header map[string]string) (int, string) {
		t.Helper()
		hr, err := http.NewRequestWithContext(t.Context(), r.method, own+r.path, strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range r.header {
			hr.Header.Set(k, v)
		}
		for k, v := range header {
			hr.Header.Set(k, v)
		}
		if host != "" {
			hr.Host = host
		}
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.path, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == 200 && r.method == "GET" && strings.Contains(resp.Header.Get("Content-Type"), "event-stream") {
			return resp.StatusCode, "" // an open stream: do not read it
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, a := range attacks {
		for _, r := range routes {
			t.Run(a.name+" "+r.method+" "+r.path, func(t *testing.T) {
				h := map[string]string{"Content-Type": "application/json"}
				for k, v := range a.header {
					h[k] = v
				}
				code, body := do(t, r, a.host, h)
				if code != a.want || !strings.Contains(body, `"code":"`+a.code+`"`) {
					t.Errorf("status %d, want %d with code %s; body %s", code, a.want, a.code, body)
				}
			})
		}
	}
	// Bodies a browser sends cross-site without a preflight, even with no
	// Origin at all (an old browser, an extension): refused on every
	// state-changing route.
	for _, ct := range []string{"text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		for _, r := range routes {
			if r.method != "POST" {
				continue
			}
			t.Run("body "+ct+" "+r.path, func(t *testing.T) {
				code, body := do(t, r, "", map[string]string{"Content-Type": ct})
				if code != 415 || !strings.Contains(body, `"code":"unsupported_media_type"`) {
					t.Errorf("status %d, want 415 unsupported_media_type; body %s", code, body)
				}
			})
		}
	}

	// Nothing got through: no server registered, no process started.
	_, body := g.rest(t, "GET", "/api/v1/aggregator/servers", nil)
	for _, s := range body["servers"].([]any) {
		if name := s.(map[string]any)["name"]; name != "demo" {
			t.Errorf("server %v registered through the guard", name)
		}
	}
	time.Sleep(200 * time.Millisecond) // a started process would have written by now
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("the attacker's command ran")
	}

	// The dashboard works from its own origin: its page, and its API calls
	// (same-origin fetches with JSON bodies).
	sameOrigin := map[string]string{"Origin": own, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}
	for _, r := range []req{
		{"GET", "/ui/", "", nil},
		{"GET", "/api/v1/aggregator/servers", "", nil},
		{"POST", "/api/v1/tools/call", `{"name":"demo.echo","arguments":{"text":"hi"}}`, nil},
		{"GET", "/metrics", "", nil},
	} {
		if code, body := do(t, r, "", sameOrigin); code != 200 {
			t.Errorf("same origin %s %s: status %d; body %s", r.method, r.path, code, body)
		}
	}
	// A link to the dashboard from another site opens it (a top-level
	// navigation, whose answer the other site cannot read).
	nav := map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
	if code, body := do(t, req{"GET", "/ui/", "", nil}, "", nav); code != 200 {
		t.Errorf("navigation to /ui/: status %d; body %s", code, body)
	}
	// Other loopback names of the listener are its own.
	if code, body := do(t, req{"GET", "/api/v1/aggregator/servers", "", nil}, "localhost:"+port, nil); code != 200 {
		t.Errorf("Host localhost: status %d; body %s", code, body)
	}
}
