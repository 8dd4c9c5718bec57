package app_test

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// accessGateway is a JWT gateway with seed 003's servers: research_fs has
// default_access deny, internal_admin_fs and notes allow. Every server is
// the demo server, so each offers echo.
func accessGateway(t *testing.T) (g *gateway, admin string, sign func(jwt.MapClaims) string) {
	t.Helper()
	const adminKey = "admin-bootstrap-key"
	secret := strings.Repeat("s", 40)
	servers := demoServer("research_fs") + "    default_access: deny\n" + demoServer("internal_admin_fs") + demoServer("notes")
	g = startGateway(t, "auth:\n  mode: jwt\n  jwt:\n    secret: ${JWT_SECRET}\n    issuer: https://idp.example\nservers:"+servers,
		map[string]string{"SWITCHBOARD_ADMIN_KEY": adminKey, "JWT_SECRET": secret})
	sign = func(claims jwt.MapClaims) string {
		claims["iss"] = "https://idp.example"
		claims["exp"] = time.Now().Add(time.Hour).Unix()
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return g, adminKey, sign
}

// seenServers is what one caller is shown and may do, server by server,
// through each surface the rule must agree on.
type seenServers struct {
	mcpList, restTools, restServers, search, calls []string
}

func (g *gateway) seenBy(t *testing.T, bearer string, servers []string) seenServers {
	t.Helper()
	var s seenServers
	add := func(set map[string]bool, name string) {
		if server, _, ok := strings.Cut(name, "."); ok {
			set[server] = true
		}
	}
	sorted := func(set map[string]bool) []string { return slices.Sorted(maps.Keys(set)) }

	set := map[string]bool{}
	for name := range toolNames(t, g.connectAs(t, bearer)) {
		add(set, name)
	}
	s.mcpList = sorted(set)

	set = map[string]bool{}
	code, body := g.restAs(t, bearer, "GET", "/api/v1/tools", nil)
	if code != 200 {
		t.Fatalf("GET /api/v1/tools: %d %v", code, body)
	}
	for _, tool := range body["tools"].([]any) {
		add(set, tool.(map[string]any)["name"].(string))
	}
	s.restTools = sorted(set)

	set = map[string]bool{}
	code, body = g.restAs(t, bearer, "GET", "/api/v1/aggregator/servers", nil)
	if code != 200 {
		t.Fatalf("GET servers: %d %v", code, body)
	}
	for _, srv := range body["servers"].([]any) {
		set[srv.(map[string]any)["name"].(string)] = true
	}
	s.restServers = sorted(set)

	set = map[string]bool{}
	code, body = g.restAs(t, bearer, "POST", "/api/v1/search", map[string]any{"query": "echo text round trip", "limit": 100})
	if code != 200 {
		t.Fatalf("search: %d %v", code, body)
	}
	for _, tool := range body["tools"].([]any) {
		set[tool.(map[string]any)["source_server"].(map[string]any)["name"].(string)] = true
	}
	s.search = sorted(set)

	set = map[string]bool{}
	for _, server := range servers {
		code, body := g.restAs(t, bearer, "POST", "/api/v1/tools/call", map[string]any{"name": server + ".echo", "arguments": map[string]any{"text": "hi"}})
		switch {
		case code == 200:
			set[server] = true
		case code != 403 || errorCode(body) != "denied":
			t.Errorf("call %s.echo: %d %v, want 200 or 403 denied", server, code, body)
		}
	}
	s.calls = sorted(set)
	return s
}

// TestSeed003Access is seed 003's rule with JWT identities and no grants:
// tools/list, the REST tool and server listings, search and calls all show
// exactly the servers the rule allows.
func TestSeed003Access(t *testing.T) {
	g, admin, sign := accessGateway(t)
	servers := []string{"internal_admin_fs", "notes", "research_fs"}
	// Search indexes in the background: wait until it knows every server.
	waitFor(t, "search to index every server", func() bool {
		_, body := g.restAs(t, admin, "POST", "/api/v1/search", map[string]any{"query": "echo text round trip", "limit": 100})
		n := map[string]bool{}
		tools, _ := body["tools"].([]any)
		for _, tool := range tools {
			n[tool.(map[string]any)["source_server"].(map[string]any)["name"].(string)] = true
		}
		return len(n) == len(servers)
	})

	policy := func(extra jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "agent-x", "isAdmin": false, "mcpServerAllowIds": []string{}, "mcpServerDenyIds": []string{}}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	tests := []struct {
		name   string
		claims jwt.MapClaims
		want   []string
	}{
		{"admin", policy(jwt.MapClaims{"isAdmin": true, "mcpServerDenyIds": []string{"notes"}}), servers},
		{"deny id", policy(jwt.MapClaims{"mcpServerDenyIds": []string{"internal_admin_fs"}}), []string{"notes"}},
		{"deny-default without allow id", policy(nil), []string{"internal_admin_fs", "notes"}},
		{"deny-default with allow id", policy(jwt.MapClaims{"mcpServerAllowIds": []string{"research_fs"}}), servers},
		{"allow-default, only a deny claim", jwt.MapClaims{"sub": "agent-y", "mcpServerDenyIds": []string{"research_fs"}}, []string{"internal_admin_fs", "notes"}},
		// No seed 003 claim at all: seed 000's default deny.
		{"no workspace policy", jwt.MapClaims{"sub": "agent-z", "workspace": "team-a"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := g.seenBy(t, sign(tc.claims), servers)
			want := seenServers{tc.want, tc.want, tc.want, tc.want, tc.want}
			if tc.name == "admin" {
				want.restServers = servers // admins list every server anyway
			}
			if !slices.Equal(got.mcpList, want.mcpList) || !slices.Equal(got.restTools, want.restTools) ||
				!slices.Equal(got.restServers, want.restServers) || !slices.Equal(got.search, want.search) || !slices.Equal(got.calls, want.calls) {
				t.Errorf("seen %+v, want %+v", got, want)
			}
		})
	}
	if code, body := g.restAs(t, admin, "GET", "/api/v1/mcp/policies", nil); code != 200 || len(body["grants"].([]any)) != 0 {
		t.Errorf("grants: %d %v, want none: the rule needs no grant", code, body)
	}
	// The audit log names the rule that decided.
	code, body := g.restAs(t, admin, "GET", "/api/v1/audit?agent_id=agent-x&tool_name=echo&server_id=research_fs&limit=10", nil)
	if code != 200 {
		t.Fatalf("audit: %d %v", code, body)
	}
	rules := map[string]bool{}
	for _, r := range body["records"].([]any) {
		rules[r.(map[string]any)["policy_rule"].(string)] = true
	}
	for _, want := range []string{"admin", "server:default-deny", "workspace:allow-id"} {
		if !rules[want] {
			t.Errorf("audit of research_fs.echo lacks rule %s: %v", want, rules)
		}
	}
}

// TestWorkspaceGrants: a grant to a workspace admits every identity of it
// (keys and JWTs without a workspace policy) and no other; an API key with
// a workspace policy follows seed 003's rule as a JWT does.
func TestWorkspaceGrants(t *testing.T) {
	g, admin, sign := accessGateway(t)
	servers := []string{"internal_admin_fs", "notes", "research_fs"}
	newKey := func(body map[string]any) string {
		t.Helper()
		code, res := g.restAs(t, admin, "POST", "/api/v1/keys", body)
		if code != 201 {
			t.Fatalf("create key %v: %d %v", body, code, res)
		}
		return res["key"].(string)
	}
	teamA := newKey(map[string]any{"agent_id": "a1", "workspace": "team-a"})
	teamB := newKey(map[string]any{"agent_id": "b1", "workspace": "team-b"})
	jwtA := sign(jwt.MapClaims{"sub": "a2", "workspace": "team-a"})
	policyKey := newKey(map[string]any{"agent_id": "p1", "workspace_policy": true, "allow_servers": []string{"research_fs"}, "deny_servers": []string{"notes"}})

	for name, bearer := range map[string]string{"team-a key": teamA, "team-a jwt": jwtA, "team-b key": teamB} {
		if got := g.seenBy(t, bearer, servers); len(got.calls) != 0 || len(got.restTools) != 0 {
			t.Errorf("%s before any grant: %+v", name, got)
		}
	}
	code, res := g.restAs(t, admin, "POST", "/api/v1/mcp/policies/grant", map[string]any{"workspace": "team-a", "tool_name": "notes.*"})
	if code != 201 {
		t.Fatalf("workspace grant: %d %v", code, res)
	}
	grant := res["grant"].(map[string]any)
	if grant["workspace"] != "team-a" || grant["agent_id"] != "" {
		t.Errorf("grant = %v, want to workspace team-a", grant)
	}
	only := []string{"notes"}
	for name, bearer := range map[string]string{"team-a key": teamA, "team-a jwt": jwtA} {
		got := g.seenBy(t, bearer, servers)
		if !slices.Equal(got.mcpList, only) || !slices.Equal(got.restTools, only) || !slices.Equal(got.search, only) || !slices.Equal(got.calls, only) {
			t.Errorf("%s with the workspace grant: %+v, want notes only", name, got)
		}
	}
	if got := g.seenBy(t, teamB, servers); len(got.calls) != 0 || len(got.mcpList) != 0 {
		t.Errorf("team-b sees team-a's grant: %+v", got)
	}
	want := []string{"internal_admin_fs", "research_fs"}
	if got := g.seenBy(t, policyKey, servers); !slices.Equal(got.calls, want) || !slices.Equal(got.mcpList, want) || !slices.Equal(got.restServers, want) {
		t.Errorf("workspace-policy key: %+v, want %v", got, want)
	}

	// Bad grant requests say what is wrong.
	for _, body := range []map[string]any{
		{"tool_name": "notes.*"},
		{"agent_id": "a1", "workspace": "team-a", "tool_name": "notes.*"},
		{"workspace": "team-a", "tool_name": "notes.echo", "issue_token": true},
	} {
		if code, res := g.restAs(t, admin, "POST", "/api/v1/mcp/policies/grant", body); code != 400 {
			t.Errorf("grant %v: %d %v, want 400", body, code, res)
		}
	}
	// Revoking the workspace's grant closes it for all of them.
	if code, res := g.restAs(t, admin, "DELETE", "/api/v1/mcp/policies/grant/"+grant["id"].(string), nil); code != 204 {
		t.Fatalf("revoke: %d %v", code, res)
	}
	if got := g.seenBy(t, teamA, servers); len(got.calls) != 0 {
		t.Errorf("team-a after the revoke: %+v", got)
	}
}

// TestDefaultAccessOverride: default_access of a config-file server can be
// changed at run time (the dashboard's toggle): the change is stored, shown
// as overriding the file, applied at once, kept across a restart, and
// cleared only by an explicit reset.
func TestDefaultAccessOverride(t *testing.T) {
	const adminKey = "admin-bootstrap-key"
	secret := strings.Repeat("s", 40)
	yaml := "auth:\n  mode: jwt\n  jwt:\n    secret: ${JWT_SECRET}\n    issuer: https://idp.example\nservers:" + demoServer("notes")
	env := map[string]string{"SWITCHBOARD_ADMIN_KEY": adminKey, "JWT_SECRET": secret}
	storePath := filepath.Join(t.TempDir(), "switchboard.db")
	g := startGatewayStore(t, yaml, env, storePath)
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "reader", "isAdmin": false,
		"iss": "https://idp.example", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	servers := []string{"notes"}
	access := func(g *gateway) map[string]any {
		t.Helper()
		code, body := g.restAs(t, adminKey, "GET", "/api/v1/aggregator/servers/notes", nil)
		if code != 200 {
			t.Fatalf("GET notes: %d %v", code, body)
		}
		return map[string]any{"default_access": body["default_access"], "source": body["default_access_source"],
			"file": body["file_default_access"], "by": body["default_access_set_by"], "at": body["default_access_set_at"] != nil}
	}
	fromFile := map[string]any{"default_access": "allow", "source": "config", "file": nil, "by": nil, "at": false}
	if got := access(g); !maps.Equal(got, fromFile) {
		t.Errorf("before: %v, want %v", got, fromFile)
	}
	if got := g.seenBy(t, token, servers); !slices.Equal(got.calls, servers) {
		t.Fatalf("allow-default before the override: %+v", got)
	}

	code, body := g.restAs(t, adminKey, "PATCH", "/api/v1/aggregator/servers/notes", map[string]any{"default_access": "deny"})
	if code != 200 || body["default_access"] != "deny" {
		t.Fatalf("PATCH default_access: %d %v (a config-file server must be changeable)", code, body)
	}
	overridden := map[string]any{"default_access": "deny", "source": "override", "file": "allow", "by": "admin", "at": true}
	if got := access(g); !maps.Equal(got, overridden) {
		t.Errorf("after PATCH: %v, want %v", got, overridden)
	}
	if got := g.seenBy(t, token, servers); len(got.calls) != 0 || len(got.mcpList) != 0 || len(got.restServers) != 0 {
		t.Errorf("the override did not apply at once: %+v", got)
	}

	// A restart on the same store keeps the override. The MCP sessions
	// opened above hold streams: end them so Close does not wait on them.
	g.http.CloseClientConnections()
	g.http.Close()
	g.app.Close(t.Context())
	g = startGatewayStore(t, yaml, env, storePath)
	if got := access(g); !maps.Equal(got, overridden) {
		t.Errorf("after a restart: %v, want %v", got, overridden)
	}
	if got := g.seenBy(t, token, servers); len(got.calls) != 0 {
		t.Errorf("after a restart the override is not applied: %+v", got)
	}

	// Only an explicit reset gives the file its say back.
	code, body = g.restAs(t, adminKey, "DELETE", "/api/v1/aggregator/servers/notes/default_access", nil)
	if code != 200 || body["default_access_source"] != "config" {
		t.Fatalf("reset: %d %v", code, body)
	}
	if got := access(g); !maps.Equal(got, fromFile) {
		t.Errorf("after the reset: %v, want %v", got, fromFile)
	}
	if got := g.seenBy(t, token, servers); !slices.Equal(got.calls, servers) {
		t.Errorf("after the reset: %+v", got)
	}
	code, body = g.restAs(t, adminKey, "GET", "/api/v1/audit?kind=operation&limit=50", nil)
	if code != 200 {
		t.Fatalf("audit: %d %v", code, body)
	}
	ops := map[string]bool{}
	for _, r := range body["records"].([]any) {
		ops[r.(map[string]any)["operation"].(string)] = true
	}
	if !ops["server.default_access_reset"] {
		t.Errorf("audit lacks the reset: %v", ops)
	}

	// A server registered through the API has no file value to return to.
	reg := map[string]any{"name": "extra", "transport_type": "STDIO", "auto_connect": false,
		"connection_config": map[string]any{"command": "switchboard", "args": []string{"demo-server"}}}
	if code, body := g.restAs(t, adminKey, "POST", "/api/v1/aggregator/servers", reg); code != 201 || body["default_access_source"] != "api" {
		t.Fatalf("register: %d %v", code, body)
	}
	if code, body := g.restAs(t, adminKey, "DELETE", "/api/v1/aggregator/servers/extra/default_access", nil); code != 409 {
		t.Errorf("reset of an API server: %d %v, want 409", code, body)
	}
	if code, body := g.restAs(t, adminKey, "PATCH", "/api/v1/aggregator/servers/extra", map[string]any{"default_access": "deny"}); code != 200 ||
		body["default_access"] != "deny" || body["default_access_source"] != "api" {
		t.Errorf("PATCH an API server: %d %v", code, body)
	}
}
