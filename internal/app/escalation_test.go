package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/front"
)

// webhook is an escalation receiver: it refuses (503) while down and keeps
// what it accepted, with the headers it came with.
type webhook struct {
	srv      *httptest.Server
	down     atomic.Bool
	refused  atomic.Int32
	mu       sync.Mutex
	got      []map[string]any
	auth     []string
	accepted chan map[string]any
}

func newWebhook(t *testing.T) *webhook {
	t.Helper()
	w := &webhook{accepted: make(chan map[string]any, 100)}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.down.Load() {
			w.refused.Add(1)
			http.Error(rw, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		var p map[string]any
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.got = append(w.got, p)
		w.auth = append(w.auth, r.Header.Get("Authorization"))
		w.mu.Unlock()
		w.accepted <- p
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// next returns the next delivery; the bound only keeps a broken gateway
// from hanging the test.
func (w *webhook) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case p := <-w.accepted:
		return p
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook received nothing")
		return nil
	}
}

func escalationYAML(hook string, extra string) string {
	return "auth:\n  mode: keys\n" + extra + fastSettings +
		"  escalation_webhook_url: " + hook + "\n" +
		"  escalation_webhook_headers: [\"Authorization=HOOK_AUTH\"]\n"
}

// TestEscalationWebhook: a call that fails after its retries reaches the
// webhook as an escalation (correlation id, identity, tool, error,
// attempts); with the webhook down the record stays and is delivered once
// it is back; an admin lists and acknowledges it over REST.
func TestEscalationWebhook(t *testing.T) {
	const admin = "admin-bootstrap-key"
	up := newFaultyUpstream(t)
	hook := newWebhook(t)
	g := startGateway(t, escalationYAML(hook.srv.URL, "")+"servers:"+up.yaml("up"),
		map[string]string{"SWITCHBOARD_ADMIN_KEY": admin, "HOOK_AUTH": "Bearer hook-secret"})
	up.failAll.Store(true)

	call := func(corr string) {
		t.Helper()
		code, body := g.restAs(t, admin, "POST", "/api/v1/mcp/invoke", map[string]any{"server_id": "up", "tool_name": "echo",
			"params": map[string]any{"text": "hi"}, "correlation_id": corr})
		if code < 500 {
			t.Fatalf("failing call: %d %v", code, body)
		}
	}

	t.Run("delivered", func(t *testing.T) {
		call("corr-up")
		p := hook.next(t)
		if p["event"] != "call_failed" || p["correlation_id"] != "corr-up" || p["tool"] != "up.echo" || p["agent_id"] == "" ||
			p["error"] == "" || p["attempts"].(float64) < 1 {
			t.Errorf("payload %v", p)
		}
		hook.mu.Lock()
		auth := hook.auth[0]
		hook.mu.Unlock()
		if auth != "Bearer hook-secret" {
			t.Errorf("Authorization header %q", auth)
		}
		if strings.Contains(g.logs.String(), "hook-secret") {
			t.Error("the webhook header's secret is in the logs")
		}
	})

	var downID string
	t.Run("receiver down, then back", func(t *testing.T) {
		hook.down.Store(true)
		call("corr-down")
		waitFor(t, "a refused delivery", func() bool { return hook.refused.Load() >= 1 })
		_, body := g.restAs(t, admin, "GET", "/api/v1/escalations", nil)
		var rec map[string]any
		for _, e := range body["escalations"].([]any) {
			if m := e.(map[string]any); m["correlation_id"] == "corr-down" {
				rec = m
			}
		}
		if rec == nil {
			t.Fatalf("the escalation is not stored: %v", body)
		}
		if _, delivered := rec["delivered_at"]; delivered {
			t.Fatalf("delivered while the receiver was down: %v", rec)
		}
		downID = rec["id"].(string)
		hook.down.Store(false)
		if p := hook.next(t); p["id"] != downID || p["correlation_id"] != "corr-down" {
			t.Errorf("delivered %v, want %s", p, downID)
		}
		waitFor(t, "the record marked delivered", func() bool {
			_, body := g.restAs(t, admin, "GET", "/api/v1/escalations", nil)
			for _, e := range body["escalations"].([]any) {
				if m := e.(map[string]any); m["id"] == downID {
					_, ok := m["delivered_at"]
					return ok && m["delivery_attempts"].(float64) >= 2
				}
			}
			return false
		})
	})

	t.Run("ack", func(t *testing.T) {
		code, body := g.restAs(t, admin, "POST", "/api/v1/escalations/"+downID+"/ack", nil)
		if code != 200 || body["acked_by"] == nil {
			t.Fatalf("ack: %d %v", code, body)
		}
		_, body = g.restAs(t, admin, "GET", "/api/v1/escalations?unacked=true", nil)
		for _, e := range body["escalations"].([]any) {
			if e.(map[string]any)["id"] == downID {
				t.Errorf("an acknowledged escalation is listed as unacked")
			}
		}
		if code, body := g.restAs(t, admin, "POST", "/api/v1/escalations/esc_unknown/ack", nil); code != 404 {
			t.Errorf("acking an unknown escalation: %d %v", code, body)
		}
	})
}

// TestApprovalRequests: with authz.approval: request, a high-risk call
// without a token files a pending approval (403 naming it, REST and MCP)
// and notifies the webhook; once an admin approves it, the caller's retry
// with the same arguments passes once and a second retry is refused; a
// denied request refuses the call; the audit log has every step.
func TestApprovalRequests(t *testing.T) {
	const admin = "admin-bootstrap-key"
	up := newFaultyUpstream(t)
	hook := newWebhook(t)
	g := startGateway(t, escalationYAML(hook.srv.URL, "authz:\n  approval: request\n")+"servers:"+up.yaml("up"),
		map[string]string{"SWITCHBOARD_ADMIN_KEY": admin, "HOOK_AUTH": "Bearer hook-secret"})
	_, body := g.restAs(t, admin, "POST", "/api/v1/keys", map[string]any{"agent_id": "writer"})
	key, _ := body["key"].(string)
	if code, body := g.restAs(t, admin, "POST", "/api/v1/mcp/policies/grant", map[string]any{"agent_id": "writer", "tool_name": "up.write"}); code >= 300 {
		t.Fatalf("grant: %d %v", code, body)
	}
	write := func(text string) (int, map[string]any) {
		return g.restAs(t, key, "POST", "/api/v1/mcp/invoke", map[string]any{"server_id": "up", "tool_name": "write",
			"params": map[string]any{"text": text}})
	}
	pending := func(code int, body map[string]any) string {
		t.Helper()
		e, _ := body["error"].(map[string]any)
		d, _ := e["details"].(map[string]any)
		id, _ := d["approval_id"].(string)
		if code != 403 || e["code"] != "approval_required" || id == "" || !strings.Contains(fmt.Sprint(e["message"]), id) {
			t.Fatalf("want 403 approval_required naming the approval, got %d %v", code, body)
		}
		return id
	}
	decide := func(id, verb string) {
		t.Helper()
		if code, body := g.restAs(t, admin, "POST", "/api/v1/approvals/"+id+"/"+verb, map[string]any{"reason": "checked by ops"}); code != 200 {
			t.Fatalf("%s %s: %d %v", verb, id, code, body)
		}
	}

	// The first call files a request; retrying before a decision names the
	// same one; the webhook hears of it.
	id := pending(write("approve me"))
	if again := pending(write("approve me")); again != id {
		t.Errorf("retry while pending names %s, want %s", again, id)
	}
	if p := hook.next(t); p["event"] != "approval_requested" || p["approval_id"] != id || p["agent_id"] != "writer" {
		t.Errorf("webhook payload %v", p)
	}
	if code, body := g.restAs(t, key, "GET", "/api/v1/approvals", nil); code != 403 {
		t.Errorf("a non-admin lists approvals: %d %v", code, body)
	}
	_, body = g.restAs(t, admin, "GET", "/api/v1/approvals?status=pending", nil)
	if list := body["approvals"].([]any); len(list) != 1 || list[0].(map[string]any)["id"] != id || list[0].(map[string]any)["name"] != "up.write" {
		t.Fatalf("pending approvals: %v", body)
	}

	// Over MCP the refusal is an isError result naming the request.
	cs := g.connectAs(t, key)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up.write", Arguments: map[string]any{"text": "approve me"}})
	if err != nil || !res.IsError {
		t.Fatalf("MCP call while pending: %v %+v", err, res)
	}
	if txt := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(txt, id) {
		t.Errorf("MCP error %q does not name %s", txt, id)
	}
	if meta, _ := res.Meta[front.ErrorMetaKey].(map[string]any); meta["approval_id"] != id {
		t.Errorf("MCP error meta %v", res.Meta)
	}
	if n := up.count(demo.ToolWrite); n != 0 {
		t.Fatalf("the upstream ran write %d times before the approval", n)
	}

	decide(id, "approve")
	if code, body := write("other arguments"); code != 403 {
		t.Errorf("the approval let other arguments through: %d %v", code, body)
	}
	if code, body := write("approve me"); code != 200 || body["success"] != true {
		t.Fatalf("retry after approval: %d %v", code, body)
	}
	second := pending(write("approve me"))
	if second == id {
		t.Errorf("the second retry reused the spent approval %s", id)
	}
	if n := up.count(demo.ToolWrite); n != 1 {
		t.Errorf("the upstream ran write %d times, want 1", n)
	}

	decide(second, "deny")
	code, body := write("approve me")
	if e, _ := body["error"].(map[string]any); code != 403 || e["code"] != "denied" || !strings.Contains(fmt.Sprint(e["message"]), "denied") {
		t.Errorf("after a denial: %d %v", code, body)
	}
	if code, body := g.restAs(t, admin, "POST", "/api/v1/approvals/"+second+"/approve", nil); code != 409 {
		t.Errorf("approving a denied request: %d %v", code, body)
	}
	if n := up.count(demo.ToolWrite); n != 1 {
		t.Errorf("the upstream ran write %d times after the denial, want 1", n)
	}

	// The audit log: the calls with the rule that decided them, and the
	// decisions.
	_, body = g.restAs(t, admin, "GET", "/api/v1/audit?agent_id=writer&limit=50", nil)
	rules := map[string]bool{}
	for _, r := range body["records"].([]any) {
		rule, _ := r.(map[string]any)["policy_rule"].(string)
		switch {
		case strings.HasPrefix(rule, "high-risk:approval-pending:"):
			rules["pending"] = true
		case strings.Contains(rule, "+approval:"+id):
			rules["approved"] = true
		case rule == "high-risk:approval-denied:"+second:
			rules["denied"] = true
		}
	}
	_, body = g.restAs(t, admin, "GET", "/api/v1/audit?kind=operation&limit=50", nil)
	for _, r := range body["records"].([]any) {
		if op, _ := r.(map[string]any)["operation"].(string); strings.HasPrefix(op, "approval.") {
			rules[op] = true
		}
	}
	for _, want := range []string{"pending", "approved", "denied", "approval.approve", "approval.deny"} {
		if !rules[want] {
			t.Errorf("the audit log lacks %q: %v", want, rules)
		}
	}
}

// TestEscalationStartErrors: a webhook the SSRF guard refuses, or a header
// whose environment variable is unset, stops the start with the setting
// named.
func TestEscalationStartErrors(t *testing.T) {
	tests := []struct {
		name, settings, want string
	}{
		{"metadata endpoint", "  escalation_webhook_url: http://169.254.169.254/hook\n", "settings.escalation_webhook_url"},
		{"header variable unset", "  escalation_webhook_url: http://127.0.0.1:9/hook\n  escalation_webhook_headers: [\"Authorization=SB_TEST_UNSET_HOOK_AUTH\"]\n",
			"SB_TEST_UNSET_HOOK_AUTH is not set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newAppErr(t, "settings:\n"+tc.settings)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("app.New = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
