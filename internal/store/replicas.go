package store

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Replica is one gateway process sharing the database (table replicas). Each
// replica upserts its own row every few seconds with [DB.Heartbeat]; a row
// whose heartbeat is stale belongs to a replica that died without
// [DB.DeleteReplica], and [DB.Replicas] leaves it out.
type Replica struct {
	ID      string // stable for the life of the process, e.g. "host-pid-random"
	Host    string
	PID     int
	Version string // the gateway's build version, to spot a mixed rollout
	Address string // where its API listens, for operators
	// StartedAt is when the replica started. Zero keeps the stored value
	// (the time of the first heartbeat when there is none).
	StartedAt time.Time
	// HeartbeatAt is the last heartbeat. Zero means now.
	HeartbeatAt time.Time
}

const replicaColumns = `id, host, pid, version, address, started_at, heartbeat_at`

// Heartbeat records that r is alive, inserting its row or replacing it.
func (db *DB) Heartbeat(ctx context.Context, r Replica) error {
	if r.ID == "" {
		return fmt.Errorf("recording replica heartbeat: empty id: %w", ErrInvalid)
	}
	beat := normalize(r.HeartbeatAt)
	// The casts type the parameters for PostgreSQL, which cannot infer
	// them from COALESCE alone.
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx,
			`INSERT INTO replicas (`+replicaColumns+`) VALUES ($1, $2, $3, $4, $5, COALESCE(CAST($6 AS BIGINT), $7), $7)
			ON CONFLICT (id) DO UPDATE SET
				host = excluded.host,
				pid = excluded.pid,
				version = excluded.version,
				address = excluded.address,
				started_at = COALESCE(CAST($6 AS BIGINT), replicas.started_at),
				heartbeat_at = excluded.heartbeat_at`,
			r.ID, r.Host, r.PID, r.Version, r.Address, zeroNanos(r.StartedAt), toNanos(beat))
		return err
	})
	if err != nil {
		return fmt.Errorf("recording heartbeat of replica %q: %w", r.ID, err)
	}
	return nil
}

// Replicas returns the replicas whose last heartbeat is at or after
// aliveSince (every one when it is zero), oldest first (by StartedAt, then
// ID), so that every replica sees the same list in the same order.
func (db *DB) Replicas(ctx context.Context, aliveSince time.Time) ([]Replica, error) {
	since := int64(math.MinInt64)
	if !aliveSince.IsZero() {
		since = toNanos(aliveSince)
	}
	rows, err := db.reader().QueryContext(ctx,
		`SELECT `+replicaColumns+` FROM replicas WHERE heartbeat_at >= $1 ORDER BY started_at, id`, since)
	if err != nil {
		return nil, fmt.Errorf("listing replicas: %w", err)
	}
	defer rows.Close()
	var out []Replica
	for rows.Next() {
		var r Replica
		var started, beat int64
		if err := rows.Scan(&r.ID, &r.Host, &r.PID, &r.Version, &r.Address, &started, &beat); err != nil {
			return nil, fmt.Errorf("listing replicas: %w", err)
		}
		r.StartedAt, r.HeartbeatAt = fromNanos(started), fromNanos(beat)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing replicas: %w", err)
	}
	return out, nil
}

// DeleteReplica removes the replica's row, as it shuts down cleanly, so that
// the others stop counting it at once rather than when its heartbeat goes
// stale. A missing row is not an error: the outcome is the same.
func (db *DB) DeleteReplica(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("deleting replica: empty id: %w", ErrInvalid)
	}
	_, err := db.execCount(ctx, fmt.Sprintf("deleting replica %q", id), `DELETE FROM replicas WHERE id = $1`, id)
	return err
}
