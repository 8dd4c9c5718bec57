package authz

import (
	"context"
	"fmt"
	"testing"
)

func BenchmarkDecideCached(b *testing.B) {
	w := newWorld(b, Policy{RoleRestrictions: map[string][]string{"dev": {"fs.*", "github.*"}}}, nil)
	ctx := context.Background()
	req := call(with(alice, roles("dev")), "fs", "read_file")
	if _, err := w.e.Decide(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if d, _ := w.e.Decide(ctx, req); !d.Cached {
			b.Fatal("not a cache hit")
		}
	}
}

func BenchmarkDecideCachedParallel(b *testing.B) {
	w := newWorld(b, Policy{}, nil)
	ctx := context.Background()
	req := call(alice, "fs", "read_file")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := w.e.Decide(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkDecideUncached measures layers 1–4 over 1000 grants of one agent.
func BenchmarkDecideUncached(b *testing.B) {
	w := newWorld(b, Policy{CacheTTL: -1}, nil)
	ctx := context.Background()
	for i := range 1000 {
		if _, _, err := w.e.Grant(ctx, Grant{AgentID: "alice", Server: fmt.Sprintf("s%d", i), Tool: "*"}, GrantOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	req := call(alice, "s999", "read_file")
	b.ReportAllocs()
	for b.Loop() {
		if d, _ := w.e.Decide(ctx, req); !d.Allow {
			b.Fatal(d)
		}
	}
}
