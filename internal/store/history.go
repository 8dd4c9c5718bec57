package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ConnectionEvent is one status transition of a server (table server_connection_history).
type ConnectionEvent struct {
	ID         int64
	ServerID   string
	ServerName string
	FromStatus string
	ToStatus   string
	Error      string
	At         time.Time
}

// AppendConnectionEvent records e. The server is found by e.ServerID, or by
// e.ServerName when the ID is empty; an unknown server is an error wrapping
// [ErrNotFound]. On success e.ID is set, e.ServerID and e.ServerName are set
// to the server's current ones, and a zero e.At to the stored time.
func (db *DB) AppendConnectionEvent(ctx context.Context, e *ConnectionEvent) error {
	if e == nil {
		return errors.New("appending connection event: nil event")
	}
	key := e.ServerID
	if key == "" {
		key = e.ServerName
	}
	if key == "" {
		return errors.New("appending connection event: no server id or name")
	}
	at := normalize(e.At)
	var id int64
	var serverID, name string
	err := db.Transact(ctx, func(tx *DB) error {
		var err error
		if serverID, name, err = resolveServer(ctx, tx.tx, key); err != nil {
			return err
		}
		return tx.tx.QueryRowContext(ctx,
			`INSERT INTO server_connection_history (server_id, server_name, from_status, to_status, error, at)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
			serverID, name, e.FromStatus, e.ToStatus, e.Error, toNanos(at)).Scan(&id)
	})
	if err != nil {
		return fmt.Errorf("appending connection event of server %q: %w", key, err)
	}
	e.ID, e.ServerID, e.ServerName, e.At = id, serverID, name, at
	return nil
}

// ListConnectionEvents returns the connection history of the server with the
// given id or name (of every server when it is ""), newest first, at most
// limit events (all when limit <= 0). An unknown server is an error wrapping
// [ErrNotFound].
func (db *DB) ListConnectionEvents(ctx context.Context, serverIDOrName string, limit int) ([]*ConnectionEvent, error) {
	q := `SELECT id, server_id, server_name, from_status, to_status, error, at FROM server_connection_history`
	var args []any
	if serverIDOrName != "" {
		id, _, err := resolveServer(ctx, db.reader(), serverIDOrName)
		if err != nil {
			return nil, fmt.Errorf("listing connection events of server %q: %w", serverIDOrName, err)
		}
		args = append(args, id)
		q += ` WHERE server_id = $1`
	}
	// id breaks ties between events of the same instant in insertion order.
	q += ` ORDER BY at DESC, id DESC`
	if limit > 0 {
		args = append(args, limit)
		q += ` LIMIT $` + strconv.Itoa(len(args))
	}
	rows, err := db.reader().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing connection events: %w", err)
	}
	defer rows.Close()
	var out []*ConnectionEvent
	for rows.Next() {
		var e ConnectionEvent
		var at int64
		if err := rows.Scan(&e.ID, &e.ServerID, &e.ServerName, &e.FromStatus, &e.ToStatus, &e.Error, &at); err != nil {
			return nil, fmt.Errorf("listing connection events: %w", err)
		}
		e.At = fromNanos(at)
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing connection events: %w", err)
	}
	return out, nil
}
