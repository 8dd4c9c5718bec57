package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func correlationIDs(recs []Record) []string {
	var ids []string
	for _, rec := range recs {
		ids = append(ids, rec.CorrelationID)
	}
	return ids
}

func TestRecordSyncReturnsAfterWrite(t *testing.T) {
	sink := newFakeSink()
	// Neither the batch size nor the interval would write these records:
	// only the synchronous record makes the writer flush.
	r := NewRecorder(sink, &Options{BatchSize: 100, FlushInterval: time.Hour, Replica: "replica-a"})
	t.Cleanup(func() { closeRecorder(t, r) })
	r.Record(Record{CorrelationID: "a"})
	r.Record(Record{CorrelationID: "b"})
	if err := r.RecordSync(t.Context(), Record{CorrelationID: "c"}); err != nil {
		t.Fatalf("RecordSync: %v", err)
	}
	recs := sink.written()
	if diff := cmp.Diff([]string{"a", "b", "c"}, correlationIDs(recs)); diff != "" {
		t.Errorf("written when RecordSync returned (-want +got):\n%s", diff)
	}
	if got := sink.callCount(); got != 1 {
		t.Errorf("WriteAudit calls = %d, want 1 (one group)", got)
	}
	if d := r.Depth(); d != 0 {
		t.Errorf("Depth = %d, want 0", d)
	}
	// RecordSync fills the same defaults as Record.
	last := recs[len(recs)-1]
	if last.ID == "" || last.InvokedAt.IsZero() || last.Kind != KindInvocation || last.Replica != "replica-a" {
		t.Errorf("RecordSync record defaults: ID %q, InvokedAt %v, Kind %q, Replica %q", last.ID, last.InvokedAt, last.Kind, last.Replica)
	}
}

func TestRecordSyncGroupCommit(t *testing.T) {
	const n = 100
	sink := newFakeSink()
	sink.block = true
	full := make(chan struct{})
	var fullOnce sync.Once
	r := NewRecorder(sink, &Options{
		FlushInterval: time.Hour,
		OnDepth: func(d int) {
			if d >= n {
				fullOnce.Do(func() { close(full) })
			}
		},
	})
	t.Cleanup(func() { closeRecorder(t, r) })

	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = r.RecordSync(t.Context(), Record{CorrelationID: fmt.Sprint(i)}) })
	}
	// The first write holds the writer until every caller has queued.
	<-sink.entered
	<-full
	close(sink.release)
	wg.Wait()

	if diff := cmp.Diff(make([]error, n), errs, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("RecordSync errors (-want +got):\n%s", diff)
	}
	got := correlationIDs(sink.written())
	slices.Sort(got)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprint(i))
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("written (-want +got):\n%s", diff)
	}
	if calls := sink.callCount(); calls >= n {
		t.Errorf("WriteAudit calls = %d for %d concurrent RecordSync, want fewer (group commit)", calls, n)
	}
}

func TestRecordSyncContextEnds(t *testing.T) {
	sink := newFakeSink()
	sink.block = true
	r := NewRecorder(sink, nil)
	t.Cleanup(func() { closeRecorder(t, r) })

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- r.RecordSync(ctx, Record{CorrelationID: "slow"}) }()
	<-sink.entered
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) || errors.Is(err, ErrDropped) {
		t.Errorf("RecordSync with a cancelled ctx = %v, want context.Canceled and not ErrDropped", err)
	}

	// The record stays queued and is still written.
	close(sink.release)
	if err := r.Flush(t.Context()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if diff := cmp.Diff([]string{"slow"}, correlationIDs(sink.written())); diff != "" {
		t.Errorf("written (-want +got):\n%s", diff)
	}
	if d := r.Dropped(); d != 0 {
		t.Errorf("Dropped = %d, want 0", d)
	}
}

// fullRecorder returns a Recorder whose committer is stuck in the sink with
// record "0", whose writer holds record "1" (the next batch, waiting for
// the committer) and whose one-slot queue holds record "2".
func fullRecorder(t *testing.T, sink *fakeSink, opts *Options) *Recorder {
	t.Helper()
	opts.QueueSize, opts.BatchSize = 1, 1
	r := NewRecorder(sink, opts)
	r.Record(Record{CorrelationID: "0"})
	<-sink.entered
	if !r.Record(Record{CorrelationID: "1"}) {
		t.Fatal("Record(1) = false, want it queued")
	}
	waitQueueEmpty(t, r)
	if !r.Record(Record{CorrelationID: "2"}) {
		t.Fatal("Record(2) = false, want it queued")
	}
	if r.Record(Record{CorrelationID: "3"}) {
		t.Fatal("Record(3) = true, want the queue full")
	}
	return r
}

// waitQueueEmpty waits until the writer has taken every queued record.
func waitQueueEmpty(t *testing.T, r *Recorder) {
	t.Helper()
	for len(r.queue) > 0 {
		select {
		case <-t.Context().Done():
			t.Fatal("the writer never took the queued records")
		case <-time.After(time.Millisecond):
		}
	}
}

func TestRecordSyncQueueFull(t *testing.T) {
	sink := newFakeSink()
	sink.block = true
	r := fullRecorder(t, sink, &Options{})
	t.Cleanup(func() { closeRecorder(t, r) })

	errc := make(chan error, 1)
	go func() { errc <- r.RecordSync(t.Context(), Record{CorrelationID: "sync"}) }()
	// RecordSync writes directly rather than drop: a second call enters
	// the sink while the writer's is still stuck.
	<-sink.entered
	close(sink.release)
	if err := <-errc; err != nil {
		t.Fatalf("RecordSync with a full queue: %v", err)
	}
	if !slices.Contains(correlationIDs(sink.written()), "sync") {
		t.Errorf("written when RecordSync returned = %v, want it to hold %q", correlationIDs(sink.written()), "sync")
	}
	if err := r.Flush(t.Context()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	got := correlationIDs(sink.written())
	slices.Sort(got)
	if diff := cmp.Diff([]string{"0", "1", "2", "sync"}, got); diff != "" {
		t.Errorf("written (-want +got):\n%s", diff)
	}
	if d := r.Dropped(); d != 1 { // record "3", from Record
		t.Errorf("Dropped = %d, want 1", d)
	}
}

func TestRecordSyncQueueFullContextEnds(t *testing.T) {
	sink := newFakeSink()
	sink.block = true
	var overflows int
	var mu sync.Mutex
	r := fullRecorder(t, sink, &Options{OnOverflow: func() { mu.Lock(); overflows++; mu.Unlock() }})
	t.Cleanup(func() { closeRecorder(t, r) })

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- r.RecordSync(ctx, Record{CorrelationID: "sync"}) }()
	<-sink.entered
	cancel()
	// The direct write is bounded by ctx: the record is lost and counted.
	if err := <-errc; !errors.Is(err, ErrDropped) || !errors.Is(err, context.Canceled) {
		t.Errorf("RecordSync = %v, want ErrDropped and context.Canceled", err)
	}
	close(sink.release)
	if err := r.Flush(t.Context()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if diff := cmp.Diff([]string{"0", "1", "2"}, correlationIDs(sink.written())); diff != "" {
		t.Errorf("written (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if d := r.Dropped(); d != 2 || overflows != 2 { // "3" from Record, and "sync"
		t.Errorf("Dropped = %d, OnOverflow calls = %d; want 2, 2", d, overflows)
	}
}

func TestRecordSyncSinkFails(t *testing.T) {
	tests := []struct {
		name string
		full bool // the queue is full, so RecordSync writes directly
	}{
		{name: "queued"},
		{name: "direct", full: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := newFakeSink()
			sink.failFirst = 1000
			opts := &Options{RetryBackoff: time.Microsecond}
			var r *Recorder
			if tt.full {
				sink.block = true
				r = fullRecorder(t, sink, opts)
				close(sink.release)
			} else {
				r = NewRecorder(sink, opts)
			}
			t.Cleanup(func() { closeRecorder(t, r) })
			if tt.full {
				// Let the queued records fail first, so only RecordSync's
				// tries remain.
				if err := r.Flush(t.Context()); !errors.Is(err, ErrDropped) {
					t.Fatalf("Flush = %v, want ErrDropped", err)
				}
			}
			before, droppedBefore := sink.callCount(), r.Dropped()

			err := r.RecordSync(t.Context(), Record{CorrelationID: "sync"})
			if !errors.Is(err, ErrDropped) || !errors.Is(err, errLocked) {
				t.Errorf("RecordSync with a failing sink = %v, want ErrDropped and the sink's error", err)
			}
			if got := sink.callCount() - before; got != writeAttempts {
				t.Errorf("WriteAudit calls for RecordSync = %d, want %d", got, writeAttempts)
			}
			if got := len(sink.written()); got != 0 {
				t.Errorf("written = %d, want 0", got)
			}
			if d := r.Dropped() - droppedBefore; d != 1 {
				t.Errorf("Dropped grew by %d, want 1", d)
			}
		})
	}
}

func TestRecordSyncClosed(t *testing.T) {
	sink := newFakeSink()
	r := NewRecorder(sink, nil)
	if err := closeRecorder(t, r); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := r.RecordSync(t.Context(), Record{}); !errors.Is(err, ErrDropped) {
		t.Errorf("RecordSync after Close = %v, want ErrDropped", err)
	}
	if d := r.Dropped(); d != 1 {
		t.Errorf("Dropped = %d, want 1", d)
	}
}

func TestCloseWaitsForDirectWrite(t *testing.T) {
	sink := newFakeSink()
	sink.block = true // never released: only Close's deadline ends the calls
	r := fullRecorder(t, sink, &Options{})
	errc := make(chan error, 1)
	go func() { errc <- r.RecordSync(t.Context(), Record{CorrelationID: "sync"}) }()
	<-sink.entered

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.Close(ctx); !errors.Is(err, ErrDropped) {
		t.Errorf("Close = %v, want ErrDropped", err)
	}
	// Close returned, so the direct write has returned too.
	if n := sink.inFlight(); n != 0 {
		t.Errorf("WriteAudit calls in flight after Close = %d, want 0", n)
	}
	if err := <-errc; !errors.Is(err, ErrDropped) || !errors.Is(err, context.Canceled) {
		t.Errorf("RecordSync cut off by Close = %v, want ErrDropped and context.Canceled", err)
	}
}
