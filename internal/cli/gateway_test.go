package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/gatewaytest"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
)

const testAdminKey = "sbk_cli_test_admin_key"

// testGateway is a gateway in auth mode "keys" with the demo server (this
// test binary, re-executed) on a temp SQLite store.
type testGateway struct {
	url string
}

func startGateway(t *testing.T) *testGateway {
	t.Helper()
	return startGatewayWith(t, fmt.Sprintf(`
  demo:
    transport: stdio
    command: switchboard
    args: [demo-server]
    env: {%s: "1"}
    auto_start: true
`, demoEnv))
}

// startGatewayWith is startGateway with other servers (YAML under servers:).
func startGatewayWith(t *testing.T, servers string) *testGateway {
	t.Helper()
	yml := "auth:\n  mode: keys\nservers:" + servers
	g := gatewaytest.Start(t, yml, &gatewaytest.Options{Env: map[string]string{"SWITCHBOARD_ADMIN_KEY": testAdminKey}})
	return &testGateway{url: g.URL()}
}

// cli runs the command line against the gateway as the admin.
func (g *testGateway) cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	env := map[string]string{envURL: g.url, envAPIKey: testAdminKey}
	var out, errb bytes.Buffer
	code = Run(t.Context(), args, strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

// get is the API's own JSON for a route, decoded.
func (g *testGateway) get(t *testing.T, path string) any {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, raw)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return v
}

// volatile are the JSON fields whose values change from run to run (ids,
// times, pids, durations); scrub replaces them for comparisons.
var volatile = map[string]bool{
	"id": true, "registered_at": true, "status_since": true, "connected_at": true, "started_at": true,
	"uptime_seconds": true, "pid": true, "health": true, "created_at": true, "prefix": true,
	"invoked_at": true, "latency_ms": true, "correlation_id": true, "granted_at": true, "expires_at": true,
	"routing_time_ms": true, "execution_time_ms": true, "last_failure_time": true, "opened_at": true,
	"next_attempt_at": true, "params_hash": true, "policy_revision": true, "replica": true,
	"server_id": true, "result_summary": true, "in_flight": true, "pinned_at": true, "changed_at": true,
	"approval_id": true, "acked_at": true, "requested_at": true, "decided_at": true, "used_at": true, "delivered_at": true,
	"client_id": true, "refreshed_at": true, "revoked_at": true, "fetched_at": true, "resource": true,
}

func scrub(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if volatile[k] {
				out[k] = "<x>"
				continue
			}
			out[k] = scrub(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = scrub(val)
		}
		return out
	}
	return v
}

var (
	reTook   = regexp.MustCompile(`\(\d+(\.\d)? (ms|s)\)`)
	reStamp  = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)
	rePID    = regexp.MustCompile(`pid \d+`)
	reUUID   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	reSpaces = regexp.MustCompile(` {2,}`)
)

// normalizeText makes table output comparable: timings, times, pids and ids
// become placeholders and column padding (which depends on them) one
// "  ". Alignment itself is pinned by TestTableRender.
func normalizeText(s string, extra ...string) string {
	s = reTook.ReplaceAllString(s, "(<t>)")
	s = reStamp.ReplaceAllString(s, "<time>")
	s = rePID.ReplaceAllString(s, "pid <pid>")
	s = reUUID.ReplaceAllString(s, "<id>")
	for i := 0; i+1 < len(extra); i += 2 {
		s = strings.ReplaceAll(s, extra[i], extra[i+1])
	}
	return reSpaces.ReplaceAllString(s, "  ")
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden := filepath.Join("testdata", "gateway", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", golden, diff)
	}
}

// jsonGolden parses -o json output, checks it against the API's JSON for
// the same listing (when apiPath is set) and pins its scrubbed form.
func jsonGolden(t *testing.T, name, out string, api any) {
	t.Helper()
	var got any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out)
	}
	if api != nil {
		if diff := cmp.Diff(scrub(api), scrub(got)); diff != "" {
			t.Errorf("-o json differs from the API's JSON (-api +cli):\n%s", diff)
		}
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(scrub(got)); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, name+".json", b.String())
}

// waitFor polls cond until it holds or the test's deadline nears.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestAgainstGateway runs the operator commands against a real gateway and
// pins their table and JSON output (E1). The subtests share the gateway
// and run in order: later ones see what earlier ones did.
func TestAgainstGateway(t *testing.T) {
	g := startGateway(t)

	t.Run("status", func(t *testing.T) {
		code, out, errOut := g.cli(t, "status")
		if code != ExitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		// The pid and the uptime of the demo row change per run.
		out = regexp.MustCompile(`(?m)^(demo +\S+ +\S+ +)\d+ +\S+`).ReplaceAllString(out, "${1}<pid>  <uptime>")
		checkGolden(t, "status.txt", normalizeText(out))
		code, out, _ = g.cli(t, "status", "-o", "json")
		if code != ExitOK {
			t.Fatalf("exit %d", code)
		}
		jsonGolden(t, "status", out, g.get(t, "/api/v1/aggregator/servers"))
	})

	t.Run("status yaml", func(t *testing.T) {
		code, out, _ := g.cli(t, "status", "-o", "yaml")
		var v struct {
			Servers []struct {
				Name   string `yaml:"name"`
				Status string `yaml:"status"`
			} `yaml:"servers"`
		}
		if code != ExitOK || yaml.Unmarshal([]byte(out), &v) != nil || len(v.Servers) != 1 || v.Servers[0].Name != "demo" {
			t.Errorf("exit %d, yaml %+v from\n%s", code, v, out)
		}
	})

	t.Run("tools", func(t *testing.T) {
		code, out, _ := g.cli(t, "tools")
		if code != ExitOK {
			t.Fatalf("exit %d", code)
		}
		checkGolden(t, "tools.txt", normalizeText(out))
		code, out, _ = g.cli(t, "tools", "--server", "demo", "-o", "json")
		if code != ExitOK {
			t.Fatalf("exit %d", code)
		}
		jsonGolden(t, "tools", out, g.get(t, "/api/v1/tools?server_id=demo"))
	})

	t.Run("search", func(t *testing.T) {
		// Hits show their skill and the classifier's confidence in it.
		code, out, errOut := g.cli(t, "search", "add", "two", "numbers", "--limit", "2")
		if code != ExitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		checkGolden(t, "search.txt", normalizeText(out))
	})

	t.Run("keys", func(t *testing.T) {
		code, out, errOut := g.cli(t, "keys", "create", "ci-bot", "--role", "dev", "--workspace", "team-a")
		if code != ExitOK || !strings.HasPrefix(out, "sb") || !strings.Contains(errOut, "shown only once") {
			t.Fatalf("keys create: exit %d, %q, %q", code, out, errOut)
		}
		code, out, _ = g.cli(t, "keys", "list")
		if code != ExitOK {
			t.Fatalf("exit %d", code)
		}
		id, prefix := ciBotKey(t, g)
		checkGolden(t, "keys.txt", normalizeText(out, id, "<id>", prefix, "<prefix>"))
		code, out, _ = g.cli(t, "keys", "list", "-o", "json")
		if code != ExitOK {
			t.Fatalf("exit %d", code)
		}
		jsonGolden(t, "keys", out, g.get(t, "/api/v1/keys"))
	})

	var grantID string
	t.Run("grant and policies", func(t *testing.T) {
		code, out, errOut := g.cli(t, "grant", "ci-bot", "demo.echo", "-o", "json")
		if code != ExitOK {
			t.Fatalf("grant: exit %d %s", code, errOut)
		}
		var res struct {
			Grant struct {
				ID string `json:"id"`
			} `json:"grant"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Grant.ID == "" {
			t.Fatalf("grant -o json: %v %q", err, out)
		}
		grantID = res.Grant.ID
		code, out, _ = g.cli(t, "policies")
		if code != ExitOK {
			t.Fatalf("exit %d", code)
		}
		checkGolden(t, "policies.txt", normalizeText(out, grantID, "<grant>"))
		code, out, _ = g.cli(t, "policies", "ci-bot", "-o", "json")
		if code != ExitOK {
			t.Fatalf("exit %d", code)
		}
		jsonGolden(t, "policies", out, g.get(t, "/api/v1/mcp/policies/ci-bot"))
	})

	t.Run("call", func(t *testing.T) {
		code, out, errOut := g.cli(t, "call", "demo.add", "--arg", "a=2", "--json", `{"b": 3}`)
		if code != ExitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		checkGolden(t, "call.txt", out)
		code, out, _ = g.cli(t, "call", "demo.echo", "--arg", "text=hello", "-o", "json")
		if code != ExitOK {
			t.Fatalf("exit %d", code)
		}
		jsonGolden(t, "call", out, nil)
		code, out, errOut = g.cli(t, "call", "demo.fail", "--arg", "mode=tool", "--arg", "message=it broke")
		if code != ExitFailure || !strings.Contains(out, "it broke") || !strings.Contains(errOut, "demo.fail reported an error") {
			t.Errorf("failing tool: exit %d, %q, %q", code, out, errOut)
		}
		code, _, errOut = g.cli(t, "call", "demo.nope")
		if code != ExitFailure || !strings.Contains(errOut, "switchboard: ") {
			t.Errorf("unknown tool: exit %d, %q", code, errOut)
		}
	})

	t.Run("audit", func(t *testing.T) {
		// The recorder writes in the background.
		waitFor(t, "the audit records of the calls", func() bool {
			page := g.get(t, "/api/v1/audit?kind=invocation&tool_name=add").(map[string]any)
			return len(page["records"].([]any)) > 0
		})
		code, out, _ := g.cli(t, "audit", "--kind", "invocation", "--tool", "add")
		if code != ExitOK {
			t.Fatalf("exit %d", code)
		}
		checkGolden(t, "audit.txt", normalizeText(regexp.MustCompile(`\d+\.\d ms`).ReplaceAllString(out, "<t> ms")))
		code, out, _ = g.cli(t, "audit", "--kind", "invocation", "--tool", "add", "-o", "json")
		if code != ExitOK {
			t.Fatalf("exit %d", code)
		}
		jsonGolden(t, "audit", out, g.get(t, "/api/v1/audit?kind=invocation&tool_name=add&limit=50"))
	})

	t.Run("audit follow", func(t *testing.T) {
		old := auditPollInterval
		auditPollInterval = 10 * time.Millisecond
		t.Cleanup(func() { auditPollInterval = old })
		ctx, cancel := context.WithCancel(t.Context())
		out := &logtest.Buffer{}
		done := make(chan int)
		go func() {
			env := map[string]string{envURL: g.url, envAPIKey: testAdminKey}
			done <- Run(ctx, []string{"audit", "--follow", "--kind", "invocation", "--tool", "now", "-o", "json"},
				strings.NewReader(""), out, io.Discard, func(k string) string { return env[k] })
		}()
		// Two calls, each printed once, oldest first, as JSON lines.
		for i := range 2 {
			if code, _, errOut := g.cli(t, "call", "demo.now"); code != ExitOK {
				t.Fatalf("call: exit %d %s", code, errOut)
			}
			waitFor(t, "the followed record", func() bool { return strings.Count(out.String(), "\n") == i+1 })
		}
		cancel()
		if code := <-done; code != ExitOK {
			t.Errorf("follow ended with exit %d", code)
		}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var rec struct {
				Tool string `json:"tool_name"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Tool != "now" {
				t.Errorf("line %q: %v", line, err)
			}
		}
	})

	t.Run("optional routes", func(t *testing.T) {
		// Search and server logs come with newer gateways: either they
		// work, or the command says the gateway lacks them.
		for _, tc := range []struct {
			args     []string
			want     string // in stdout on success
			unsupErr string // in stderr otherwise
		}{
			{[]string{"search", "echo", "text"}, "demo.echo", "does not support search"},
			{[]string{"servers", "logs", "demo", "-n", "5"}, "", "does not support server logs"},
		} {
			code, out, errOut := g.cli(t, tc.args...)
			switch {
			case code == ExitOK && strings.Contains(out, tc.want):
			case code == ExitFailure && (strings.Contains(errOut, tc.unsupErr) || strings.Contains(errOut, "not configured on this gateway")) &&
				strings.Count(errOut, "\n") == 1:
			default:
				t.Errorf("%v: exit %d, stdout %q, stderr %q", tc.args, code, out, errOut)
			}
		}
	})

	t.Run("breakers", func(t *testing.T) {
		code, out, _ := g.cli(t, "breakers")
		if code != ExitOK {
			t.Fatalf("exit %d", code)
		}
		checkGolden(t, "breakers.txt", normalizeText(out))
		code, out, _ = g.cli(t, "breakers", "-o", "json")
		if code != ExitOK {
			t.Fatalf("exit %d", code)
		}
		jsonGolden(t, "breakers", out, sortBreakers(g.get(t, "/api/v1/mcp/circuit-breakers")))
	})

	t.Run("revoke", func(t *testing.T) {
		if code, out, errOut := g.cli(t, "revoke", grantID); code != ExitOK || !strings.Contains(out, grantID) {
			t.Errorf("revoke: exit %d %q %q", code, out, errOut)
		}
	})

	t.Run("stop and start", func(t *testing.T) {
		for _, tc := range []struct{ name, verb string }{
			{"stop", "stop"}, {"stop again", "stop"}, {"start", "start"}, {"start again", "start"}, {"discover", "discover"},
		} {
			code, out, errOut := g.cli(t, tc.verb, "demo")
			if code != ExitOK {
				t.Fatalf("%s: exit %d\n%s%s", tc.name, code, out, errOut)
			}
			checkGolden(t, strings.ReplaceAll(tc.name, " ", "_")+".txt", normalizeText(out))
		}
		code, out, _ := g.cli(t, "restart", "demo")
		if code != ExitOK {
			t.Fatalf("restart: exit %d\n%s", code, out)
		}
		checkGolden(t, "restart.txt", normalizeText(out))

		code, out, _ = g.cli(t, "start", "nope")
		if code != ExitFailure {
			t.Errorf("start nope: exit %d", code)
		}
		checkGolden(t, "start_unknown.txt", normalizeText(out))

		// A server whose command does not exist fails at its start step,
		// with the gateway's reason.
		missing := filepath.Join(t.TempDir(), "no-such-server")
		if code, out, errOut := g.cli(t, "servers", "add", "broken", "--command", missing); code != ExitOK {
			t.Fatalf("servers add: exit %d %s %s", code, out, errOut)
		}
		code, out, _ = g.cli(t, "start", "broken")
		if code != ExitFailure {
			t.Errorf("start broken: exit %d\n%s", code, out)
		}
		checkGolden(t, "start_broken.txt", normalizeText(out, missing, "<missing>"))
		if code, out, errOut := g.cli(t, "servers", "rm", "broken"); code != ExitOK {
			t.Errorf("servers rm: exit %d %s %s", code, out, errOut)
		}
	})

	t.Run("errors", func(t *testing.T) {
		down := httptest.NewServer(http.NotFoundHandler())
		downURL := down.URL
		down.Close()
		tests := []struct {
			name string
			args []string
			code int
			want string // the whole of stderr, after normalization
		}{
			{"unreachable", []string{"status", "--url", downURL}, ExitFailure,
				"switchboard: cannot reach the gateway at " + downURL + ": <reason> (is it running? set --url or SWITCHBOARD_URL)\n"},
			{"no key", []string{"tools", "--api-key", "wrong"}, ExitFailure, ""},
			{"bad output", []string{"status", "-o", "xml"}, ExitUsage, "switchboard: --output \"xml\": want table, json or yaml\n"},
			{"bad arg", []string{"call", "demo.echo", "--arg", "novalue"}, ExitUsage, "switchboard: --arg \"novalue\": want key=value\n"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				code, _, errOut := g.cli(t, tc.args...)
				errOut = regexp.MustCompile(`: dial tcp [^(]*\(`).ReplaceAllString(errOut, ": <reason> (")
				if code != tc.code || (tc.want != "" && errOut != tc.want) || strings.Count(errOut, "\n") != 1 {
					t.Errorf("exit %d, stderr %q; want exit %d, %q", code, errOut, tc.code, tc.want)
				}
			})
		}
	})
}

// ciBotKey is the id and public prefix of the ci-bot key (random per run).
func ciBotKey(t *testing.T, g *testGateway) (id, prefix string) {
	for _, k := range g.get(t, "/api/v1/keys").(map[string]any)["keys"].([]any) {
		m := k.(map[string]any)
		if m["agent_id"] == "ci-bot" {
			return m["id"].(string), m["prefix"].(string)
		}
	}
	t.Fatal("no key for ci-bot")
	return "", ""
}

func sortBreakers(v any) any {
	list := v.(map[string]any)["circuit_breakers"].([]any)
	sort.Slice(list, func(i, j int) bool {
		return fmt.Sprint(list[i].(map[string]any)["circuit_key"]) < fmt.Sprint(list[j].(map[string]any)["circuit_key"])
	})
	return v
}
