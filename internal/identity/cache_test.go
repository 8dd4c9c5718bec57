package identity

import (
	"testing"
	"time"
)

// TestMakeRoom checks the bound of the key and introspection caches: below
// the bound nothing goes; at it, every expired entry goes, and arbitrary
// live ones only as far as needed to make room for one more.
func TestMakeRoom(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fill := func(n, expired int) map[int]cacheEntry {
		c := make(map[int]cacheEntry, n)
		for i := range n {
			until := now.Add(time.Minute)
			if i < expired {
				until = now.Add(-time.Duration(i%2) * time.Second) // at now or before: expired
			}
			c[i] = cacheEntry{until: until}
		}
		return c
	}
	tests := []struct {
		name       string
		n, expired int
		wantLen    int
		wantLive   int // live entries left
	}{
		{"below the bound", maxCacheEntries - 1, 10, maxCacheEntries - 1, maxCacheEntries - 11},
		{"full, some expired", maxCacheEntries, 100, maxCacheEntries - 100, maxCacheEntries - 100},
		{"full, none expired", maxCacheEntries, 0, maxCacheEntries - 1, maxCacheEntries - 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fill(tc.n, tc.expired)
			makeRoom(c, now)
			live := 0
			for _, e := range c {
				if now.Before(e.until) {
					live++
				}
			}
			if len(c) != tc.wantLen || live != tc.wantLive {
				t.Errorf("after makeRoom: %d entries, %d live; want %d, %d", len(c), live, tc.wantLen, tc.wantLive)
			}
		})
	}
	// The introspection cache's entries obey the same bound.
	ic := map[string]introEntry{}
	for i := range maxCacheEntries {
		ic[string(rune(i+1))] = introEntry{until: now}
	}
	makeRoom(ic, now)
	if len(ic) != 0 {
		t.Errorf("introspection cache keeps %d expired entries", len(ic))
	}
}
