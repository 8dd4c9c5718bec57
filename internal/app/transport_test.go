package app_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestInsecureTransport: a server reached over plain http:// at a host
// other than loopback is registered with a warning and flagged
// insecure_transport on its status; with settings.require_tls_upstreams it
// is refused (422 validation_failed naming the url). Loopback and https are
// never flagged.
func TestInsecureTransport(t *testing.T) {
	type attempt struct {
		url      string
		status   int
		insecure bool
	}
	tests := []struct {
		name     string
		settings string
		attempts []attempt
	}{
		{"default warns", "", []attempt{
			{"http://10.20.30.40:9/mcp", 201, true},
			{"http://mcp.example.com/mcp", 201, true},
			{"https://10.20.30.40:9/mcp", 201, false},
			{"http://127.0.0.1:9/mcp", 201, false},
			{"http://localhost:9/mcp", 201, false},
			{"http://[::1]:9/mcp", 201, false},
		}},
		{"require_tls_upstreams refuses", "settings:\n  require_tls_upstreams: true\n", []attempt{
			{"http://10.20.30.40:9/mcp", 422, false},
			{"http://mcp.example.com/mcp", 422, false},
			{"https://10.20.30.40:9/mcp", 201, false},
			{"http://127.0.0.1:9/mcp", 201, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := startGateway(t, tt.settings+"servers: {}\n", nil)
			for i, a := range tt.attempts {
				name := fmt.Sprintf("s%d", i)
				code, body := g.rest(t, "POST", "/api/v1/aggregator/servers", map[string]any{"name": name, "transport_type": "HTTP",
					"auto_connect": false, "connection_config": map[string]any{"url": a.url}})
				if code != a.status {
					t.Fatalf("register %s: %d %v, want %d", a.url, code, body, a.status)
				}
				if code != 201 {
					e, _ := body["error"].(map[string]any)
					if e["code"] != "validation_failed" || !strings.Contains(fmt.Sprint(body), "servers."+name+".url") ||
						!strings.Contains(fmt.Sprint(body), "require_tls_upstreams") {
						t.Errorf("refusal of %s = %v, want validation_failed naming the url and the setting", a.url, body)
					}
					continue
				}
				if got, _ := body["insecure_transport"].(bool); got != a.insecure {
					t.Errorf("register %s: insecure_transport = %v, want %v", a.url, got, a.insecure)
				}
				_, got := g.rest(t, "GET", "/api/v1/aggregator/servers/"+name, nil)
				if flag, _ := got["insecure_transport"].(bool); flag != a.insecure {
					t.Errorf("GET %s: insecure_transport = %v, want %v", a.url, flag, a.insecure)
				}
				warned := false
				for _, line := range strings.Split(g.logs.String(), "\n") {
					if strings.Contains(line, "plain http://") && strings.Contains(line, "server="+name) {
						warned = true
					}
				}
				if warned != a.insecure {
					t.Errorf("register %s: warning logged = %v, want %v; logs:\n%s", a.url, warned, a.insecure, g.logs.String())
				}
			}
		})
	}
}

// TestRenameMovesBreakers: renaming a server carries its open circuit
// breakers over to the new name (calls under the new name are refused
// without reaching the upstream), leaves no breaker under the old name, and
// the moved state is what the store keeps across a restart.
func TestRenameMovesBreakers(t *testing.T) {
	up := newFaultyUpstream(t)
	dbPath := filepath.Join(t.TempDir(), "switchboard.db")
	settings := strings.Replace(fastSettings, "circuit_cooldown_seconds: 1", "circuit_cooldown_seconds: 3600", 1)
	g := startGatewayStore(t, settings+"servers: {}\n", nil, dbPath)
	code, body := g.rest(t, "POST", "/api/v1/aggregator/servers", map[string]any{"name": "up", "transport_type": "HTTP",
		"auto_connect": true, "connection_config": map[string]any{"url": up.srv.URL + "/mcp"}})
	if code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	waitFor(t, "up to connect", func() bool { return g.serverByName(t, "up")["status"] == "CONNECTED" })

	up.failAll.Store(true)
	g.invoke(t, "up", "echo", map[string]any{"text": "x"}, nil)
	if code, body := g.invoke(t, "up", "echo", map[string]any{"text": "x"}, nil); errorCode(body) != "circuit_open" {
		t.Fatalf("breaker of up.echo did not open: %d %v", code, body)
	}
	up.failAll.Store(false)

	if code, body := g.rest(t, "PATCH", "/api/v1/aggregator/servers/up", map[string]any{"name": "renamed"}); code != 200 {
		t.Fatalf("rename: %d %v", code, body)
	}
	waitFor(t, "renamed to connect", func() bool { return g.serverByName(t, "renamed")["status"] == "CONNECTED" })
	breakers := func(g *gateway) map[string]string {
		_, body := g.rest(t, "GET", "/api/v1/mcp/circuit-breakers", nil)
		out := map[string]string{}
		list, _ := body["circuit_breakers"].([]any)
		if list == nil {
			list, _ = body["breakers"].([]any)
		}
		for _, b := range list {
			m, _ := b.(map[string]any)
			out[fmt.Sprint(m["circuit_key"])] = fmt.Sprint(m["state"])
		}
		if len(out) == 0 {
			t.Fatalf("no breakers listed: %v", body)
		}
		return out
	}
	if got := breakers(g); got["renamed:echo"] != "OPEN" || got["up:echo"] != "" {
		t.Errorf("breakers after the rename = %v, want renamed:echo OPEN and no up:echo", got)
	}
	before := up.count("echo")
	if code, body := g.invoke(t, "renamed", "echo", map[string]any{"text": "x"}, nil); code != 503 || errorCode(body) != "circuit_open" {
		t.Errorf("call under the new name: %d %v, want 503 circuit_open", code, body)
	}
	if up.count("echo") != before {
		t.Error("the moved open breaker let a call through")
	}

	// The store holds the moved state: a restart keeps it open.
	g.http.Close()
	g.app.Close(t.Context())
	g2 := startGatewayStore(t, settings+"servers: {}\n", nil, dbPath)
	if got := breakers(g2); got["renamed:echo"] != "OPEN" || got["up:echo"] != "" {
		t.Errorf("breakers after a restart = %v, want renamed:echo OPEN and no up:echo", got)
	}
}
