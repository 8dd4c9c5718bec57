// Package gctune keeps the gateway's garbage collector cheap on the call
// path and its memory in proportion to what it holds.
//
// The gateway's two loads pull the collector in opposite directions. The
// call path allocates much short-lived garbage per call over a small live
// heap: collecting at 5× the live heap (GOGC=400) instead of 2× halves the
// gateway's CPU per call. A large catalog (10,000 tools) is a large live
// heap: at GOGC=400 the process would grow to five times it, 400 MB for
// the 70 MB that 10,000 tools take. A soft memory limit that follows the
// live heap gives each load what it needs: small heaps keep GOGC=400, and
// a large one is collected when it has grown by [Options.Headroom] of
// itself, with the memory beyond the limit given back to the system.
package gctune

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Defaults of [Options].
const (
	DefaultPercent  = 400
	DefaultHeadroom = 0.5
	DefaultFloor    = 96 << 20
	DefaultInterval = time.Second
)

// Options configure [Run]. Zero values mean the defaults.
type Options struct {
	// Percent is the GC target (GOGC) set when the operator set none.
	Percent int
	// Headroom is how much of the live heap the heap may grow by before a
	// collection, once the live heap is large enough for the limit to
	// matter: the soft limit is the live heap × (1 + Headroom), and never
	// below Floor.
	Headroom float64
	// Floor is the lowest soft limit: below it GOGC alone paces the
	// collector.
	Floor int64
	// Interval is how often the live heap is read.
	Interval time.Duration
}

func (o Options) withDefaults() Options {
	if o.Percent <= 0 {
		o.Percent = DefaultPercent
	}
	if o.Headroom <= 0 {
		o.Headroom = DefaultHeadroom
	}
	if o.Floor <= 0 {
		o.Floor = DefaultFloor
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	return o
}

// Limit is the soft memory limit for a live heap of live bytes.
func (o Options) Limit(live uint64) int64 {
	o = o.withDefaults()
	l := float64(live) * (1 + o.Headroom)
	if l > math.MaxInt64/2 {
		return math.MaxInt64
	}
	return max(o.Floor, int64(l))
}

// Apply sets the GC target, unless the operator chose one with GOGC, and
// reports whether the soft limit should follow the live heap: not when the
// operator set GOMEMLIMIT, whose choice stands.
func Apply(getenv func(string) string, o Options) (follow bool) {
	o = o.withDefaults()
	if getenv("GOGC") == "" {
		debug.SetGCPercent(o.Percent)
	}
	return getenv("GOMEMLIMIT") == ""
}

// Run makes the soft memory limit follow the live heap until ctx ends,
// then lifts it.
func Run(ctx context.Context, o Options) {
	o = o.withDefaults()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var last int64
	update := func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		if l := o.Limit(sample[0].Value.Uint64()); l != last {
			debug.SetMemoryLimit(l)
			last = l
		}
	}
	update()
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			debug.SetMemoryLimit(math.MaxInt64)
			return
		case <-t.C:
			update()
		}
	}
}
