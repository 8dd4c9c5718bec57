package search

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// corpus10k is D2's catalog: 100 servers × 100 tools, drawn from the
// synthetic corpus (each server takes a different window of it, so term
// statistics look like a real, overlapping catalog).
func corpus10k() []Doc {
	pool := syntheticDocs()
	out := make([]Doc, 0, 10000)
	for i := range 100 {
		server := fmt.Sprintf("%s-%02d", domains[i%len(domains)].server, i)
		seen := make(map[string]bool, 100)
		for k := i * 131; len(seen) < 100; k++ {
			d := pool[k%len(pool)]
			orig := d.OriginalName
			if seen[orig] {
				orig += "_" + d.Server
			}
			seen[orig] = true
			d.Name, d.OriginalName, d.Server = server+"."+orig, orig, server
			out = append(out, d)
		}
	}
	return out
}

// benchModes are the rankings the benchmarks compare: the default (with the
// WordNet and word vector layer) against the lexical ranking it grew from.
var benchModes = []struct {
	name string
	opts *Options
}{{"default", nil}, {"lexical", &Options{LexicalOnly: true}}}

// BenchmarkSearch10k reports each search's latency percentiles over the
// queries of both relevance sets (plus prefix and typo variants) on 10,000
// tools, for each ranking.
func BenchmarkSearch10k(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) { benchSearch10k(b, m.opts) })
	}
}

func benchSearch10k(b *testing.B, opts *Options) {
	ix := NewIndex(opts)
	b.Cleanup(ix.Close)
	ix.Upsert(corpus10k()...)
	var queries []string
	for _, c := range loadRelevance(b) {
		queries = append(queries, c.Query)
	}
	for _, c := range loadCases(b, filepath.Join("testdata", "blind", "queries.json")) {
		queries = append(queries, c.Query)
	}
	queries = append(queries, "reposit", "crea", "kubernets pods", "slack", "list")
	ctx := context.Background()
	durs := make([]time.Duration, 0, b.N)
	// The CPU time of the searching thread too: on a shared machine the
	// wall-clock p99 is mostly time spent waiting for a core.
	var cpu []time.Duration
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start, startCPU := time.Now(), threadCPU()
		res := ix.Search(ctx, Query{Text: queries[i%len(queries)], Limit: 10})
		durs = append(durs, time.Since(start))
		cpu = append(cpu, threadCPU()-startCPU)
		if res.Searched != 10000 {
			b.Fatalf("Searched = %d", res.Searched)
		}
	}
	b.StopTimer()
	slices.Sort(durs)
	slices.Sort(cpu)
	pct := func(d []time.Duration, p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) }
	b.ReportMetric(pct(durs, 0.50), "p50-µs")
	b.ReportMetric(pct(durs, 0.99), "p99-µs")
	b.ReportMetric(pct(cpu, 0.50), "cpu-p50-µs")
	b.ReportMetric(pct(cpu, 0.99), "cpu-p99-µs")
	b.ReportMetric(float64(ix.MemoryBytes())/(1<<20), "index-MiB")
}

// BenchmarkSearch10kFiltered is BenchmarkSearch10k with an Allow filter
// (every document in scope is checked, as the API does for authorization).
func BenchmarkSearch10kFiltered(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			ix := NewIndex(m.opts)
			b.Cleanup(ix.Close)
			ix.Upsert(corpus10k()...)
			allow := func(name string) bool { return len(name)%7 != 0 }
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				ix.Search(ctx, Query{Text: "send a message to a slack channel", Allow: allow})
			}
		})
	}
}

// BenchmarkBuild10k indexes 10,000 tools from empty and reports the index's
// estimated size (MemoryBytes) next to the measured live-heap growth.
func BenchmarkBuild10k(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			docs := corpus10k()
			var est, heap float64
			b.ReportAllocs()
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				ix := NewIndex(m.opts)
				ix.Upsert(docs...)
				runtime.GC()
				runtime.ReadMemStats(&after)
				est = float64(ix.MemoryBytes()) / (1 << 20)
				heap = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
				ix.Close()
			}
			b.ReportMetric(est, "MemoryBytes-MiB")
			b.ReportMetric(heap, "heap-MiB")
		})
	}
}

// BenchmarkSearch10kLongQuery is the worst a caller can send through the
// API: 1,000 characters of distinct English words (every one a WordNet
// entry with relatives), against 10,000 tools.
func BenchmarkSearch10kLongQuery(b *testing.B) {
	words := strings.Fields(`delete remove erase list show find search read write create update merge
		branch issue request file folder directory record entity memory graph node relation observation
		message channel thread reaction user profile page browser click type press navigate screenshot
		network console dialog form option select hover drag resize evaluate upload tab wait close
		repository commit code review comment status history sum echo image environment resource link
		logging subscription operation research content structure annotation picture photo video
		document report draft typo line layout project archive backup asset size owner permission`)
	var sb strings.Builder
	for i := 0; sb.Len() < 990; i++ {
		sb.WriteString(words[i%len(words)])
		sb.WriteByte(' ')
	}
	q := sb.String()
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			ix := NewIndex(m.opts)
			b.Cleanup(ix.Close)
			ix.Upsert(corpus10k()...)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				ix.Search(ctx, Query{Text: q})
			}
		})
	}
}
