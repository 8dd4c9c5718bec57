package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/switchboard-mcp/switchboard/internal/clocktest"
)

// fakeSink stores records in memory. With block set, every WriteAudit
// announces itself on entered and waits for release or its ctx; failFirst
// makes the first n calls fail.
type fakeSink struct {
	block     bool
	entered   chan struct{}
	release   chan struct{}
	failFirst int

	mu     sync.Mutex
	recs   []Record
	calls  int
	active int // WriteAudit calls in progress
	purges []time.Time
	purged chan time.Time
}

// errLocked is what a failing fakeSink returns.
var errLocked = errors.New("database is locked")

func newFakeSink() *fakeSink {
	return &fakeSink{
		entered: make(chan struct{}, 100),
		release: make(chan struct{}),
		purged:  make(chan time.Time, 10),
	}
}

func (s *fakeSink) WriteAudit(ctx context.Context, recs []Record) error {
	s.mu.Lock()
	s.calls++
	s.active++
	fail := s.calls <= s.failFirst
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.active--
		s.mu.Unlock()
	}()
	if s.block {
		s.entered <- struct{}{}
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errLocked
	}
	s.mu.Lock()
	s.recs = append(s.recs, recs...)
	s.mu.Unlock()
	return nil
}

func (s *fakeSink) PurgeAudit(ctx context.Context, before time.Time) (int64, error) {
	s.mu.Lock()
	s.purges = append(s.purges, before)
	s.mu.Unlock()
	select {
	case s.purged <- before:
	default: // nobody is counting any more
	}
	return 7, nil
}

func (s *fakeSink) written() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.recs...)
}

func (s *fakeSink) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

func (s *fakeSink) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// logCapture is a slog.Handler that keeps every record.
type logCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logCapture) WithGroup(string) slog.Handler            { return h }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}

// lines renders the captured records as "LEVEL msg k=v ..." for comparison.
func (h *logCapture) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		out = append(out, b.String())
	}
	return out
}

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// closeRecorder closes r and checks that no goroutine outlived Close.
func closeRecorder(t *testing.T, r *Recorder) error {
	t.Helper()
	err := r.Close(t.Context())
	select {
	case <-r.done:
	default:
		t.Error("goroutines still running after Close returned")
	}
	return err
}

func TestRecorderWritesAllInOrder(t *testing.T) {
	clock := clocktest.New(t0)
	sink := newFakeSink()
	var lastDepth atomic.Int64
	r := NewRecorder(sink, &Options{
		BatchSize: 7,
		Replica:   "replica-a",
		Clock:     clock.Now,
		OnDepth:   func(n int) { lastDepth.Store(int64(n)) },
	})
	t.Cleanup(func() { closeRecorder(t, r) })

	const n = 1000
	var want []string
	for i := range n {
		rec := Record{CorrelationID: fmt.Sprint(i)}
		if i == 1 {
			rec.Kind, rec.Operation, rec.Replica = KindOperation, "server.register", "replica-b"
			rec.ID, rec.InvokedAt = "fixed-id", t0.Add(-time.Hour)
		}
		if !r.Record(rec) {
			t.Fatalf("Record(%d) = false, want true", i)
		}
		want = append(want, rec.CorrelationID)
	}
	if err := r.Flush(t.Context()); err != nil {
		t.Fatalf("Flush: %v", err)
	}

	recs := sink.written()
	var got []string
	for _, rec := range recs {
		got = append(got, rec.CorrelationID)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("written records (-want +got):\n%s", diff)
	}
	if d := r.Depth(); d != 0 {
		t.Errorf("Depth after Flush = %d, want 0", d)
	}
	if d := lastDepth.Load(); d != 0 {
		t.Errorf("last OnDepth after Flush = %d, want 0", d)
	}

	// Defaults are filled in; values the caller set are kept.
	id, err := uuid.Parse(recs[0].ID)
	if err != nil || id.Version() != 7 {
		t.Errorf("filled ID = %q (err %v), want a UUIDv7", recs[0].ID, err)
	}
	type fields struct {
		Kind, Operation, Replica, ID string
		InvokedAt                    time.Time
	}
	pick := func(r Record, withID bool) fields {
		f := fields{r.Kind, r.Operation, r.Replica, "", r.InvokedAt}
		if withID {
			f.ID = r.ID
		}
		return f
	}
	if diff := cmp.Diff(fields{Kind: KindInvocation, Replica: "replica-a", InvokedAt: t0}, pick(recs[0], false)); diff != "" {
		t.Errorf("filled fields (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(fields{KindOperation, "server.register", "replica-b", "fixed-id", t0.Add(-time.Hour)}, pick(recs[1], true)); diff != "" {
		t.Errorf("caller's fields (-want +got):\n%s", diff)
	}
}

func TestRecorderFlushWritesPartialBatch(t *testing.T) {
	sink := newFakeSink()
	// Neither the batch size nor the interval would write these records.
	r := NewRecorder(sink, &Options{BatchSize: 100, FlushInterval: time.Hour})
	t.Cleanup(func() { closeRecorder(t, r) })
	for range 3 {
		r.Record(Record{})
	}
	if err := r.Flush(t.Context()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := len(sink.written()); got != 3 {
		t.Errorf("written after Flush = %d, want 3", got)
	}
	// A Flush with nothing queued returns at once.
	if err := r.Flush(t.Context()); err != nil {
		t.Fatalf("second Flush: %v", err)
	}
}

func TestRecorderFlushHonoursContext(t *testing.T) {
	sink := newFakeSink()
	sink.block = true
	r := NewRecorder(sink, &Options{BatchSize: 1})
	t.Cleanup(func() {
		close(sink.release)
		closeRecorder(t, r)
	})
	r.Record(Record{})
	<-sink.entered
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush with a cancelled ctx and a stuck sink = %v, want context.Canceled", err)
	}
}

func TestRecorderOverflowNeverBlocks(t *testing.T) {
	sink := newFakeSink()
	sink.block = true
	var overflows atomic.Int64
	logs := &logCapture{}
	clock := clocktest.New(t0)
	r := NewRecorder(sink, &Options{
		QueueSize:  4,
		BatchSize:  1,
		Clock:      clock.Now,
		Logger:     slog.New(logs),
		OnOverflow: func() { overflows.Add(1) },
	})

	// The committer takes the first record and blocks in the sink; the
	// writer takes the second as the next batch and waits for it.
	if !r.Record(Record{CorrelationID: "0"}) {
		t.Fatal("first Record = false")
	}
	<-sink.entered
	if !r.Record(Record{CorrelationID: "1"}) {
		t.Fatal("second Record = false")
	}
	waitQueueEmpty(t, r)
	var got []bool
	for i := 2; i <= 7; i++ {
		got = append(got, r.Record(Record{CorrelationID: fmt.Sprint(i)}))
	}
	if diff := cmp.Diff([]bool{true, true, true, true, false, false}, got); diff != "" {
		t.Errorf("Record results with a stuck sink (-want +got):\n%s", diff)
	}
	if d := r.Dropped(); d != 2 {
		t.Errorf("Dropped = %d, want 2", d)
	}
	if n := overflows.Load(); n != 2 {
		t.Errorf("OnOverflow calls = %d, want 2", n)
	}
	if d := r.Depth(); d != 6 {
		t.Errorf("Depth = %d, want 6", d)
	}

	close(sink.release)
	if err := closeRecorder(t, r); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var ids []string
	for _, rec := range sink.written() {
		ids = append(ids, rec.CorrelationID)
	}
	if diff := cmp.Diff([]string{"0", "1", "2", "3", "4", "5"}, ids); diff != "" {
		t.Errorf("written (-want +got):\n%s", diff)
	}
	// One warning for the first drop; the second drop is within 10s and is
	// reported, with its count, by Close.
	wantLogs := []string{
		"WARN audit records dropped count=1 reason=queue full",
		"WARN audit records dropped count=1 reason=queue full or closed",
	}
	if diff := cmp.Diff(wantLogs, logs.lines()); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}
}

func TestRecorderDropWarningRateLimited(t *testing.T) {
	clock := clocktest.New(t0)
	sink := newFakeSink()
	logs := &logCapture{}
	r := NewRecorder(sink, &Options{QueueSize: 1, Clock: clock.Now, Logger: slog.New(logs)})
	if err := closeRecorder(t, r); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// After Close every Record is a drop.
	for range 3 {
		r.Record(Record{})
	}
	clock.Advance(9 * time.Second)
	r.Record(Record{})
	clock.Advance(time.Second)
	r.Record(Record{})
	r.Record(Record{})
	want := []string{
		"WARN audit records dropped count=1 reason=recorder closed",
		"WARN audit records dropped count=4 reason=recorder closed",
	}
	if diff := cmp.Diff(want, logs.lines()); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}
	if d := r.Dropped(); d != 6 {
		t.Errorf("Dropped = %d, want 6", d)
	}
}

func TestRecorderCloseFlushes(t *testing.T) {
	sink := newFakeSink()
	var overflows atomic.Int64
	r := NewRecorder(sink, &Options{
		BatchSize:     4,
		FlushInterval: time.Hour,
		OnOverflow:    func() { overflows.Add(1) },
	})
	for range 10 {
		r.Record(Record{})
	}
	if err := closeRecorder(t, r); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := len(sink.written()); got != 10 {
		t.Errorf("written after Close = %d, want 10", got)
	}
	if r.Record(Record{}) {
		t.Error("Record after Close = true, want false")
	}
	if d, o := r.Dropped(), overflows.Load(); d != 1 || o != 1 {
		t.Errorf("after a Record on a closed Recorder: Dropped = %d, OnOverflow calls = %d; want 1, 1", d, o)
	}
	if err := r.Flush(t.Context()); err != nil {
		t.Errorf("Flush after Close: %v", err)
	}
}

func TestRecorderCloseIdempotent(t *testing.T) {
	sink := newFakeSink()
	r := NewRecorder(sink, &Options{Retention: time.Hour})
	r.Record(Record{})
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = r.Close(t.Context()) })
	}
	wg.Wait()
	if diff := cmp.Diff([]error{nil, nil, nil}, errs, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("concurrent Close errors (-want +got):\n%s", diff)
	}
	// Closed already: even a cancelled ctx succeeds.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.Close(ctx); err != nil {
		t.Errorf("Close again: %v", err)
	}
	if err := closeRecorder(t, r); err != nil {
		t.Errorf("Close again: %v", err)
	}
	if got := len(sink.written()); got != 1 {
		t.Errorf("written = %d, want 1", got)
	}
}

func TestRecorderCloseDeadline(t *testing.T) {
	sink := newFakeSink()
	sink.block = true
	var overflows atomic.Int64
	r := NewRecorder(sink, &Options{BatchSize: 1, OnOverflow: func() { overflows.Add(1) }})
	for range 3 {
		r.Record(Record{})
	}
	<-sink.entered
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := r.Close(ctx)
	if !errors.Is(err, ErrDropped) || !errors.Is(err, context.Canceled) {
		t.Errorf("Close with a stuck sink and a cancelled ctx = %v, want ErrDropped and context.Canceled", err)
	}
	select {
	case <-r.done:
	default:
		t.Error("goroutines still running after Close returned")
	}
	if d, o := r.Dropped(), overflows.Load(); d != 3 || o != 3 {
		t.Errorf("Dropped = %d, OnOverflow calls = %d; want 3, 3", d, o)
	}
	if got := len(sink.written()); got != 0 {
		t.Errorf("written = %d, want 0", got)
	}
	if d := r.Depth(); d != 0 {
		t.Errorf("Depth = %d, want 0", d)
	}
}

func TestRecorderWriteRetries(t *testing.T) {
	tests := []struct {
		name        string
		failFirst   int
		wantCalls   int
		wantWritten int
		wantDropped uint64
		wantLogs    []string
	}{
		{
			name:        "recovers on the third try",
			failFirst:   2,
			wantCalls:   3,
			wantWritten: 3,
		},
		{
			name:        "dropped after three tries",
			failFirst:   1000,
			wantCalls:   3,
			wantDropped: 3,
			wantLogs:    []string{"ERROR audit batch dropped after write failures count=3 attempts=3 err=database is locked"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := newFakeSink()
			sink.failFirst = tt.failFirst
			logs := &logCapture{}
			var overflows atomic.Int64
			r := NewRecorder(sink, &Options{
				BatchSize:    10,
				RetryBackoff: time.Microsecond,
				Logger:       slog.New(logs),
				OnOverflow:   func() { overflows.Add(1) },
			})
			t.Cleanup(func() { closeRecorder(t, r) })
			for range 3 {
				// Contents that must never reach the log.
				r.Record(Record{Tool: "secret-tool", ResultSummary: "hunter2"})
			}
			err := r.Flush(t.Context())
			if tt.wantDropped > 0 && !errors.Is(err, ErrDropped) {
				t.Errorf("Flush = %v, want ErrDropped", err)
			}
			if tt.wantDropped == 0 && err != nil {
				t.Errorf("Flush = %v, want nil", err)
			}
			if got := sink.callCount(); got != tt.wantCalls {
				t.Errorf("WriteAudit calls = %d, want %d", got, tt.wantCalls)
			}
			if got := len(sink.written()); got != tt.wantWritten {
				t.Errorf("written = %d, want %d", got, tt.wantWritten)
			}
			if d, o := r.Dropped(), overflows.Load(); d != tt.wantDropped || o != int64(tt.wantDropped) {
				t.Errorf("Dropped = %d, OnOverflow calls = %d; want %d", d, o, tt.wantDropped)
			}
			lines := logs.lines()
			if diff := cmp.Diff(tt.wantLogs, lines); diff != "" {
				t.Errorf("logs (-want +got):\n%s", diff)
			}
			for _, l := range lines {
				if strings.Contains(l, "secret-tool") || strings.Contains(l, "hunter2") {
					t.Errorf("log line %q holds record contents", l)
				}
			}
		})
	}
}

func TestRecorderRetention(t *testing.T) {
	tests := []struct {
		name       string
		retention  time.Duration
		wantPurges []time.Time
	}{
		{name: "purges at start", retention: 24 * time.Hour, wantPurges: []time.Time{t0.Add(-24 * time.Hour)}},
		{name: "keeps forever", retention: 0, wantPurges: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clocktest.New(t0)
			sink := newFakeSink()
			logs := &logCapture{}
			r := NewRecorder(sink, &Options{
				Retention:     tt.retention,
				PurgeInterval: time.Hour,
				Clock:         clock.Now,
				Logger:        slog.New(logs),
			})
			if tt.wantPurges != nil {
				<-sink.purged
			}
			if err := closeRecorder(t, r); err != nil {
				t.Fatalf("Close: %v", err)
			}
			sink.mu.Lock()
			got := sink.purges
			sink.mu.Unlock()
			if diff := cmp.Diff(tt.wantPurges, got); diff != "" {
				t.Errorf("purge cut-offs (-want +got):\n%s", diff)
			}
			var wantLogs []string
			for _, before := range tt.wantPurges {
				wantLogs = append(wantLogs, fmt.Sprintf("INFO purged audit records count=7 before=%v", before))
			}
			if diff := cmp.Diff(wantLogs, logs.lines()); diff != "" {
				t.Errorf("logs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecorderPurgesPeriodically(t *testing.T) {
	clock := clocktest.New(t0)
	sink := newFakeSink()
	r := NewRecorder(sink, &Options{Retention: time.Hour, PurgeInterval: time.Millisecond, Clock: clock.Now})
	t.Cleanup(func() { closeRecorder(t, r) })
	first := <-sink.purged
	clock.Advance(time.Minute)
	// Skip purges that read the clock before it moved.
	for second := range sink.purged {
		if second.After(first) {
			if want := t0.Add(time.Minute - time.Hour); !second.Equal(want) {
				t.Errorf("later purge cut-off = %v, want %v", second, want)
			}
			return
		}
	}
}

func TestRecorderWriteTimeout(t *testing.T) {
	sink := newFakeSink()
	sink.block = true // never released: only WriteTimeout ends a call
	r := NewRecorder(sink, &Options{WriteTimeout: time.Millisecond, RetryBackoff: time.Microsecond})
	t.Cleanup(func() { closeRecorder(t, r) })
	r.Record(Record{})
	if err := r.Flush(t.Context()); !errors.Is(err, ErrDropped) {
		t.Errorf("Flush with a hung sink = %v, want ErrDropped", err)
	}
	if got := sink.callCount(); got != writeAttempts {
		t.Errorf("WriteAudit calls = %d, want %d", got, writeAttempts)
	}
}

func TestRecorderConcurrent(t *testing.T) {
	sink := newFakeSink()
	r := NewRecorder(sink, &Options{QueueSize: 64, BatchSize: 16})
	const workers, each = 8, 500
	var accepted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if r.Record(Record{CorrelationID: fmt.Sprint(w, "-", i)}) {
					accepted.Add(1)
				}
				if i%100 == 0 {
					if err := r.Flush(t.Context()); err != nil {
						t.Errorf("Flush: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := closeRecorder(t, r); err != nil {
		t.Fatalf("Close: %v", err)
	}
	written := sink.written()
	if got, want := int64(len(written)), accepted.Load(); got != want {
		t.Errorf("written = %d, accepted = %d; want equal", got, want)
	}
	if got := uint64(len(written)) + r.Dropped(); got != workers*each {
		t.Errorf("written + Dropped = %d, want %d", got, workers*each)
	}
	// Each worker's records stay in its order.
	next := make(map[string]int)
	for _, rec := range written {
		var w, i int
		fmt.Sscanf(rec.CorrelationID, "%d-%d", &w, &i)
		key := fmt.Sprint(w)
		if i < next[key] {
			t.Fatalf("record %s written after a later one of its worker", rec.CorrelationID)
		}
		next[key] = i + 1
	}
}

func TestNewRecorderNilSinkPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewRecorder(nil, nil) did not panic")
		}
	}()
	NewRecorder(nil, nil)
}
