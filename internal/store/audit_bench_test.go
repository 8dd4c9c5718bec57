package store_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// BenchmarkInsertInvocations is the audit writer's commit: one batch of
// rows in one transaction, per durability setting and batch size. At
// batch 1 it is what a call waits for at concurrency 1 when its record
// must be on disk before the answer (audit_durability: durable, the
// default); bigger batches are group commit under load. The figures are
// the floor the gateway's added latency cannot go below on this disk (see
// bench/README.md, "What the goals cost on two cores"); compare with
// BenchmarkFdatasync, the disk alone.
func BenchmarkInsertInvocations(b *testing.B) {
	for _, durable := range []bool{true, false} {
		mode := "normal"
		if durable {
			mode = "durable"
		}
		for _, batch := range []int{1, 32} {
			b.Run(mode+"/batch="+strconv.Itoa(batch), func(b *testing.B) {
				db, err := store.Open(b.Context(), filepath.Join(b.TempDir(), "switchboard.db"), &store.Options{Durable: durable})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = db.Close() })
				rows := make([]store.Invocation, batch)
				b.ReportAllocs()
				for b.Loop() {
					now := time.Now()
					for i := range rows {
						rows[i] = benchRow(now)
					}
					if err := db.InsertInvocations(b.Context(), rows); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/row")
			})
		}
	}
}

// benchRow is an audit row as the gateway writes it for a successful echo
// call: the same fields set, summaries of a realistic size.
func benchRow(at time.Time) store.Invocation {
	return store.Invocation{
		Kind: "invocation", CorrelationID: "0f6c1f9e-6b1f-4c55-9d2a-3f2a51b6f0aa", AgentID: "local",
		Server: "demo", Tool: "echo", ParamsHash: "9c56cc51b374c3ba189210d5b6d4bf57790d351c96c47c02190ecf1e430635ab",
		Success: true, ResultSummary: `{"content":[{"type":"text","text":"hello from the benchmark"}]}`,
		Attempts: 1, LatencyMS: 0.41, PolicyDecision: "ALLOW", PolicyRule: "local-admin", PolicyRevision: 7,
		ServedBy: "gateway-1", Replica: "gateway-1", InvokedAt: at,
	}
}

// BenchmarkFdatasync is the disk's own floor for a durable append: one
// audit-row-sized write into space allocated beforehand, then fdatasync,
// in the directory the database would use. No store of any design makes a
// record durable in less on this disk.
func BenchmarkFdatasync(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "journal"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	const recordSize = 700
	if err := preallocate(f, 64<<20); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, recordSize)
	var off int64
	for b.Loop() {
		if off+recordSize > 64<<20 {
			off = 0
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
		off += recordSize
		if err := fdatasync(f); err != nil {
			b.Fatal(err)
		}
	}
}
