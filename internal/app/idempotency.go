package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// sharedIdempotency is the idempotency cache of replicas: each keeps its
// own in memory (concurrent duplicates on one replica wait for the first),
// and results are also written to the shared store, so a client retrying on
// another replica gets the first result instead of a second execution.
// Duplicates racing on two replicas at the same instant may both run; the
// store keeps the first result and both callers get it.
type sharedIdempotency struct {
	local  *resilience.Idempotency[*invoke.Result]
	db     *store.DB
	cat    *catalog.Catalog
	ttl    time.Duration
	logger *slog.Logger
}

// storedResult is the stored form of a result.
type storedResult struct {
	Result   *mcp.CallToolResult `json:"result"`
	Tool     string              `json:"tool"`
	ServedBy string              `json:"served_by,omitempty"`
}

// dbKey keeps the client's key out of the store in clear.
func dbKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func (s *sharedIdempotency) Peek(ctx context.Context, key, fp string) (*invoke.Result, bool, error) {
	if r, ok, err := s.local.Peek(ctx, key, fp); ok || err != nil {
		return r, ok, err
	}
	return s.fromStore(ctx, key, fp)
}

func (s *sharedIdempotency) DoFingerprint(ctx context.Context, key, fp string, fn func(context.Context) (*invoke.Result, error)) (*invoke.Result, bool, error) {
	return s.local.DoFingerprint(ctx, key, fp, func(ctx context.Context) (*invoke.Result, error) {
		if r, ok, err := s.fromStore(ctx, key, fp); err != nil || ok {
			return r, err
		}
		res, err := fn(ctx)
		if err != nil {
			return res, err
		}
		b, err := json.Marshal(storedResult{Result: res.CallToolResult, Tool: res.Tool.Name, ServedBy: res.ServedBy})
		if err != nil {
			return res, nil
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		now := time.Now()
		row, err := s.db.PutIdempotent(sctx, store.IdempotentResult{Key: dbKey(key), Fingerprint: fp, Result: b, CreatedAt: now, ExpiresAt: now.Add(s.ttl)})
		switch {
		case err != nil:
			s.logger.Warn("sharing an idempotent result with the other replicas", "error", err)
		case string(row.Result) != string(b) && row.Fingerprint == fp:
			// Another replica finished the same call first: every caller
			// gets that one result.
			if other, ok := s.decode(row.Result); ok {
				return other, nil
			}
		}
		return res, nil
	})
}

// fromStore returns a live result another replica stored for key, asking
// the store for at most 2 s within ctx.
func (s *sharedIdempotency) fromStore(ctx context.Context, key, fp string) (*invoke.Result, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	row, err := s.db.GetIdempotent(ctx, dbKey(key), time.Now())
	if err != nil {
		return nil, false, nil // none, or the store failed: run the call
	}
	if row.Fingerprint != fp {
		return nil, false, fmt.Errorf("idempotency key used by another replica for a different call: %w", resilience.ErrIdempotencyConflict)
	}
	r, ok := s.decode(row.Result)
	return r, ok, nil
}

func (s *sharedIdempotency) decode(b []byte) (*invoke.Result, bool) {
	var sr storedResult
	if err := json.Unmarshal(b, &sr); err != nil || sr.Result == nil {
		return nil, false
	}
	t, ok := s.cat.Snapshot().Tool(sr.Tool)
	if !ok {
		t = catalog.Tool{Name: sr.Tool}
	}
	return &invoke.Result{CallToolResult: sr.Result, Tool: t, ServedBy: sr.ServedBy, Replayed: true}, true
}
