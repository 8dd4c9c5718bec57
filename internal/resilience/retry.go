package resilience

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults applied by RetryPolicy when a field is zero (the seed's
// configuration table: RETRY_MAX_ATTEMPTS, RETRY_BASE_MS, RETRY_FACTOR,
// RETRY_MAX_DELAY_MS).
const (
	DefaultMaxAttempts = 3
	DefaultBase        = 500 * time.Millisecond
	DefaultFactor      = 2.0
	DefaultMaxDelay    = 30 * time.Second
)

// ErrRetryExhausted is wrapped by the error RetryPolicy.Do returns when every
// attempt failed with a retryable error, so callers can map it to one status.
var ErrRetryExhausted = errors.New("retries exhausted")

// ErrRetryBudgetExhausted is wrapped by the error RetryPolicy.Do returns when
// it gave up early because RetryPolicy.Budget had no retries left.
var ErrRetryBudgetExhausted = errors.New("retry budget exhausted")

// RetryPolicy describes how a transient failure is retried. It is a plain
// value: the zero RetryPolicy is usable and means the documented defaults.
// Policy decisions are func fields (as in go-retryablehttp) rather than types.
type RetryPolicy struct {
	// MaxAttempts is the total number of calls, including the first.
	// Zero or negative means DefaultMaxAttempts (3).
	MaxAttempts int
	// Base is the delay before the first retry. Zero or negative means
	// DefaultBase (500ms).
	Base time.Duration
	// Factor multiplies the delay after each retry. Values below 1 mean
	// DefaultFactor (2.0).
	Factor float64
	// MaxDelay caps every delay, before jitter. Zero or negative means
	// DefaultMaxDelay (30s).
	MaxDelay time.Duration
	// Jitter turns the capped delay into the actual wait, so that many callers
	// failing together do not retry in lockstep. Nil means "equal jitter": a
	// uniformly random wait in [d/2, d], which never exceeds MaxDelay.
	Jitter func(d time.Duration) time.Duration
	// Retryable reports whether err is transient. Nil means every non-nil
	// error is retried except context.Canceled and context.DeadlineExceeded.
	Retryable func(err error) bool
	// Clock times the waits. Nil means SystemClock.
	Clock Clock
	// Budget, if set, is charged one Call per Do and one TryRetry per retry,
	// so retries of a failing upstream stay a bounded share of its traffic.
	// Give each upstream its own. Nil means no budget.
	Budget *RetryBudget
}

// DefaultJitter is the jitter used when RetryPolicy.Jitter is nil: a uniformly
// random duration in [d/2, d].
func DefaultJitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// DefaultRetryable is the classifier used when RetryPolicy.Retryable is nil:
// any non-nil error is transient except a context cancellation or deadline,
// which retrying cannot fix.
func DefaultRetryable(err error) bool {
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

func (p RetryPolicy) maxAttempts() int {
	if p.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return p.MaxAttempts
}

// Delay returns the wait before retry number retry+1, before jitter:
// min(Base*Factor^retry, MaxDelay). Delay(0) is the wait between the first and
// second call. It is exported so tests and docs can show the schedule.
func (p RetryPolicy) Delay(retry int) time.Duration {
	base, factor, maxDelay := p.Base, p.Factor, p.MaxDelay
	if base <= 0 {
		base = DefaultBase
	}
	if factor < 1 {
		factor = DefaultFactor
	}
	if maxDelay <= 0 {
		maxDelay = DefaultMaxDelay
	}
	if retry < 0 {
		retry = 0
	}
	d := float64(base) * math.Pow(factor, float64(retry))
	if math.IsNaN(d) || d >= float64(maxDelay) {
		return maxDelay
	}
	return time.Duration(d)
}

// Do calls fn until it succeeds, returns a non-retryable error, MaxAttempts is
// reached, or ctx ends. attempt passed to fn starts at 1. Waits between
// attempts select on ctx.Done, so cancellation returns promptly with an error
// wrapping ctx.Err() (and the last call's error). Any other failure is
// returned wrapped with the attempt count; exhaustion also wraps
// ErrRetryExhausted.
func (p RetryPolicy) Do(ctx context.Context, fn func(ctx context.Context, attempt int) error) error {
	maxAttempts := p.maxAttempts()
	retryable := p.Retryable
	if retryable == nil {
		retryable = DefaultRetryable
	}
	jitter := p.Jitter
	if jitter == nil {
		jitter = DefaultJitter
	}
	clock := clockOrSystem(p.Clock)

	var lastErr error
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			if lastErr == nil {
				return fmt.Errorf("before attempt %d: %w", attempt, err)
			}
			return fmt.Errorf("before attempt %d: %w (last error: %w)", attempt, err, lastErr)
		}
		if attempt == 1 && p.Budget != nil {
			p.Budget.Call()
		}
		err := fn(ctx, attempt)
		if err == nil {
			return nil
		}
		lastErr = err
		if !retryable(err) {
			return fmt.Errorf("attempt %d (not retryable): %w", attempt, err)
		}
		if attempt >= maxAttempts {
			return fmt.Errorf("%w after %d attempts: %w", ErrRetryExhausted, attempt, err)
		}
		if p.Budget != nil && !p.Budget.TryRetry() {
			return fmt.Errorf("%w after %d attempts: %w", ErrRetryBudgetExhausted, attempt, err)
		}
		wait := jitter(p.Delay(attempt - 1))
		if wait < 0 {
			wait = 0
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting to retry after attempt %d: %w (last error: %w)", attempt, ctx.Err(), err)
		case <-clock.After(wait):
		}
	}
}

// Spread returns a jitter that spreads a delay uniformly over ±fraction of
// it, so that callers failing together do not retry together.
func Spread(fraction float64) func(time.Duration) time.Duration {
	return func(d time.Duration) time.Duration {
		if d <= 0 {
			return d
		}
		f := 1 - fraction + 2*fraction*rand.Float64()
		return time.Duration(math.Round(float64(d) * f))
	}
}
