package resilience

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// waitQueued yields until key has want callers waiting. It has no deadline of
// its own: a bug shows up as the test's -timeout.
func waitQueued(t *testing.T, b *Bulkheads, key string, want int) {
	t.Helper()
	for {
		if _, q := b.Stats(key); q == want {
			return
		}
		runtime.Gosched()
	}
}

type stats struct{ Active, Queued int }

func statsOf(b *Bulkheads, key string) stats {
	a, q := b.Stats(key)
	return stats{a, q}
}

func TestBulkheadCapUnderLoad(t *testing.T) {
	const capacity, workers = 5, 100
	b := NewBulkheads(BulkheadSettings{MaxConcurrent: capacity, MaxQueue: workers})
	var active, peak atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			release, err := b.Acquire(t.Context(), "srv")
			if err != nil {
				errs <- err
				return
			}
			defer release()
			n := active.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			runtime.Gosched()
			active.Add(-1)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Acquire() = %v", err)
	}
	if got := peak.Load(); got > capacity || got < 1 {
		t.Errorf("peak concurrent = %d, want in [1, %d]", got, capacity)
	}
	if diff := cmp.Diff(stats{}, statsOf(b, "srv")); diff != "" {
		t.Errorf("Stats after all released (-want +got):\n%s", diff)
	}
}

func TestBulkheadFIFO(t *testing.T) {
	b := NewBulkheads(BulkheadSettings{MaxConcurrent: 1})
	hold, err := b.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	order := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			release, err := b.Acquire(t.Context(), "k")
			if err != nil {
				t.Errorf("waiter %d: Acquire() = %v", i, err)
				return
			}
			order <- i
			release()
		})
		waitQueued(t, b, "k", i+1) // enqueue one at a time so the order is known
	}
	hold()
	wg.Wait()
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	if diff := cmp.Diff([]int{0, 1, 2, 3, 4, 5, 6, 7}, got); diff != "" {
		t.Errorf("grant order (-want +got):\n%s", diff)
	}
}

func TestBulkheadRejects(t *testing.T) {
	tests := []struct {
		name     string
		settings BulkheadSettings
		queued   int // waiters to park before the rejected call
	}{
		{name: "queue full", settings: BulkheadSettings{MaxConcurrent: 1, MaxQueue: 2}, queued: 2},
		{name: "no queue", settings: BulkheadSettings{MaxConcurrent: 1, MaxQueue: -1}, queued: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBulkheads(tt.settings)
			hold, err := b.Acquire(t.Context(), "k")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			t.Cleanup(func() { cancel(); wg.Wait() })
			for i := range tt.queued {
				wg.Go(func() { _, _ = b.Acquire(ctx, "k") })
				waitQueued(t, b, "k", i+1)
			}
			// Must return at once; if it queued, the test would hang.
			if release, err := b.Acquire(t.Context(), "k"); !errors.Is(err, ErrBulkheadFull) || release != nil {
				t.Errorf("Acquire() = (%v, %v), want (nil, ErrBulkheadFull)", release != nil, err)
			}
			if diff := cmp.Diff(stats{1, tt.queued}, statsOf(b, "k")); diff != "" {
				t.Errorf("Stats (-want +got):\n%s", diff)
			}
			// Another key is not affected.
			if release, err := b.Acquire(t.Context(), "other"); err != nil {
				t.Errorf("Acquire(other) = %v", err)
			} else {
				release()
			}
			hold()
		})
	}
}

func TestBulkheadCancelWhileQueued(t *testing.T) {
	b := NewBulkheads(BulkheadSettings{MaxConcurrent: 1, MaxQueue: 1})
	hold, err := b.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, "k")
		done <- err
	}()
	waitQueued(t, b, "k", 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("queued Acquire() = %v, want context.Canceled", err)
	}
	if diff := cmp.Diff(stats{1, 0}, statsOf(b, "k")); diff != "" {
		t.Errorf("Stats after cancel (-want +got):\n%s", diff)
	}
	// The queue slot is free again: a new waiter is accepted and served.
	got := make(chan error, 1)
	go func() {
		release, err := b.Acquire(t.Context(), "k")
		if err == nil {
			release()
		}
		got <- err
	}()
	waitQueued(t, b, "k", 1)
	hold()
	if err := <-got; err != nil {
		t.Errorf("Acquire() after the cancelled waiter = %v", err)
	}
	if diff := cmp.Diff(stats{}, statsOf(b, "k")); diff != "" {
		t.Errorf("final Stats (-want +got):\n%s", diff)
	}
}

// TestBulkheadCancelRacesGrant cancels a waiter just as its slot is handed
// over; whichever wins, no slot may leak.
func TestBulkheadCancelRacesGrant(t *testing.T) {
	b := NewBulkheads(BulkheadSettings{MaxConcurrent: 1})
	for range 200 {
		hold, err := b.Acquire(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if release, err := b.Acquire(ctx, "k"); err == nil {
				release()
			}
		}()
		waitQueued(t, b, "k", 1)
		cancel()
		hold()
		<-done
		if diff := cmp.Diff(stats{}, statsOf(b, "k")); diff != "" {
			t.Fatalf("Stats after race (-want +got):\n%s", diff)
		}
	}
}

func TestBulkheadAcquireDoneContext(t *testing.T) {
	b := NewBulkheads(BulkheadSettings{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Acquire(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire(done ctx) = %v, want context.Canceled", err)
	}
	if diff := cmp.Diff(stats{}, statsOf(b, "k")); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
}

func TestBulkheadReleaseIdempotent(t *testing.T) {
	b := NewBulkheads(BulkheadSettings{MaxConcurrent: 2})
	r1, err := b.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	r1()
	r1()
	if diff := cmp.Diff(stats{1, 0}, statsOf(b, "k")); diff != "" {
		t.Errorf("Stats after double release (-want +got):\n%s", diff)
	}
	r2()
	if diff := cmp.Diff(stats{}, statsOf(b, "k")); diff != "" {
		t.Errorf("Stats after all released (-want +got):\n%s", diff)
	}
}

func TestBulkheadForget(t *testing.T) {
	keys := func(b *Bulkheads) int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.m)
	}
	t.Run("idle key is dropped", func(t *testing.T) {
		b := NewBulkheads(BulkheadSettings{})
		release, err := b.Acquire(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		release()
		b.Forget("k")
		b.Forget("never-seen")
		if got := keys(b); got != 0 {
			t.Errorf("%d keys after Forget, want 0", got)
		}
	})
	t.Run("busy key keeps its cap until idle", func(t *testing.T) {
		b := NewBulkheads(BulkheadSettings{MaxConcurrent: 1, MaxQueue: -1})
		release, err := b.Acquire(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		b.Forget("k")
		if _, err := b.Acquire(t.Context(), "k"); !errors.Is(err, ErrBulkheadFull) {
			t.Errorf("Acquire() on forgotten busy key = %v, want ErrBulkheadFull", err)
		}
		if diff := cmp.Diff(stats{1, 0}, statsOf(b, "k")); diff != "" {
			t.Errorf("Stats (-want +got):\n%s", diff)
		}
		release()
		if got := keys(b); got != 0 {
			t.Errorf("%d keys after the last release, want 0", got)
		}
		release() // a late second release must not touch a new entry
		r2, err := b.Acquire(t.Context(), "k")
		if err != nil {
			t.Fatalf("Acquire() after Forget = %v", err)
		}
		if diff := cmp.Diff(stats{1, 0}, statsOf(b, "k")); diff != "" {
			t.Errorf("Stats of the new entry (-want +got):\n%s", diff)
		}
		r2()
	})
}

func TestBulkheadSetSettings(t *testing.T) {
	b := NewBulkheads(BulkheadSettings{MaxConcurrent: 1})
	hold, err := b.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan func(), 1)
	go func() {
		release, err := b.Acquire(t.Context(), "k")
		if err != nil {
			t.Errorf("Acquire() = %v", err)
			release = func() {}
		}
		granted <- release
	}()
	waitQueued(t, b, "k", 1)
	b.SetSettings(BulkheadSettings{MaxConcurrent: 2})
	r2 := <-granted // admitted by the raised cap while the first still holds
	if diff := cmp.Diff(stats{2, 0}, statsOf(b, "k")); diff != "" {
		t.Errorf("Stats after raising the cap (-want +got):\n%s", diff)
	}
	b.SetSettings(BulkheadSettings{MaxConcurrent: 1, MaxQueue: -1})
	if _, err := b.Acquire(t.Context(), "k"); !errors.Is(err, ErrBulkheadFull) {
		t.Errorf("Acquire() over the lowered cap = %v, want ErrBulkheadFull", err)
	}
	hold()
	if _, err := b.Acquire(t.Context(), "k"); !errors.Is(err, ErrBulkheadFull) {
		t.Errorf("Acquire() at the lowered cap = %v, want ErrBulkheadFull", err)
	}
	r2()
	if diff := cmp.Diff(BulkheadSettings{MaxConcurrent: 1, MaxQueue: 0}, b.Settings()); diff != "" {
		t.Errorf("Settings() (-want +got):\n%s", diff)
	}
}

func BenchmarkBulkheadAcquire(b *testing.B) {
	bh := NewBulkheads(BulkheadSettings{MaxConcurrent: 1 << 20})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			release, err := bh.Acquire(ctx, "srv")
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
	})
}
