package app_test

import (
	"os"
	"strings"
	"testing"
)

// TestUpdateRuntimeServer: PUT replaces a runtime server's definition the
// way a reload does — built and started next to the running one, swapped
// in only when it started — keeps the secret values sent back masked, and
// leaves the server as it was when the new definition is invalid or does
// not start.
func TestUpdateRuntimeServer(t *testing.T) {
	g := startGateway(t, "servers:"+demoServer("demo"), nil)
	def := func(desc, command string) map[string]any {
		return map[string]any{
			"transport_type": "STDIO", "auto_connect": true, "description": desc,
			// demoEnv, a literal value, is stored sealed: sent back as "***"
			// it must keep its value, or the process would not be the demo.
			"connection_config": map[string]any{"command": command, "args": []string{"demo-server"}, "env": map[string]string{demoEnv: "1"}},
		}
	}
	reg := def("first", os.Args[0])
	reg["name"] = "up"
	if code, body := g.rest(t, "POST", "/api/v1/aggregator/servers", reg); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	waitFor(t, "up to connect", func() bool { return g.serverByName(t, "up")["status"] == "CONNECTED" })
	before := g.serverByName(t, "up")
	cs := g.connect(t, "/mcp")

	// Invalid, and not starting: refused, nothing changed.
	bad := def("bad", os.Args[0])
	bad["connection_config"].(map[string]any)["command"] = "/nonexistent/switchboard-no-such-server"
	for name, tc := range map[string]struct {
		body map[string]any
		code int
		want string
	}{
		"a new definition that does not start": {bad, 422, "keeps its previous one"},
		"a shell pipeline":                     {map[string]any{"transport_type": "STDIO", "connection_config": map[string]any{"command": "switchboard demo-server | tee log"}}, 422, "needs a shell"},
		"a new name":                           {map[string]any{"name": "other", "transport_type": "STDIO", "connection_config": map[string]any{"command": os.Args[0]}}, 400, "rename"},
	} {
		code, body := g.rest(t, "PUT", "/api/v1/aggregator/servers/up", tc.body)
		if code != tc.code || !strings.Contains(body["error"].(map[string]any)["message"].(string), tc.want) {
			t.Errorf("%s: %d %v, want %d mentioning %q", name, code, body, tc.code, tc.want)
		}
		if s := g.serverByName(t, "up"); s["pid"] != before["pid"] || s["description"] != "first" || s["status"] != "CONNECTED" {
			t.Errorf("%s changed the server: %v", name, s)
		}
	}
	if code, _ := g.rest(t, "PUT", "/api/v1/aggregator/servers/demo", def("x", os.Args[0])); code != 409 {
		t.Errorf("PUT of a config file server: %d, want 409", code)
	}

	// A valid change, the secret sent back masked: a new process, the new
	// description, the same id, and the secret kept (the demo runs).
	next := def("second", os.Args[0])
	next["connection_config"].(map[string]any)["env"] = map[string]string{demoEnv: "***"}
	code, body := g.rest(t, "PUT", "/api/v1/aggregator/servers/up", next)
	if code != 200 {
		t.Fatalf("update: %d %v", code, body)
	}
	after := g.serverByName(t, "up")
	if after["pid"] == before["pid"] || after["description"] != "second" || after["id"] != before["id"] || after["status"] != "CONNECTED" {
		t.Errorf("after the update: %v (before: pid %v id %v)", after, before["pid"], before["id"])
	}
	if text, _ := callText(t, cs, "up.echo", map[string]any{"text": "same session"}); text != "same session" {
		t.Errorf("up.echo after the update = %q", text)
	}
	// An identical definition is a no-op.
	if code, _ := g.rest(t, "PUT", "/api/v1/aggregator/servers/up", next); code != 200 || g.serverByName(t, "up")["pid"] != after["pid"] {
		t.Errorf("an unchanged definition restarted the server")
	}
}
