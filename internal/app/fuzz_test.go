package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// queryRoutes are the GET routes that read query parameters.
var queryRoutes = []string{
	"/api/v1/audit",
	"/api/v1/mcp/metrics",
	"/api/v1/mcp/tools",
	"/api/v1/mcp/circuit-breakers",
	"/api/v1/tools",
	"/api/v1/aggregator/servers/demo/history",
	"/api/v1/aggregator/servers/demo/logs",
	"/api/v1/skills/file_operations/tools",
}

// FuzzRESTQuery sends arbitrary query strings to every route that reads
// one, on a real gateway (SQLite store, demo upstream): no answer is a 5xx
// (a bad cursor once was a 500 from the store), and every refusal is the
// API's JSON error.
func FuzzRESTQuery(f *testing.F) {
	for i := range queryRoutes {
		for _, q := range []string{"", "limit=ten", "limit=0", "cursor=garbage", "cursor=AAAA", "cursor=" + "eyJ4IjoxfQ",
			"since=yesterday", "since=2025-01-02T00:00:00Z&until=2025-01-01T00:00:00Z", "time_range=2y",
			"decision=maybe", "success=perhaps", "enabled_only=x", "lines=-1", "server_id=%zz", "kind=x&kind=y"} {
			f.Add(uint8(i), q)
		}
	}
	g := startGateway(f, "servers:"+demoServer("demo"), nil)
	f.Fuzz(func(t *testing.T, route uint8, query string) {
		path := queryRoutes[int(route)%len(queryRoutes)]
		req, err := http.NewRequestWithContext(t.Context(), "GET", g.url()+path, nil)
		if err != nil {
			return
		}
		req.URL.RawQuery = query
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return // a query the client itself cannot send
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 500 && resp.StatusCode != 501 && resp.StatusCode != 503 {
			t.Fatalf("GET %s?%s: status %d: %s", path, query, resp.StatusCode, body)
		}
		if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != "application/json" {
			// net/http's own answer to a request line it cannot parse,
			// before any handler ran.
			if resp.StatusCode != 400 {
				t.Fatalf("GET %s?%s: status %d without a JSON error: %s", path, query, resp.StatusCode, body)
			}
			return
		}
		if resp.StatusCode >= 400 {
			var out struct {
				Error struct{ Code string } `json:"error"`
			}
			if json.Unmarshal(body, &out) != nil || out.Error.Code == "" {
				t.Fatalf("GET %s?%s: status %d, not an API error: %s", path, query, resp.StatusCode, body)
			}
		}
	})
}
