package resilience

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// budgetStep moves the clock, records calls, then tries retries.
type budgetStep struct {
	advance time.Duration
	calls   int
	tries   int
}

func TestRetryBudget(t *testing.T) {
	tests := []struct {
		name     string
		settings RetryBudgetSettings
		steps    []budgetStep
		want     []int // retries granted per step
	}{
		{
			name:     "ratio of calls",
			settings: RetryBudgetSettings{Ratio: 0.5, MinPerSecond: -1},
			steps:    []budgetStep{{calls: 10, tries: 8}, {calls: 4, tries: 8}},
			want:     []int{5, 2},
		},
		{
			name:     "min per second without calls",
			settings: RetryBudgetSettings{Ratio: -1, MinPerSecond: 2, Window: 10 * time.Second},
			steps:    []budgetStep{{tries: 25}, {calls: 100, tries: 1}},
			want:     []int{20, 0},
		},
		{
			name:  "defaults: 20% of calls plus 10/s over 10s",
			steps: []budgetStep{{calls: 100, tries: 200}},
			want:  []int{120},
		},
		{
			name:     "window slides",
			settings: RetryBudgetSettings{Ratio: 0.5, MinPerSecond: -1, Window: 10 * time.Second},
			steps: []budgetStep{
				{calls: 10, tries: 6},                          // t=0: 5 of 6
				{advance: 9 * time.Second, calls: 2, tries: 2}, // t=9: everything still counts: 1 more
				{advance: time.Second, tries: 1},               // t=10: t=0 expired; 2 calls, 1 retry: none
				{calls: 2, tries: 2},                           // 4 calls, 1 retry: 1 more
				{advance: 9 * time.Second, tries: 1},           // t=19: t=9 expired; 2 calls, 1 retry: none
				{advance: time.Hour, calls: 2, tries: 2},       // all expired: 1 of 2
			},
			want: []int{5, 1, 0, 1, 0, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			b := NewRetryBudget(tt.settings, clock)
			var got []int
			for _, st := range tt.steps {
				clock.Advance(st.advance)
				for range st.calls {
					b.Call()
				}
				n := 0
				for range st.tries {
					if b.TryRetry() {
						n++
					}
				}
				got = append(got, n)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("retries granted per step (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetryPolicyDoBudget(t *testing.T) {
	tests := []struct {
		name      string
		budget    RetryBudgetSettings
		wantCalls int
		wantErrIs error
	}{
		{name: "no budget left stops after the first call", budget: RetryBudgetSettings{Ratio: -1, MinPerSecond: -1},
			wantCalls: 1, wantErrIs: ErrRetryBudgetExhausted},
		{name: "one retry allowed", budget: RetryBudgetSettings{Ratio: 1, MinPerSecond: -1},
			wantCalls: 2, wantErrIs: ErrRetryBudgetExhausted},
		{name: "ample budget runs to MaxAttempts", budget: RetryBudgetSettings{},
			wantCalls: 3, wantErrIs: ErrRetryExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			p := RetryPolicy{Clock: clock, Jitter: noJitter, Budget: NewRetryBudget(tt.budget, clock)}
			calls := 0
			err := p.Do(t.Context(), func(context.Context, int) error { calls++; return errTransient })
			if !errors.Is(err, tt.wantErrIs) || !errors.Is(err, errTransient) {
				t.Errorf("Do() = %v, want %v wrapping errTransient", err, tt.wantErrIs)
			}
			if calls != tt.wantCalls {
				t.Errorf("fn called %d times, want %d", calls, tt.wantCalls)
			}
		})
	}
}
