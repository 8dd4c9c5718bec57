package cli

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

var (
	reEscID      = regexp.MustCompile(`esc_[a-z0-9]{16}`)
	reApprovalID = regexp.MustCompile(`apr_[a-z0-9]{16}`)
)

// TestEscalationsAndApprovals runs `escalations [ack]` and `approvals
// [approve|deny]` against a gateway whose demo server is stopped (its calls
// fail, and escalate) and whose "add" tool is high-risk with approvals
// requested, and pins their output. The subtests run in order.
func TestEscalationsAndApprovals(t *testing.T) {
	// The string after the server closes servers: and opens authz:.
	g := startGatewayWith(t, fmt.Sprintf(`
  demo:
    transport: stdio
    command: switchboard
    args: [demo-server]
    env: {%s: "1"}
    auto_start: true
authz:
  approval: request
  admin_needs_token: true
  high_risk_tools: [add]
`, demoEnv))
	norm := func(s string) string {
		return normalizeText(reApprovalID.ReplaceAllString(reEscID.ReplaceAllString(s, "<esc>"), "<apr>"))
	}

	var escID string
	t.Run("failed call escalated", func(t *testing.T) {
		if code, out, _ := g.cli(t, "escalations"); code != ExitOK || out != "no escalations\n" {
			t.Fatalf("before: exit %d %q", code, out)
		}
		if code, _, errOut := g.cli(t, "stop", "demo"); code != ExitOK {
			t.Fatalf("stop: exit %d %s", code, errOut)
		}
		if code, _, errOut := g.cli(t, "call", "demo.echo", "--arg", "text=hi"); code != ExitFailure {
			t.Fatalf("calling a stopped server: exit %d %s", code, errOut)
		}
		code, out, errOut := g.cli(t, "escalations")
		if code != ExitOK {
			t.Fatalf("exit %d %s", code, errOut)
		}
		escID = reEscID.FindString(out)
		if escID == "" {
			t.Fatalf("no escalation listed:\n%s", out)
		}
		checkGolden(t, "escalations.txt", norm(out))
		code, out, _ = g.cli(t, "escalations", "-o", "json")
		if code != ExitOK {
			t.Fatalf("-o json: exit %d", code)
		}
		jsonGolden(t, "escalations", out, g.get(t, "/api/v1/escalations"))
	})

	t.Run("ack", func(t *testing.T) {
		code, out, errOut := g.cli(t, "escalations", "ack", escID)
		if code != ExitOK {
			t.Fatalf("exit %d %s", code, errOut)
		}
		checkGolden(t, "escalations_ack.txt", norm(out))
		if code, out, _ := g.cli(t, "escalations", "--unacked"); code != ExitOK || out != "no escalations\n" {
			t.Errorf("--unacked after the ack: exit %d %q", code, out)
		}
		if code, _, errOut := g.cli(t, "escalations", "ack", "esc_unknown"); code != ExitFailure || !strings.Contains(errOut, "not found") {
			t.Errorf("acking an unknown id: exit %d %q", code, errOut)
		}
	})

	t.Run("approval", func(t *testing.T) {
		if code, _, errOut := g.cli(t, "start", "demo"); code != ExitOK {
			t.Fatalf("start: exit %d %s", code, errOut)
		}
		add := func() (int, string, string) { return g.cli(t, "call", "demo.add", "--arg", "a=1", "--arg", "b=2") }
		code, _, errOut := add()
		id := reApprovalID.FindString(errOut)
		if code != ExitFailure || id == "" || !strings.Contains(errOut, "approvals approve "+id) {
			t.Fatalf("high-risk call: exit %d %q", code, errOut)
		}
		code, out, _ := g.cli(t, "approvals", "--status", "pending")
		if code != ExitOK || !strings.Contains(out, id) {
			t.Fatalf("approvals: exit %d\n%s", code, out)
		}
		checkGolden(t, "approvals.txt", norm(out))
		code, out, errOut = g.cli(t, "approvals", "approve", id, "--reason", "ticket OPS-42")
		if code != ExitOK {
			t.Fatalf("approve: exit %d %s", code, errOut)
		}
		checkGolden(t, "approvals_approve.txt", norm(out))
		if code, out, errOut := add(); code != ExitOK || !strings.Contains(out, "3") {
			t.Fatalf("retry after the approval: exit %d %q %q", code, out, errOut)
		}
		code, _, errOut = add()
		second := reApprovalID.FindString(errOut)
		if code != ExitFailure || second == "" || second == id {
			t.Fatalf("second retry: exit %d %q", code, errOut)
		}
		if code, _, errOut := g.cli(t, "approvals", "deny", second, "--reason", "once is enough"); code != ExitOK {
			t.Fatalf("deny: exit %d %s", code, errOut)
		}
		if code, _, errOut := add(); code != ExitFailure || !strings.Contains(errOut, "denied") || !strings.Contains(errOut, "once is enough") {
			t.Errorf("after the denial: exit %d %q", code, errOut)
		}
		if code, _, errOut := g.cli(t, "approvals", "approve", second); code != ExitFailure || !strings.Contains(errOut, "not pending") {
			t.Errorf("approving a denied request: exit %d %q", code, errOut)
		}
		code, out, _ = g.cli(t, "approvals", "-o", "json")
		if code != ExitOK {
			t.Fatalf("-o json: exit %d", code)
		}
		jsonGolden(t, "approvals", out, g.get(t, "/api/v1/approvals"))
	})
}
