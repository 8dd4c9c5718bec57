package gctune

import (
	"context"
	"math"
	"runtime/debug"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	o := Options{}
	tests := []struct {
		live uint64
		want int64
	}{
		{0, DefaultFloor},
		{10 << 20, DefaultFloor},                 // a small heap: GOGC alone paces it
		{80 << 20, int64(float64(80<<20) * 1.5)}, // the 10,000-tool catalog
		{1 << 30, int64(float64(1<<30) * 1.5)},
		{math.MaxUint64, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := o.Limit(tt.live); got != tt.want {
			t.Errorf("Limit(%d) = %d, want %d", tt.live, got, tt.want)
		}
	}
	if got := (Options{Headroom: 1, Floor: 1 << 20}).Limit(8 << 20); got != 16<<20 {
		t.Errorf("Limit with headroom 1 = %d, want %d", got, 16<<20)
	}
}

func TestApply(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

	debug.SetGCPercent(100)
	if !Apply(env(nil), Options{}) {
		t.Error("no GOMEMLIMIT: the limit should follow the live heap")
	}
	if got := debug.SetGCPercent(100); got != DefaultPercent {
		t.Errorf("GOGC unset: percent %d, want %d", got, DefaultPercent)
	}

	debug.SetGCPercent(100)
	if Apply(env(map[string]string{"GOGC": "50", "GOMEMLIMIT": "1GiB"}), Options{}) {
		t.Error("GOMEMLIMIT set: the operator's limit must stand")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set: percent changed to %d", got)
	}
}

func TestRun(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Run(ctx, Options{Floor: 1 << 40, Interval: time.Millisecond})
		close(done)
	}()
	for debug.SetMemoryLimit(-1) != 1<<40 { // -1 reads the limit
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit after Run ended = %d, want none", got)
	}
}
