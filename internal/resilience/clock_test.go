package resilience

import (
	"sync"
	"time"
)

// fakeClock is a manual clock. After records the requested duration and, by
// default, advances the clock by it and fires at once, so retry loops run
// without sleeping. onAfter, if set, replaces that behaviour.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waits   []time.Duration
	onAfter func(d time.Duration) <-chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	hook := c.onAfter
	if hook == nil {
		c.now = c.now.Add(d)
	}
	now := c.now
	c.mu.Unlock()
	if hook != nil {
		return hook(d)
	}
	ch := make(chan time.Time, 1)
	ch <- now
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}
