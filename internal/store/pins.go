package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ToolPin is the pinned definition of one tool of a server (table
// tool_pins), and the other definition its upstream presents, if any.
type ToolPin struct {
	ServerID     string
	OriginalName string
	// Hash and Definition are the pinned definition (catalog.Pin).
	Hash       string
	Definition json.RawMessage
	PinnedAt   time.Time
	// ApprovedBy is who approved the pinned definition; "" for a pin taken
	// when the gateway first saw the tool.
	ApprovedBy string
	// ChangedHash and ChangedDefinition are the definition the upstream
	// presented instead of the pinned one, first seen at ChangedAt; empty
	// (and zero) while it presents the pinned one.
	ChangedHash       string
	ChangedDefinition json.RawMessage
	ChangedAt         time.Time
}

// Changed reports whether the upstream presents another definition than
// the pinned one.
func (p ToolPin) Changed() bool { return p.ChangedHash != "" && p.ChangedHash != p.Hash }

const pinColumns = `server_id, original_name, hash, definition, pinned_at, approved_by,
	changed_hash, changed_definition, changed_at`

func checkPin(p ToolPin) error {
	switch {
	case p.ServerID == "" || p.OriginalName == "" || p.Hash == "":
		return fmt.Errorf("server, tool and hash are required: %w", ErrInvalid)
	case !json.Valid(p.Definition):
		return fmt.Errorf("definition of tool %q is not valid JSON: %w", p.OriginalName, ErrInvalid)
	}
	return nil
}

// PinTool pins p's definition unless the tool is already pinned, and
// returns the pin stored (p, or the one found), so that two replicas seeing
// a tool for the first time at once agree on one pin. p.ServerID may be the
// server's id or name; a zero PinnedAt is set to now. An unknown server is
// an error wrapping [ErrNotFound].
func (db *DB) PinTool(ctx context.Context, p ToolPin) (ToolPin, error) {
	out, err := db.writePin(ctx, p, `DO NOTHING`)
	if err != nil {
		return p, fmt.Errorf("pinning tool %q of server %q: %w", p.OriginalName, p.ServerID, err)
	}
	return out, nil
}

// writePin inserts p's pin, doing onConflict when the tool is pinned
// already, and returns the pin stored.
func (db *DB) writePin(ctx context.Context, p ToolPin, onConflict string) (ToolPin, error) {
	if err := checkPin(p); err != nil {
		return p, err
	}
	var out ToolPin
	err := db.Transact(ctx, func(tx *DB) error {
		q := tx.tx
		id, _, err := resolveServer(ctx, q, p.ServerID)
		if err != nil {
			return err
		}
		_, err = q.ExecContext(ctx, `INSERT INTO tool_pins (server_id, original_name, hash, definition, pinned_at, approved_by)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (server_id, original_name) `+onConflict,
			id, p.OriginalName, p.Hash, string(p.Definition), toNanos(normalize(p.PinnedAt)), p.ApprovedBy)
		if err != nil {
			return err
		}
		out, err = getPin(ctx, q, id, p.OriginalName)
		return err
	})
	return out, err
}

// ToolPin returns the pin of one tool of the server with the given id, or
// an error wrapping [ErrNotFound].
func (db *DB) ToolPin(ctx context.Context, serverID, originalName string) (ToolPin, error) {
	p, err := getPin(ctx, db.reader(), serverID, originalName)
	if err != nil {
		return p, fmt.Errorf("reading the pin of tool %q of server %q: %w", originalName, serverID, err)
	}
	return p, nil
}

// ToolPins returns the pins of the tools of the server with the given id,
// sorted by original name.
func (db *DB) ToolPins(ctx context.Context, serverID string) ([]ToolPin, error) {
	rows, err := db.reader().QueryContext(ctx, `SELECT `+pinColumns+` FROM tool_pins WHERE server_id = $1 ORDER BY original_name`, serverID)
	if err != nil {
		return nil, fmt.Errorf("listing tool pins: %w", err)
	}
	defer rows.Close()
	var out []ToolPin
	for rows.Next() {
		p, err := scanPin(rows)
		if err != nil {
			return nil, fmt.Errorf("listing tool pins: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing tool pins: %w", err)
	}
	return out, nil
}

// NoteToolChange records that the upstream presents the definition hash
// (def) instead of the pinned one. It reports whether that is news: false
// when the pinned definition is hash, when this very change is already
// recorded (by this replica or another), or when the tool is not pinned.
// Exactly one of several replicas noting the same change gets true, so a
// change is announced once.
func (db *DB) NoteToolChange(ctx context.Context, serverID, originalName, hash string, def json.RawMessage, at time.Time) (bool, error) {
	if hash == "" || !json.Valid(def) {
		return false, fmt.Errorf("noting a tool change: hash and a JSON definition are required: %w", ErrInvalid)
	}
	var n int64
	err := db.atomic(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, `UPDATE tool_pins SET changed_hash = $3, changed_definition = $4, changed_at = $5
			WHERE server_id = $1 AND original_name = $2 AND hash <> $3 AND changed_hash <> $3`,
			serverID, originalName, hash, string(def), toNanos(normalize(at)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("noting a change of tool %q of server %q: %w", originalName, serverID, err)
	}
	return n == 1, nil
}

// ClearToolChange records that the upstream presents the pinned definition
// again, and reports whether a change had been recorded (once, across
// replicas, like [DB.NoteToolChange]).
func (db *DB) ClearToolChange(ctx context.Context, serverID, originalName string) (bool, error) {
	var n int64
	err := db.atomic(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, `UPDATE tool_pins SET changed_hash = '', changed_definition = '', changed_at = 0
			WHERE server_id = $1 AND original_name = $2 AND changed_hash <> ''`, serverID, originalName)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("clearing the change of tool %q of server %q: %w", originalName, serverID, err)
	}
	return n == 1, nil
}

// ApproveToolPin re-pins a tool to p's definition (recording p.ApprovedBy
// and p.PinnedAt, now when zero) and forgets any recorded change. A tool
// not pinned yet is pinned. p.ServerID may be the server's id or name; an
// unknown server is an error wrapping [ErrNotFound].
func (db *DB) ApproveToolPin(ctx context.Context, p ToolPin) (ToolPin, error) {
	out, err := db.writePin(ctx, p, `DO UPDATE SET
		hash = excluded.hash, definition = excluded.definition, pinned_at = excluded.pinned_at,
		approved_by = excluded.approved_by, changed_hash = '', changed_definition = '', changed_at = 0`)
	if err != nil {
		return p, fmt.Errorf("approving the definition of tool %q of server %q: %w", p.OriginalName, p.ServerID, err)
	}
	return out, nil
}

func getPin(ctx context.Context, q querier, serverID, originalName string) (ToolPin, error) {
	p, err := scanPin(q.QueryRowContext(ctx, `SELECT `+pinColumns+` FROM tool_pins WHERE server_id = $1 AND original_name = $2`,
		serverID, originalName))
	if errors.Is(err, sql.ErrNoRows) {
		return p, ErrNotFound
	}
	return p, err
}

func scanPin(row interface{ Scan(...any) error }) (ToolPin, error) {
	var p ToolPin
	var def, changedDef string
	var pinned, changed int64
	if err := row.Scan(&p.ServerID, &p.OriginalName, &p.Hash, &def, &pinned, &p.ApprovedBy,
		&p.ChangedHash, &changedDef, &changed); err != nil {
		return p, err
	}
	p.Definition, p.PinnedAt = json.RawMessage(def), fromNanos(pinned)
	if p.ChangedHash != "" {
		p.ChangedDefinition, p.ChangedAt = json.RawMessage(changedDef), fromNanos(changed)
	}
	return p, nil
}
