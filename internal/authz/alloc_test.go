//go:build !race

package authz

import (
	"context"
	"testing"
)

// TestDecideCachedAllocs keeps the hot path honest: a cache hit on a tool
// that needs no token allocates nothing. (Skipped under -race, whose
// instrumentation may allocate.)
func TestDecideCachedAllocs(t *testing.T) {
	w := newWorld(t, Policy{RoleRestrictions: map[string][]string{"dev": {"fs.*"}}}, nil)
	ctx := context.Background()
	req := call(with(alice, roles("dev")), "fs", "read_file")
	if d := w.decide(t, req); !d.Allow {
		t.Fatalf("warm-up: %+v", d)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if d, _ := w.e.Decide(ctx, req); !d.Cached {
			t.Fatal("not a cache hit")
		}
	})
	if allocs != 0 {
		t.Errorf("cached Decide allocates %v times per call, want 0", allocs)
	}
}
