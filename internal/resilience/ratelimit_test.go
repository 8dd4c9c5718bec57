package resilience

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// rateStep is one Allow in a scripted scenario, after moving the clock.
type rateStep struct {
	advance time.Duration
	key     string
	ok      bool
	retry   time.Duration
}

type rateResult struct {
	OK    bool
	Retry time.Duration
}

func runRateSteps(t *testing.T, clock *fakeClock, r *RateLimiter, steps []rateStep) {
	t.Helper()
	for i, st := range steps {
		clock.Advance(st.advance)
		key := st.key
		if key == "" {
			key = "agent"
		}
		ok, retry := r.Allow(key)
		if diff := cmp.Diff(rateResult{st.ok, st.retry}, rateResult{ok, retry}); diff != "" {
			t.Fatalf("step %d: Allow(%q) mismatch (-want +got):\n%s", i, key, diff)
		}
	}
}

func TestRateLimiterAllow(t *testing.T) {
	tests := []struct {
		name  string
		limit RateLimit
		steps []rateStep
	}{
		{
			name:  "burst then deny with time to one token, then refill",
			limit: RateLimit{Rate: 2, Burst: 3},
			steps: []rateStep{
				{ok: true}, {ok: true}, {ok: true},
				{ok: false, retry: 500 * time.Millisecond},
				{advance: 499 * time.Millisecond, ok: false, retry: time.Millisecond},
				{advance: time.Millisecond, ok: true},
				{ok: false, retry: 500 * time.Millisecond},
				// A long pause refills to the burst, not beyond.
				{advance: time.Hour, ok: true}, {ok: true}, {ok: true},
				{ok: false, retry: 500 * time.Millisecond},
			},
		},
		{
			name:  "default burst is ceil(rate)",
			limit: RateLimit{Rate: 2.5},
			steps: []rateStep{
				{ok: true}, {ok: true}, {ok: true},
				{ok: false, retry: 400 * time.Millisecond},
			},
		},
		{
			name:  "slow rate defaults to a burst of one",
			limit: RateLimit{Rate: 0.5},
			steps: []rateStep{
				{ok: true},
				{ok: false, retry: 2 * time.Second},
				{advance: 1500 * time.Millisecond, ok: false, retry: 500 * time.Millisecond},
				{advance: 500 * time.Millisecond, ok: true},
			},
		},
		{
			name:  "keys have their own buckets",
			limit: RateLimit{Rate: 1},
			steps: []rateStep{
				{key: "a", ok: true},
				{key: "a", ok: false, retry: time.Second},
				{key: "b", ok: true},
				{key: "b", ok: false, retry: time.Second},
			},
		},
		{
			name:  "zero rate disables",
			limit: RateLimit{Burst: 1},
			steps: []rateStep{{ok: true}, {ok: true}, {ok: true}},
		},
		{
			name:  "negative rate disables",
			limit: RateLimit{Rate: -1},
			steps: []rateStep{{ok: true}, {ok: true}, {ok: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			runRateSteps(t, clock, NewRateLimiter(tt.limit, clock), tt.steps)
		})
	}
}

func TestRateLimiterSetLimit(t *testing.T) {
	tests := []struct {
		name   string
		before []rateStep
		limit  RateLimit
		after  []rateStep
	}{
		{
			name:   "empty bucket refills at the new rate",
			before: []rateStep{{ok: true}, {ok: false, retry: time.Second}},
			limit:  RateLimit{Rate: 10, Burst: 10},
			after: []rateStep{
				{ok: false, retry: 100 * time.Millisecond},
				{advance: 100 * time.Millisecond, ok: true},
				{ok: false, retry: 100 * time.Millisecond},
			},
		},
		{
			name:   "full bucket takes the new burst",
			before: []rateStep{{key: "idle", ok: true}},
			limit:  RateLimit{Rate: 1, Burst: 3},
			after:  []rateStep{{ok: true}, {ok: true}, {ok: true}, {ok: false, retry: time.Second}},
		},
		{
			name:   "disabling allows everything",
			before: []rateStep{{ok: true}, {ok: false, retry: time.Second}},
			limit:  RateLimit{},
			after:  []rateStep{{ok: true}, {ok: true}},
		},
		{
			name:   "lower burst keeps the bucket no fuller than the new size",
			before: []rateStep{{key: "other", ok: true}},
			limit:  RateLimit{Rate: 1, Burst: 1},
			after:  []rateStep{{ok: true}, {ok: false, retry: time.Second}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			r := NewRateLimiter(RateLimit{Rate: 1, Burst: 1}, clock)
			runRateSteps(t, clock, r, tt.before)
			r.SetLimit(tt.limit)
			if diff := cmp.Diff(tt.limit, r.Limit()); diff != "" {
				t.Errorf("Limit() mismatch (-want +got):\n%s", diff)
			}
			runRateSteps(t, clock, r, tt.after)
		})
	}
	t.Run("re-enable after disable", func(t *testing.T) {
		clock := newFakeClock()
		r := NewRateLimiter(RateLimit{Rate: 1}, clock)
		runRateSteps(t, clock, r, []rateStep{{ok: true}, {ok: false, retry: time.Second}})
		r.SetLimit(RateLimit{})
		r.SetLimit(RateLimit{Rate: 1})
		runRateSteps(t, clock, r, []rateStep{{ok: true}, {ok: false, retry: time.Second}})
	})
}

func TestRateLimiterEviction(t *testing.T) {
	clock := newFakeClock()
	// One token per hour: a bucket used once stays in debt for an hour.
	r := NewRateLimiter(RateLimit{Rate: 1.0 / 3600}, clock)
	for i := range 5 {
		r.Allow(fmt.Sprint("fast", i))
	}
	r.SetLimit(RateLimit{Rate: 1000, Burst: 1}) // "fast" buckets refill within a millisecond
	r.Allow("slow-debt")                        // in debt for 1ms only, but used later
	if got := r.len(); got != 6 {
		t.Fatalf("len() = %d, want 6", got)
	}
	clock.Advance(5 * time.Minute)
	r.Allow("slow-debt")
	clock.Advance(5*time.Minute + time.Nanosecond)
	r.Allow("new") // idle > 10m and full: the five "fast" buckets go
	if got := r.len(); got != 2 {
		t.Errorf("len() after sweep = %d, want 2 (slow-debt, new)", got)
	}

	// A bucket still in debt is kept, however long it was idle, so that
	// forgetting it cannot grant extra calls.
	r.SetLimit(RateLimit{Rate: 1.0 / 86400}) // one a day
	r.Allow("daily")
	clock.Advance(11 * time.Minute)
	r.Allow("x")
	clock.Advance(11 * time.Minute)
	if ok, _ := r.Allow("daily"); ok {
		t.Error("Allow(daily) = true after eviction sweep, want the debt kept")
	}
}

func BenchmarkRateLimiterAllow(b *testing.B) {
	r := NewRateLimiter(RateLimit{Rate: 1e9, Burst: 1 << 20}, nil)
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprint("agent", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.Allow(keys[i%len(keys)])
			i++
		}
	})
}
