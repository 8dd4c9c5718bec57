package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// AccessOverride is a runtime override of a server's default_access (table
// default_access_overrides): what an operator set instead of the value of
// the config file, until it is reset.
type AccessOverride struct {
	ServerID      string
	DefaultAccess string // "allow" or "deny"
	SetAt         time.Time
	SetBy         string
}

// SetAccessOverride stores o, replacing the server's override if it has
// one. o.ServerID may be the server's id or name; a zero SetAt is stored as
// now. It returns the row as stored. An unknown server is an error wrapping
// [ErrNotFound].
func (db *DB) SetAccessOverride(ctx context.Context, o AccessOverride) (AccessOverride, error) {
	if o.ServerID == "" || o.DefaultAccess == "" {
		return AccessOverride{}, fmt.Errorf("setting a default_access override: server and value are required: %w", ErrInvalid)
	}
	var out AccessOverride
	err := db.Transact(ctx, func(tx *DB) error {
		id, _, err := resolveServer(ctx, tx.tx, o.ServerID)
		if err != nil {
			return err
		}
		out, err = scanAccessOverride(tx.tx.QueryRowContext(ctx,
			`INSERT INTO default_access_overrides (server_id, default_access, set_at, set_by) VALUES ($1, $2, $3, $4)
			ON CONFLICT (server_id) DO UPDATE SET
				default_access = excluded.default_access,
				set_at = excluded.set_at,
				set_by = excluded.set_by
			RETURNING server_id, default_access, set_at, set_by`,
			id, o.DefaultAccess, toNanos(normalize(o.SetAt)), o.SetBy))
		return err
	})
	if err != nil {
		return AccessOverride{}, fmt.Errorf("setting the default_access override of server %q: %w", o.ServerID, err)
	}
	return out, nil
}

// ClearAccessOverride removes the override of the server with the given id
// and reports whether there was one.
func (db *DB) ClearAccessOverride(ctx context.Context, serverID string) (bool, error) {
	var n int64
	err := db.atomic(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM default_access_overrides WHERE server_id = $1`, serverID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("clearing the default_access override of server %q: %w", serverID, err)
	}
	return n > 0, nil
}

// AccessOverrides returns every override, by server id.
func (db *DB) AccessOverrides(ctx context.Context) (map[string]AccessOverride, error) {
	rows, err := db.reader().QueryContext(ctx, `SELECT server_id, default_access, set_at, set_by FROM default_access_overrides`)
	if err != nil {
		return nil, fmt.Errorf("listing default_access overrides: %w", err)
	}
	defer rows.Close()
	out := map[string]AccessOverride{}
	for rows.Next() {
		o, err := scanAccessOverride(rows)
		if err != nil {
			return nil, fmt.Errorf("listing default_access overrides: %w", err)
		}
		out[o.ServerID] = o
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing default_access overrides: %w", err)
	}
	return out, nil
}

// AccessOverride returns the override of the server with the given id, or
// an error wrapping [ErrNotFound] when it has none.
func (db *DB) AccessOverride(ctx context.Context, serverID string) (AccessOverride, error) {
	o, err := scanAccessOverride(db.reader().QueryRowContext(ctx,
		`SELECT server_id, default_access, set_at, set_by FROM default_access_overrides WHERE server_id = $1`, serverID))
	if errors.Is(err, sql.ErrNoRows) {
		return AccessOverride{}, fmt.Errorf("default_access override of server %q: %w", serverID, ErrNotFound)
	}
	if err != nil {
		return AccessOverride{}, fmt.Errorf("default_access override of server %q: %w", serverID, err)
	}
	return o, nil
}

func scanAccessOverride(sc scanner) (AccessOverride, error) {
	var o AccessOverride
	var at int64
	if err := sc.Scan(&o.ServerID, &o.DefaultAccess, &at, &o.SetBy); err != nil {
		return AccessOverride{}, err
	}
	o.SetAt = fromNanos(at)
	return o, nil
}
