package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

func testIdempotent(t *testing.T, db *store.DB) {
	ctx := t.Context()
	now := time.Now()
	if _, err := db.GetIdempotent(ctx, "agent/k", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("empty: %v, want ErrNotFound", err)
	}
	first := store.IdempotentResult{Key: "agent/k", Fingerprint: "fp1", Result: []byte(`{"n":1}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	got, err := db.PutIdempotent(ctx, first)
	if err != nil || string(got.Result) != `{"n":1}` {
		t.Fatalf("put: %+v, %v", got, err)
	}
	// A second replica finishing the same key gets the first result back.
	got, err = db.PutIdempotent(ctx, store.IdempotentResult{Key: "agent/k", Fingerprint: "fp1", Result: []byte(`{"n":2}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
	if err != nil || string(got.Result) != `{"n":1}` {
		t.Errorf("second put: %+v, %v; want the first result kept", got, err)
	}
	got, err = db.GetIdempotent(ctx, "agent/k", now)
	if err != nil || got.Fingerprint != "fp1" || string(got.Result) != `{"n":1}` {
		t.Errorf("get: %+v, %v", got, err)
	}
	// Expired: not returned, replaced by a new put, purged.
	if _, err := db.GetIdempotent(ctx, "agent/k", now.Add(2*time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired get: %v, want ErrNotFound", err)
	}
	later := now.Add(2 * time.Hour)
	got, err = db.PutIdempotent(ctx, store.IdempotentResult{Key: "agent/k", Fingerprint: "fp2", Result: []byte(`{"n":3}`), CreatedAt: later, ExpiresAt: later.Add(time.Hour)})
	if err != nil || string(got.Result) != `{"n":3}` {
		t.Errorf("put over an expired row: %+v, %v", got, err)
	}
	if n, err := db.PurgeIdempotent(ctx, later.Add(2*time.Hour)); err != nil || n != 1 {
		t.Errorf("purge: %d, %v", n, err)
	}
	if _, err := db.PutIdempotent(ctx, store.IdempotentResult{Key: "x"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("invalid put: %v", err)
	}
}
