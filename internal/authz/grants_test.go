package authz

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"
)

func TestGrantValidation(t *testing.T) {
	ok := Grant{AgentID: "carol", Server: "fs", Tool: "read_file"}
	tests := []struct {
		name string
		g    Grant
		o    GrantOptions
		want string // in the error
	}{
		{"empty agent", Grant{Server: "fs", Tool: "x"}, GrantOptions{}, "agent_id (or workspace) is empty"},
		{"blank agent", Grant{AgentID: " ", Server: "fs", Tool: "x"}, GrantOptions{}, "agent_id (or workspace) is empty"},
		{"agent and workspace", Grant{AgentID: "carol", Workspace: "team", Server: "fs", Tool: "x"}, GrantOptions{}, "agent_id and workspace are both set"},
		{"token to a workspace", Grant{Workspace: "team", Server: "fs", Tool: "x"}, GrantOptions{IssueToken: true}, "a token is issued to an agent, not to a workspace"},
		{"empty server", Grant{AgentID: "carol", Tool: "x"}, GrantOptions{}, "server_id is empty"},
		{"empty tool", Grant{AgentID: "carol", Server: "fs"}, GrantOptions{}, "tool_name is empty"},
		{"expires now", with2(ok, func(g *Grant) { g.ExpiresAt = ptr(t0) }), GrantOptions{}, "expires_at is not in the future"},
		{"expired", with2(ok, func(g *Grant) { g.ExpiresAt = ptr(t0.Add(-time.Second)) }), GrantOptions{}, "expires_at is not in the future"},
		{"empty action", with2(ok, func(g *Grant) { g.Actions = []string{"invoke", ""} }), GrantOptions{}, "an action is empty"},
		{"negative token ttl", ok, GrantOptions{IssueToken: true, TokenTTL: -time.Second}, "token ttl is negative"},
		{"bad bound arguments", ok, GrantOptions{IssueToken: true, BindArguments: json.RawMessage(`{"a":`)}, "bind_arguments"},
		{"every problem at once", Grant{}, GrantOptions{}, "agent_id (or workspace) is empty; server_id is empty; tool_name is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Policy{}, nil)
			rev := w.e.Revision()
			_, _, err := w.e.Grant(context.Background(), tc.g, tc.o)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Grant error = %v, want ErrInvalid containing %q", err, tc.want)
			}
			if got := len(w.e.Grants("carol")); got != 0 {
				t.Errorf("%d grants of carol after a failed Grant", got)
			}
			if got := w.e.Revision(); got != rev {
				t.Errorf("revision moved from %d to %d on a failed Grant", rev, got)
			}
		})
	}
}

func with2(g Grant, f func(*Grant)) Grant {
	g = cloneGrant(g)
	f(&g)
	return g
}

func TestGrantDefaultsAndUpsert(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, Policy{}, nil)
	g, tok, err := w.e.Grant(ctx, Grant{ID: "ignored", AgentID: "carol", Server: "fs", Tool: "read_file", GrantedBy: "admin"}, GrantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tok != nil {
		t.Errorf("token issued without IssueToken: %+v", tok)
	}
	if _, err := uuid.Parse(g.ID); err != nil {
		t.Errorf("grant ID %q is not a UUID: %v", g.ID, err)
	}
	want := Grant{ID: g.ID, AgentID: "carol", Server: "fs", Tool: "read_file", Actions: []string{"invoke"}, GrantedAt: t0, GrantedBy: "admin"}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("Grant mismatch (-want +got):\n%s", diff)
	}

	// Granting again upserts: the ID is kept and the new fields win.
	w.clock.Advance(time.Minute)
	g2, _, err := w.e.Grant(ctx, Grant{AgentID: "carol", Server: "fs", Tool: "read_file", Actions: []string{"invoke", "read"}}, GrantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want = Grant{ID: g.ID, AgentID: "carol", Server: "fs", Tool: "read_file", Actions: []string{"invoke", "read"}, GrantedAt: t0.Add(time.Minute)}
	if diff := cmp.Diff(want, g2); diff != "" {
		t.Errorf("re-Grant mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Grant{want}, w.e.Grants("carol")); diff != "" {
		t.Errorf("Grants(carol) mismatch (-want +got):\n%s", diff)
	}
}

func TestGrants(t *testing.T) {
	w := newWorld(t, Policy{}, nil)
	ids := func(gs []Grant) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.ID)
		}
		return out
	}
	tests := []struct {
		agent string
		want  []string
	}{
		{"bob", []string{"g-bob"}},
		{"nobody", nil},
		{"alice", []string{"g-delete", "g-old", "g-readstar", "g-read", "g-soon", "g-tail", "g-write", "g-github", "g-secrets"}},
		{"", []string{"g-delete", "g-old", "g-readstar", "g-read", "g-soon", "g-tail", "g-write", "g-github", "g-secrets", "g-bob", "g-root"}},
	}
	for _, tc := range tests {
		t.Run("agent="+tc.agent, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ids(w.e.Grants(tc.agent))); diff != "" {
				t.Errorf("Grants(%q) mismatch (-want +got):\n%s", tc.agent, diff)
			}
		})
	}
	// The result is a copy.
	gs := w.e.Grants("alice")
	gs[0].Tool = "*"
	if got := w.e.Grants("alice")[0].Tool; got != "delete_file" {
		t.Errorf("editing Grants' result changed the engine: tool = %q", got)
	}
}

func TestGrantIssuesToken(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		g       Grant
		o       GrantOptions
		expires time.Time
		digest  string
	}{
		{"policy ttl", Grant{AgentID: "carol", Server: "fs", Tool: "write_file"}, GrantOptions{IssueToken: true}, t0.Add(DefaultTokenTTL), ""},
		{"own ttl", Grant{AgentID: "carol", Server: "fs", Tool: "write_file"}, GrantOptions{IssueToken: true, TokenTTL: time.Hour}, t0.Add(time.Hour), ""},
		{"capped by grant", Grant{AgentID: "carol", Server: "fs", Tool: "write_file", ExpiresAt: ptr(t0.Add(time.Minute))}, GrantOptions{IssueToken: true}, t0.Add(time.Minute), ""},
		{"bound and single-use", Grant{AgentID: "carol", Server: "fs", Tool: "write_file"}, GrantOptions{IssueToken: true, SingleUse: true, BindArguments: json.RawMessage(`{"b":2,"a":1}`)}, t0.Add(DefaultTokenTTL), mustDigest(`{"a":1,"b":2}`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Policy{}, nil)
			g, it, err := w.e.Grant(ctx, tc.g, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if it == nil || !strings.HasPrefix(it.Secret, secretPrefix) || len(it.Secret) < 20 {
				t.Fatalf("issued token = %+v, want a secret", it)
			}
			want := Token{
				ID: HashSecret(it.Secret), AgentID: "carol", Server: "fs", Tool: "write_file",
				ArgsDigest: tc.digest, SingleUse: tc.o.SingleUse, GrantID: g.ID, CreatedAt: t0, ExpiresAt: tc.expires,
			}
			if diff := cmp.Diff(want, it.Token); diff != "" {
				t.Errorf("token mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, w.st.token(want.ID)); diff != "" {
				t.Errorf("stored token mismatch (-want +got):\n%s", diff)
			}
			if strings.Contains(w.st.token(want.ID).ID, it.Secret) {
				t.Error("the store holds the secret")
			}
		})
	}
}

func TestRevokeRevokesItsTokens(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, Policy{}, nil)
	// A broad grant stays, so only the token layer can refuse afterwards.
	if _, _, err := w.e.Grant(ctx, Grant{AgentID: "carol", Server: "fs", Tool: "*"}, GrantOptions{}); err != nil {
		t.Fatal(err)
	}
	g, withGrant, err := w.e.Grant(ctx, Grant{AgentID: "carol", Server: "fs", Tool: "write_file"}, GrantOptions{IssueToken: true})
	if err != nil {
		t.Fatal(err)
	}
	extra, err := w.e.IssueToken(ctx, TokenRequest{AgentID: "carol", Server: "fs", Tool: "write_file", GrantID: g.ID})
	if err != nil {
		t.Fatal(err)
	}
	loose, err := w.e.IssueToken(ctx, TokenRequest{AgentID: "carol", Server: "fs", Tool: "write_file"})
	if err != nil {
		t.Fatal(err)
	}
	carol := Identity{ID: "key:carol", AgentID: "carol"}
	req := call(carol, "fs", "write_file")
	if d := w.decide(t, req.token(withGrant.Secret)); d.Rule != "grant:"+g.ID+"+token:"+withGrant.Token.ID[:8] {
		t.Fatalf("before Revoke: %+v", d)
	}

	if err := w.e.Revoke(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	for _, it := range []IssuedToken{*withGrant, extra} {
		if !w.st.token(it.Token.ID).Revoked {
			t.Errorf("token %s of the revoked grant is not revoked in the store", it.Token.ID[:8])
		}
		if d := w.decide(t, req.token(it.Secret)); d.Allow || d.Rule != "high-risk:token-revoked" {
			t.Errorf("token of the revoked grant: %+v, want high-risk:token-revoked", d)
		}
	}
	if w.st.token(loose.Token.ID).Revoked {
		t.Error("a token not issued with the grant was revoked")
	}
	if d := w.decide(t, req.token(loose.Secret)); !d.Allow {
		t.Errorf("unrelated token: %+v, want allow", d)
	}
	if err := w.e.Revoke(ctx, g.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Revoke error = %v, want ErrNotFound", err)
	}
	if err := w.e.Revoke(ctx, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("Revoke(\"\") error = %v, want ErrInvalid", err)
	}
}

func TestRevokeGrantDeletedElsewhere(t *testing.T) {
	// Another replica deleted the row; this engine still holds the grant.
	ctx := context.Background()
	w := newWorld(t, Policy{}, nil)
	if err := w.st.DeleteGrant(ctx, "g-bob"); err != nil {
		t.Fatal(err)
	}
	if err := w.e.Revoke(ctx, "g-bob"); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if d := w.decide(t, call(bob, "fs", "read_file")); d.Allow {
		t.Errorf("after Revoke: %+v", d)
	}
}

func TestIssueTokenValidation(t *testing.T) {
	ok := TokenRequest{AgentID: "alice", Server: "fs", Tool: "write_file"}
	tests := []struct {
		name string
		r    TokenRequest
		want string
	}{
		{"empty agent", TokenRequest{Server: "fs", Tool: "x"}, "agent_id is empty"},
		{"empty server", TokenRequest{AgentID: "alice", Tool: "x"}, "server_id is empty"},
		{"empty tool", TokenRequest{AgentID: "alice", Server: "fs"}, "tool_name is empty"},
		{"negative ttl", with3(ok, func(r *TokenRequest) { r.TTL = -1 }), "ttl is negative"},
		{"bad arguments", with3(ok, func(r *TokenRequest) { r.BindArguments = json.RawMessage(`{} {}`) }), "bind_arguments"},
		{"unknown grant", with3(ok, func(r *TokenRequest) { r.GrantID = "g-nope" }), `grant "g-nope" does not exist`},
		{"grant of another agent", with3(ok, func(r *TokenRequest) { r.GrantID = "g-bob" }), "belongs to another agent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Policy{}, nil)
			n := len(w.st.tokens)
			_, err := w.e.IssueToken(context.Background(), tc.r)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("IssueToken error = %v, want ErrInvalid containing %q", err, tc.want)
			}
			if len(w.st.tokens) != n {
				t.Error("a token was stored")
			}
		})
	}
}

func with3(r TokenRequest, f func(*TokenRequest)) TokenRequest { f(&r); return r }

func TestRevokeToken(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		id   func(it IssuedToken) string
		err  error
	}{
		{"by id", func(it IssuedToken) string { return it.Token.ID }, nil},
		{"by secret", func(it IssuedToken) string { return it.Secret }, nil},
		{"unknown", func(IssuedToken) string { return "sbt_unknown" }, ErrNotFound},
		{"empty", func(IssuedToken) string { return "" }, ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Policy{}, nil)
			it, err := w.e.IssueToken(ctx, TokenRequest{AgentID: "alice", Server: "fs", Tool: "write_file"})
			if err != nil {
				t.Fatal(err)
			}
			err = w.e.RevokeToken(ctx, tc.id(it))
			if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Fatalf("RevokeToken error = %v, want %v", err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "sbt_") {
				t.Errorf("error %q shows the secret", err)
			}
			d := w.decide(t, call(alice, "fs", "write_file").token(it.Secret))
			if revoked := d.Rule == "high-risk:token-revoked"; revoked != (tc.err == nil) {
				t.Errorf("after RevokeToken: %+v", d)
			}
		})
	}
}

func TestRevision(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, Policy{}, nil)
	req := call(alice, "fs", "read_file")
	steps := []struct {
		name string
		do   func() error
		want uint64
	}{
		{"new", func() error { return nil }, 1},
		{"grant", func() error {
			_, _, err := w.e.Grant(ctx, Grant{AgentID: "carol", Server: "fs", Tool: "x"}, GrantOptions{})
			return err
		}, 2},
		{"issue token does not move it", func() error {
			_, err := w.e.IssueToken(ctx, TokenRequest{AgentID: "alice", Server: "fs", Tool: "x"})
			return err
		}, 2},
		{"set policy", func() error { w.e.SetPolicy(Policy{}); return nil }, 3},
		{"revoke", func() error { return w.e.Revoke(ctx, "g-bob") }, 4},
		{"failed revoke does not move it", func() error {
			if err := w.e.Revoke(ctx, "g-bob"); !errors.Is(err, ErrNotFound) {
				return err
			}
			return nil
		}, 4},
		{"reload", func() error { return w.e.Reload(ctx) }, 5},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := w.e.Revision(); got != s.want {
			t.Errorf("%s: Revision() = %d, want %d", s.name, got, s.want)
		}
		for range 2 { // computed, then cached
			if d := w.decide(t, req); d.Revision != s.want {
				t.Errorf("%s: decision revision = %d (cached %v), want %d", s.name, d.Revision, d.Cached, s.want)
			}
		}
	}
}

func TestStoreFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("New", func(t *testing.T) {
		st := newFakeStore()
		st.errList = errBroken
		if _, err := New(ctx, st, Policy{}, nil); !errors.Is(err, errBroken) {
			t.Errorf("New error = %v, want %v", err, errBroken)
		}
		if _, err := New(ctx, nil, Policy{}, nil); err == nil {
			t.Error("New(nil store) succeeded")
		}
	})
	t.Run("Reload keeps old grants", func(t *testing.T) {
		w := newWorld(t, Policy{}, nil)
		w.st.errList = errBroken
		if err := w.e.Reload(ctx); !errors.Is(err, errBroken) {
			t.Errorf("Reload error = %v", err)
		}
		if d := w.decide(t, call(bob, "fs", "read_file")); !d.Allow {
			t.Errorf("after failed Reload: %+v", d)
		}
	})
	for _, tc := range []struct {
		name   string
		break_ func(*fakeStore)
		token  string
	}{
		{"GetToken", func(s *fakeStore) { s.errGet = errBroken }, "tok-write"},
		{"UseToken", func(s *fakeStore) { s.errUse = errBroken }, "tok-single"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Policy{}, nil)
			tc.break_(w.st)
			d, err := w.e.Decide(ctx, call(alice, "fs", "write_file").token(tc.token))
			if !errors.Is(err, errBroken) {
				t.Errorf("Decide error = %v, want %v", err, errBroken)
			}
			if d.Allow || d.Rule != "high-risk:token-error" {
				t.Errorf("Decide = %+v, want a deny", d)
			}
		})
	}
}

func TestVisible(t *testing.T) {
	pol := Policy{
		ServerAccess:     map[string]string{"secrets": "deny"},
		RoleRestrictions: map[string][]string{"reader": {"fs.read_*"}},
	}
	tests := []struct {
		name                 string
		id                   Identity
		server, tool, nsName string
		destructive          bool
		want                 bool
	}{
		{"granted", alice, "fs", "read_file", "fs.read_file", false, true},
		{"not granted", alice, "fs", "chmod", "fs.chmod", false, false},
		{"high-risk stays visible", alice, "fs", "write_file", "fs.write_file", false, true},
		{"destructive stays visible", alice, "fs", "delete_file", "fs.delete_file", true, true},
		{"default-deny server", alice, "secrets", "get_secret", "secrets.get_secret", false, false},
		{"allow id", with(alice, allowIDs("secrets")), "secrets", "get_secret", "secrets.get_secret", false, true},
		{"role uses the given name", with(alice, roles("reader")), "fs", "read_file", "fs__read_file", false, false},
		{"empty name is namespaced with a dot", with(alice, roles("reader")), "fs", "read_file", "", false, true},
		{"admin", root, "secrets", "anything", "secrets.anything", true, true},
		{"expired grant", alice, "fs", "list_dir", "fs.list_dir", false, false},
	}
	w := newWorld(t, pol, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // computed, then cached
				if got := w.e.Visible(tc.id, tc.server, tc.tool, tc.nsName, tc.destructive); got != tc.want {
					t.Errorf("Visible = %v, want %v", got, tc.want)
				}
			}
		})
	}
	// Visible and Decide share the cache.
	w.e.Visible(bob, "fs", "read_file", "fs.read_file", false)
	if d := w.decide(t, call(bob, "fs", "read_file")); !d.Cached {
		t.Errorf("Decide after Visible: %+v, want cached", d)
	}
}

func TestPolicyDefaults(t *testing.T) {
	w := newWorld(t, Policy{}, nil)
	want := Policy{RoleRestrictions: map[string][]string{}, HighRisk: DefaultHighRisk(), TokenTTL: DefaultTokenTTL, CacheTTL: DefaultCacheTTL}
	if diff := cmp.Diff(want, w.e.Policy(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Policy() mismatch (-want +got):\n%s", diff)
	}
	set := Policy{
		ServerAccess: map[string]string{"fs": "deny"}, RoleRestrictions: map[string][]string{"r": {"fs.*"}},
		HighRisk: []string{}, AdminNeedsToken: true, TokenTTL: time.Minute, CacheTTL: -1,
	}
	w.e.SetPolicy(set)
	got := w.e.Policy()
	if diff := cmp.Diff(set, got); diff != "" {
		t.Errorf("Policy() after SetPolicy mismatch (-want +got):\n%s", diff)
	}
	// Neither the caller's Policy nor the returned one aliases the engine's.
	set.ServerAccess["fs"] = "allow"
	got.RoleRestrictions["r"][0] = "*"
	again := w.e.Policy()
	if again.ServerAccess["fs"] != "deny" || again.RoleRestrictions["r"][0] != "fs.*" {
		t.Errorf("engine policy aliased: %+v", again)
	}
}

func TestCacheBounded(t *testing.T) {
	w := newWorld(t, Policy{}, &Options{CacheSize: 3})
	for _, tool := range []string{"a", "b", "c", "d", "e", "f"} {
		w.decide(t, call(alice, "fs", tool))
		if n := w.e.cache.len(); n > 3 {
			t.Fatalf("cache holds %d entries, bound is 3", n)
		}
	}
	w = newWorld(t, Policy{}, &Options{CacheSize: -1})
	w.decide(t, call(alice, "fs", "read_file"))
	if d := w.decide(t, call(alice, "fs", "read_file")); d.Cached {
		t.Errorf("negative CacheSize still caches: %+v", d)
	}
}
