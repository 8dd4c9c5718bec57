package telemetry

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable clock for the series.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }
func newClock(t time.Time) *clock    { c := &clock{}; c.ns.Store(t.UnixNano()); return c }
func find(a SeriesAnswer, scope, name string) *SeriesData {
	for i := range a.Series {
		if a.Series[i].Scope == scope && a.Series[i].Name == name {
			return &a.Series[i]
		}
	}
	return nil
}

func TestTimeSeriesCounts(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	type call struct {
		at           time.Duration // after start
		server, tool string
		failed       bool
		took         time.Duration
	}
	tests := []struct {
		name      string
		calls     []call
		after     time.Duration // clock at query, after start
		q         SeriesQuery
		scope     string
		series    string
		wantCalls uint64
		errors    uint64
		p50Max    float64 // p50 within (p50Min, p50Max]
		p50Min    float64
		nonzero   int // points with calls
	}{
		{
			name: "gateway counts every call and its errors",
			calls: []call{
				{0, "a", "a.x", false, 3 * time.Millisecond},
				{time.Second, "b", "b.y", true, 3 * time.Millisecond},
				{2 * time.Second, "", "", true, 3 * time.Millisecond},
			},
			after: 3 * time.Second, q: SeriesQuery{Window: time.Minute, Step: time.Second, Top: 5},
			scope: "gateway", series: "gateway", wantCalls: 3, errors: 2, p50Min: 2, p50Max: 5, nonzero: 3,
		},
		{
			name: "a server sees only its calls",
			calls: []call{
				{0, "a", "a.x", false, 30 * time.Millisecond},
				{0, "a", "a.x", false, 40 * time.Millisecond},
				{0, "b", "b.y", true, time.Millisecond},
			},
			after: time.Second, q: SeriesQuery{Window: time.Minute, Step: 10 * time.Second, Server: "a", Top: 5},
			scope: "server", series: "a", wantCalls: 2, p50Min: 25, p50Max: 50, nonzero: 1,
		},
		{
			name: "calls older than the window are left out",
			calls: []call{
				{0, "a", "a.x", false, time.Millisecond},
				{50 * time.Minute, "a", "a.x", false, time.Millisecond},
			},
			after: 50*time.Minute + time.Second, q: SeriesQuery{Window: 5 * time.Minute, Step: 10 * time.Second, Top: 5},
			scope: "tool", series: "a.x", wantCalls: 1, p50Min: 0, p50Max: 1, nonzero: 1,
		},
		{
			name: "a slot reused after an hour forgets the old step",
			calls: []call{
				{0, "a", "a.x", true, time.Millisecond},
				{time.Hour, "a", "a.x", false, time.Millisecond},
			},
			after: time.Hour + time.Second, q: SeriesQuery{Window: time.Hour, Step: time.Minute, Top: 5},
			scope: "gateway", series: "gateway", wantCalls: 1, errors: 0, p50Min: 0, p50Max: 1, nonzero: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock(start)
			ts := NewTimeSeries(c.now)
			for _, cl := range tt.calls {
				c.ns.Store(start.Add(cl.at).UnixNano())
				ts.Record(cl.server, cl.tool, cl.failed, cl.took)
			}
			c.ns.Store(start.Add(tt.after).UnixNano())
			a := ts.Query(tt.q)
			d := find(a, tt.scope, tt.series)
			if d == nil {
				t.Fatalf("no %s series %q in %+v", tt.scope, tt.series, a.Series)
			}
			if d.Calls != tt.wantCalls || d.Errors != tt.errors {
				t.Errorf("calls, errors = %d, %d; want %d, %d", d.Calls, d.Errors, tt.wantCalls, tt.errors)
			}
			if d.P50MS <= tt.p50Min || d.P50MS > tt.p50Max {
				t.Errorf("p50 = %v ms, want in (%v, %v]", d.P50MS, tt.p50Min, tt.p50Max)
			}
			var nz int
			var sum uint64
			for _, p := range d.Points {
				if p.Calls > 0 {
					nz++
				}
				sum += p.Calls
			}
			if nz != tt.nonzero || sum != d.Calls {
				t.Errorf("%d points with calls summing to %d; want %d points, sum %d", nz, sum, tt.nonzero, d.Calls)
			}
			if want := int(tt.q.Window / time.Duration(d.StepSeconds) / time.Second); len(d.Points) != want {
				t.Errorf("%d points, want %d", len(d.Points), want)
			}
		})
	}
}

func TestTimeSeriesTopAndCaps(t *testing.T) {
	c := newClock(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	ts := NewTimeSeries(c.now)
	for i := range maxToolSeries + 10 {
		for range i + 1 {
			ts.Record("s", "s.t"+string(rune('A'+i%26))+string(rune('a'+i/26)), false, time.Millisecond)
		}
	}
	c.add(time.Second)
	a := ts.Query(SeriesQuery{Window: time.Minute, Step: 10 * time.Second, Top: 3})
	var tools []SeriesData
	for _, d := range a.Series {
		if d.Scope == "tool" {
			tools = append(tools, d)
		}
	}
	if len(tools) != 3 {
		t.Fatalf("%d tools, want 3", len(tools))
	}
	// The busiest tracked tool is the last one under the cap.
	if tools[0].Calls != maxToolSeries || tools[0].Calls < tools[1].Calls || tools[1].Calls < tools[2].Calls {
		t.Errorf("top tools not busiest first: %d, %d, %d", tools[0].Calls, tools[1].Calls, tools[2].Calls)
	}
	g := find(a, "gateway", "gateway")
	n := uint64(maxToolSeries+10) * uint64(maxToolSeries+11) / 2
	if g.Calls != n {
		t.Errorf("gateway calls = %d, want %d (calls past the cap still count)", g.Calls, n)
	}
	ts.Forget("s")
	if a := ts.Query(SeriesQuery{Window: time.Minute, Step: 10 * time.Second, Top: 3}); find(a, "server", "s") != nil || len(a.Series) != 1 {
		t.Errorf("after Forget: %d series, want the gateway's only", len(a.Series))
	}
	ts.Record("s", "s.new", false, time.Millisecond)
	if a := ts.Query(SeriesQuery{Window: time.Minute, Step: 10 * time.Second, Top: 3}); find(a, "tool", "s.new") == nil {
		t.Error("Forget did not free room under the tool cap")
	}
}

func TestTimeSeriesConcurrent(t *testing.T) {
	c := newClock(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	ts := NewTimeSeries(c.now)
	const workers, per = 8, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				ts.Record("s", "s.t", i%4 == 0, time.Duration(w+1)*time.Millisecond)
			}
		}()
	}
	wg.Wait()
	c.add(time.Second)
	g := find(ts.Query(SeriesQuery{Window: time.Minute, Step: time.Second}), "gateway", "gateway")
	if g.Calls != workers*per || g.Errors != workers*per/4 {
		t.Errorf("calls, errors = %d, %d; want %d, %d", g.Calls, g.Errors, workers*per, workers*per/4)
	}
}

func TestRecordAllocs(t *testing.T) {
	ts := NewTimeSeries(nil)
	ts.Record("s", "s.t", false, time.Millisecond)
	if n := testing.AllocsPerRun(1000, func() { ts.Record("s", "s.t", false, time.Millisecond) }); n != 0 {
		t.Errorf("Record allocates %v times per call, want 0", n)
	}
}

func BenchmarkTimeSeriesRecord(b *testing.B) {
	ts := NewTimeSeries(nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ts.Record("demo", "demo.echo", false, 2*time.Millisecond)
		}
	})
}
