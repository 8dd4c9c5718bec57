package telemetry

import (
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// SeriesBoundsMS are the upper bounds (milliseconds) of the latency
// histogram kept per time slot; a last, open bucket takes the rest. p50 and
// p95 are read from it by linear interpolation inside the bucket, so they
// are estimates with the resolution of these bounds.
var SeriesBoundsMS = [...]float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}

const histBuckets = len(SeriesBoundsMS) + 1

// Series shapes. The gateway's own series has 1-second slots for an hour;
// per server and per tool, 10-second slots for an hour. One slot is 80
// bytes, so the gateway series is 288 KB, each server or tool 28.8 KB, and
// with the caps below the whole store stays under 9 MB.
const (
	gatewayStep  = time.Second
	gatewaySlots = 3600
	detailStep   = 10 * time.Second
	detailSlots  = 360
	// SeriesWindow is the longest window the series answer for.
	SeriesWindow = time.Hour
	// maxServerSeries and maxToolSeries cap the servers and tools that get
	// a series of their own; calls beyond them still count for the gateway.
	maxServerSeries = 256
	maxToolSeries   = 64
)

// slot is one time step of a ring. epoch is the step number (unix time /
// step) the counters belong to, with resetting set while the writer that
// moved the slot to a new step zeroes it.
type slot struct {
	epoch  atomic.Uint64
	calls  atomic.Uint32
	errors atomic.Uint32
	hist   [histBuckets]atomic.Uint32
	sumUS  atomic.Uint64
}

const resetting = 1 << 63

// ring is one series: a fixed array of slots reused round-robin.
type ring struct {
	step  time.Duration
	slots []slot
	// server is the server a tool series belongs to ("" otherwise).
	server string
}

func newRing(step time.Duration, n int, server string) *ring {
	return &ring{step: step, slots: make([]slot, n), server: server}
}

// add records one call at unix-nanosecond now. It only does atomic loads,
// adds and (once per slot per step) a compare-and-swap: no lock, no
// allocation.
func (r *ring) add(now int64, failed bool, bucket int, us uint64) {
	ep := uint64(now / int64(r.step))
	s := &r.slots[ep%uint64(len(r.slots))]
	for {
		cur := s.epoch.Load()
		if cur == ep {
			break
		}
		// The resetting bit must not take part in the comparison: a slot
		// being zeroed for this very step compares above ep with it, and
		// the call waiting for it was dropped as stale.
		if at := cur &^ resetting; at > ep {
			return // a call that finished a whole ring ago; drop it
		}
		if cur&resetting != 0 {
			runtime.Gosched() // another writer is zeroing this slot for a new step
			continue
		}
		if s.epoch.CompareAndSwap(cur, ep|resetting) {
			s.calls.Store(0)
			s.errors.Store(0)
			for i := range s.hist {
				s.hist[i].Store(0)
			}
			s.sumUS.Store(0)
			s.epoch.Store(ep)
			break
		}
	}
	s.calls.Add(1)
	if failed {
		s.errors.Add(1)
	}
	s.hist[bucket].Add(1)
	s.sumUS.Add(us)
}

// Point is one step of a series answer.
type Point struct {
	// T is the start of the step.
	T      time.Time `json:"t"`
	Calls  uint64    `json:"calls"`
	Errors uint64    `json:"errors"`
	// P50MS and P95MS are estimated from the histogram; 0 without calls.
	P50MS  float64 `json:"p50_ms"`
	P95MS  float64 `json:"p95_ms"`
	MeanMS float64 `json:"mean_ms"`
}

// SeriesData is one series over a window.
type SeriesData struct {
	Scope  string `json:"scope"` // gateway, server or tool
	Name   string `json:"name"`
	Server string `json:"server,omitempty"` // a tool's server
	// StepSeconds is the width of each point.
	StepSeconds int     `json:"step_seconds"`
	Calls       uint64  `json:"calls"`
	Errors      uint64  `json:"errors"`
	P50MS       float64 `json:"p50_ms"`
	P95MS       float64 `json:"p95_ms"`
	Points      []Point `json:"points"`
}

type acc struct {
	calls, errors, sumUS uint64
	hist                 [histBuckets]uint64
}

func (a *acc) point(t time.Time) Point {
	p := Point{T: t, Calls: a.calls, Errors: a.errors}
	if a.calls > 0 {
		p.P50MS = quantile(&a.hist, a.calls, 0.5)
		p.P95MS = quantile(&a.hist, a.calls, 0.95)
		p.MeanMS = math.Round(float64(a.sumUS)/float64(a.calls)) / 1e3
	}
	return p
}

// quantile estimates the q quantile from the histogram, interpolating
// linearly inside the bucket that holds it.
func quantile(h *[histBuckets]uint64, n uint64, q float64) float64 {
	rank := q * float64(n)
	var seen float64
	for i, c := range h {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			lo := 0.0
			if i > 0 {
				lo = SeriesBoundsMS[i-1]
			}
			if i == len(SeriesBoundsMS) {
				return lo // the open bucket: its lower bound is all we know
			}
			hi := SeriesBoundsMS[i]
			return math.Round((lo+(hi-lo)*(rank-seen)/float64(c))*1000) / 1000
		}
		seen += float64(c)
	}
	return SeriesBoundsMS[len(SeriesBoundsMS)-1]
}

// read sums the slots into points of step over [end-window, end).
func (r *ring) read(end time.Time, window, step time.Duration) SeriesData {
	if step < r.step {
		step = r.step
	}
	step = step / r.step * r.step
	endEp := uint64(end.UnixNano() / int64(r.step))
	n := max(int(window/step), 1)
	per := uint64(step / r.step)
	// Align the last point to the step so points do not shift as time goes.
	lastStart := endEp / per * per
	firstStart := lastStart - uint64(n-1)*per
	d := SeriesData{StepSeconds: int(step / time.Second)}
	var total acc
	d.Points = make([]Point, 0, n)
	for i := range n {
		start := firstStart + uint64(i)*per
		var a acc
		for ep := start; ep < start+per && ep <= endEp; ep++ {
			if endEp-ep >= uint64(len(r.slots)) {
				continue
			}
			s := &r.slots[ep%uint64(len(r.slots))]
			if s.epoch.Load() != ep {
				continue
			}
			a.calls += uint64(s.calls.Load())
			a.errors += uint64(s.errors.Load())
			a.sumUS += s.sumUS.Load()
			for b := range s.hist {
				a.hist[b] += uint64(s.hist[b].Load())
			}
		}
		total.calls += a.calls
		total.errors += a.errors
		for b := range a.hist {
			total.hist[b] += a.hist[b]
		}
		d.Points = append(d.Points, a.point(time.Unix(0, int64(start)*int64(r.step)).UTC()))
	}
	tp := total.point(time.Time{})
	d.Calls, d.Errors, d.P50MS, d.P95MS = tp.Calls, tp.Errors, tp.P50MS, tp.P95MS
	return d
}

// TimeSeries keeps the calls, errors and latency of the last hour in
// memory, for the gateway as a whole, per server and per tool (at most
// maxServerSeries servers and maxToolSeries tools; see the constants for
// the memory this takes). Recording costs a few atomic adds and map loads,
// no allocation, so it runs on every call. Safe for concurrent use.
type TimeSeries struct {
	now     func() time.Time
	gateway *ring
	servers sync.Map // name → *ring
	tools   sync.Map // name → *ring

	mu      sync.Mutex // guards creating and dropping series
	nServer int
	nTool   int
}

// NewTimeSeries returns an empty store. now is the clock (nil: time.Now),
// injectable so tests control the steps.
func NewTimeSeries(now func() time.Time) *TimeSeries {
	if now == nil {
		now = time.Now
	}
	return &TimeSeries{now: now, gateway: newRing(gatewayStep, gatewaySlots, "")}
}

func bucketOf(ms float64) int {
	for i, b := range SeriesBoundsMS {
		if ms <= b {
			return i
		}
	}
	return len(SeriesBoundsMS)
}

// Record counts one finished call of tool (namespaced) on server; failed
// is any outcome but success. An empty server or tool counts only for the
// gateway.
func (ts *TimeSeries) Record(server, tool string, failed bool, took time.Duration) {
	now := ts.now().UnixNano()
	us := uint64(max(took.Microseconds(), 0))
	b := bucketOf(float64(us) / 1e3)
	ts.gateway.add(now, failed, b, us)
	if server != "" {
		if r := ts.series(&ts.servers, server, "", &ts.nServer, maxServerSeries); r != nil {
			r.add(now, failed, b, us)
		}
		if tool != "" {
			if r := ts.series(&ts.tools, tool, server, &ts.nTool, maxToolSeries); r != nil {
				r.add(now, failed, b, us)
			}
		}
	}
}

// series finds or, below the cap, creates the named series. The lookup
// is lock-free; only the first call of a name takes the lock.
func (ts *TimeSeries) series(m *sync.Map, name, server string, n *int, limit int) *ring {
	if v, ok := m.Load(name); ok {
		return v.(*ring)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if v, ok := m.Load(name); ok {
		return v.(*ring)
	}
	if *n >= limit {
		return nil
	}
	r := newRing(detailStep, detailSlots, server)
	m.Store(name, r)
	*n++
	return r
}

// Forget drops a removed server's series and those of its tools, which
// frees room under the caps.
func (ts *TimeSeries) Forget(server string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if _, ok := ts.servers.LoadAndDelete(server); ok {
		ts.nServer--
	}
	ts.tools.Range(func(k, v any) bool {
		if v.(*ring).server == server {
			ts.tools.Delete(k)
			ts.nTool--
		}
		return true
	})
}

// SeriesQuery selects what [TimeSeries.Query] answers.
type SeriesQuery struct {
	// Window is how far back (at most [SeriesWindow]); Step the width of
	// a point (at least the series' resolution).
	Window, Step time.Duration
	// Server, if set, keeps only that server and its tools.
	Server string
	// Top is how many tools to answer for, busiest over the window first.
	Top int
}

// SeriesAnswer is the answer of [TimeSeries.Query].
type SeriesAnswer struct {
	End           time.Time `json:"end"`
	WindowSeconds int       `json:"window_seconds"`
	// StepSeconds is the step asked for; detail series may be coarser.
	StepSeconds int          `json:"step_seconds"`
	Series      []SeriesData `json:"series"`
}

// Query reads the series over q.Window ending now: the gateway's (unless
// q.Server is set), every server's (or q.Server's), and the q.Top busiest
// tools'. The gateway's series has 1-second resolution, the others 10
// seconds, so Step is raised to at least that for them (each series says
// its own step_seconds).
func (ts *TimeSeries) Query(q SeriesQuery) SeriesAnswer {
	end := ts.now()
	step := max(q.Step, detailStep)
	a := SeriesAnswer{End: end.UTC(), WindowSeconds: int(q.Window / time.Second), StepSeconds: int(max(q.Step, gatewayStep) / time.Second)}
	if q.Server == "" {
		d := ts.gateway.read(end, q.Window, q.Step)
		d.Scope, d.Name = "gateway", "gateway"
		a.Series = append(a.Series, d)
	}
	var servers []SeriesData
	ts.servers.Range(func(k, v any) bool {
		name := k.(string)
		if q.Server == "" || q.Server == name {
			d := v.(*ring).read(end, q.Window, step)
			d.Scope, d.Name = "server", name
			servers = append(servers, d)
		}
		return true
	})
	if q.Server != "" && len(servers) == 0 {
		d := newRing(detailStep, 1, "").read(end, q.Window, step) // no calls yet: an empty series
		d.Scope, d.Name = "server", q.Server
		servers = append(servers, d)
	}
	sort.Slice(servers, func(i, j int) bool { return servers[i].Name < servers[j].Name })
	a.Series = append(a.Series, servers...)
	var tools []SeriesData
	ts.tools.Range(func(k, v any) bool {
		r := v.(*ring)
		if q.Server == "" || q.Server == r.server {
			d := r.read(end, q.Window, step)
			if d.Calls > 0 {
				d.Scope, d.Name, d.Server = "tool", k.(string), r.server
				tools = append(tools, d)
			}
		}
		return true
	})
	sort.Slice(tools, func(i, j int) bool {
		if tools[i].Calls != tools[j].Calls {
			return tools[i].Calls > tools[j].Calls
		}
		return tools[i].Name < tools[j].Name
	})
	if len(tools) > q.Top {
		tools = tools[:max(q.Top, 0)]
	}
	a.Series = append(a.Series, tools...)
	return a
}
