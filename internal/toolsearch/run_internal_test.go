package toolsearch

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// TestRunStopReleasesWaiters checks a search waiting for the index to
// catch up with the catalog returns once the worker stops, rather than
// waiting for a version that will never be indexed.
func TestRunStopReleasesWaiters(t *testing.T) {
	cat := catalog.New(nil)
	svc, err := New(cat, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	if _, err := cat.Set(catalog.Entry{Server: "s", Available: true,
		Tools: []*mcp.Tool{{Name: "t", InputSchema: map[string]any{"type": "object"}}}}); err != nil {
		t.Fatal(err)
	}

	// A version the catalog has not reached: only the stop can end the
	// wait before its (very long) bound.
	released := make(chan struct{})
	go func() {
		svc.waitIndexed(cat.Snapshot().Version()+1000, time.Hour)
		close(released)
	}()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case <-released:
	case <-time.After(30 * time.Second):
		t.Fatal("a waiter was not released within 30 s of the worker stopping")
	}
}

// TestIndexHoldsCatalog checks the index holds the catalog's tools and no
// more: a removed server's documents go with it.
func TestIndexHoldsCatalog(t *testing.T) {
	cat := catalog.New(nil)
	svc, err := New(cat, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	tools := func(names ...string) []*mcp.Tool {
		var out []*mcp.Tool
		for _, n := range names {
			out = append(out, &mcp.Tool{Name: n, InputSchema: map[string]any{"type": "object"}})
		}
		return out
	}
	steps := []struct {
		name string
		do   func() error
		want int
	}{
		{"two servers", func() error {
			if _, err := cat.Set(catalog.Entry{Server: "a", Tools: tools("x", "y", "z")}); err != nil {
				return err
			}
			_, err := cat.Set(catalog.Entry{Server: "b", Tools: tools("x", "y")})
			return err
		}, 5},
		{"a server loses a tool", func() error {
			_, err := cat.Set(catalog.Entry{Server: "a", Tools: tools("x", "y")})
			return err
		}, 4},
		{"a server is removed", func() error { cat.Remove("b"); return nil }, 2},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for svc.index.Len() != st.want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the index holds %d documents, want %d", st.name, svc.index.Len(), st.want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
