package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// IdempotentResult is a stored result of a call made with an idempotency
// key (table idempotency_results).
type IdempotentResult struct {
	Key         string
	Fingerprint string
	Result      []byte // the caller's encoding
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// PutIdempotent stores r unless a live result is already stored under its
// key; the one stored (r or the earlier one) is returned, so two replicas
// finishing the same key agree on one result.
func (db *DB) PutIdempotent(ctx context.Context, r IdempotentResult) (IdempotentResult, error) {
	if r.Key == "" || len(r.Result) == 0 || r.ExpiresAt.IsZero() {
		return r, fmt.Errorf("storing an idempotent result: key, result and expiry are required: %w", ErrInvalid)
	}
	created := normalize(r.CreatedAt)
	var out IdempotentResult
	err := db.atomic(ctx, func(q querier) error {
		// An expired row gives way; a live one wins.
		if _, err := q.ExecContext(ctx, `DELETE FROM idempotency_results WHERE key = $1 AND expires_at <= $2`,
			r.Key, toNanos(created)); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO idempotency_results (key, fingerprint, result, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO NOTHING`,
			r.Key, r.Fingerprint, string(r.Result), toNanos(created), toNanos(r.ExpiresAt)); err != nil {
			return err
		}
		var err error
		out, err = getIdempotent(ctx, q, r.Key)
		return err
	})
	if err != nil {
		return r, fmt.Errorf("storing an idempotent result: %w", err)
	}
	return out, nil
}

// GetIdempotent returns the live result stored under key, or an error
// wrapping [ErrNotFound].
func (db *DB) GetIdempotent(ctx context.Context, key string, now time.Time) (IdempotentResult, error) {
	r, err := getIdempotent(ctx, db.reader(), key)
	if err == nil && !normalize(now).Before(r.ExpiresAt) {
		err = ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("reading an idempotent result: %w", err)
	}
	return r, nil
}

func getIdempotent(ctx context.Context, q querier, key string) (IdempotentResult, error) {
	var r IdempotentResult
	var result string
	var created, expires int64
	err := q.QueryRowContext(ctx, `SELECT key, fingerprint, result, created_at, expires_at FROM idempotency_results WHERE key = $1`, key).
		Scan(&r.Key, &r.Fingerprint, &result, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, err
	}
	r.Result, r.CreatedAt, r.ExpiresAt = []byte(result), fromNanos(created), fromNanos(expires)
	return r, nil
}

// PurgeIdempotent deletes the results that expired before t.
func (db *DB) PurgeIdempotent(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := db.atomic(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM idempotency_results WHERE expires_at <= $1`, toNanos(normalize(before)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
