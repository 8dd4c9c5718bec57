package main

import (
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// outcome is how one soak call ended.
type outcome int

const (
	outcomeOK         outcome = iota // the expected answer
	outcomeExpected                  // the failing upstream's injected fault
	outcomeUnexpected                // anything else: a timeout, a wrong answer, another error
)

// maxErrorsKept bounds the unexpected errors a soak report quotes.
const maxErrorsKept = 20

// loadSpec is the schedule of an open-loop load.
type loadSpec struct {
	Rate        float64       // calls started per second
	Duration    time.Duration // how long calls are started
	MaxInFlight int           // calls due while this many are in flight are dropped

	dispatched func() // tests: called once every call is started or dropped
}

// scheduled is how many calls the spec starts: one every 1/Rate from the
// start, the last one before Duration ends.
func (s loadSpec) scheduled() int {
	return int(math.Ceil(s.Duration.Seconds()*s.Rate - 1e-9))
}

// seconds is how many one-second samples the load spans.
func (s loadSpec) seconds() int {
	return max(int(math.Ceil(s.Duration.Seconds()-1e-9)), 1)
}

// due is when call seq is scheduled, from the start.
func (s loadSpec) due(seq int) time.Duration {
	return time.Duration(float64(seq) * float64(time.Second) / s.Rate)
}

// soakCall is one call of the load: seq numbers the calls from 0 in
// schedule order. It returns how the call ended and, unless ok, why.
type soakCall func(ctx context.Context, seq int) (outcome, error)

// gauges reads the gateway's state at the end of every second (RSS,
// goroutines, CPU); nil reads nothing.
type gauges func() gaugeReading

// gaugeReading is one reading of the gateway; a field below 0 could not be
// read.
type gaugeReading struct {
	RSS        int64
	Goroutines int
	CPU        time.Duration // cumulative since the gateway started
}

// soakSample is one second of the soak: the calls that ended in it and the
// gateway's state at its end.
type soakSample struct {
	T          int `json:"t_s"`     // the sample covers [T, T+1) seconds from the start
	Started    int `json:"started"` // calls started in this second
	Dropped    int `json:"dropped"` // calls due in this second but not started (in-flight bound)
	Ended      int `json:"ended"`   // calls that ended in this second, by outcome below
	OK         int `json:"ok"`
	Expected   int `json:"expected_errors"`
	Unexpected int `json:"unexpected_errors"`
	// Latency percentiles (nearest rank) of the calls that ended in this
	// second, from the moment each was sent; 0 when none ended.
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
	// MaxLag is the latest a call of this second was sent after its
	// scheduled time: a harness that cannot keep its schedule shows here.
	MaxLag   time.Duration `json:"max_send_lag_ns"`
	InFlight int           `json:"in_flight"` // at the end of the second
	// The gateway at the end of the second; -1 = could not be read.
	RSS        int64 `json:"rss_bytes"`
	Goroutines int   `json:"goroutines"`
	// GatewayCPU is the CPU time the gateway process used in this second;
	// -1 = could not be read.
	GatewayCPU time.Duration `json:"gateway_cpu_ns"`

	lat []time.Duration // the latencies behind the percentiles, for the windows
}

// loadResult is everything an open-loop run saw.
type loadResult struct {
	Samples   []soakSample
	Scheduled int
	Started   int
	Dropped   int
	Errors    []string // the first unexpected errors, "t=…s call N: …"
	// Interrupted is set when ctx ended the schedule early; Scheduled is
	// then the calls that came due before, Samples the seconds begun.
	Interrupted bool
}

// recorder files each call's end into its second.
type recorder struct {
	t0 time.Time
	mu sync.Mutex
	s  []soakSample
	// errs keeps the first maxErrorsKept unexpected errors.
	errs []string
}

func newRecorder(t0 time.Time, seconds int) *recorder {
	s := make([]soakSample, seconds)
	for i := range s {
		s[i].T = i
		s[i].RSS, s[i].Goroutines, s[i].GatewayCPU = -1, -1, -1
	}
	return &recorder{t0: t0, s: s}
}

// second is the sample index of instant t; calls that end after the last
// second (the in-flight ones when the schedule ends) count in the last.
func (r *recorder) second(t time.Time) int {
	i := int(t.Sub(r.t0) / time.Second)
	return min(max(i, 0), len(r.s)-1)
}

func (r *recorder) started(due time.Duration, lag time.Duration) {
	i := min(int(due/time.Second), len(r.s)-1)
	r.mu.Lock()
	r.s[i].Started++
	r.s[i].MaxLag = max(r.s[i].MaxLag, lag)
	r.mu.Unlock()
}

func (r *recorder) dropped(due time.Duration) {
	i := min(int(due/time.Second), len(r.s)-1)
	r.mu.Lock()
	r.s[i].Dropped++
	r.mu.Unlock()
}

func (r *recorder) ended(seq int, start, end time.Time, o outcome, err error) {
	i := r.second(end)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.s[i]
	s.Ended++
	s.lat = append(s.lat, end.Sub(start))
	switch o {
	case outcomeOK:
		s.OK++
	case outcomeExpected:
		s.Expected++
	default:
		s.Unexpected++
		if len(r.errs) < maxErrorsKept {
			msg := "no error"
			if err != nil {
				msg = err.Error()
			}
			r.errs = append(r.errs, "t="+end.Sub(r.t0).Round(time.Millisecond).String()+" call "+strconv.Itoa(seq)+": "+msg)
		}
	}
}

func (r *recorder) gauge(i int, g gaugeReading, prevCPU time.Duration, inFlight int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.s[i]
	s.RSS, s.Goroutines, s.InFlight = g.RSS, g.Goroutines, inFlight
	if g.CPU >= 0 && prevCPU >= 0 {
		s.GatewayCPU = g.CPU - prevCPU
	}
}

// runOpenLoop starts call number seq at loadSpec.due(seq) from now,
// whether or not earlier calls have ended (open loop: a slow gateway does
// not slow the load down, it piles calls up). A call due while
// MaxInFlight are in flight is dropped and counted. At the end of every
// second it reads g. It returns once every started call has ended and the
// schedule's last second is over, or, when ctx ends, once the calls in
// flight have ended.
func runOpenLoop(ctx context.Context, spec loadSpec, call soakCall, g gauges) loadResult {
	t0 := time.Now()
	rec := newRecorder(t0, spec.seconds())
	var inFlight atomic.Int64
	sem := make(chan struct{}, spec.MaxInFlight)
	var calls sync.WaitGroup

	// The gauges: one reading at the start (the CPU base) and one at the
	// end of each second of the schedule.
	var gaugeWG sync.WaitGroup
	gaugeWG.Go(func() {
		prevCPU := time.Duration(-1)
		if g != nil {
			prevCPU = g().CPU
		}
		for i := range rec.s {
			if sleep(ctx, time.Until(t0.Add(time.Duration(i+1)*time.Second))) != nil {
				return
			}
			n := int(inFlight.Load())
			r := gaugeReading{RSS: -1, Goroutines: -1, CPU: -1}
			if g != nil {
				r = g()
			}
			rec.gauge(i, r, prevCPU, n)
			prevCPU = r.CPU
		}
	})

	// An interruption (ctx) stops the schedule, not the calls in flight:
	// they end on their own (each has its timeout), so the report of an
	// interrupted soak still accounts for every call it sent.
	callCtx := context.WithoutCancel(ctx)
	res := loadResult{Scheduled: spec.scheduled()}
	for seq := range res.Scheduled {
		due := spec.due(seq)
		if wait := time.Until(t0.Add(due)); wait > 0 {
			if sleep(ctx, wait) != nil {
				res.Scheduled, res.Interrupted = seq, true
				break
			}
		}
		select {
		case sem <- struct{}{}:
		default:
			rec.dropped(due)
			res.Dropped++
			continue
		}
		rec.started(due, time.Since(t0.Add(due)))
		res.Started++
		inFlight.Add(1)
		calls.Go(func() {
			defer func() { inFlight.Add(-1); <-sem }()
			start := time.Now()
			o, err := call(callCtx, seq)
			rec.ended(seq, start, time.Now(), o, err)
		})
	}
	if spec.dispatched != nil {
		spec.dispatched()
	}
	calls.Wait()
	gaugeWG.Wait() // it ends with the last second of the schedule, or ctx
	if res.Interrupted {
		// Keep the seconds that began; every call ended in one of them.
		n := int((time.Since(t0) + time.Second - 1) / time.Second)
		rec.s = rec.s[:min(max(n, 1), len(rec.s))]
	}

	for i := range rec.s {
		s := &rec.s[i]
		l := summarize(s.lat) // sorts s.lat, which the windows reuse
		s.P50, s.P90, s.P99, s.Max = l.P50, l.P90, l.P99, l.Max
	}
	res.Samples, res.Errors = rec.s, rec.errs
	return res
}
