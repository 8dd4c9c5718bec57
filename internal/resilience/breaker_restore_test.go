package resilience

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBreakersRestore(t *testing.T) {
	settings := BreakerSettings{FailureThreshold: 3, Cooldown: 10 * time.Second, HalfOpenMax: 2}
	tests := []struct {
		name  string
		snap  func(now time.Time) BreakerSnapshot
		steps []step // as in TestBreakerTransitions
	}{
		{
			name: "open keeps failing fast until the cooldown since OpenedAt",
			snap: func(now time.Time) BreakerSnapshot {
				return BreakerSnapshot{State: Open, Failures: 3, OpenedAt: now.Add(-4 * time.Second), Generation: 7}
			},
			steps: []step{
				{wantErr: ErrOpen, wantState: Open},
				{advance: 6*time.Second - time.Nanosecond, wantErr: ErrOpen, wantState: Open},
				{advance: time.Nanosecond, admit: 2, wantErr: ErrTooManyRequests, wantState: HalfOpen},
			},
		},
		{
			name: "open without OpenedAt waits a full cooldown",
			snap: func(time.Time) BreakerSnapshot { return BreakerSnapshot{State: Open} },
			steps: []step{
				{advance: 10*time.Second - time.Nanosecond, wantErr: ErrOpen, wantState: Open},
				{advance: time.Nanosecond, wantState: HalfOpen},
			},
		},
		{
			name: "open from a clock ahead of ours waits a full cooldown",
			snap: func(now time.Time) BreakerSnapshot {
				return BreakerSnapshot{State: Open, OpenedAt: now.Add(time.Hour)}
			},
			steps: []step{
				{advance: 10*time.Second - time.Nanosecond, wantErr: ErrOpen, wantState: Open},
				{advance: time.Nanosecond, wantState: HalfOpen},
			},
		},
		{
			name: "half-open admits a fresh round of trials at once",
			snap: func(now time.Time) BreakerSnapshot {
				return BreakerSnapshot{State: HalfOpen, HalfOpenRequests: 2, Successes: 1, OpenedAt: now.Add(-time.Second)}
			},
			steps: []step{
				{admit: 2, wantErr: ErrTooManyRequests, wantState: HalfOpen},
				{finish: []bool{true, true}, wantState: Closed},
			},
		},
		{
			name: "closed keeps its failure count",
			snap: func(time.Time) BreakerSnapshot { return BreakerSnapshot{State: Closed, Failures: 2} },
			steps: []step{
				{outcomes: []bool{false}, wantErr: ErrOpen, wantState: Open},
			},
		},
		{
			name: "unknown state restores as closed",
			snap: func(time.Time) BreakerSnapshot { return BreakerSnapshot{State: State(9)} },
			steps: []step{
				{outcomes: []bool{false, false}, wantState: Closed},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			s := settings
			s.Clock = clock
			bs := NewBreakers(s)
			snap := tt.snap(clock.Now())
			snap.Key = "s:t"
			bs.Restore(snap)
			b := bs.Get("s:t")
			var pending []func(bool)
			for i, st := range tt.steps {
				clock.Advance(st.advance)
				for _, ok := range st.outcomes {
					done, err := b.Allow()
					if err != nil {
						t.Fatalf("step %d: Allow() = %v, want admitted", i, err)
					}
					done(ok)
				}
				for range st.admit {
					done, err := b.Allow()
					if err != nil {
						t.Fatalf("step %d: Allow() = %v, want admitted", i, err)
					}
					pending = append(pending, done)
				}
				for _, ok := range st.finish {
					pending[0](ok)
					pending = pending[1:]
				}
				if st.wantErr != nil {
					if _, err := b.Allow(); !errors.Is(err, st.wantErr) {
						t.Fatalf("step %d: Allow() = %v, want %v", i, err, st.wantErr)
					}
				}
				if got := b.State(); got != st.wantState {
					t.Fatalf("step %d: State() = %v, want %v", i, got, st.wantState)
				}
			}
		})
	}
}

func TestBreakersRestoreOverwritesLive(t *testing.T) {
	clock := newFakeClock()
	bs := NewBreakers(BreakerSettings{FailureThreshold: 2, Clock: clock})
	b := bs.Get("k")
	inflight, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done, _ := b.Allow()
	done(false)
	bs.Restore(BreakerSnapshot{Key: "k", State: Closed})
	if got := bs.Get("k"); got != b {
		t.Error("Restore replaced the *Breaker; holders of the old one would miss it")
	}
	inflight(false) // admitted before the restore: ignored
	want := BreakerSnapshot{Key: "k", State: Closed, Generation: 1}
	if diff := cmp.Diff(want, b.Snapshot()); diff != "" {
		t.Errorf("Snapshot() after Restore (-want +got):\n%s", diff)
	}
}

// changeRec records OnChange snapshots.
type changeRec struct {
	mu  sync.Mutex
	got []BreakerSnapshot
}

func (r *changeRec) onChange(s BreakerSnapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, s)
}

func (r *changeRec) brief() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.got {
		out = append(out, fmt.Sprintf("%s f=%d s=%d", s.State, s.Failures, s.Successes))
	}
	return out
}

func TestBreakerOnChange(t *testing.T) {
	clock := newFakeClock()
	rec := &changeRec{}
	b := NewBreaker("k", BreakerSettings{FailureThreshold: 2, Cooldown: time.Second, HalfOpenMax: 2,
		Clock: clock, OnChange: rec.onChange})
	report := func(ok bool) {
		t.Helper()
		done, err := b.Allow()
		if err != nil {
			t.Fatalf("Allow() = %v", err)
		}
		done(ok)
	}
	report(true)  // closed, nothing to reset: silent
	report(false) // f=1
	report(true)  // reset: f=0
	report(true)  // silent
	report(false) // f=1
	report(false) // opens
	if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
		t.Fatalf("Allow() = %v, want ErrOpen", err) // rejected while open: silent
	}
	clock.Advance(time.Second)
	_ = b.State() // half-opens
	report(true)  // s=1
	report(true)  // closes
	report(true)  // silent
	want := []string{
		"CLOSED f=1 s=0",
		"CLOSED f=0 s=0",
		"CLOSED f=1 s=0",
		"OPEN f=2 s=0",
		"HALF_OPEN f=2 s=0",
		"HALF_OPEN f=2 s=1",
		"CLOSED f=0 s=0",
	}
	if diff := cmp.Diff(want, rec.brief()); diff != "" {
		t.Errorf("OnChange snapshots (-want +got):\n%s", diff)
	}
}

// TestBreakerOnChangeOrdered checks that concurrent changes are delivered in
// order, so the last snapshot a persister sees is the current one, and that
// callbacks may call back into the breaker.
func TestBreakerOnChangeOrdered(t *testing.T) {
	var (
		mu   sync.Mutex
		last BreakerSnapshot
		n    int
		b    *Breaker
	)
	b = NewBreaker("k", BreakerSettings{FailureThreshold: 1 << 20, Clock: newFakeClock(),
		OnChange: func(s BreakerSnapshot) {
			_ = b.Snapshot() // reentrant call must not deadlock
			mu.Lock()
			defer mu.Unlock()
			if s.Failures < last.Failures {
				t.Errorf("snapshot with %d failures delivered after one with %d", s.Failures, last.Failures)
			}
			last = s
			n++
		}})
	const workers, each = 20, 50
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if done, err := b.Allow(); err == nil {
					done(false)
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(b.Snapshot(), last); diff != "" {
		t.Errorf("last delivered snapshot is not the current one (-want +got):\n%s", diff)
	}
	if n != workers*each {
		t.Errorf("OnChange called %d times, want %d", n, workers*each)
	}
}

func TestBreakersSettingsAndForget(t *testing.T) {
	clock := newFakeClock()
	bs := NewBreakers(BreakerSettings{FailureThreshold: 5, Clock: clock})
	old := bs.Get("old")
	for range 2 {
		done, _ := old.Allow()
		done(false)
	}
	next := BreakerSettings{FailureThreshold: 3, Cooldown: time.Second, Clock: clock}
	bs.SetSettings(next)
	if diff := cmp.Diff(next.FailureThreshold, bs.Settings().FailureThreshold); diff != "" {
		t.Errorf("Settings().FailureThreshold (-want +got):\n%s", diff)
	}
	done, _ := old.Allow()
	done(false) // third failure: opens under the new threshold
	if got := old.State(); got != Open {
		t.Errorf("existing breaker State() = %v after 3 failures with threshold 3, want OPEN", got)
	}
	clock.Advance(time.Second) // new cooldown applies too
	if got := old.State(); got != HalfOpen {
		t.Errorf("existing breaker State() = %v after the new cooldown, want HALF_OPEN", got)
	}
	fresh := bs.Get("fresh")
	for range 3 {
		done, _ := fresh.Allow()
		done(false)
	}
	if got := fresh.State(); got != Open {
		t.Errorf("new breaker State() = %v after 3 failures, want OPEN", got)
	}

	bs.Forget("old")
	bs.Forget("never-seen")
	if got := bs.Get("old"); got == old || got.State() != Closed {
		t.Errorf("Get after Forget returned the old breaker or a non-closed one (%v)", got.State())
	}
	var keys []string
	for _, s := range bs.All() {
		keys = append(keys, s.Key)
	}
	if diff := cmp.Diff([]string{"fresh", "old"}, keys); diff != "" {
		t.Errorf("All() keys (-want +got):\n%s", diff)
	}
}

// TestBreakerOnChangeWaitsItsTurn pins the delivery order down: a change made
// while an earlier snapshot is still being delivered is handed to the
// delivering goroutine, not delivered alongside it.
func TestBreakerOnChangeWaitsItsTurn(t *testing.T) {
	var (
		mu      sync.Mutex
		got     []int
		entered = make(chan struct{})
		unblock = make(chan struct{})
	)
	b := NewBreaker("k", BreakerSettings{FailureThreshold: 10, Clock: newFakeClock(),
		OnChange: func(s BreakerSnapshot) {
			mu.Lock()
			got = append(got, s.Failures)
			mu.Unlock()
			if s.Failures == 1 {
				close(entered)
				<-unblock
			}
		}})
	fail := func() {
		if done, err := b.Allow(); err == nil {
			done(false)
		}
	}
	first := make(chan struct{})
	go func() { defer close(first); fail() }()
	<-entered
	fail() // returns at once: its snapshot is queued behind the blocked one
	mu.Lock()
	during := append([]int(nil), got...)
	mu.Unlock()
	close(unblock)
	<-first
	if diff := cmp.Diff([]int{1}, during); diff != "" {
		t.Errorf("delivered while the first was in progress (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]int{1, 2}, got); diff != "" {
		t.Errorf("delivered in total (-want +got):\n%s", diff)
	}
}
