package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

func testUpstreamTokens(t *testing.T, db *store.DB) {
	ctx := t.Context()
	if _, err := db.UpstreamToken(ctx, "gh", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UpstreamToken of nothing: %v, want ErrNotFound", err)
	}
	if _, err := db.PutUpstreamToken(ctx, store.UpstreamToken{Server: "gh"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("PutUpstreamToken without a grant: %v, want ErrInvalid", err)
	}
	exp := time.Date(2026, 5, 1, 12, 0, 0, 123, time.UTC)
	first, err := db.PutUpstreamToken(ctx, store.UpstreamToken{Server: "gh", Sealed: "enc:v1:a", ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	if first.Version != 1 || first.Sealed != "enc:v1:a" || !first.ExpiresAt.Equal(exp) || first.UpdatedAt.IsZero() || first.Problem != "" {
		t.Fatalf("first put = %+v", first)
	}
	// A grant for a caller of the same server is a row of its own.
	if _, err := db.PutUpstreamToken(ctx, store.UpstreamToken{Server: "gh", Subject: "alice", Sealed: "enc:v1:alice"}); err != nil {
		t.Fatal(err)
	}
	got, err := db.UpstreamToken(ctx, "gh", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Sealed != "enc:v1:a" || got.Version != 1 {
		t.Fatalf("read back %+v", got)
	}
	alice, err := db.UpstreamToken(ctx, "gh", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !alice.ExpiresAt.IsZero() {
		t.Errorf("unknown expiry reads back as %v, want zero", alice.ExpiresAt)
	}

	// The callers' grants are listed, newest first, never the server's own.
	if _, err := db.PutUpstreamToken(ctx, store.UpstreamToken{Server: "jira", Subject: "alice", Sealed: "enc:v1:j", UpdatedAt: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		server, subject string
		want            []string
	}{
		{"", "", []string{"jira/alice", "gh/alice"}},
		{"gh", "", []string{"gh/alice"}},
		{"", "alice", []string{"jira/alice", "gh/alice"}},
		{"gh", "bob", nil},
	} {
		rows, err := db.UserUpstreamTokens(ctx, c.server, c.subject)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.Server+"/"+r.Subject)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("UserUpstreamTokens(%q, %q) = %v, want %v", c.server, c.subject, got, c.want)
		}
	}
	if err := db.DeleteUpstreamToken(ctx, "jira", "alice"); err != nil {
		t.Fatal(err)
	}

	// Compare-and-swap: the version read wins once, a stale one conflicts.
	next, err := db.ReplaceUpstreamToken(ctx, store.UpstreamToken{Server: "gh", Sealed: "enc:v1:b", Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	if next.Version != 2 || next.Sealed != "enc:v1:b" || !next.ExpiresAt.IsZero() {
		t.Fatalf("replace = %+v", next)
	}
	if _, err := db.ReplaceUpstreamToken(ctx, store.UpstreamToken{Server: "gh", Sealed: "enc:v1:c", Version: 1}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale replace: %v, want ErrConflict", err)
	}
	if _, err := db.ReplaceUpstreamToken(ctx, store.UpstreamToken{Server: "nope", Sealed: "enc:v1:c", Version: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("replace of nothing: %v, want ErrNotFound", err)
	}
	// A refused refresh is recorded as a problem with the grant.
	bad, err := db.ReplaceUpstreamToken(ctx, store.UpstreamToken{Server: "gh", Sealed: "enc:v1:b", Version: 2, Problem: "invalid_grant"})
	if err != nil {
		t.Fatal(err)
	}
	if bad.Problem != "invalid_grant" || bad.Version != 3 {
		t.Fatalf("problem = %+v", bad)
	}
	// A new authorization replaces whatever was there.
	fresh, err := db.PutUpstreamToken(ctx, store.UpstreamToken{Server: "gh", Sealed: "enc:v1:d"})
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Version != 4 || fresh.Problem != "" {
		t.Fatalf("put over = %+v", fresh)
	}

	if err := db.DeleteUpstreamToken(ctx, "gh", ""); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteUpstreamToken(ctx, "gh", ""); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
	if _, err := db.UpstreamToken(ctx, "gh", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v, want ErrNotFound", err)
	}
	if _, err := db.UpstreamToken(ctx, "gh", "alice"); err != nil {
		t.Fatalf("the caller's grant went with the server's: %v", err)
	}
}

func testUpstreamTokenLease(t *testing.T, db *store.DB) {
	ctx := t.Context()
	tok, err := db.PutUpstreamToken(ctx, store.UpstreamToken{Server: "gh", Sealed: "enc:v1:a"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, version int64, now time.Time) bool {
		t.Helper()
		ok, err := db.LeaseUpstreamToken(ctx, "gh", "", version, holder, now, now.Add(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !lease("r1", tok.Version, t0) {
		t.Fatal("r1 did not get a free lease")
	}
	if lease("r2", tok.Version, t0.Add(time.Second)) {
		t.Fatal("r2 got a lease r1 holds")
	}
	if !lease("r1", tok.Version, t0.Add(time.Second)) {
		t.Fatal("r1 could not extend its own lease")
	}
	got, err := db.UpstreamToken(ctx, "gh", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.LeaseOwner != "r1" || !got.LeaseUntil.Equal(t0.Add(11*time.Second)) {
		t.Fatalf("lease = %q until %v", got.LeaseOwner, got.LeaseUntil)
	}
	// An expired lease gives way.
	if !lease("r2", tok.Version, t0.Add(time.Minute)) {
		t.Fatal("r2 did not get an expired lease")
	}
	// r1 gives up a lease it no longer holds: r2's stays.
	if err := db.ReleaseUpstreamToken(ctx, "gh", "", "r1"); err != nil {
		t.Fatal(err)
	}
	if lease("r1", tok.Version, t0.Add(time.Minute)) {
		t.Fatal("r1 took r2's live lease after releasing its own")
	}
	if err := db.ReleaseUpstreamToken(ctx, "gh", "", "r2"); err != nil {
		t.Fatal(err)
	}
	if !lease("r1", tok.Version, t0.Add(time.Minute)) {
		t.Fatal("r1 did not get a released lease")
	}
	// The refresh replaces the grant and frees the lease; a lease on the old
	// version is refused.
	next, err := db.ReplaceUpstreamToken(ctx, store.UpstreamToken{Server: "gh", Sealed: "enc:v1:b", Version: tok.Version})
	if err != nil {
		t.Fatal(err)
	}
	if next.LeaseOwner != "" || !next.LeaseUntil.IsZero() {
		t.Fatalf("lease kept after replace: %q until %v", next.LeaseOwner, next.LeaseUntil)
	}
	if lease("r2", tok.Version, t0.Add(time.Minute)) {
		t.Fatal("leased a version that was replaced")
	}
	if !lease("r2", next.Version, t0.Add(time.Minute)) {
		t.Fatal("r2 did not get the new version's lease")
	}
	if _, err := db.LeaseUpstreamToken(ctx, "gh", "", next.Version, "", t0, t0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("lease without holder: %v, want ErrInvalid", err)
	}
	if ok, err := db.LeaseUpstreamToken(ctx, "nope", "", 1, "r1", t0, t0.Add(time.Second)); err != nil || ok {
		t.Fatalf("lease of nothing = %v, %v; want false, nil", ok, err)
	}
}

// testUpstreamTokenLeaseRace has many holders race for one version's
// lease, as replicas do when a token nears its expiry: exactly one wins.
func testUpstreamTokenLeaseRace(t *testing.T, db *store.DB) {
	ctx := t.Context()
	tok, err := db.PutUpstreamToken(ctx, store.UpstreamToken{Server: "gh", Sealed: "enc:v1:a"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	const n = 8
	var wg sync.WaitGroup
	won := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			holder := fmt.Sprintf("r%d", i)
			ok, err := db.LeaseUpstreamToken(ctx, "gh", "", tok.Version, holder, now, now.Add(time.Minute))
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				won <- holder
			}
		})
	}
	wg.Wait()
	close(won)
	var winners []string
	for w := range won {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Fatalf("%d holders got the lease (%v), want 1", len(winners), winners)
	}
}
