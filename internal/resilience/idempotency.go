package resilience

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults used by NewIdempotency for a zero or negative ttl or max.
const (
	DefaultIdempotencyTTL = time.Hour
	DefaultIdempotencyMax = 10000
)

// errPanicked is what waiters see when the shared execution panicked.
var errPanicked = errors.New("idempotent call panicked")

// ErrIdempotencyConflict is wrapped by DoFingerprint when a key is reused for
// a different request: replaying the first request's result would be wrong,
// and running the second would break the key's promise (the API maps it to
// 409).
var ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")

// Idempotency remembers the results of calls by idempotency key so that a
// client retrying a request does not run the tool twice. Concurrent calls with
// the same key share one execution; calls within the TTL get the stored
// result. Errors are not stored, so a failed call can be retried with the same
// key. The cache holds at most max results and evicts the oldest first. It is
// safe for concurrent use.
type Idempotency[T any] struct {
	ttl   time.Duration
	max   int
	clock Clock

	mu       sync.Mutex
	entries  map[string]*list.Element // value is *idemEntry[T]
	order    *list.List               // oldest first; TTL is uniform so this is expiry order
	inflight map[string]*idemCall[T]
}

type idemEntry[T any] struct {
	key         string
	fingerprint string
	v           T
	expires     time.Time
}

type idemCall[T any] struct {
	fingerprint string
	done        chan struct{}
	v           T
	err         error
}

// fingerprintsConflict reports whether two requests under one key differ. An
// empty fingerprint (from Do) matches anything.
func fingerprintsConflict(a, b string) bool { return a != "" && b != "" && a != b }

// NewIdempotency returns an empty cache. ttl <= 0 means DefaultIdempotencyTTL
// (1h), max <= 0 means DefaultIdempotencyMax, a nil clock means SystemClock.
func NewIdempotency[T any](ttl time.Duration, max int, clock Clock) *Idempotency[T] {
	if ttl <= 0 {
		ttl = DefaultIdempotencyTTL
	}
	if max <= 0 {
		max = DefaultIdempotencyMax
	}
	return &Idempotency[T]{
		ttl:      ttl,
		max:      max,
		clock:    clockOrSystem(clock),
		entries:  make(map[string]*list.Element),
		order:    list.New(),
		inflight: make(map[string]*idemCall[T]),
	}
}

// Do returns the stored result for key if there is a live one, waits for an
// execution already running for key, or else runs fn and stores its result if
// it succeeds. shared reports whether v came from another execution. An empty
// key disables deduplication: fn simply runs.
//
// fn runs with the ctx of the caller that started it. If that caller's ctx
// ends and fn fails with a context error, waiters whose own ctx is still live
// start over instead of inheriting the cancellation. A waiter whose ctx ends
// returns ctx.Err() at once.
func (c *Idempotency[T]) Do(ctx context.Context, key string, fn func(context.Context) (T, error)) (v T, shared bool, err error) {
	return c.DoFingerprint(ctx, key, "", fn)
}

// DoFingerprint is Do for keys chosen by clients: the key remembers the
// fingerprint (e.g. a digest of the tool name and arguments) of the call that
// created it, while in flight and while stored. A call with the same key and
// a different fingerprint gets an error wrapping ErrIdempotencyConflict
// without running fn. An empty fingerprint matches any other, which is how Do
// behaves.
func (c *Idempotency[T]) DoFingerprint(ctx context.Context, key, fingerprint string, fn func(context.Context) (T, error)) (v T, shared bool, err error) {
	if key == "" {
		v, err = fn(ctx)
		return v, false, err
	}
	for {
		c.mu.Lock()
		now := c.clock.Now()
		c.expireLocked(now)
		if el, ok := c.entries[key]; ok {
			e := el.Value.(*idemEntry[T])
			c.mu.Unlock()
			if fingerprintsConflict(e.fingerprint, fingerprint) {
				var zero T
				return zero, false, fmt.Errorf("idempotency key %q: %w", key, ErrIdempotencyConflict)
			}
			return e.v, true, nil
		}
		if call, ok := c.inflight[key]; ok {
			c.mu.Unlock()
			if fingerprintsConflict(call.fingerprint, fingerprint) {
				var zero T
				return zero, false, fmt.Errorf("idempotency key %q (in flight): %w", key, ErrIdempotencyConflict)
			}
			select {
			case <-ctx.Done():
				var zero T
				return zero, false, fmt.Errorf("waiting for idempotent call %q: %w", key, ctx.Err())
			case <-call.done:
			}
			if call.err != nil && isContextErr(call.err) && ctx.Err() == nil {
				continue // the leader was cancelled, not us: try again
			}
			return call.v, true, call.err
		}
		call := &idemCall[T]{fingerprint: fingerprint, done: make(chan struct{}), err: errPanicked}
		c.inflight[key] = call
		c.mu.Unlock()

		c.run(ctx, key, call, fn)
		return call.v, false, call.err
	}
}

// Peek returns the stored result for key without running or waiting for
// anything: ok is true for a live stored result whose fingerprint matches.
// A stored or running call with another fingerprint is
// ErrIdempotencyConflict. It lets a caller check, before work that must
// happen only once per execution (spending a single-use approval), whether
// this request is a replay.
func (c *Idempotency[T]) Peek(_ context.Context, key, fingerprint string) (v T, ok bool, err error) {
	if key == "" {
		return v, false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(c.clock.Now())
	if el, found := c.entries[key]; found {
		e := el.Value.(*idemEntry[T])
		if fingerprintsConflict(e.fingerprint, fingerprint) {
			return v, false, fmt.Errorf("idempotency key %q: %w", key, ErrIdempotencyConflict)
		}
		return e.v, true, nil
	}
	if call, found := c.inflight[key]; found && fingerprintsConflict(call.fingerprint, fingerprint) {
		return v, false, fmt.Errorf("idempotency key %q (in flight): %w", key, ErrIdempotencyConflict)
	}
	return v, false, nil
}

func (c *Idempotency[T]) run(ctx context.Context, key string, call *idemCall[T], fn func(context.Context) (T, error)) {
	defer func() {
		c.mu.Lock()
		delete(c.inflight, key)
		if call.err == nil {
			c.storeLocked(key, call.fingerprint, call.v, c.clock.Now())
		}
		c.mu.Unlock()
		close(call.done)
	}()
	call.v, call.err = fn(ctx)
}

// Len returns the number of stored (possibly expired but not yet purged)
// results.
func (c *Idempotency[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Forget drops any stored result for key, for example after the caller learns
// the result is no longer valid.
func (c *Idempotency[T]) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.order.Remove(el)
		delete(c.entries, key)
	}
}

// storeLocked records v for key and evicts the oldest results beyond max.
func (c *Idempotency[T]) storeLocked(key, fingerprint string, v T, now time.Time) {
	if el, ok := c.entries[key]; ok {
		c.order.Remove(el)
	}
	c.entries[key] = c.order.PushBack(&idemEntry[T]{key: key, fingerprint: fingerprint, v: v, expires: now.Add(c.ttl)})
	for c.order.Len() > c.max {
		c.removeLocked(c.order.Front())
	}
}

// expireLocked drops results whose TTL has passed; they sit at the front.
func (c *Idempotency[T]) expireLocked(now time.Time) {
	for el := c.order.Front(); el != nil; el = c.order.Front() {
		if now.Before(el.Value.(*idemEntry[T]).expires) {
			return
		}
		c.removeLocked(el)
	}
}

func (c *Idempotency[T]) removeLocked(el *list.Element) {
	c.order.Remove(el)
	delete(c.entries, el.Value.(*idemEntry[T]).key)
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
