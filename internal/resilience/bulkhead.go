package resilience

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Defaults applied by BulkheadSettings when a field is zero.
const (
	DefaultBulkheadMaxConcurrent = 64
	DefaultBulkheadMaxQueue      = 256
)

// ErrBulkheadFull is wrapped by Bulkheads.Acquire when every slot is taken and
// the wait queue is full: the call is rejected at once rather than piling up
// behind a slow upstream (the gateway maps it to 503 "server busy").
var ErrBulkheadFull = errors.New("bulkhead full")

// BulkheadSettings configures Bulkheads. The zero value means the defaults.
type BulkheadSettings struct {
	// MaxConcurrent is the number of calls per key that may run at once.
	// Zero or negative means DefaultBulkheadMaxConcurrent (64).
	MaxConcurrent int
	// MaxQueue is the number of calls per key that may wait for a slot.
	// Zero means DefaultBulkheadMaxQueue (256); negative means no queue:
	// a call that finds every slot taken is rejected at once.
	MaxQueue int
}

func (s BulkheadSettings) withDefaults() BulkheadSettings {
	if s.MaxConcurrent <= 0 {
		s.MaxConcurrent = DefaultBulkheadMaxConcurrent
	}
	switch {
	case s.MaxQueue == 0:
		s.MaxQueue = DefaultBulkheadMaxQueue
	case s.MaxQueue < 0:
		s.MaxQueue = 0
	}
	return s
}

// Bulkheads caps concurrent calls per key (per upstream server), so one slow
// or stuck upstream cannot take every goroutine and connection of the
// gateway. Calls beyond the cap wait in a bounded FIFO queue. It is safe for
// concurrent use and starts no goroutines.
type Bulkheads struct {
	mu sync.Mutex // one lock for all keys: every critical section is a few field updates
	s  BulkheadSettings
	m  map[string]*bulkhead
}

// bulkhead is the state of one key. Invariant: waiters is non-empty only
// while active >= the cap, because a released slot is handed straight to the
// first waiter.
type bulkhead struct {
	active    int
	waiters   list.List // of *bulkheadWaiter, oldest first
	forgotten bool      // drop from the map once idle
}

type bulkheadWaiter struct {
	ready   chan struct{} // closed when granted
	granted bool          // set under Bulkheads.mu together with closing ready
}

// NewBulkheads returns an empty set of bulkheads that all use s.
func NewBulkheads(s BulkheadSettings) *Bulkheads {
	return &Bulkheads{s: s.withDefaults(), m: make(map[string]*bulkhead)}
}

// Acquire takes a slot for key, waiting in FIFO order behind earlier callers
// if all slots are taken. It returns an error wrapping ErrBulkheadFull at once
// if the queue is full too, and one wrapping ctx.Err() if ctx ends first (a
// slot granted at that moment is passed on, never leaked). The caller must
// call release when the call ends; extra calls of release do nothing.
func (b *Bulkheads) Acquire(ctx context.Context, key string) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bulkhead %q: %w", key, err)
	}
	b.mu.Lock()
	h := b.m[key]
	if h == nil {
		h = &bulkhead{}
		b.m[key] = h
	}
	if h.active < b.s.MaxConcurrent && h.waiters.Len() == 0 {
		h.forgotten = false
		h.active++
		b.mu.Unlock()
		return b.releaser(key, h), nil
	}
	if h.waiters.Len() >= b.s.MaxQueue {
		active, queued := h.active, h.waiters.Len()
		b.mu.Unlock()
		return nil, fmt.Errorf("bulkhead %q (%d running, %d waiting): %w", key, active, queued, ErrBulkheadFull)
	}
	h.forgotten = false
	w := &bulkheadWaiter{ready: make(chan struct{})}
	el := h.waiters.PushBack(w)
	b.mu.Unlock()

	select {
	case <-w.ready:
		return b.releaser(key, h), nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	if w.granted {
		// Granted while we were giving up: hand the slot on.
		b.releaseLocked(key, h)
	} else {
		h.waiters.Remove(el)
		b.dropIfIdleLocked(key, h)
	}
	b.mu.Unlock()
	return nil, fmt.Errorf("waiting for bulkhead %q: %w", key, ctx.Err())
}

func (b *Bulkheads) releaser(key string, h *bulkhead) func() {
	var done atomic.Bool
	return func() {
		if done.Swap(true) {
			return
		}
		b.mu.Lock()
		b.releaseLocked(key, h)
		b.mu.Unlock()
	}
}

// releaseLocked frees one slot of h, handing it to the first waiter if the
// cap allows. b.mu is held.
func (b *Bulkheads) releaseLocked(key string, h *bulkhead) {
	h.active--
	b.grantLocked(h)
	b.dropIfIdleLocked(key, h)
}

// grantLocked hands free slots to waiters, oldest first. b.mu is held.
func (b *Bulkheads) grantLocked(h *bulkhead) {
	for h.active < b.s.MaxConcurrent && h.waiters.Len() > 0 {
		w := h.waiters.Remove(h.waiters.Front()).(*bulkheadWaiter)
		w.granted = true
		close(w.ready)
		h.active++
	}
}

// dropIfIdleLocked removes a forgotten key once nothing uses it. b.mu is held.
func (b *Bulkheads) dropIfIdleLocked(key string, h *bulkhead) {
	if h.forgotten && h.active == 0 && h.waiters.Len() == 0 && b.m[key] == h {
		delete(b.m, key)
	}
}

// Stats returns the number of calls running and waiting for key, for metrics
// and the API.
func (b *Bulkheads) Stats(key string) (active, queued int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.m[key]; h != nil {
		return h.active, h.waiters.Len()
	}
	return 0, 0
}

// Forget drops key (a removed server) so the set does not grow forever. If
// calls still hold or wait for slots, the key is dropped when the last one
// ends, so the cap keeps holding for them; an Acquire for key that gets or
// waits for a slot in the meantime keeps it.
func (b *Bulkheads) Forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.m[key]; h != nil {
		h.forgotten = true
		b.dropIfIdleLocked(key, h)
	}
}

// Settings returns the effective settings (defaults applied).
func (b *Bulkheads) Settings() BulkheadSettings {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.s
}

// SetSettings hot-reloads the limits for every key. A raised cap admits
// waiters at once; a lowered cap lets running calls finish and admits no one
// until the count is under it. A smaller queue rejects new callers but keeps
// those already waiting.
func (b *Bulkheads) SetSettings(s BulkheadSettings) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.s = s.withDefaults()
	for _, h := range b.m {
		b.grantLocked(h)
	}
}
