package app_test

import (
	"fmt"
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
