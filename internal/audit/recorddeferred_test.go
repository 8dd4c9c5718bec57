package audit

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// summarize is a derive function as the pipeline builds one: it fills the
// redacted fields from material the caller handed over.
func summarize(sum string) func(*Record) {
	return func(rec *Record) {
		rec.ParamsHash = "hash-of-" + rec.CorrelationID
		rec.ResultSummary = sum
	}
}

func TestRecordDeferredDerivesBeforeWrite(t *testing.T) {
	tests := []struct {
		name   string
		record func(r *Recorder, rec Record, derive func(*Record)) error
	}{
		{"queued", func(r *Recorder, rec Record, derive func(*Record)) error {
			if !r.RecordDeferred(rec, derive) {
				t.Fatal("RecordDeferred = false")
			}
			return r.Flush(t.Context())
		}},
		{"durable", func(r *Recorder, rec Record, derive func(*Record)) error {
			return r.RecordSyncDeferred(t.Context(), rec, derive)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := newFakeSink()
			r := NewRecorder(sink, &Options{FlushInterval: time.Hour, Replica: "r1"})
			t.Cleanup(func() { closeRecorder(t, r) })
			if err := tt.record(r, Record{CorrelationID: "c1", Tool: "echo"}, summarize(`{"ok":true}`)); err != nil {
				t.Fatal(err)
			}
			if err := tt.record(r, Record{CorrelationID: "c2", ParamsHash: "given"}, nil); err != nil {
				t.Fatal(err)
			}
			recs := sink.written()
			if len(recs) != 2 {
				t.Fatalf("written %d records, want 2", len(recs))
			}
			got := []Record{recs[0], recs[1]}
			want := []Record{
				{CorrelationID: "c1", Tool: "echo", ParamsHash: "hash-of-c1", ResultSummary: `{"ok":true}`},
				{CorrelationID: "c2", ParamsHash: "given"},
			}
			for i := range got {
				// The defaults Record fills are filled before derive runs.
				if got[i].ID == "" || got[i].InvokedAt.IsZero() || got[i].Kind != KindInvocation || got[i].Replica != "r1" {
					t.Errorf("record %d defaults: %+v", i, got[i])
				}
				got[i].ID, got[i].InvokedAt, got[i].Kind, got[i].Replica = "", time.Time{}, "", ""
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("written (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRecordDeferredPreparesWhileStoring shows the point of the committer:
// the writer derives the next records while the previous batch is still in
// the sink, so their redaction is not added to the commit's latency.
func TestRecordDeferredPreparesWhileStoring(t *testing.T) {
	sink := newFakeSink()
	sink.block = true
	r := NewRecorder(sink, &Options{BatchSize: 1})
	t.Cleanup(func() { closeRecorder(t, r) })
	r.Record(Record{CorrelationID: "0"})
	<-sink.entered // the committer is storing "0"

	derived := make(chan string, 2)
	errc := make(chan error, 1)
	go func() {
		errc <- r.RecordSyncDeferred(t.Context(), Record{CorrelationID: "1"}, func(rec *Record) {
			derived <- rec.CorrelationID
			rec.ResultSummary = "s1"
		})
	}()
	select {
	case got := <-derived:
		if got != "1" {
			t.Fatalf("derived %q, want 1", got)
		}
	case <-time.After(10 * time.Second): // a guard against hanging, not a speed limit
		t.Fatal("the next record was not derived while the sink was storing the previous batch")
	}
	if n := len(sink.written()); n != 0 {
		t.Fatalf("%d records stored before the sink was released, want 0", n)
	}
	select {
	case err := <-errc:
		t.Fatalf("RecordSyncDeferred returned before its record was stored: %v", err)
	default:
	}
	close(sink.release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	recs := sink.written()
	if diff := cmp.Diff([]string{"0", "1"}, correlationIDs(recs)); diff != "" {
		t.Fatalf("written (-want +got):\n%s", diff)
	}
	if recs[1].ResultSummary != "s1" {
		t.Errorf("stored summary = %q, want s1", recs[1].ResultSummary)
	}
}

func TestRecordDeferredQueueFullDerivesDirectly(t *testing.T) {
	sink := newFakeSink()
	sink.block = true
	r := fullRecorder(t, sink, &Options{})
	t.Cleanup(func() { closeRecorder(t, r) })
	errc := make(chan error, 1)
	go func() {
		errc <- r.RecordSyncDeferred(t.Context(), Record{CorrelationID: "sync"}, summarize("direct"))
	}()
	<-sink.entered
	close(sink.release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for _, rec := range sink.written() {
		if rec.CorrelationID == "sync" {
			if rec.ResultSummary != "direct" || rec.ParamsHash != "hash-of-sync" {
				t.Errorf("direct write without derived fields: %+v", rec)
			}
			return
		}
	}
	t.Errorf("record not written: %v", correlationIDs(sink.written()))
}

func TestRecordDeferredPanicKeepsRecord(t *testing.T) {
	sink := newFakeSink()
	logs := &logCapture{}
	r := NewRecorder(sink, &Options{Logger: slog.New(logs)})
	t.Cleanup(func() { closeRecorder(t, r) })
	err := r.RecordSyncDeferred(t.Context(), Record{CorrelationID: "p", Tool: "t"}, func(rec *Record) {
		rec.ParamsHash = "half-done"
		panic("secret-value-in-panic")
	})
	if err != nil {
		t.Fatal(err)
	}
	// The writer survived: later records are still written.
	if err := r.RecordSync(t.Context(), Record{CorrelationID: "after"}); err != nil {
		t.Fatal(err)
	}
	recs := sink.written()
	if diff := cmp.Diff([]string{"p", "after"}, correlationIDs(recs)); diff != "" {
		t.Fatalf("written (-want +got):\n%s", diff)
	}
	if recs[0].ParamsHash != "" || recs[0].Tool != "t" {
		t.Errorf("record after a panicking derive = %+v, want its own fields and no derived ones", recs[0])
	}
	lines := strings.Join(logs.lines(), "\n")
	if !strings.Contains(lines, "panicked") || strings.Contains(lines, "secret-value") {
		t.Errorf("logs = %q, want the panic reported without its value", lines)
	}
}

func TestRecordDeferredConcurrentGroupCommit(t *testing.T) {
	sink := newFakeSink()
	r := NewRecorder(sink, &Options{FlushInterval: time.Hour})
	t.Cleanup(func() { closeRecorder(t, r) })
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := string(rune('A'+i%26)) + strings.Repeat("x", i/26)
			if err := r.RecordSyncDeferred(t.Context(), Record{CorrelationID: id}, summarize("s-"+id)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	recs := sink.written()
	if len(recs) != n {
		t.Fatalf("written %d, want %d", len(recs), n)
	}
	for _, rec := range recs {
		if rec.ResultSummary != "s-"+rec.CorrelationID || rec.ParamsHash != "hash-of-"+rec.CorrelationID {
			t.Errorf("record %q: derived fields %q, %q", rec.CorrelationID, rec.ParamsHash, rec.ResultSummary)
		}
	}
}
