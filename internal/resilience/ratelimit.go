package resilience

import (
	"math"
	"sync"
	"time"
)

// Idle buckets are kept this long, and swept at most this often.
const (
	rateIdleTTL    = 10 * time.Minute
	rateSweepEvery = time.Minute
)

// RateLimit is a token bucket: Rate tokens per second refill a bucket that
// holds at most Burst. The zero value disables limiting.
type RateLimit struct {
	// Rate is in tokens (calls) per second. Zero or negative disables the
	// limiter: every call is allowed.
	Rate float64
	// Burst is the bucket size, the number of calls allowed at once after a
	// quiet spell. Zero or negative means max(1, ceil(Rate)).
	Burst int
}

// RateLimiter is a token bucket per key (agent), so one noisy agent cannot
// starve the others. Memory stays bounded: a bucket idle for more than 10
// minutes is dropped once it has refilled (a full bucket is the same as a new
// one, so no debt is forgiven). It is safe for concurrent use and starts no
// goroutines.
//
// Each bucket is stored as the time it will be full again (the "theoretical
// arrival time" of GCRA), which is exact in integer nanoseconds, so a caller
// that waits exactly retryAfter is always admitted.
type RateLimiter struct {
	clock Clock

	mu        sync.Mutex
	limit     RateLimit // as given
	interval  time.Duration
	tolerance time.Duration // (burst-1) * interval
	buckets   map[string]*rateBucket
	lastSweep time.Time
}

type rateBucket struct {
	full     time.Time // the bucket is full from this moment on
	lastSeen time.Time
}

// NewRateLimiter returns a limiter applying l to every key. A nil clock means
// SystemClock.
func NewRateLimiter(l RateLimit, clock Clock) *RateLimiter {
	r := &RateLimiter{clock: clockOrSystem(clock), buckets: make(map[string]*rateBucket)}
	r.lastSweep = r.clock.Now()
	r.setLocked(l)
	return r
}

// Limit returns the limit last given to NewRateLimiter or SetLimit.
func (r *RateLimiter) Limit() RateLimit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.limit
}

// setLocked computes the GCRA parameters for l. r.mu is held (or r is new).
func (r *RateLimiter) setLocked(l RateLimit) {
	r.limit = l
	if l.Rate <= 0 || math.IsNaN(l.Rate) {
		r.interval, r.tolerance = 0, 0
		return
	}
	burst := l.Burst
	if burst <= 0 {
		burst = int(min(math.Ceil(l.Rate), 1<<30))
	}
	burst = min(max(burst, 1), 1<<30)
	// Keep burst*interval well inside time.Duration, whatever the config says.
	const span = float64(1 << 62)
	iv := min(float64(time.Second)/l.Rate, span/float64(burst))
	r.interval = max(time.Duration(iv), 1)
	r.tolerance = time.Duration(burst-1) * r.interval
}

// Allow takes one token from key's bucket. If the bucket is empty it returns
// false and how long until a token will be there (always > 0), for a
// Retry-After header.
func (r *RateLimiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.interval == 0 {
		return true, 0
	}
	now := r.clock.Now()
	r.maybeSweepLocked(now)
	b := r.buckets[key]
	if b == nil {
		b = &rateBucket{full: now}
		r.buckets[key] = b
	}
	b.lastSeen = now
	full := b.full
	if full.Before(now) {
		full = now
	}
	if debt := full.Sub(now); debt > r.tolerance {
		return false, debt - r.tolerance
	}
	b.full = full.Add(r.interval)
	return true, 0
}

// SetLimit hot-reloads the limit. Each bucket keeps its share of tokens: a
// bucket that was empty stays empty and refills at the new rate, a full one
// stays full. Disabling drops every bucket.
func (r *RateLimiter) SetLimit(l RateLimit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	oldInterval, oldTolerance := r.interval, r.tolerance
	r.setLocked(l)
	if r.interval == 0 || oldInterval == 0 {
		clear(r.buckets) // from or to "unlimited": every bucket starts full
		return
	}
	now := r.clock.Now()
	oldBurst := float64(oldTolerance/oldInterval) + 1
	newBurst := float64(r.tolerance/r.interval) + 1
	for _, b := range r.buckets {
		debt := max(b.full.Sub(now), 0)
		tokens := min(oldBurst-float64(debt)/float64(oldInterval), newBurst)
		newDebt := time.Duration((newBurst - max(tokens, 0)) * float64(r.interval))
		b.full = now.Add(newDebt)
	}
}

// maybeSweepLocked drops buckets idle for rateIdleTTL that have refilled, at
// most once per rateSweepEvery so Allow stays O(1) amortized. r.mu is held.
func (r *RateLimiter) maybeSweepLocked(now time.Time) {
	if now.Sub(r.lastSweep) < rateSweepEvery {
		return
	}
	r.lastSweep = now
	for k, b := range r.buckets {
		if now.Sub(b.lastSeen) > rateIdleTTL && !b.full.After(now) {
			delete(r.buckets, k)
		}
	}
}

// len returns the number of buckets held, for tests.
func (r *RateLimiter) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.buckets)
}
