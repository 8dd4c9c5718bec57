package resilience

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestIdempotencySingleflight(t *testing.T) {
	c := NewIdempotency[string](time.Minute, 10, newFakeClock())
	var calls atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{})
	const n = 10
	type result struct {
		v      string
		shared bool
		err    error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			v, shared, err := c.Do(t.Context(), "k", func(context.Context) (string, error) {
				if calls.Add(1) == 1 {
					close(started)
				}
				<-release
				return "value", nil
			})
			results[i] = result{v, shared, err}
		})
	}
	<-started
	close(release)
	wg.Wait()
	if got := calls.Load(); got != 1 {
		t.Errorf("fn ran %d times, want 1", got)
	}
	leaders := 0
	for i, r := range results {
		if r.err != nil || r.v != "value" {
			t.Errorf("caller %d got (%q, %v), want (\"value\", nil)", i, r.v, r.err)
		}
		if !r.shared {
			leaders++
		}
	}
	if leaders != 1 {
		t.Errorf("%d callers had shared=false, want exactly 1", leaders)
	}
}

// idemCallStep is one scripted Do in a sequential scenario.
type idemCallStep struct {
	advance    time.Duration
	key        string
	fail       bool
	wantV      int // value returned
	wantShared bool
	wantErr    bool
}

func TestIdempotencySequential(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name    string
		ttl     time.Duration
		max     int
		steps   []idemCallStep
		wantLen int
	}{
		{
			name: "later calls within TTL get the stored result",
			ttl:  time.Minute, max: 10,
			steps: []idemCallStep{
				{key: "a", wantV: 1},
				{key: "a", advance: time.Minute - time.Nanosecond, wantV: 1, wantShared: true},
				{key: "a", advance: time.Nanosecond, wantV: 2},
				{key: "a", wantV: 2, wantShared: true},
			},
			wantLen: 1,
		},
		{
			name: "max size evicts the oldest",
			ttl:  time.Minute, max: 2,
			steps: []idemCallStep{
				{key: "a", wantV: 1},
				{key: "b", wantV: 2},
				{key: "c", wantV: 3},
				{key: "b", wantV: 2, wantShared: true},
				{key: "c", wantV: 3, wantShared: true},
				{key: "a", wantV: 4},
				{key: "b", wantV: 5},
			},
			wantLen: 2,
		},
		{
			name: "errors are not cached",
			ttl:  time.Minute, max: 10,
			steps: []idemCallStep{
				{key: "a", fail: true, wantErr: true},
				{key: "a", wantV: 2},
				{key: "a", wantV: 2, wantShared: true},
			},
			wantLen: 1,
		},
		{
			name: "empty key always runs",
			ttl:  time.Minute, max: 10,
			steps: []idemCallStep{
				{key: "", wantV: 1},
				{key: "", wantV: 2},
			},
			wantLen: 0,
		},
		{
			name: "zero ttl and max mean defaults",
			steps: []idemCallStep{
				{key: "a", wantV: 1},
				{key: "a", advance: DefaultIdempotencyTTL - time.Nanosecond, wantV: 1, wantShared: true},
				{key: "a", advance: time.Nanosecond, wantV: 2},
			},
			wantLen: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			c := NewIdempotency[int](tt.ttl, tt.max, clock)
			calls := 0
			for i, st := range tt.steps {
				clock.Advance(st.advance)
				v, shared, err := c.Do(t.Context(), st.key, func(context.Context) (int, error) {
					calls++
					if st.fail {
						return 0, errBoom
					}
					return calls, nil
				})
				if (err != nil) != st.wantErr {
					t.Fatalf("step %d: Do() err = %v, want error %v", i, err, st.wantErr)
				}
				if st.wantErr && !errors.Is(err, errBoom) {
					t.Fatalf("step %d: Do() err = %v, want errBoom", i, err)
				}
				if diff := cmp.Diff([]any{st.wantV, st.wantShared}, []any{v, shared}); !st.wantErr && diff != "" {
					t.Fatalf("step %d: Do() (v, shared) mismatch (-want +got):\n%s", i, diff)
				}
			}
			if got := c.Len(); got != tt.wantLen {
				t.Errorf("Len() = %d, want %d", got, tt.wantLen)
			}
		})
	}
}

func TestIdempotencyWaiterContextEnds(t *testing.T) {
	c := NewIdempotency[int](time.Minute, 10, newFakeClock())
	release := make(chan struct{})
	started := make(chan struct{})
	leaderDone := make(chan error, 1)
	go func() {
		_, _, err := c.Do(t.Context(), "k", func(context.Context) (int, error) {
			close(started)
			<-release
			return 1, nil
		})
		leaderDone <- err
	}()
	<-started
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := c.Do(ctx, "k", func(context.Context) (int, error) { return 2, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("waiter Do() = %v, want context.Canceled", err)
	}
	close(release)
	if err := <-leaderDone; err != nil {
		t.Errorf("leader Do() = %v", err)
	}
}

func TestIdempotencyLeaderCancelledWaiterRetries(t *testing.T) {
	c := NewIdempotency[int](time.Minute, 10, newFakeClock())
	leaderCtx, cancelLeader := context.WithCancel(t.Context())
	defer cancelLeader()
	started := make(chan struct{})
	leaderDone := make(chan error, 1)
	go func() {
		_, _, err := c.Do(leaderCtx, "k", func(ctx context.Context) (int, error) {
			close(started)
			<-ctx.Done()
			return 0, ctx.Err()
		})
		leaderDone <- err
	}()
	<-started
	waiterDone := make(chan struct{})
	var v int
	var err error
	go func() {
		defer close(waiterDone)
		v, _, err = c.Do(t.Context(), "k", func(context.Context) (int, error) { return 7, nil })
	}()
	// Whether the waiter joins the leader or arrives after it, it must end up
	// running its own fn, because the leader's failure was its own cancellation.
	cancelLeader()
	if lerr := <-leaderDone; !errors.Is(lerr, context.Canceled) {
		t.Errorf("leader Do() = %v, want context.Canceled", lerr)
	}
	<-waiterDone
	if err != nil || v != 7 {
		t.Errorf("waiter Do() = (%d, %v), want (7, nil)", v, err)
	}
}

func TestIdempotencyForget(t *testing.T) {
	c := NewIdempotency[int](time.Minute, 10, newFakeClock())
	calls := 0
	fn := func(context.Context) (int, error) { calls++; return calls, nil }
	_, _, _ = c.Do(t.Context(), "k", fn)
	c.Forget("k")
	if v, shared, _ := c.Do(t.Context(), "k", fn); v != 2 || shared {
		t.Errorf("Do() after Forget = (%d, %v), want (2, false)", v, shared)
	}
}

func TestIdempotencyDoFingerprintSequential(t *testing.T) {
	type fpStep struct {
		advance      time.Duration
		key, fp      string
		wantV        int
		wantShared   bool
		wantConflict bool
	}
	tests := []struct {
		name  string
		steps []fpStep
	}{
		{
			name: "same fingerprint shares the stored result",
			steps: []fpStep{
				{key: "a", fp: "x", wantV: 1},
				{key: "a", fp: "x", wantV: 1, wantShared: true},
			},
		},
		{
			name: "different fingerprint conflicts without running",
			steps: []fpStep{
				{key: "a", fp: "x", wantV: 1},
				{key: "a", fp: "y", wantConflict: true},
				{key: "a", fp: "x", wantV: 1, wantShared: true},
				{key: "b", fp: "y", wantV: 2},
			},
		},
		{
			name: "empty fingerprint matches any",
			steps: []fpStep{
				{key: "a", fp: "x", wantV: 1},
				{key: "a", fp: "", wantV: 1, wantShared: true},
				{key: "b", fp: "", wantV: 2},
				{key: "b", fp: "y", wantV: 2, wantShared: true},
			},
		},
		{
			name: "an expired key can be reused for another request",
			steps: []fpStep{
				{key: "a", fp: "x", wantV: 1},
				{key: "a", fp: "y", advance: time.Minute, wantV: 2},
				{key: "a", fp: "x", wantConflict: true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			c := NewIdempotency[int](time.Minute, 10, clock)
			calls := 0
			for i, st := range tt.steps {
				clock.Advance(st.advance)
				v, shared, err := c.DoFingerprint(t.Context(), st.key, st.fp, func(context.Context) (int, error) {
					calls++
					return calls, nil
				})
				if got := errors.Is(err, ErrIdempotencyConflict); got != st.wantConflict {
					t.Fatalf("step %d: DoFingerprint() err = %v, want conflict %v", i, err, st.wantConflict)
				}
				if st.wantConflict {
					continue
				}
				if err != nil {
					t.Fatalf("step %d: DoFingerprint() err = %v", i, err)
				}
				if diff := cmp.Diff([]any{st.wantV, st.wantShared}, []any{v, shared}); diff != "" {
					t.Fatalf("step %d: (v, shared) mismatch (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestIdempotencyDoFingerprintInFlight(t *testing.T) {
	c := NewIdempotency[string](time.Minute, 10, newFakeClock())
	var calls atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{})
	const n = 10
	type result struct {
		V      string
		Shared bool
		Err    error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			v, shared, err := c.DoFingerprint(t.Context(), "k", "fp", func(context.Context) (string, error) {
				if calls.Add(1) == 1 {
					close(started)
				}
				<-release
				return "value", nil
			})
			results[i] = result{v, shared, err}
		})
	}
	<-started
	// While the call runs, a different request under the key conflicts at once.
	_, _, err := c.DoFingerprint(t.Context(), "k", "other", func(context.Context) (string, error) {
		calls.Add(1)
		return "wrong", nil
	})
	if !errors.Is(err, ErrIdempotencyConflict) {
		t.Errorf("in-flight DoFingerprint(other) = %v, want ErrIdempotencyConflict", err)
	}
	close(release)
	wg.Wait()
	if got := calls.Load(); got != 1 {
		t.Errorf("fn ran %d times, want 1", got)
	}
	leaders := 0
	for i, r := range results {
		if r.Err != nil || r.V != "value" {
			t.Errorf("caller %d got (%q, %v), want (\"value\", nil)", i, r.V, r.Err)
		}
		if !r.Shared {
			leaders++
		}
	}
	if leaders != 1 {
		t.Errorf("%d callers had shared=false, want exactly 1", leaders)
	}
}

func TestIdempotencyPeek(t *testing.T) {
	c := NewIdempotency[string](time.Minute, 10, newFakeClock())
	if _, ok, err := c.Peek(t.Context(), "k", "fp1"); ok || err != nil {
		t.Fatalf("empty cache: ok=%v err=%v", ok, err)
	}
	if _, _, err := c.DoFingerprint(t.Context(), "k", "fp1", func(context.Context) (string, error) { return "v", nil }); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := c.Peek(t.Context(), "k", "fp1"); !ok || err != nil || v != "v" {
		t.Errorf("stored: %q ok=%v err=%v", v, ok, err)
	}
	if _, ok, err := c.Peek(t.Context(), "k", "fp2"); ok || !errors.Is(err, ErrIdempotencyConflict) {
		t.Errorf("other fingerprint: ok=%v err=%v, want a conflict", ok, err)
	}
}
