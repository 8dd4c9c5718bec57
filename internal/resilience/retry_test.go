package resilience

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	errTransient = errors.New("transient")
	errPermanent = errors.New("permanent")
)

func noJitter(d time.Duration) time.Duration { return d }

func TestRetryPolicyDelay(t *testing.T) {
	tests := []struct {
		name   string
		policy RetryPolicy
		want   []time.Duration
	}{
		{
			name:   "defaults from the seed",
			policy: RetryPolicy{},
			want: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second,
				8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second},
		},
		{
			name:   "custom base factor and cap",
			policy: RetryPolicy{Base: 100 * time.Millisecond, Factor: 3, MaxDelay: time.Second},
			want:   []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 900 * time.Millisecond, time.Second, time.Second},
		},
		{
			name:   "factor one is constant",
			policy: RetryPolicy{Base: time.Second, Factor: 1},
			want:   []time.Duration{time.Second, time.Second, time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []time.Duration
			for i := range tt.want {
				got = append(got, tt.policy.Delay(i))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Delay schedule mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if got, want := (RetryPolicy{}).Delay(10000), DefaultMaxDelay; got != want {
		t.Errorf("Delay(10000) = %v, want cap %v", got, want)
	}
}

func TestDefaultJitterBounds(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 2, 3, time.Millisecond, 500 * time.Millisecond, 30 * time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			for range 2000 {
				got := DefaultJitter(d)
				if got < d/2 || got > d {
					t.Fatalf("DefaultJitter(%v) = %v, want in [%v, %v]", d, got, d/2, d)
				}
			}
		})
	}
}

func TestRetryPolicyDo(t *testing.T) {
	tests := []struct {
		name        string
		policy      RetryPolicy
		results     []error // result of each call; the last repeats
		wantCalls   int
		wantWaits   []time.Duration
		wantErrIs   []error
		wantNoError bool
	}{
		{
			name:        "success first time",
			results:     []error{nil},
			wantCalls:   1,
			wantNoError: true,
		},
		{
			name:        "success on third attempt",
			results:     []error{errTransient, errTransient, nil},
			wantCalls:   3,
			wantWaits:   []time.Duration{500 * time.Millisecond, time.Second},
			wantNoError: true,
		},
		{
			name:      "exhausted after default max attempts",
			results:   []error{errTransient},
			wantCalls: 3,
			wantWaits: []time.Duration{500 * time.Millisecond, time.Second},
			wantErrIs: []error{ErrRetryExhausted, errTransient},
		},
		{
			name:      "custom attempts and cap",
			policy:    RetryPolicy{MaxAttempts: 5, Base: time.Second, Factor: 10, MaxDelay: 5 * time.Second},
			results:   []error{errTransient},
			wantCalls: 5,
			wantWaits: []time.Duration{time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second},
			wantErrIs: []error{ErrRetryExhausted, errTransient},
		},
		{
			name:      "non-retryable stops at once",
			policy:    RetryPolicy{Retryable: func(err error) bool { return !errors.Is(err, errPermanent) }},
			results:   []error{errTransient, fmt.Errorf("wrapped: %w", errPermanent)},
			wantCalls: 2,
			wantWaits: []time.Duration{500 * time.Millisecond},
			wantErrIs: []error{errPermanent},
		},
		{
			name:      "context errors from fn are not retried by default",
			results:   []error{fmt.Errorf("call: %w", context.DeadlineExceeded)},
			wantCalls: 1,
			wantErrIs: []error{context.DeadlineExceeded},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			p := tt.policy
			p.Clock = clock
			p.Jitter = noJitter
			var attempts []int
			err := p.Do(t.Context(), func(_ context.Context, attempt int) error {
				attempts = append(attempts, attempt)
				return tt.results[min(len(attempts), len(tt.results))-1]
			})
			if tt.wantNoError && err != nil {
				t.Fatalf("Do() = %v, want nil", err)
			}
			if !tt.wantNoError && err == nil {
				t.Fatal("Do() = nil, want error")
			}
			for _, target := range tt.wantErrIs {
				if !errors.Is(err, target) {
					t.Errorf("Do() = %v, want errors.Is %v", err, target)
				}
			}
			if !tt.wantNoError && errors.Is(err, ErrRetryExhausted) != slices.Contains(tt.wantErrIs, ErrRetryExhausted) {
				t.Errorf("Do() = %v: ErrRetryExhausted wrapped unexpectedly", err)
			}
			var wantAttempts []int
			for i := 1; i <= tt.wantCalls; i++ {
				wantAttempts = append(wantAttempts, i)
			}
			if diff := cmp.Diff(wantAttempts, attempts); diff != "" {
				t.Errorf("attempt numbers mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWaits, clock.Waits()); diff != "" {
				t.Errorf("waits mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetryPolicyDoDefaultJitterWithinBounds(t *testing.T) {
	clock := newFakeClock()
	p := RetryPolicy{MaxAttempts: 6, Clock: clock}
	_ = p.Do(t.Context(), func(context.Context, int) error { return errTransient })
	waits := clock.Waits()
	if len(waits) != 5 {
		t.Fatalf("got %d waits, want 5", len(waits))
	}
	for i, w := range waits {
		d := p.Delay(i)
		if w < d/2 || w > d {
			t.Errorf("wait %d = %v, want in [%v, %v]", i, w, d/2, d)
		}
	}
}

func TestRetryPolicyDoCancelDuringWait(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	clock := newFakeClock()
	// The wait never ends on its own; the context is cancelled as it starts.
	clock.onAfter = func(time.Duration) <-chan time.Time {
		cancel()
		return make(chan time.Time)
	}
	calls := 0
	err := RetryPolicy{Clock: clock}.Do(ctx, func(context.Context, int) error {
		calls++
		return errTransient
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Do() = %v, want context.Canceled", err)
	}
	if !errors.Is(err, errTransient) {
		t.Errorf("Do() = %v, want it to carry the last error", err)
	}
	if calls != 1 {
		t.Errorf("fn called %d times, want 1", calls)
	}
}

func TestRetryPolicyDoCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := 0
	err := RetryPolicy{Clock: newFakeClock()}.Do(ctx, func(context.Context, int) error {
		calls++
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls != 0 {
		t.Errorf("Do() = %v with %d calls, want context.Canceled and 0 calls", err, calls)
	}
}

func TestSpread(t *testing.T) {
	j := Spread(0.2)
	if j(0) != 0 || j(-time.Second) != -time.Second {
		t.Error("a non-positive delay is not spread")
	}
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range 10000 {
		d := j(time.Second)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 800*time.Millisecond || hi > 1200*time.Millisecond || hi-lo < 300*time.Millisecond {
		t.Errorf("spread of 1s over 10000 draws: [%v, %v], want within and across most of [800ms, 1.2s]", lo, hi)
	}
}
