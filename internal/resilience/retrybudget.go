package resilience

import (
	"sync"
	"time"
)

// Defaults applied by RetryBudgetSettings when a field is zero.
const (
	DefaultRetryBudgetRatio        = 0.2
	DefaultRetryBudgetMinPerSecond = 10
	DefaultRetryBudgetWindow       = 10 * time.Second
)

// retryBudgetBuckets is how many slices the window is cut into: the window
// slides by a tenth at a time, and every operation touches O(1) state.
const retryBudgetBuckets = 10

// RetryBudgetSettings configures a RetryBudget. The zero value means the
// defaults.
type RetryBudgetSettings struct {
	// Ratio is the share of first attempts that may be retried. Zero means
	// DefaultRetryBudgetRatio (0.2); negative means none beyond MinPerSecond.
	Ratio float64
	// MinPerSecond retries per second are always allowed, so a quiet
	// upstream can still be retried. Zero means
	// DefaultRetryBudgetMinPerSecond (10); negative means none.
	MinPerSecond float64
	// Window is how far back calls and retries are counted. Zero or
	// negative means DefaultRetryBudgetWindow (10s).
	Window time.Duration
}

func (s RetryBudgetSettings) withDefaults() RetryBudgetSettings {
	switch {
	case s.Ratio == 0:
		s.Ratio = DefaultRetryBudgetRatio
	case s.Ratio < 0:
		s.Ratio = 0
	}
	switch {
	case s.MinPerSecond == 0:
		s.MinPerSecond = DefaultRetryBudgetMinPerSecond
	case s.MinPerSecond < 0:
		s.MinPerSecond = 0
	}
	if s.Window <= 0 {
		s.Window = DefaultRetryBudgetWindow
	}
	// A window shorter than one nanosecond per bucket cannot be sliced.
	s.Window = max(s.Window, retryBudgetBuckets)
	return s
}

// RetryBudget bounds retries to a share of calls, so a failing upstream
// cannot multiply the load on itself (like gRPC's retry throttling and
// Finagle's RetryBudget): over a sliding window, retries may be at most
// Ratio of the first attempts plus MinPerSecond per second of window. The
// caller keeps one budget per upstream server. It is safe for concurrent use.
type RetryBudget struct {
	s      RetryBudgetSettings
	clock  Clock
	bucket time.Duration // Window / retryBudgetBuckets
	start  time.Time     // slot numbers count buckets from here
	// allowance of the window that does not depend on traffic
	reserve float64

	mu      sync.Mutex
	head    int64 // slot number of the newest bucket
	calls   [retryBudgetBuckets]int64
	retries [retryBudgetBuckets]int64
	// sums over the ring, kept up to date so checks are O(1)
	totalCalls, totalRetries int64
}

// NewRetryBudget returns an empty budget. A nil clock means SystemClock.
func NewRetryBudget(s RetryBudgetSettings, clock Clock) *RetryBudget {
	s = s.withDefaults()
	clock = clockOrSystem(clock)
	return &RetryBudget{
		s:       s,
		clock:   clock,
		bucket:  s.Window / retryBudgetBuckets,
		start:   clock.Now(),
		reserve: s.MinPerSecond * s.Window.Seconds(),
	}
}

// Call records one first attempt, which earns Ratio of a retry.
func (b *RetryBudget) Call() {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := b.advanceLocked()
	b.calls[i]++
	b.totalCalls++
}

// TryRetry spends budget on one retry. False means the budget is exhausted
// and the caller should fail instead of retrying.
func (b *RetryBudget) TryRetry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := b.advanceLocked()
	// The epsilon keeps 0.2*100 calls worth exactly 20 retries.
	allowance := b.s.Ratio*float64(b.totalCalls) + b.reserve + 1e-9
	if float64(b.totalRetries+1) > allowance {
		return false
	}
	b.retries[i]++
	b.totalRetries++
	return true
}

// advanceLocked slides the window to now, clearing the buckets that fell
// out, and returns the ring index of the current bucket. b.mu is held.
func (b *RetryBudget) advanceLocked() int {
	slot := int64(b.clock.Now().Sub(b.start) / b.bucket)
	if slot > b.head {
		// Clear at most one full ring, however long we were idle.
		from := max(b.head+1, slot-retryBudgetBuckets+1)
		for s := from; s <= slot; s++ {
			i := s % retryBudgetBuckets
			b.totalCalls -= b.calls[i]
			b.totalRetries -= b.retries[i]
			b.calls[i], b.retries[i] = 0, 0
		}
		b.head = slot
	}
	// A clock that went backwards counts into the newest bucket.
	return int(b.head % retryBudgetBuckets)
}
