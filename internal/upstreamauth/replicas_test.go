package upstreamauth_test

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
	"github.com/switchboard-mcp/switchboard/internal/upstreamauth"
)

// TestOneRefreshAcrossReplicas runs two replicas, each with its own
// handle on one database and its own Authorizer for the same server, and
// has both need a token at once inside the refresh margin, several
// expiries in a row: the authorization server sees one refresh per
// expiry, and both replicas end up with the new token.
func TestOneRefreshAcrossReplicas(t *testing.T) {
	backends := map[string]func(t *testing.T) string{
		"sqlite":     func(t *testing.T) string { return filepath.Join(t.TempDir(), "switchboard.db") },
		"postgresql": func(t *testing.T) string { return storetest.StartPostgres(t) },
	}
	for name, dsn := range backends {
		t.Run(name, func(t *testing.T) {
			testOneRefreshAcrossReplicas(t, dsn(t))
		})
	}
}

func testOneRefreshAcrossReplicas(t *testing.T, dsn string) {
	as := newFakeAS(t)
	as.expiresIn = 20
	as.refreshDelay = 100 * time.Millisecond // the other replica asks meanwhile
	rs := newResourceServer(t, as)
	cb := newCallbackServer(t)
	clk := newClock()
	start := clk.Now()
	kr := testKeyring(t)
	replica := func(holder string) *upstreamauth.Authorizer {
		db, err := store.Open(t.Context(), dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := db.Close(); err != nil {
				t.Error(err)
			}
		})
		return newAuthorizer(t, rs.URL(), upstreamauth.Spec{RefreshMargin: 5 * time.Second}, &upstreamauth.Options{
			Store: db, Keyring: kr, RedirectURL: cb.redirect, Now: clk.Now, Holder: holder})
	}
	replicas := []*upstreamauth.Authorizer{replica("r1"), replica("r2")}
	if err := replicas[0].Reauthorize(t.Context(), cb.fetcher()); err != nil {
		t.Fatal(err)
	}
	prev, err := replicas[1].Token()
	if err != nil {
		t.Fatal(err)
	}
	// Each expiry: 16 s after the previous token was issued, 4 s before it
	// expires, both replicas want a token, 4 callers each.
	for round := 1; round <= 3; round++ {
		clk.set(start, time.Duration(round)*16*time.Second)
		var wg sync.WaitGroup
		for i := range 8 {
			a := replicas[i%2]
			wg.Go(func() {
				tok, err := a.Token()
				if err != nil {
					t.Errorf("round %d: %v", round, err)
					return
				}
				// The replica that does not refresh uses the current
				// token meanwhile: it has not expired.
				if !clk.Now().Before(tok.Expiry) {
					t.Errorf("round %d: got a token that expired at %v", round, tok.Expiry)
				}
			})
		}
		wg.Wait()
		if _, refreshes, _ := as.counts(); refreshes != round {
			t.Fatalf("round %d: the authorization server saw %d refreshes in all, want %d", round, refreshes, round)
		}
		// Both replicas now hand out the new token, without refreshing.
		var toks [2]string
		for i, a := range replicas {
			tok, err := a.Token()
			if err != nil {
				t.Fatal(err)
			}
			toks[i] = tok.AccessToken
		}
		if toks[0] != toks[1] || toks[0] == prev.AccessToken {
			t.Fatalf("round %d: replicas hand out %q and %q (previous %q)", round, toks[0], toks[1], prev.AccessToken)
		}
		if _, refreshes, _ := as.counts(); refreshes != round {
			t.Fatalf("round %d: %d refreshes after reading the new token", round, refreshes)
		}
		prev, _ = replicas[0].Token()
	}
}
