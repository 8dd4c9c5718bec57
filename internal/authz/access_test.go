package authz

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// ws is an identity whose credential carries a workspace policy (seed 003),
// of an agent with no grants at all.
func ws(f ...func(*Identity)) Identity {
	id := Identity{ID: "jwt:idp|carol", AgentID: "carol", Workspace: "team-a", Method: "jwt", WorkspacePolicy: true}
	for _, fn := range f {
		fn(&id)
	}
	return id
}

func admin(i *Identity) { i.Admin = true }

// TestSeed003Rule is seed 003's _filter_by_policy as a table, for
// identities whose credential carries a workspace policy and who hold no
// grant: admin → every server; a deny id → never; default_access deny →
// only with an allow id; otherwise allowed. The four outcomes must agree
// between Decide (a call), Visible (a listing) and ServerAllowed
// (resources and prompts).
func TestSeed003Rule(t *testing.T) {
	pol := Policy{ServerAccess: map[string]string{"research_fs": "deny", "internal_admin_fs": "allow", "notes": "allow"}}
	tests := []struct {
		name   string
		id     Identity
		server string
		want   Decision
	}{
		{"admin sees a default-deny server", ws(admin), "research_fs", allow("admin")},
		{"admin ignores its deny ids", ws(admin, denyIDs("internal_admin_fs")), "internal_admin_fs", allow("admin")},
		{"deny id", ws(denyIDs("internal_admin_fs")), "internal_admin_fs", deny("workspace:deny-id")},
		{"deny id beats allow id", ws(denyIDs("research_fs"), allowIDs("research_fs")), "research_fs", deny("workspace:deny-id")},
		{"deny-default without allow id", ws(), "research_fs", deny("server:default-deny")},
		{"deny-default with allow id", ws(allowIDs("research_fs")), "research_fs", allow("workspace:allow-id")},
		{"allow-default", ws(), "notes", allow("workspace:default-allow")},
		{"allow-default, other servers denied", ws(denyIDs("internal_admin_fs")), "notes", allow("workspace:default-allow")},
		{"server without default_access is allow", ws(), "unlisted", allow("workspace:default-allow")},
		{"allow id on an allow-default server", ws(allowIDs("notes")), "notes", allow("workspace:allow-id")},
		// Without a workspace policy the same claims only restrict: seed
		// 000's grants are still needed.
		{"no policy: allow-default needs a grant", with(ws(), func(i *Identity) { i.WorkspacePolicy = false }), "notes", deny("default-deny")},
		{"no policy: allow id needs a grant", with(ws(allowIDs("research_fs")), func(i *Identity) { i.WorkspacePolicy = false }), "research_fs", deny("default-deny")},
	}
	ignore := cmpopts.IgnoreFields(Decision{}, "Reason", "Revision")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, pol, nil)
			got := w.decide(t, call(tc.id, tc.server, "read_note"))
			if diff := cmp.Diff(tc.want, got, ignore); diff != "" {
				t.Errorf("Decide mismatch (-want +got):\n%s", diff)
			}
			if got.Reason == "" {
				t.Errorf("empty reason in %+v", got)
			}
			if v := w.e.Visible(tc.id, tc.server, "read_note", "", false); v != tc.want.Allow {
				t.Errorf("Visible = %v, want %v", v, tc.want.Allow)
			}
			if v := w.e.ServerAllowed(tc.id, tc.server); v != tc.want.Allow {
				t.Errorf("ServerAllowed = %v, want %v", v, tc.want.Allow)
			}
			if n := len(w.e.Grants("carol")); n != 0 {
				t.Errorf("carol has %d grants; the rule must need none", n)
			}
		})
	}
}

// TestWorkspacePolicyKeepsOtherLayers: role restrictions and high-risk
// approval apply to workspace-policy identities as to any other.
func TestWorkspacePolicyKeepsOtherLayers(t *testing.T) {
	pol := Policy{RoleRestrictions: map[string][]string{"review": {"notes.read_*"}}}
	w := newWorld(t, pol, nil)
	ignore := cmpopts.IgnoreFields(Decision{}, "Reason", "Revision", "Cached")
	for _, tc := range []struct {
		req  Request
		want Decision
	}{
		{call(ws(roles("review")), "notes", "read_note"), allow("workspace:default-allow")},
		{call(ws(roles("review")), "notes", "list_notes"), deny("role:review")},
		{call(ws(), "notes", "write_note"), deny("high-risk:token-missing").risky()},
		{call(ws(), "notes", "read_note").destructive(), deny("high-risk:token-missing").risky()},
	} {
		if diff := cmp.Diff(tc.want, w.decide(t, tc.req), ignore); diff != "" {
			t.Errorf("Decide(%s) mismatch (-want +got):\n%s", tc.req.Name, diff)
		}
	}
	// A token issued to the agent approves its high-risk call.
	it, err := w.e.IssueToken(context.Background(), TokenRequest{AgentID: "carol", Server: "notes", Tool: "write_note"})
	if err != nil {
		t.Fatal(err)
	}
	want := allow("workspace:default-allow+token:" + it.Token.ID[:8]).risky()
	if diff := cmp.Diff(want, w.decide(t, call(ws(), "notes", "write_note").token(it.Secret)), ignore); diff != "" {
		t.Errorf("with a token (-want +got):\n%s", diff)
	}
}

// TestWorkspaceGrants: a grant to a workspace admits every identity of that
// workspace, and only those; revoking it ends that.
func TestWorkspaceGrants(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, Policy{ServerAccess: map[string]string{"secrets": "deny"}}, nil)
	dave := Identity{ID: "key:dave", AgentID: "dave", Workspace: "team-a", Method: "key"}
	erin := Identity{ID: "key:erin", AgentID: "erin", Workspace: "team-b", Method: "key"}
	nobody := Identity{ID: "key:frank", AgentID: "frank", Method: "key"}
	g, _, err := w.e.Grant(ctx, Grant{Workspace: "team-a", Server: "notes", Tool: "*"}, GrantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sg, _, err := w.e.Grant(ctx, Grant{Workspace: "team-a", Server: "secrets", Tool: "get_secret"}, GrantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ignore := cmpopts.IgnoreFields(Decision{}, "Reason", "Revision", "Cached")
	for _, tc := range []struct {
		req  Request
		want Decision
	}{
		{call(dave, "notes", "read_note"), allow("grant:" + g.ID)},
		{call(erin, "notes", "read_note"), deny("default-deny")},
		{call(nobody, "notes", "read_note"), deny("default-deny")},
		// An agent named like the workspace is not in it.
		{call(Identity{ID: "key:x", AgentID: "team-a"}, "notes", "read_note"), deny("default-deny")},
		// The workspace layer still comes first.
		{call(dave, "secrets", "get_secret"), deny("server:default-deny")},
		{call(with(dave, allowIDs("secrets")), "secrets", "get_secret"), allow("grant:" + sg.ID)},
		{call(with(dave, denyIDs("notes")), "notes", "read_note"), deny("workspace:deny-id")},
		// An agent's own grant is more specific than its workspace's pattern.
		{call(alice, "fs", "read_file"), allow("grant:g-read")},
	} {
		if diff := cmp.Diff(tc.want, w.decide(t, tc.req), ignore); diff != "" {
			t.Errorf("Decide(%s as %s) mismatch (-want +got):\n%s", tc.req.Name, tc.req.Identity.ID, diff)
		}
	}
	if !w.e.ServerAllowed(dave, "notes") || w.e.ServerAllowed(erin, "notes") {
		t.Errorf("ServerAllowed(notes): dave %v, erin %v; want true, false", w.e.ServerAllowed(dave, "notes"), w.e.ServerAllowed(erin, "notes"))
	}
	// Granting the workspace again replaces its grant; an agent grant on
	// the same tool is another grant.
	again, _, err := w.e.Grant(ctx, Grant{Workspace: "team-a", Server: "notes", Tool: "*", Actions: []string{"invoke", "read"}}, GrantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != g.ID {
		t.Errorf("re-granting the workspace made grant %s, want %s kept", again.ID, g.ID)
	}
	if _, _, err := w.e.Grant(ctx, Grant{AgentID: "team-a", Server: "notes", Tool: "*"}, GrantOptions{}); err != nil {
		t.Fatal(err)
	}
	var toWorkspace int
	for _, gr := range w.e.Grants("") {
		if gr.Workspace == "team-a" {
			toWorkspace++
		}
	}
	if toWorkspace != 2 {
		t.Errorf("%d grants to workspace team-a, want 2", toWorkspace)
	}
	if err := w.e.Revoke(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if got := w.decide(t, call(dave, "notes", "read_note")); got.Allow {
		t.Errorf("after revoking the workspace grant: %+v", got)
	}
}
