package logtest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestBufferConcurrent: writes from many goroutines all arrive whole while
// the test reads (go test -race checks the locking).
func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				fmt.Fprintf(&b, "g%d-%d\n", g, i)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 8*50 {
		t.Fatalf("%d lines, want %d", len(lines), 8*50)
	}
	for g := range 8 {
		for i := range 50 {
			if !strings.Contains(b.String(), fmt.Sprintf("g%d-%d\n", g, i)) {
				t.Fatalf("line g%d-%d is missing or torn", g, i)
			}
		}
	}
}
