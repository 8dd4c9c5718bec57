package authz

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchboard-mcp/switchboard/internal/clocktest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// world is one engine over a fake store seeded with the fixtures below.
type world struct {
	st    *fakeStore
	clock *clocktest.Clock
	e     *Engine
}

// Fixture grants: alice can read fs, use all of github, write files and
// read secrets; some of her grants are expired or expire soon.
var fixtureGrants = []Grant{
	{ID: "g-read", AgentID: "alice", Server: "fs", Tool: "read_file"},
	{ID: "g-readstar", AgentID: "alice", Server: "fs", Tool: "read_*"},
	{ID: "g-github", AgentID: "alice", Server: "github", Tool: "*"},
	{ID: "g-old", AgentID: "alice", Server: "fs", Tool: "list_dir", ExpiresAt: ptr(t0.Add(-time.Hour))},
	{ID: "g-soon", AgentID: "alice", Server: "fs", Tool: "stat", ExpiresAt: ptr(t0.Add(10 * time.Minute))},
	{ID: "g-write", AgentID: "alice", Server: "fs", Tool: "write_file"},
	{ID: "g-delete", AgentID: "alice", Server: "fs", Tool: "delete_file"},
	{ID: "g-tail", AgentID: "alice", Server: "fs", Tool: "tail", Actions: []string{"read"}},
	{ID: "g-secrets", AgentID: "alice", Server: "secrets", Tool: "get_secret"},
	{ID: "g-bob", AgentID: "bob", Server: "fs", Tool: "read_file"},
	{ID: "g-root", AgentID: "root", Server: "*", Tool: "*"},
}

// Fixture tokens, keyed by the secret a caller presents.
var fixtureTokens = map[string]Token{
	"tok-write":   {AgentID: "alice", Server: "fs", Tool: "write_file", ExpiresAt: t0.Add(15 * time.Minute)},
	"tok-expired": {AgentID: "alice", Server: "fs", Tool: "write_file", ExpiresAt: t0.Add(-time.Minute)},
	"tok-revoked": {AgentID: "alice", Server: "fs", Tool: "write_file", ExpiresAt: t0.Add(time.Hour), Revoked: true},
	"tok-delete":  {AgentID: "alice", Server: "fs", Tool: "delete_file", ExpiresAt: t0.Add(time.Hour)},
	"tok-bob":     {AgentID: "bob", Server: "fs", Tool: "write_file", ExpiresAt: t0.Add(time.Hour)},
	"tok-fs-any":  {AgentID: "alice", Server: "fs", Tool: "*", ExpiresAt: t0.Add(time.Hour)},
	"tok-bound":   {AgentID: "alice", Server: "fs", Tool: "write_file", ExpiresAt: t0.Add(time.Hour), ArgsDigest: mustDigest(`{"path":"/tmp/a","mode":1}`)},
	"tok-single":  {AgentID: "alice", Server: "fs", Tool: "write_file", ExpiresAt: t0.Add(time.Hour), SingleUse: true},
	"tok-orphan":  {AgentID: "alice", Server: "fs", Tool: "write_file", ExpiresAt: t0.Add(time.Hour), GrantID: "g-gone"},
	"tok-granted": {AgentID: "alice", Server: "fs", Tool: "write_file", ExpiresAt: t0.Add(time.Hour), GrantID: "g-write"},
	"tok-root":    {AgentID: "root", Server: "fs", Tool: "write_file", ExpiresAt: t0.Add(time.Hour)},
	"tok-github":  {AgentID: "alice", Server: "github", Tool: "createIssue", ExpiresAt: t0.Add(time.Hour)},
}

func mustDigest(args string) string {
	d, err := ArgsDigest(json.RawMessage(args))
	if err != nil {
		panic(err)
	}
	return d
}

func id8(secret string) string { return HashSecret(secret)[:8] }

func newWorld(t testing.TB, pol Policy, opts *Options) *world {
	t.Helper()
	st := newFakeStore()
	for _, g := range fixtureGrants {
		st.grants[g.ID] = cloneGrant(g)
	}
	for secret, tok := range fixtureTokens {
		tok.ID = HashSecret(secret)
		tok.CreatedAt = t0.Add(-time.Minute)
		st.tokens[tok.ID] = tok
	}
	clock := clocktest.New(t0)
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Clock = clock.Now
	e, err := New(context.Background(), st, pol, &o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &world{st: st, clock: clock, e: e}
}

var (
	alice = Identity{ID: "key:alice", AgentID: "alice", Method: "key"}
	bob   = Identity{ID: "key:bob", AgentID: "bob", Method: "key"}
	root  = Identity{ID: "key:root", AgentID: "root", Admin: true, Method: "key"}
)

func with(id Identity, f func(*Identity)) Identity {
	f(&id)
	return id
}

func call(id Identity, server, tool string) Request {
	return Request{Identity: id, Server: server, Tool: tool, Name: server + "." + tool}
}

func (r Request) token(secret string) Request { r.Token = secret; return r }
func (r Request) args(a string) Request       { r.Arguments = json.RawMessage(a); return r }
func (r Request) action(a string) Request     { r.Action = a; return r }
func (r Request) destructive() Request        { r.Destructive = true; return r }
func allow(rule string) Decision              { return Decision{Allow: true, Rule: rule} }
func deny(rule string) Decision               { return Decision{Rule: rule} }
func (d Decision) cached() Decision           { d.Cached = true; return d }
func (d Decision) risky() Decision            { d.TokenRequired = true; return d }
func roles(rs ...string) func(*Identity)      { return func(i *Identity) { i.Roles = rs } }
func allowIDs(ids ...string) func(*Identity)  { return func(i *Identity) { i.AllowServers = ids } }
func denyIDs(ids ...string) func(*Identity)   { return func(i *Identity) { i.DenyServers = ids } }
func (w *world) decide(t *testing.T, r Request) Decision {
	t.Helper()
	return must(w.e.Decide(context.Background(), r))(t)
}

func must(d Decision, err error) func(*testing.T) Decision {
	return func(t *testing.T) Decision {
		t.Helper()
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		return d
	}
}

// step is one decision in a case, after an optional change to the world.
type step struct {
	before func(t *testing.T, w *world)
	req    Request
	want   Decision
}

// TestDecide is the policy table (issue C1): each case starts from the
// fixtures and makes one or more decisions. Reason and Revision are checked
// elsewhere.
func TestDecide(t *testing.T) {
	ctx := context.Background()
	fsWrite := call(alice, "fs", "write_file")
	readers := Policy{RoleRestrictions: map[string][]string{
		"reader": {"fs.read_*"}, "ops": {"github.*"}, "all": {"*"}, "none": {},
	}}
	secretsDeny := Policy{ServerAccess: map[string]string{"secrets": "deny", "fs": "allow"}}

	tests := []struct {
		name  string
		pol   Policy
		steps []step
	}{
		// Default deny and grants.
		{name: "default deny", steps: []step{{req: call(alice, "fs", "chmod"), want: deny("default-deny")}}},
		{name: "unknown agent default deny", steps: []step{{req: call(Identity{ID: "key:carol", AgentID: "carol"}, "fs", "read_file"), want: deny("default-deny")}}},
		{name: "grant", steps: []step{{req: call(bob, "fs", "read_file"), want: allow("grant:g-bob")}}},
		{name: "grant is per agent", steps: []step{{req: call(bob, "github", "search_issues"), want: deny("default-deny")}}},
		{name: "exact grant beats pattern grant", steps: []step{{req: call(alice, "fs", "read_file"), want: allow("grant:g-read")}}},
		{name: "pattern grant tool read_*", steps: []step{{req: call(alice, "fs", "read_link"), want: allow("grant:g-readstar")}}},
		{name: "pattern grant (server.*)", steps: []step{{req: call(alice, "github", "search_issues"), want: allow("grant:g-github")}}},
		{name: "pattern star does not leak to other servers", steps: []step{{req: call(alice, "gitlab", "search_issues"), want: deny("default-deny")}}},
		{name: "expired grant", steps: []step{{req: call(alice, "fs", "list_dir"), want: deny("grant-expired:g-old")}}},
		{name: "grant expires with time", steps: []step{
			{req: call(alice, "fs", "stat"), want: allow("grant:g-soon")},
			{before: advance(10 * time.Minute), req: call(alice, "fs", "stat"), want: deny("grant-expired:g-soon")},
		}},
		{name: "action not granted", steps: []step{{req: call(alice, "fs", "read_file").action("admin"), want: deny("default-deny")}}},
		{name: "grant with custom action", steps: []step{
			{req: call(alice, "fs", "tail").action("read"), want: allow("grant:g-tail")},
			{req: call(alice, "fs", "tail"), want: deny("default-deny")},
		}},

		// Role restrictions.
		{name: "role restriction", pol: readers, steps: []step{{req: call(with(alice, roles("reader")), "github", "search_issues"), want: deny("role:reader")}}},
		{name: "role restriction allows match", pol: readers, steps: []step{{req: call(with(alice, roles("reader")), "fs", "read_file"), want: allow("grant:g-read")}}},
		{name: "role without entry restricts nothing", pol: readers, steps: []step{{req: call(with(alice, roles("dev")), "github", "search_issues"), want: allow("grant:g-github")}}},
		{name: "first restricted role named", pol: readers, steps: []step{{req: call(with(alice, roles("dev", "reader", "ops")), "fs", "write_file"), want: deny("role:reader").risky()}}},
		{name: "any restricted role may allow", pol: readers, steps: []step{{req: call(with(alice, roles("reader", "ops")), "github", "search_issues"), want: allow("grant:g-github")}}},
		{name: "role does not grant", pol: readers, steps: []step{{req: call(with(bob, roles("ops")), "github", "search_issues"), want: deny("default-deny")}}},
		{name: "role with empty list allows nothing", pol: readers, steps: []step{{req: call(with(alice, roles("none")), "fs", "read_file"), want: deny("role:none")}}},
		{name: "role star allows all", pol: readers, steps: []step{{req: call(with(alice, roles("all")), "github", "search_issues"), want: allow("grant:g-github")}}},

		// Workspace and server access (seed 003).
		{name: "workspace deny beats grant", steps: []step{{req: call(with(alice, denyIDs("fs")), "fs", "read_file"), want: deny("workspace:deny-id")}}},
		{name: "workspace deny beats allow id", pol: secretsDeny, steps: []step{{req: call(with(alice, func(i *Identity) { i.DenyServers, i.AllowServers = []string{"secrets"}, []string{"secrets"} }), "secrets", "get_secret"), want: deny("workspace:deny-id")}}},
		{name: "workspace deny beats role", pol: readers, steps: []step{{req: call(with(alice, func(i *Identity) { i.Roles, i.DenyServers = []string{"reader"}, []string{"github"} }), "github", "search_issues"), want: deny("workspace:deny-id")}}},
		{name: "default_access deny without allow id", pol: secretsDeny, steps: []step{{req: call(alice, "secrets", "get_secret"), want: deny("server:default-deny")}}},
		{name: "default_access deny with allow id", pol: secretsDeny, steps: []step{{req: call(with(alice, allowIDs("secrets")), "secrets", "get_secret"), want: allow("grant:g-secrets")}}},
		{name: "default_access allow", pol: secretsDeny, steps: []step{{req: call(alice, "fs", "read_file"), want: allow("grant:g-read")}}},
		{name: "allow id does not grant", pol: secretsDeny, steps: []step{{req: call(with(bob, allowIDs("secrets")), "secrets", "get_secret"), want: deny("default-deny")}}},
		{name: "unknown default_access fails closed", pol: Policy{ServerAccess: map[string]string{"fs": "maybe"}}, steps: []step{{req: call(alice, "fs", "read_file"), want: deny("server:default-deny")}}},

		// Admins.
		{name: "admin", steps: []step{{req: call(with(root, func(i *Identity) { i.AgentID = "nobody" }), "anything", "at_all"), want: allow("admin")}}},
		{name: "admin ignores deny ids and default_access", pol: secretsDeny, steps: []step{{req: call(with(root, denyIDs("secrets")), "secrets", "get_secret"), want: allow("admin")}}},
		{name: "admin skips high-risk token", steps: []step{{req: call(root, "fs", "write_file"), want: allow("admin")}}},
		{name: "admin needs token when configured", pol: Policy{AdminNeedsToken: true}, steps: []step{{req: call(root, "fs", "write_file"), want: deny("high-risk:token-missing").risky()}}},
		{name: "admin with token when configured", pol: Policy{AdminNeedsToken: true}, steps: []step{{req: call(root, "fs", "write_file").token("tok-root"), want: allow("admin+token:" + id8("tok-root")).risky()}}},

		// High-risk tools and approval tokens.
		{name: "high-risk without token", steps: []step{{req: fsWrite, want: deny("high-risk:token-missing").risky()}}},
		{name: "high-risk with token", steps: []step{{req: fsWrite.token("tok-write"), want: allow("grant:g-write+token:" + id8("tok-write")).risky()}}},
		{name: "high-risk with expired token", steps: []step{{req: fsWrite.token("tok-expired"), want: deny("high-risk:token-expired").risky()}}},
		{name: "token expires with time", steps: []step{
			{req: fsWrite.token("tok-write"), want: allow("grant:g-write+token:" + id8("tok-write")).risky()},
			{before: advance(15 * time.Minute), req: fsWrite.token("tok-write"), want: deny("high-risk:token-expired").risky()},
		}},
		{name: "high-risk with revoked token", steps: []step{{req: fsWrite.token("tok-revoked"), want: deny("high-risk:token-revoked").risky()}}},
		{name: "high-risk with token of a revoked grant", steps: []step{{req: fsWrite.token("tok-orphan"), want: deny("high-risk:token-revoked").risky()}}},
		{name: "high-risk with token of a live grant", steps: []step{{req: fsWrite.token("tok-granted"), want: allow("grant:g-write+token:" + id8("tok-granted")).risky()}}},
		{name: "high-risk with unknown token", steps: []step{{req: fsWrite.token("sbt_made_up"), want: deny("high-risk:token-invalid").risky()}}},
		{name: "high-risk with token for another tool", steps: []step{{req: fsWrite.token("tok-delete"), want: deny("high-risk:token-other-tool").risky()}}},
		{name: "high-risk with token of another agent", steps: []step{{req: fsWrite.token("tok-bob"), want: deny("high-risk:token-invalid").risky()}}},
		{name: "high-risk with pattern token", steps: []step{{req: call(alice, "fs", "delete_file").token("tok-fs-any"), want: allow("grant:g-delete+token:" + id8("tok-fs-any")).risky()}}},
		{name: "token bound to other arguments", steps: []step{{req: fsWrite.token("tok-bound").args(`{"path":"/etc/passwd","mode":1}`), want: deny("high-risk:token-args").risky()}}},
		{name: "token bound to arguments, none given", steps: []step{{req: fsWrite.token("tok-bound"), want: deny("high-risk:token-args").risky()}}},
		{name: "token bound to same args", steps: []step{{req: fsWrite.token("tok-bound").args("{ \"mode\": 1.0,\n \"path\": \"/tmp/a\" }"), want: allow("grant:g-write+token:" + id8("tok-bound")).risky()}}},
		{name: "single-use token used twice", steps: []step{
			{req: fsWrite.token("tok-single"), want: allow("grant:g-write+token:" + id8("tok-single")).risky()},
			{req: fsWrite.token("tok-single"), want: deny("high-risk:token-used").risky().cached()},
		}},
		{name: "single-use token spent by another replica", steps: []step{
			{before: func(t *testing.T, w *world) {
				if err := w.st.UseToken(ctx, HashSecret("tok-single"), t0); err != nil {
					t.Fatal(err)
				}
			}, req: fsWrite.token("tok-single"), want: deny("high-risk:token-used").risky()},
		}},
		{name: "destructiveHint makes high-risk", steps: []step{{req: call(alice, "fs", "read_file").destructive(), want: deny("high-risk:token-missing").risky()}}},
		{name: "high-risk word in camelCase", steps: []step{
			{req: call(alice, "github", "createIssue"), want: deny("high-risk:token-missing").risky()},
			{req: call(alice, "github", "createIssue").token("tok-github"), want: allow("grant:g-github+token:" + id8("tok-github")).risky().cached()},
		}},
		{name: "high-risk word must be a whole token", steps: []step{{req: call(alice, "github", "rewrite_history"), want: allow("grant:g-github")}}},
		{name: "high-risk glob on namespaced name", pol: Policy{HighRisk: []string{"fs.read_*"}}, steps: []step{
			{req: call(alice, "fs", "read_file"), want: deny("high-risk:token-missing").risky()},
			{req: fsWrite, want: allow("grant:g-write")},
		}},
		{name: "empty HighRisk disables name matching", pol: Policy{HighRisk: []string{}}, steps: []step{
			{req: fsWrite, want: allow("grant:g-write")},
			{req: fsWrite.destructive(), want: deny("high-risk:token-missing").risky().cached()},
		}},
		{name: "policy deny reports token required", steps: []step{{req: call(bob, "fs", "delete_file"), want: deny("default-deny").risky()}}},

		// The decision cache.
		{name: "cache hit", steps: []step{
			{req: call(alice, "fs", "read_file"), want: allow("grant:g-read")},
			{req: call(alice, "fs", "read_file"), want: allow("grant:g-read").cached()},
		}},
		{name: "cache hit on deny", steps: []step{
			{req: call(alice, "fs", "chmod"), want: deny("default-deny")},
			{req: call(alice, "fs", "chmod"), want: deny("default-deny").cached()},
		}},
		{name: "cache invalidated by grant", steps: []step{
			{req: call(alice, "fs", "chmod"), want: deny("default-deny")},
			{before: grant(Grant{AgentID: "alice", Server: "fs", Tool: "chmod"}), req: call(alice, "fs", "chmod"), want: allow("grant:new")},
		}},
		{name: "cache invalidated by revoke", steps: []step{
			{req: call(alice, "fs", "read_file"), want: allow("grant:g-read")},
			{before: revoke("g-read"), req: call(alice, "fs", "read_file"), want: allow("grant:g-readstar")},
			{before: revoke("g-readstar"), req: call(alice, "fs", "read_file"), want: deny("default-deny")},
		}},
		{name: "cache invalidated by SetPolicy", steps: []step{
			{req: call(with(alice, roles("reader")), "github", "search_issues"), want: allow("grant:g-github")},
			{before: func(_ *testing.T, w *world) { w.e.SetPolicy(readers) }, req: call(with(alice, roles("reader")), "github", "search_issues"), want: deny("role:reader")},
		}},
		{name: "cache invalidated by Reload", steps: []step{
			{req: call(alice, "github", "search_issues"), want: allow("grant:g-github")},
			{before: func(t *testing.T, w *world) {
				if err := w.st.DeleteGrant(ctx, "g-github"); err != nil {
					t.Fatal(err)
				}
				if err := w.e.Reload(ctx); err != nil {
					t.Fatal(err)
				}
			}, req: call(alice, "github", "search_issues"), want: deny("default-deny")},
		}},
		{name: "cached allow ends at grant expiry", steps: []step{
			// Cached at t0+8m, the entry would live until t0+13m by TTL
			// but the grant ends at t0+10m.
			{before: advance(8 * time.Minute), req: call(alice, "fs", "stat"), want: allow("grant:g-soon")},
			{before: advance(time.Minute), req: call(alice, "fs", "stat"), want: allow("grant:g-soon").cached()},
			{before: advance(time.Minute), req: call(alice, "fs", "stat"), want: deny("grant-expired:g-soon")},
		}},
		{name: "cache entry expires after TTL", steps: []step{
			{req: call(alice, "fs", "read_file"), want: allow("grant:g-read")},
			{before: advance(DefaultCacheTTL), req: call(alice, "fs", "read_file"), want: allow("grant:g-read")},
		}},
		{name: "cache disabled by negative TTL", pol: Policy{CacheTTL: -1}, steps: []step{
			{req: call(alice, "fs", "read_file"), want: allow("grant:g-read")},
			{req: call(alice, "fs", "read_file"), want: allow("grant:g-read")},
		}},
		{name: "cache key includes roles", pol: readers, steps: []step{
			{req: call(alice, "github", "search_issues"), want: allow("grant:g-github")},
			{req: call(with(alice, roles("reader")), "github", "search_issues"), want: deny("role:reader")},
			{req: call(alice, "github", "search_issues"), want: allow("grant:g-github").cached()},
		}},
		{name: "cache key includes deny ids", steps: []step{
			{req: call(alice, "fs", "read_file"), want: allow("grant:g-read")},
			{req: call(with(alice, denyIDs("fs")), "fs", "read_file"), want: deny("workspace:deny-id")},
		}},
		{name: "cache key includes action", steps: []step{
			{req: call(alice, "fs", "tail").action("read"), want: allow("grant:g-tail")},
			{req: call(alice, "fs", "tail"), want: deny("default-deny")},
		}},
		{name: "token layer is never cached", steps: []step{
			{req: fsWrite.token("tok-write"), want: allow("grant:g-write+token:" + id8("tok-write")).risky()},
			{req: fsWrite, want: deny("high-risk:token-missing").risky().cached()},
			{req: fsWrite.token("tok-expired"), want: deny("high-risk:token-expired").risky().cached()},
		}},
	}
	if len(tests) < 30 {
		t.Fatalf("only %d policy cases", len(tests))
	}
	ignore := cmpopts.IgnoreFields(Decision{}, "Reason", "Revision")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.pol, nil)
			for i, s := range tc.steps {
				if s.before != nil {
					s.before(t, w)
				}
				got := w.decide(t, s.req)
				if got.Reason == "" {
					t.Errorf("step %d: empty reason in %+v", i, got)
				}
				want := s.want
				if want.Rule == "grant:new" {
					want.Rule = "grant:" + w.grantID(t, "alice", "fs", "chmod")
				}
				if diff := cmp.Diff(want, got, ignore); diff != "" {
					t.Errorf("step %d: Decide(%s as %s) mismatch (-want +got):\n%s", i, s.req.Name, s.req.Identity.ID, diff)
				}
			}
		})
	}
}

func advance(d time.Duration) func(*testing.T, *world) {
	return func(_ *testing.T, w *world) { w.clock.Advance(d) }
}

func grant(g Grant) func(*testing.T, *world) {
	return func(t *testing.T, w *world) {
		t.Helper()
		if _, _, err := w.e.Grant(context.Background(), g, GrantOptions{}); err != nil {
			t.Fatalf("Grant: %v", err)
		}
	}
}

func revoke(id string) func(*testing.T, *world) {
	return func(t *testing.T, w *world) {
		t.Helper()
		if err := w.e.Revoke(context.Background(), id); err != nil {
			t.Fatalf("Revoke(%s): %v", id, err)
		}
	}
}

func (w *world) grantID(t *testing.T, agent, server, tool string) string {
	t.Helper()
	for _, g := range w.e.Grants(agent) {
		if g.Server == server && g.Tool == tool {
			return g.ID
		}
	}
	t.Fatalf("no grant of %s on %s.%s", agent, server, tool)
	return ""
}

func TestServerAllowed(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, newFakeStore(), Policy{ServerAccess: map[string]string{"secret": "deny"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []Grant{{AgentID: "a", Server: "fs", Tool: "read"}, {AgentID: "a", Server: "secret", Tool: "*"}} {
		if _, _, err := e.Grant(ctx, g, GrantOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a := Identity{ID: "key:a", AgentID: "a"}
	for _, tc := range []struct {
		id     Identity
		server string
		want   bool
	}{
		{a, "fs", true},
		{a, "other", false},  // no grant on it
		{a, "secret", false}, // default_access deny
		{Identity{ID: "key:a", AgentID: "a", AllowServers: []string{"secret"}}, "secret", true},
		{Identity{ID: "key:a", AgentID: "a", DenyServers: []string{"fs"}}, "fs", false},
		{Identity{ID: "x", AgentID: "x", Admin: true}, "other", true},
	} {
		if got := e.ServerAllowed(tc.id, tc.server); got != tc.want {
			t.Errorf("ServerAllowed(%+v, %q) = %v, want %v", tc.id, tc.server, got, tc.want)
		}
	}
}
