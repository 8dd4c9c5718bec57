package search

import (
	"context"
	"fmt"
	"math"
	"time"
)

// queueLocked marks a document as needing a vector. The queue is a set of
// names, so it is bounded by the number of documents and a document updated
// twice before being embedded is embedded once. ix.mu must be held.
func (ix *Index) queueLocked(name string) {
	if len(ix.pending) == 0 {
		ix.idle = make(chan struct{})
	}
	ix.pending[name] = struct{}{}
}

// markIdleLocked closes the idle channel once nothing is pending.
func (ix *Index) markIdleLocked() {
	if len(ix.pending) == 0 {
		select {
		case <-ix.idle:
		default:
			close(ix.idle)
		}
	}
}

// signal wakes the background embedder, without blocking.
func (ix *Index) signal() {
	if ix.wake == nil {
		return
	}
	select {
	case ix.wake <- struct{}{}:
	default:
	}
}

// Flush waits until every document has a vector (or ctx is done). Without an
// Embedder it returns at once. Tests and warm-up use it; searches never wait.
func (ix *Index) Flush(ctx context.Context) error {
	ix.mu.RLock()
	idle := ix.idle
	ix.mu.RUnlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Embedded is the number of documents that have a vector.
func (ix *Index) Embedded() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n := 0
	for i := range ix.docs {
		if ix.docs[i].live && ix.docs[i].vec != nil {
			n++
		}
	}
	return n
}

// embedLoop embeds pending documents in batches until ctx is cancelled. A
// failed batch stays queued and is retried with exponential backoff (1s up
// to a minute), so an endpoint that is down costs one request per backoff.
func (ix *Index) embedLoop(ctx context.Context) {
	defer close(ix.done)
	backoff := time.Duration(0)
	var retry <-chan time.Time
	for {
		if retry == nil {
			select {
			case <-ctx.Done():
				return
			case <-ix.wake:
			}
		} else {
			select {
			case <-ctx.Done():
				return
			case <-retry:
				retry = nil
			}
		}
		for {
			names, texts := ix.nextBatch()
			if len(names) == 0 {
				break
			}
			vecs, err := ix.emb.Embed(ctx, texts)
			if err == nil && len(vecs) != len(texts) {
				err = fmt.Errorf("embedder returned %d vectors for %d texts", len(vecs), len(texts))
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				backoff = min(max(2*backoff, time.Second), maxBackoff)
				ix.log.Warn("search: embedding documents", "docs", len(names), "retry_in", backoff, "err", err)
				retry = time.After(backoff)
				break
			}
			backoff = 0
			ix.storeVectors(names, texts, vecs)
		}
	}
}

// nextBatch picks up to embedBatch pending documents, in no particular order.
func (ix *Index) nextBatch() (names, texts []string) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for name := range ix.pending {
		slot, ok := ix.byName[name]
		if !ok {
			continue
		}
		names = append(names, name)
		texts = append(texts, ix.docs[slot].embedText)
		if len(names) == embedBatch {
			break
		}
	}
	return names, texts
}

// storeVectors attaches vectors to documents whose text has not changed
// while they were being embedded (a changed one stays queued).
func (ix *Index) storeVectors(names, texts []string, vecs [][]float32) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for i, name := range names {
		slot, ok := ix.byName[name]
		if !ok || ix.docs[slot].embedText != texts[i] {
			continue
		}
		ix.docs[slot].vec = normalize(vecs[i])
		delete(ix.pending, name)
		ix.gen.Add(1)
	}
	ix.markIdleLocked()
}

// normalize returns v scaled to unit length (a copy), so cosine similarity
// is a dot product; a zero vector stays zero.
func normalize(v []float32) []float32 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if ss == 0 {
		return out
	}
	inv := 1 / math.Sqrt(ss)
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}
