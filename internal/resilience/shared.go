package resilience

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// IdempotencyStore is where replicas share idempotent results.
type IdempotencyStore interface {
	GetIdempotent(ctx context.Context, key string, now time.Time) (store.IdempotentResult, error)
	PutIdempotent(ctx context.Context, r store.IdempotentResult) (store.IdempotentResult, error)
}

// Codec turns a result into the bytes the store keeps and back; Decode
// reports false for bytes it cannot read.
type Codec[T any] struct {
	Encode func(T) ([]byte, error)
	Decode func([]byte) (T, bool)
}

// SharedIdempotency is the idempotency cache of replicas: each keeps its
// own in memory (concurrent duplicates on one replica wait for the first),
// and results are also written to the shared store, so a client retrying
// on another replica gets the first result instead of a second execution.
// Duplicates racing on two replicas at the same instant may both run; the
// store keeps the first result and both callers get it.
type SharedIdempotency[T any] struct {
	local  *Idempotency[T]
	db     IdempotencyStore
	codec  Codec[T]
	ttl    time.Duration
	logger *slog.Logger
}

// NewSharedIdempotency shares local's results through db for ttl.
func NewSharedIdempotency[T any](local *Idempotency[T], db IdempotencyStore, codec Codec[T], ttl time.Duration, logger *slog.Logger) *SharedIdempotency[T] {
	if ttl <= 0 {
		ttl = DefaultIdempotencyTTL
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &SharedIdempotency[T]{local: local, db: db, codec: codec, ttl: ttl, logger: logger}
}

// storeKey keeps the client's key out of the store in clear.
func storeKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Peek returns a live result for key, from this replica or the store.
func (s *SharedIdempotency[T]) Peek(ctx context.Context, key, fp string) (T, bool, error) {
	if r, ok, err := s.local.Peek(ctx, key, fp); ok || err != nil {
		return r, ok, err
	}
	return s.fromStore(ctx, key, fp)
}

// DoFingerprint is Idempotency.DoFingerprint across replicas: shared also
// reports a result another replica produced (read from the store, or
// stored first while fn ran here).
func (s *SharedIdempotency[T]) DoFingerprint(ctx context.Context, key, fp string, fn func(context.Context) (T, error)) (T, bool, error) {
	// Set by the function below, which the local cache runs on this
	// goroutine when this call leads.
	var fromOther bool
	v, shared, err := s.local.DoFingerprint(ctx, key, fp, func(ctx context.Context) (T, error) {
		if r, ok, err := s.fromStore(ctx, key, fp); err != nil || ok {
			fromOther = ok
			return r, err
		}
		res, err := fn(ctx)
		if err != nil {
			return res, err
		}
		b, err := s.codec.Encode(res)
		if err != nil {
			return res, nil
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		now := time.Now()
		row, err := s.db.PutIdempotent(sctx, store.IdempotentResult{Key: storeKey(key), Fingerprint: fp, Result: b, CreatedAt: now, ExpiresAt: now.Add(s.ttl)})
		switch {
		case err != nil:
			s.logger.Warn("sharing an idempotent result with the other replicas", "error", err)
		case string(row.Result) != string(b) && row.Fingerprint == fp:
			// Another replica finished the same call first: every caller
			// gets that one result.
			if other, ok := s.codec.Decode(row.Result); ok {
				fromOther = true
				return other, nil
			}
		}
		return res, nil
	})
	return v, shared || fromOther, err
}

// fromStore returns a live result another replica stored for key, asking
// the store for at most 2 s within ctx.
func (s *SharedIdempotency[T]) fromStore(ctx context.Context, key, fp string) (T, bool, error) {
	var zero T
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	row, err := s.db.GetIdempotent(ctx, storeKey(key), time.Now())
	if err != nil {
		return zero, false, nil // none, or the store failed: run the call
	}
	if row.Fingerprint != fp {
		return zero, false, fmt.Errorf("idempotency key used by another replica for a different call: %w", ErrIdempotencyConflict)
	}
	r, ok := s.codec.Decode(row.Result)
	return r, ok, nil
}
