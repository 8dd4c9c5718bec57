package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// The suite's cases for API keys, grants, tokens and circuit breakers.

// oddTime has nanoseconds and a zone other than UTC, to catch lossy or
// zone-dependent storage of instants.
var oddTime = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("UTC+5:30", 5*3600+1800))

func ptr[T any](v T) *T { return &v }

func testAPIKeys(t *testing.T, db *store.DB) {
	ctx := t.Context()
	full := store.APIKey{
		ID: "k1", Hash: "hash-1", Prefix: "sb_abc", AgentID: "agent-1", Roles: []string{"reader", "ops"},
		Workspace: "team-a", Admin: true, AllowServers: []string{"github", "fs"}, DenyServers: []string{"shell"},
		WorkspacePolicy: true, CreatedAt: oddTime, CreatedBy: "admin", ExpiresAt: ptr(oddTime.Add(24 * time.Hour)),
	}
	// Created later but listed first: ListAPIKeys orders by CreatedAt.
	older := store.APIKey{ID: "k0", Hash: "hash-0", AgentID: "agent-0", CreatedAt: oddTime.Add(-time.Hour)}
	sameTime := store.APIKey{ID: "k2", Hash: "hash-2", AgentID: "agent-2", CreatedAt: oddTime}
	for _, k := range []store.APIKey{full, older, sameTime} {
		if err := db.CreateAPIKey(ctx, k); err != nil {
			t.Fatalf("CreateAPIKey(%q): %v", k.ID, err)
		}
	}
	// Nil lists read back empty, not nil.
	wantOlder := older
	wantOlder.Roles, wantOlder.AllowServers, wantOlder.DenyServers = []string{}, []string{}, []string{}
	wantSame := sameTime
	wantSame.Roles, wantSame.AllowServers, wantSame.DenyServers = []string{}, []string{}, []string{}

	got, err := db.APIKeyByHash(ctx, "hash-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(full, got); diff != "" {
		t.Errorf("APIKeyByHash mismatch (-want +got):\n%s", diff)
	}
	list, err := db.ListAPIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]store.APIKey{wantOlder, full, wantSame}, list); diff != "" {
		t.Errorf("ListAPIKeys mismatch (-want +got):\n%s", diff)
	}

	t.Run("conflicts", func(t *testing.T) {
		for _, k := range []store.APIKey{
			{ID: "k1", Hash: "hash-new", AgentID: "x"},
			{ID: "k-new", Hash: "hash-1", AgentID: "x"},
		} {
			if err := db.CreateAPIKey(ctx, k); !errors.Is(err, store.ErrConflict) {
				t.Errorf("CreateAPIKey(%q, %q) = %v, want ErrConflict", k.ID, k.Hash, err)
			}
		}
	})
	t.Run("invalid", func(t *testing.T) {
		for _, k := range []store.APIKey{{Hash: "h"}, {ID: "i"}} {
			if err := db.CreateAPIKey(ctx, k); err == nil {
				t.Errorf("CreateAPIKey(%+v) succeeded, want an error", k)
			}
		}
	})
	t.Run("unknown hash", func(t *testing.T) {
		_, err := db.APIKeyByHash(ctx, "secret-looking-hash")
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("APIKeyByHash = %v, want ErrNotFound", err)
		}
		if strings.Contains(err.Error(), "secret-looking-hash") {
			t.Errorf("error %q repeats the hash", err)
		}
	})

	t.Run("revoke", func(t *testing.T) {
		revokedAt := oddTime.Add(time.Minute)
		got, err := db.RevokeAPIKey(ctx, "k1", revokedAt)
		if err != nil {
			t.Fatal(err)
		}
		want := full
		want.RevokedAt = &revokedAt
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("RevokeAPIKey mismatch (-want +got):\n%s", diff)
		}
		// Again, later: the first revocation time stays.
		if got, err = db.RevokeAPIKey(ctx, "k1", revokedAt.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("second RevokeAPIKey mismatch (-want +got):\n%s", diff)
		}
		// Revoked keys are still found by hash.
		if got, err = db.APIKeyByHash(ctx, "hash-1"); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("APIKeyByHash of a revoked key mismatch (-want +got):\n%s", diff)
		}
		// A zero time means now.
		got, err = db.RevokeAPIKey(ctx, "k0", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if got.RevokedAt == nil || got.RevokedAt.IsZero() {
			t.Errorf("RevokeAPIKey with a zero time left RevokedAt %v", got.RevokedAt)
		}
		if _, err := db.RevokeAPIKey(ctx, "missing", oddTime); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RevokeAPIKey(missing) = %v, want ErrNotFound", err)
		}
	})
}

func testGrants(t *testing.T, db *store.DB) {
	ctx := t.Context()
	put := func(g store.Grant) store.Grant {
		t.Helper()
		got, err := db.PutGrant(ctx, g)
		if err != nil {
			t.Fatalf("PutGrant(%+v): %v", g, err)
		}
		return got
	}
	first := put(store.Grant{AgentID: "bob", Server: "github", Tool: "*", Actions: []string{"invoke"},
		GrantedAt: oddTime, GrantedBy: "admin", ExpiresAt: ptr(oddTime.Add(time.Hour))})
	if first.ID == "" {
		t.Fatal("PutGrant did not assign an ID")
	}
	want := store.Grant{ID: first.ID, AgentID: "bob", Server: "github", Tool: "*", Actions: []string{"invoke"},
		GrantedAt: oddTime, GrantedBy: "admin", ExpiresAt: ptr(oddTime.Add(time.Hour))}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("PutGrant mismatch (-want +got):\n%s", diff)
	}

	// Granting again keeps the ID (even when another is offered) and
	// replaces the rest, an expiry included.
	again := put(store.Grant{ID: "ignored", AgentID: "bob", Server: "github", Tool: "*",
		Actions: []string{"invoke", "approve"}, GrantedAt: oddTime.Add(time.Minute), GrantedBy: "root"})
	want = store.Grant{ID: first.ID, AgentID: "bob", Server: "github", Tool: "*", Actions: []string{"invoke", "approve"},
		GrantedAt: oddTime.Add(time.Minute), GrantedBy: "root"}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("PutGrant upsert mismatch (-want +got):\n%s", diff)
	}

	alice := put(store.Grant{ID: "g-alice", AgentID: "alice", Server: "fs", Tool: "read"})
	if alice.ID != "g-alice" || alice.GrantedAt.IsZero() || alice.Actions == nil || len(alice.Actions) != 0 {
		t.Errorf("PutGrant with a given ID, no time, no actions = %+v; want the ID, a time and empty actions", alice)
	}
	bobFS := put(store.Grant{AgentID: "bob", Server: "fs", Tool: "write", Actions: []string{}})

	tests := []struct {
		agent string
		want  []store.Grant
	}{
		{"", []store.Grant{alice, bobFS, again}},
		{"bob", []store.Grant{bobFS, again}},
		{"nobody", nil},
	}
	for _, tt := range tests {
		t.Run("list "+tt.agent, func(t *testing.T) {
			got, err := db.ListGrants(ctx, tt.agent)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ListGrants(%q) mismatch (-want +got):\n%s", tt.agent, diff)
			}
		})
	}

	t.Run("id of another grant", func(t *testing.T) {
		_, err := db.PutGrant(ctx, store.Grant{ID: "g-alice", AgentID: "carol", Server: "x", Tool: "y"})
		if !errors.Is(err, store.ErrConflict) {
			t.Errorf("PutGrant = %v, want ErrConflict", err)
		}
	})
	t.Run("incomplete", func(t *testing.T) {
		for _, g := range []store.Grant{{Server: "s", Tool: "t"}, {AgentID: "a", Tool: "t"}, {AgentID: "a", Server: "s"},
			{AgentID: "a", Workspace: "w", Server: "s", Tool: "t"}} {
			if _, err := db.PutGrant(ctx, g); err == nil {
				t.Errorf("PutGrant(%+v) succeeded, want an error", g)
			}
		}
	})
	t.Run("delete", func(t *testing.T) {
		got, err := db.DeleteGrant(ctx, first.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(again, got); diff != "" {
			t.Errorf("DeleteGrant returned (-want +got):\n%s", diff)
		}
		if _, err := db.DeleteGrant(ctx, first.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("second DeleteGrant = %v, want ErrNotFound", err)
		}
		list, err := db.ListGrants(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]store.Grant{alice, bobFS}, list); diff != "" {
			t.Errorf("grants after delete (-want +got):\n%s", diff)
		}
	})
}

// testWorkspaceGrants: a grant to a workspace is its own row, beside a
// grant of the same tool to an agent named like the workspace, and is
// upserted on (workspace, server, tool).
func testWorkspaceGrants(t *testing.T, db *store.DB) {
	ctx := t.Context()
	ws, err := db.PutGrant(ctx, store.Grant{Workspace: "team-a", Server: "notes", Tool: "*", Actions: []string{"invoke"}, GrantedAt: oddTime})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := db.PutGrant(ctx, store.Grant{AgentID: "team-a", Server: "notes", Tool: "*", Actions: []string{"invoke"}, GrantedAt: oddTime})
	if err != nil {
		t.Fatal(err)
	}
	if ws.ID == agent.ID {
		t.Fatalf("the workspace's grant and the agent's share ID %s", ws.ID)
	}
	again, err := db.PutGrant(ctx, store.Grant{Workspace: "team-a", Server: "notes", Tool: "*", Actions: []string{"read"}, GrantedAt: oddTime})
	if err != nil {
		t.Fatal(err)
	}
	want := store.Grant{ID: ws.ID, Workspace: "team-a", Server: "notes", Tool: "*", Actions: []string{"read"}, GrantedAt: oddTime}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("re-granting the workspace (-want +got):\n%s", diff)
	}
	all, err := db.ListGrants(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	// Ordered by agent first: the workspace's grant (agent "") leads.
	if diff := cmp.Diff([]store.Grant{again, agent}, all); diff != "" {
		t.Errorf("ListGrants (-want +got):\n%s", diff)
	}
	mine, err := db.ListGrants(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]store.Grant{agent}, mine); diff != "" {
		t.Errorf("ListGrants(agent team-a) (-want +got):\n%s", diff)
	}
}

func newToken(id, grantID string, expires time.Time) store.Token {
	return store.Token{ID: id, AgentID: "bob", Server: "github", Tool: "delete_repo", ArgsDigest: "d-" + id,
		SingleUse: true, GrantID: grantID, CreatedAt: oddTime, ExpiresAt: expires}
}

func mustToken(t *testing.T, db *store.DB, tok store.Token) store.Token {
	t.Helper()
	if err := db.PutToken(t.Context(), tok); err != nil {
		t.Fatalf("PutToken(%q): %v", tok.ID, err)
	}
	return tok
}

func testTokens(t *testing.T, db *store.DB) {
	ctx := t.Context()
	tok := mustToken(t, db, newToken("t1", "g1", oddTime.Add(time.Hour)))
	got, err := db.GetToken(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tok, got); diff != "" {
		t.Errorf("GetToken mismatch (-want +got):\n%s", diff)
	}
	bare := store.Token{ID: "t2", AgentID: "bob", ExpiresAt: oddTime}
	mustToken(t, db, bare)
	if got, err = db.GetToken(ctx, "t2"); err != nil {
		t.Fatal(err)
	}
	if got.CreatedAt.IsZero() {
		t.Errorf("PutToken with a zero CreatedAt stored %v", got.CreatedAt)
	}

	t.Run("errors", func(t *testing.T) {
		if err := db.PutToken(ctx, newToken("t1", "", oddTime)); !errors.Is(err, store.ErrConflict) {
			t.Errorf("duplicate PutToken = %v, want ErrConflict", err)
		}
		if err := db.PutToken(ctx, store.Token{ID: "t3", AgentID: "bob"}); err == nil {
			t.Error("PutToken without expiry succeeded, want an error")
		}
		if err := db.PutToken(ctx, store.Token{AgentID: "bob", ExpiresAt: oddTime}); err == nil {
			t.Error("PutToken without id succeeded, want an error")
		}
		if _, err := db.GetToken(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetToken(missing) = %v, want ErrNotFound", err)
		}
		if err := db.UseToken(ctx, "missing", oddTime); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("UseToken(missing) = %v, want ErrNotFound", err)
		}
		if err := db.RevokeToken(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RevokeToken(missing) = %v, want ErrNotFound", err)
		}
	})

	t.Run("use", func(t *testing.T) {
		usedAt := oddTime.Add(time.Minute)
		if err := db.UseToken(ctx, "t1", usedAt); err != nil {
			t.Fatal(err)
		}
		if err := db.UseToken(ctx, "t1", usedAt.Add(time.Minute)); !errors.Is(err, store.ErrTokenUsed) {
			t.Errorf("second UseToken = %v, want ErrTokenUsed", err)
		}
		got, err := db.GetToken(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		want := tok
		want.UsedAt = &usedAt
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("used token mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("revoke", func(t *testing.T) {
		for range 2 { // revoking twice is fine
			if err := db.RevokeToken(ctx, "t2"); err != nil {
				t.Fatal(err)
			}
		}
		got, err := db.GetToken(ctx, "t2")
		if err != nil {
			t.Fatal(err)
		}
		if !got.Revoked {
			t.Errorf("RevokeToken left %+v unrevoked", got)
		}
	})
}

func testUseTokenRace(t *testing.T, db *store.DB) {
	ctx := t.Context()
	mustToken(t, db, newToken("race", "", oddTime.Add(time.Hour)))
	const callers = 20
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { errs[i] = db.UseToken(ctx, "race", time.Time{}) })
	}
	wg.Wait()
	wins := 0
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, store.ErrTokenUsed):
			t.Errorf("caller %d: UseToken = %v, want nil or ErrTokenUsed", i, err)
		}
	}
	if wins != 1 {
		t.Errorf("%d of %d concurrent UseToken calls succeeded, want exactly 1", wins, callers)
	}
}

func testRevokeGrantTokens(t *testing.T, db *store.DB) {
	ctx := t.Context()
	exp := oddTime.Add(time.Hour)
	mustToken(t, db, newToken("a1", "g1", exp))
	mustToken(t, db, newToken("a2", "g1", exp))
	mustToken(t, db, newToken("b1", "g2", exp))
	mustToken(t, db, newToken("solo", "", exp))
	if err := db.RevokeToken(ctx, "a2"); err != nil {
		t.Fatal(err)
	}

	counts := []struct {
		grant string
		want  int64
	}{{"g1", 1}, {"g1", 0}, {"unknown", 0}}
	for _, c := range counts {
		n, err := db.RevokeGrantTokens(ctx, c.grant)
		if err != nil {
			t.Fatal(err)
		}
		if n != c.want {
			t.Errorf("RevokeGrantTokens(%q) = %d, want %d", c.grant, n, c.want)
		}
	}
	if _, err := db.RevokeGrantTokens(ctx, ""); err == nil {
		t.Error(`RevokeGrantTokens("") succeeded, want an error`)
	}
	for id, want := range map[string]bool{"a1": true, "a2": true, "b1": false, "solo": false} {
		got, err := db.GetToken(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Revoked != want {
			t.Errorf("token %q Revoked = %v, want %v", id, got.Revoked, want)
		}
	}
}

func testPurge(t *testing.T, db *store.DB) {
	ctx := t.Context()
	base := oddTime
	for i, d := range []time.Duration{-time.Hour, -time.Nanosecond, 0, time.Hour} {
		mustToken(t, db, newToken(fmt.Sprint("t", i), "", base.Add(d)))
	}
	if err := db.UseToken(ctx, "t0", base); err != nil { // used ones go too
		t.Fatal(err)
	}
	var rows []store.Invocation
	for i, d := range []time.Duration{-time.Hour, -time.Nanosecond, 0, time.Hour} {
		rows = append(rows, store.Invocation{ID: fmt.Sprint("i", i), Kind: "invocation", InvokedAt: base.Add(d)})
	}
	if err := db.InsertInvocations(ctx, rows); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name string
		fn   func(time.Time) (int64, error)
	}{
		{"tokens", func(at time.Time) (int64, error) { return db.PurgeTokens(ctx, at) }},
		{"invocations", func(at time.Time) (int64, error) { return db.PurgeInvocations(ctx, at) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				at   time.Time
				want int64
			}{{time.Time{}, 0}, {base, 2}, {base, 0}, {base.Add(time.Hour + 1), 2}} {
				n, err := tt.fn(c.at)
				if err != nil {
					t.Fatal(err)
				}
				if n != c.want {
					t.Errorf("purge before %v = %d, want %d", c.at, n, c.want)
				}
			}
		})
	}
	if _, err := db.GetToken(ctx, "t3"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetToken after purging all = %v, want ErrNotFound", err)
	}
	if n, err := db.CountInvocations(ctx, store.InvocationFilter{}); err != nil || n != 0 {
		t.Errorf("CountInvocations after purging all = %d, %v; want 0", n, err)
	}
}

func testBreakers(t *testing.T, db *store.DB) {
	ctx := t.Context()
	list := func() []store.BreakerState {
		t.Helper()
		got, err := db.ListBreakers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("ListBreakers on an empty store = %+v", got)
	}
	open := store.BreakerState{Key: "github:create_issue", State: "OPEN", Failures: 5, Successes: 1,
		HalfOpenRequests: 0, LastFailureAt: oddTime, OpenedAt: oddTime.Add(time.Second),
		Generation: 1<<63 + 7, UpdatedAt: oddTime.Add(2 * time.Second)}
	closed := store.BreakerState{Key: "fs", State: "CLOSED"}
	for _, b := range []store.BreakerState{open, closed} {
		if err := db.SaveBreaker(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	got := list()
	if len(got) != 2 {
		t.Fatalf("ListBreakers = %+v, want 2", got)
	}
	if got[0].UpdatedAt.IsZero() {
		t.Errorf("SaveBreaker with a zero UpdatedAt stored %v", got[0].UpdatedAt)
	}
	closed.UpdatedAt = got[0].UpdatedAt
	if diff := cmp.Diff([]store.BreakerState{closed, open}, got); diff != "" {
		t.Errorf("ListBreakers mismatch (-want +got):\n%s", diff)
	}

	// Upsert: the half-open probe replaces the whole state, zero times too.
	half := store.BreakerState{Key: open.Key, State: "HALF_OPEN", HalfOpenRequests: 1, Generation: 2,
		UpdatedAt: oddTime.Add(time.Minute)}
	if err := db.SaveBreaker(ctx, half); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteBreaker(ctx, "fs"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteBreaker(ctx, "never-saved"); err != nil {
		t.Errorf("DeleteBreaker of a missing key = %v, want nil", err)
	}
	if diff := cmp.Diff([]store.BreakerState{half}, list()); diff != "" {
		t.Errorf("breakers after upsert and delete (-want +got):\n%s", diff)
	}
	if err := db.SaveBreaker(ctx, store.BreakerState{State: "OPEN"}); err == nil {
		t.Error("SaveBreaker without a key succeeded, want an error")
	}
}

// testTimeRoundTrip checks every kind of row keeps an instant to the
// nanosecond and reads it back in UTC.
func testTimeRoundTrip(t *testing.T, db *store.DB) {
	ctx := t.Context()
	if err := db.CreateAPIKey(ctx, store.APIKey{ID: "k", Hash: "h", CreatedAt: oddTime, ExpiresAt: &oddTime}); err != nil {
		t.Fatal(err)
	}
	g, err := db.PutGrant(ctx, store.Grant{AgentID: "a", Server: "s", Tool: "t", GrantedAt: oddTime, ExpiresAt: &oddTime})
	if err != nil {
		t.Fatal(err)
	}
	mustToken(t, db, store.Token{ID: "tok", CreatedAt: oddTime, ExpiresAt: oddTime, UsedAt: &oddTime})
	if err := db.SaveBreaker(ctx, store.BreakerState{Key: "b", LastFailureAt: oddTime, OpenedAt: oddTime, UpdatedAt: oddTime}); err != nil {
		t.Fatal(err)
	}
	if err := db.InsertInvocations(ctx, []store.Invocation{{ID: "i", Kind: "invocation", InvokedAt: oddTime}}); err != nil {
		t.Fatal(err)
	}

	k, err := db.APIKeyByHash(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := db.GetToken(ctx, "tok")
	if err != nil {
		t.Fatal(err)
	}
	breakers, err := db.ListBreakers(ctx)
	if err != nil || len(breakers) != 1 {
		t.Fatalf("ListBreakers = %v, %v", breakers, err)
	}
	inv, _, err := db.QueryInvocations(ctx, store.InvocationFilter{})
	if err != nil || len(inv) != 1 {
		t.Fatalf("QueryInvocations = %v, %v", inv, err)
	}
	b := breakers[0]
	for name, got := range map[string]time.Time{
		"key created": k.CreatedAt, "key expires": *k.ExpiresAt,
		"grant granted": g.GrantedAt, "grant expires": *g.ExpiresAt,
		"token created": tok.CreatedAt, "token expires": tok.ExpiresAt, "token used": *tok.UsedAt,
		"breaker failure": b.LastFailureAt, "breaker opened": b.OpenedAt, "breaker updated": b.UpdatedAt,
		"invoked": inv[0].InvokedAt,
	} {
		if !got.Equal(oddTime) || got.Location() != time.UTC {
			t.Errorf("%s reads back as %v, want %v in UTC", name, got, oddTime.UTC())
		}
	}
}

// testEmptyLists checks nil and empty lists both read back as empty,
// non-nil slices, so JSON renders them as [] and never null.
func testEmptyLists(t *testing.T, db *store.DB) {
	ctx := t.Context()
	for i, list := range [][]string{nil, {}} {
		id := fmt.Sprint("k", i)
		if err := db.CreateAPIKey(ctx, store.APIKey{ID: id, Hash: id, Roles: list, AllowServers: list, DenyServers: list}); err != nil {
			t.Fatal(err)
		}
		k, err := db.APIKeyByHash(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		g, err := db.PutGrant(ctx, store.Grant{AgentID: id, Server: "s", Tool: "t", Actions: list})
		if err != nil {
			t.Fatal(err)
		}
		grants, err := db.ListGrants(ctx, id)
		if err != nil || len(grants) != 1 {
			t.Fatalf("ListGrants(%q) = %v, %v", id, grants, err)
		}
		for name, got := range map[string][]string{
			"roles": k.Roles, "allow": k.AllowServers, "deny": k.DenyServers,
			"put actions": g.Actions, "listed actions": grants[0].Actions,
		} {
			if got == nil || len(got) != 0 {
				t.Errorf("%#v stored as %s reads back as %#v, want []string{}", list, name, got)
			}
		}
	}
}

// sortedIDs returns the ids of rows in the store's order: newest first, ties
// by id descending.
func sortedIDs(rows []store.Invocation) []string {
	s := slices.Clone(rows)
	slices.SortFunc(s, func(a, b store.Invocation) int {
		if c := b.InvokedAt.Compare(a.InvokedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	ids := make([]string, len(s))
	for i, r := range s {
		ids[i] = r.ID
	}
	return ids
}

func invocationIDs(rows []store.Invocation) []string {
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}
