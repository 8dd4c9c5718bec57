package resilience

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) onChange(key string, from, to State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf("%s:%s->%s", key, from, to))
}

func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// step is one action on a breaker in a scripted scenario.
type step struct {
	advance   time.Duration // move the clock first
	outcomes  []bool        // Allow then report each outcome, in order
	admit     int           // Allow this many calls and keep them pending
	finish    []bool        // report outcomes of pending calls, oldest first
	wantErr   error         // one extra Allow must fail with this
	wantState State
}

func TestBreakerTransitions(t *testing.T) {
	settings := BreakerSettings{FailureThreshold: 3, Cooldown: 10 * time.Second, HalfOpenMax: 2}
	tests := []struct {
		name       string
		steps      []step
		wantEvents []string
	}{
		{
			name: "failures below threshold and a success reset the count",
			steps: []step{
				{outcomes: []bool{false, false, true, false, false}, wantState: Closed},
			},
		},
		{
			name: "threshold consecutive failures open, open rejects",
			steps: []step{
				{outcomes: []bool{false, false, false}, wantState: Open},
				{wantErr: ErrOpen, wantState: Open},
				{advance: 9 * time.Second, wantErr: ErrOpen, wantState: Open},
			},
			wantEvents: []string{"s:t:CLOSED->OPEN"},
		},
		{
			name: "cooldown half-opens, admits HalfOpenMax, successes close",
			steps: []step{
				{outcomes: []bool{false, false, false}, wantState: Open},
				{advance: 10 * time.Second, wantState: HalfOpen},
				{admit: 2, wantErr: ErrTooManyRequests, wantState: HalfOpen},
				{finish: []bool{true}, wantState: HalfOpen},
				{finish: []bool{true}, wantState: Closed},
				{outcomes: []bool{true}, wantState: Closed},
			},
			wantEvents: []string{"s:t:CLOSED->OPEN", "s:t:OPEN->HALF_OPEN", "s:t:HALF_OPEN->CLOSED"},
		},
		{
			name: "failure in half-open reopens and restarts the cooldown",
			steps: []step{
				{outcomes: []bool{false, false, false}, wantState: Open},
				{advance: 10 * time.Second, admit: 2, wantState: HalfOpen},
				{finish: []bool{false}, wantState: Open},
				// The other trial call belonged to the half-open generation: ignored.
				{finish: []bool{true}, wantState: Open},
				{advance: 9 * time.Second, wantErr: ErrOpen, wantState: Open},
				{advance: time.Second, wantState: HalfOpen},
			},
			wantEvents: []string{"s:t:CLOSED->OPEN", "s:t:OPEN->HALF_OPEN", "s:t:HALF_OPEN->OPEN", "s:t:OPEN->HALF_OPEN"},
		},
		{
			name: "stale closed-generation results are ignored in half-open",
			steps: []step{
				{admit: 3, wantState: Closed},
				{outcomes: []bool{false, false, false}, wantState: Open},
				{advance: 10 * time.Second, wantState: HalfOpen},
				// Late failures from calls admitted while closed must not reopen.
				{finish: []bool{false, false, false}, wantState: HalfOpen},
				{outcomes: []bool{true, true}, wantState: Closed},
			},
			wantEvents: []string{"s:t:CLOSED->OPEN", "s:t:OPEN->HALF_OPEN", "s:t:HALF_OPEN->CLOSED"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			rec := &recorder{}
			s := settings
			s.Clock = clock
			s.OnStateChange = rec.onChange
			b := NewBreaker("s:t", s)
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
					if done, err := b.Allow(); !errors.Is(err, st.wantErr) || done != nil {
						t.Fatalf("step %d: Allow() = (%v, %v), want (nil, %v)", i, done != nil, err, st.wantErr)
					}
				}
				if got := b.State(); got != st.wantState {
					t.Fatalf("step %d: State() = %v, want %v", i, got, st.wantState)
				}
			}
			if diff := cmp.Diff(tt.wantEvents, rec.events()); diff != "" {
				t.Errorf("OnStateChange events mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBreakerDoneTwiceCountsOnce(t *testing.T) {
	b := NewBreaker("k", BreakerSettings{FailureThreshold: 2, Clock: newFakeClock()})
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(false)
	done(false)
	if got := b.State(); got != Closed {
		t.Errorf("State() = %v after one failure reported twice, want CLOSED", got)
	}
}

func TestBreakerDefaultsAndSnapshot(t *testing.T) {
	clock := newFakeClock()
	b := NewBreaker("srv:tool", BreakerSettings{Clock: clock})
	start := clock.Now()
	for i := range DefaultFailureThreshold {
		done, err := b.Allow()
		if err != nil {
			t.Fatalf("call %d: Allow() = %v", i, err)
		}
		done(false)
	}
	want := BreakerSnapshot{Key: "srv:tool", State: Open, Failures: 5, LastFailureAt: start, OpenedAt: start, Generation: 1}
	if diff := cmp.Diff(want, b.Snapshot()); diff != "" {
		t.Errorf("Snapshot() mismatch (-want +got):\n%s", diff)
	}
	clock.Advance(DefaultCooldown - time.Nanosecond)
	if got := b.State(); got != Open {
		t.Fatalf("State() = %v just before the default cooldown, want OPEN", got)
	}
	clock.Advance(time.Nanosecond)
	for i := range DefaultHalfOpenMax {
		if _, err := b.Allow(); err != nil {
			t.Fatalf("half-open call %d: Allow() = %v", i, err)
		}
	}
	if _, err := b.Allow(); !errors.Is(err, ErrTooManyRequests) {
		t.Errorf("Allow() beyond the default half-open quota = %v, want ErrTooManyRequests", err)
	}
	want = BreakerSnapshot{Key: "srv:tool", State: HalfOpen, Failures: 5, HalfOpenRequests: 3,
		LastFailureAt: start, OpenedAt: start, Generation: 2}
	if diff := cmp.Diff(want, b.Snapshot()); diff != "" {
		t.Errorf("Snapshot() mismatch (-want +got):\n%s", diff)
	}
}

func TestStateText(t *testing.T) {
	for _, s := range []State{Closed, Open, HalfOpen} {
		t.Run(s.String(), func(t *testing.T) {
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			var back State
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("Unmarshal(%s) = %v", b, err)
			}
			if back != s {
				t.Errorf("round trip of %v gave %v", s, back)
			}
		})
	}
	if got := State(7).String(); got != "State(7)" {
		t.Errorf("State(7).String() = %q", got)
	}
	var s State
	if err := s.UnmarshalText([]byte("AJAR")); err == nil {
		t.Error("UnmarshalText(AJAR) = nil, want error")
	}
}

func TestBreakersConcurrentGet(t *testing.T) {
	bs := NewBreakers(BreakerSettings{Clock: newFakeClock()})
	keys := []string{Key("b", "x"), Key("a", "y"), Key("a", "x")}
	const workers = 20
	got := make([][]*Breaker, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for _, k := range keys {
				b := bs.Get(k)
				got[w] = append(got[w], b)
				if done, err := b.Allow(); err == nil {
					done(true)
				}
				_ = bs.All()
			}
		})
	}
	wg.Wait()
	for w := range workers {
		for i, k := range keys {
			if got[w][i] != got[0][i] {
				t.Fatalf("worker %d got a different breaker for %q", w, k)
			}
			if got[w][i].Key() != k {
				t.Fatalf("breaker key = %q, want %q", got[w][i].Key(), k)
			}
		}
	}
	var gotKeys []string
	for _, s := range bs.All() {
		gotKeys = append(gotKeys, s.Key)
	}
	if diff := cmp.Diff([]string{"a:x", "a:y", "b:x"}, gotKeys); diff != "" {
		t.Errorf("All() keys mismatch (-want +got):\n%s", diff)
	}
}

func TestBreakerIgnoreFreesHalfOpenSlot(t *testing.T) {
	clk := newFakeClock()
	b := NewBreaker("k", BreakerSettings{FailureThreshold: 1, Cooldown: time.Second, HalfOpenMax: 1, Clock: clk})
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(false)
	clk.Advance(2 * time.Second)
	if _, err := b.Allow(); err != nil { // the one trial slot
		t.Fatalf("half-open trial: %v", err)
	}
	if _, err := b.Allow(); err == nil {
		t.Fatal("second trial admitted while the first is out")
	}
	b.Ignore()
	done, err = b.Allow()
	if err != nil {
		t.Fatalf("trial after Ignore: %v", err)
	}
	done(true)
	if st := b.State(); st != Closed {
		t.Errorf("state = %v, want CLOSED", st)
	}
}

// TestBreakersMoveServer: a rename moves every "old:tool" (and "old")
// breaker to the new name with its state, leaves other servers alone
// (including one whose name starts like the old one), and the old keys
// start closed if asked again.
func TestBreakersMoveServer(t *testing.T) {
	clk := newFakeClock()
	bs := NewBreakers(BreakerSettings{FailureThreshold: 2, Cooldown: time.Minute, Clock: clk})
	fail := func(key string, n int) {
		for range n {
			done, err := bs.Get(key).Allow()
			if err != nil {
				t.Fatalf("Allow %s: %v", key, err)
			}
			done(false)
		}
	}
	fail("gh:search", 2) // open
	fail("gh:issues", 1) // closed, one failure
	fail("ghost:search", 2)
	before := bs.Get("gh:search").Snapshot()

	moved := bs.MoveServer("gh", "hub")
	var keys []string
	for _, s := range moved {
		keys = append(keys, s.Key)
	}
	if diff := cmp.Diff([]string{"hub:issues", "hub:search"}, keys); diff != "" {
		t.Fatalf("moved (-want +got):\n%s", diff)
	}
	got := bs.Get("hub:search").Snapshot()
	if got.State != Open || got.Failures != before.Failures || !got.OpenedAt.Equal(before.OpenedAt) || got.Generation <= before.Generation {
		t.Errorf("hub:search = %+v, want the state of gh:search %+v with a newer generation", got, before)
	}
	if _, err := bs.Get("hub:search").Allow(); !errors.Is(err, ErrOpen) {
		t.Errorf("moved open breaker admits calls: %v", err)
	}
	if s := bs.Get("hub:issues").Snapshot(); s.State != Closed || s.Failures != 1 {
		t.Errorf("hub:issues = %+v, want closed with 1 failure", s)
	}
	if s := bs.Get("ghost:search").Snapshot(); s.State != Open {
		t.Errorf("ghost:search = %+v, want untouched (open)", s)
	}
	if s := bs.Get("gh:search").Snapshot(); s.State != Closed || s.Failures != 0 {
		t.Errorf("gh:search after the move = %+v, want a fresh closed breaker", s)
	}
	if moved := bs.MoveServer("hub", "hub"); moved != nil {
		t.Errorf("MoveServer to the same name moved %v", moved)
	}
}
