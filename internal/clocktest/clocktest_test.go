package clocktest

import (
	"sync"
	"testing"
	"time"
)

// TestClock: the clock stands still until advanced, by exactly the steps
// taken, also while other goroutines read it.
func TestClock(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				_ = c.Now()
			}
		})
	}
	for range 10 {
		c.Advance(time.Minute)
	}
	c.Advance(-30 * time.Second)
	wg.Wait()
	if got, want := c.Now(), start.Add(9*time.Minute+30*time.Second); !got.Equal(want) {
		t.Errorf("Now = %v, want %v", got, want)
	}
}
