package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// BreakerState is the persisted state of one circuit breaker (table
// circuit_breakers), so an open circuit stays open across restarts and is
// shared by replicas instead of every process re-learning that an upstream
// is down.
type BreakerState struct {
	Key              string // "server:tool" or "server"
	State            string // "CLOSED", "OPEN" or "HALF_OPEN"
	Failures         int
	Successes        int
	HalfOpenRequests int
	LastFailureAt    time.Time // zero when there was none
	OpenedAt         time.Time // zero when never opened
	// Generation counts state changes, so a replica can tell a stale write
	// from a newer one.
	Generation uint64
	UpdatedAt  time.Time
}

const breakerColumns = `circuit_key, state, failure_count, success_count, half_open_requests,
	last_failure_time, opened_at, generation, updated_at`

// SaveBreaker stores b, replacing the state of the same key. A zero
// UpdatedAt is stored as now.
func (db *DB) SaveBreaker(ctx context.Context, b BreakerState) error {
	if b.Key == "" {
		return errors.New("saving circuit breaker: empty key")
	}
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx,
			`INSERT INTO circuit_breakers (`+breakerColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (circuit_key) DO UPDATE SET
				state = excluded.state,
				failure_count = excluded.failure_count,
				success_count = excluded.success_count,
				half_open_requests = excluded.half_open_requests,
				last_failure_time = excluded.last_failure_time,
				opened_at = excluded.opened_at,
				generation = excluded.generation,
				updated_at = excluded.updated_at`,
			b.Key, b.State, b.Failures, b.Successes, b.HalfOpenRequests,
			zeroNanos(b.LastFailureAt), zeroNanos(b.OpenedAt),
			// Bit-preserving: database/sql refuses uint64 values >= 2^63.
			int64(b.Generation), toNanos(normalize(b.UpdatedAt)))
		return err
	})
	if err != nil {
		return fmt.Errorf("saving circuit breaker %q: %w", b.Key, err)
	}
	return nil
}

// ListBreakers returns every saved breaker, sorted by key.
func (db *DB) ListBreakers(ctx context.Context) ([]BreakerState, error) {
	rows, err := db.reader().QueryContext(ctx,
		`SELECT `+breakerColumns+` FROM circuit_breakers ORDER BY circuit_key`)
	if err != nil {
		return nil, fmt.Errorf("listing circuit breakers: %w", err)
	}
	defer rows.Close()
	var out []BreakerState
	for rows.Next() {
		b, err := scanBreaker(rows)
		if err != nil {
			return nil, fmt.Errorf("listing circuit breakers: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing circuit breakers: %w", err)
	}
	return out, nil
}

// GetBreaker returns the saved state of one breaker, as a replica does when
// another one notifies it that the key changed, rather than reloading them
// all. A key never saved is [ErrNotFound].
func (db *DB) GetBreaker(ctx context.Context, key string) (BreakerState, error) {
	b, err := scanBreaker(db.reader().QueryRowContext(ctx,
		`SELECT `+breakerColumns+` FROM circuit_breakers WHERE circuit_key = $1`, key))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return BreakerState{}, fmt.Errorf("getting circuit breaker %q: %w", key, ErrNotFound)
	case err != nil:
		return BreakerState{}, fmt.Errorf("getting circuit breaker %q: %w", key, err)
	}
	return b, nil
}

func scanBreaker(sc scanner) (BreakerState, error) {
	var b BreakerState
	var lastFailure, opened sql.NullInt64
	var generation, updated int64
	if err := sc.Scan(&b.Key, &b.State, &b.Failures, &b.Successes, &b.HalfOpenRequests,
		&lastFailure, &opened, &generation, &updated); err != nil {
		return BreakerState{}, err
	}
	b.LastFailureAt, b.OpenedAt = zeroTime(lastFailure), zeroTime(opened)
	b.Generation, b.UpdatedAt = uint64(generation), fromNanos(updated)
	return b, nil
}

// DeleteBreaker forgets the breaker's state, as when its server is removed.
// A key that is not saved is not an error: the outcome is the same.
func (db *DB) DeleteBreaker(ctx context.Context, key string) error {
	if _, err := db.execCount(ctx, fmt.Sprintf("deleting circuit breaker %q", key),
		`DELETE FROM circuit_breakers WHERE circuit_key = $1`, key); err != nil {
		return err
	}
	return nil
}

// MoveBreakers re-keys the saved breakers of server from ("from:tool" and
// "from") to server name to, in one transaction, as when the server is
// renamed: its circuits keep their state instead of starting closed under
// the new name while the old rows linger. A row already saved under a new
// key is replaced. It returns the new keys.
func (db *DB) MoveBreakers(ctx context.Context, from, to string) ([]string, error) {
	if from == to {
		return nil, nil
	}
	var moved []string
	err := db.Transact(ctx, func(tx *DB) error {
		all, err := tx.ListBreakers(ctx)
		if err != nil {
			return err
		}
		for _, b := range all {
			var key string
			switch {
			case b.Key == from:
				key = to
			case strings.HasPrefix(b.Key, from+":"):
				key = to + b.Key[len(from):]
			default:
				continue
			}
			old := b.Key
			b.Key, b.UpdatedAt = key, time.Time{}
			if err := tx.SaveBreaker(ctx, b); err != nil {
				return err
			}
			if err := tx.DeleteBreaker(ctx, old); err != nil {
				return err
			}
			moved = append(moved, key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("moving the circuit breakers of %q to %q: %w", from, to, err)
	}
	return moved, nil
}
