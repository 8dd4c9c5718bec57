package authz

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentDecideGrant runs decisions against grants, revokes, policy
// changes and reloads; -race checks the locking, and the end state must be
// decided from the final grants, not from a stale cache entry.
func TestConcurrentDecideGrant(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, Policy{}, &Options{CacheSize: 16})
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for i := range workers {
		wg.Go(func() {
			id := with(alice, roles(fmt.Sprintf("r%d", i%3)))
			for j := range rounds {
				tool := fmt.Sprintf("t%d", j%10)
				if _, err := w.e.Decide(ctx, call(id, "fs", tool)); err != nil {
					errs <- err
					return
				}
				w.e.Visible(id, "fs", tool, "", false)
				if _, err := w.e.Decide(ctx, call(id, "fs", "write_file").token("tok-write")); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		for j := range rounds {
			g, _, err := w.e.Grant(ctx, Grant{AgentID: "alice", Server: "fs", Tool: fmt.Sprintf("t%d", j%10)}, GrantOptions{})
			if err != nil {
				errs <- err
				return
			}
			switch j % 4 {
			case 0:
				if err := w.e.Revoke(ctx, g.ID); err != nil {
					errs <- err
					return
				}
			case 1:
				w.e.SetPolicy(Policy{})
			case 2:
				if err := w.e.Reload(ctx); err != nil {
					errs <- err
					return
				}
			}
			_ = w.e.Grants("")
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Rounds j%4==0 revoked their grant; t0..t9 were last granted at
	// j=190..199, of which j=192 and j=196 (t2, t6) were revoked.
	for k := range 10 {
		tool := fmt.Sprintf("t%d", k)
		want := k != 2 && k != 6
		for range 2 {
			if d := w.decide(t, call(alice, "fs", tool)); d.Allow != want {
				t.Errorf("after the storm, %s: %+v, want allow=%v", tool, d, want)
			}
		}
	}
}
