// Package clocktest is a clock that moves only when a test moves it, for
// the code under test that takes its time from an injected func() time.Time
// (Options.Clock and the like), so that tokens, keys and caches age by the
// test's steps and never by wall-clock time.
//
// It is test support: only _test.go files import it, never the gateway.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a settable clock, safe for concurrent use: the code under test
// may read it from its own goroutines while the test advances it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a Clock that reads start until it is advanced.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now is the clock's time; pass the method value (c.Now) as the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d (back, for a negative d).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
