package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Grant is a stored permission of an agent, or of every identity of a
// workspace, to call tools (table mcp_policies). Its fields are exactly
// those of authz.Grant, in the same order, so the two convert into each
// other with a plain Go conversion. Server and Tool are names or patterns,
// kept as given. Exactly one of AgentID and Workspace is set.
type Grant struct {
	ID        string
	AgentID   string
	Workspace string
	Server    string
	Tool      string
	Actions   []string
	GrantedAt time.Time
	GrantedBy string
	ExpiresAt *time.Time
}

const grantColumns = `id, agent_id, workspace, server_id, tool_name, actions, granted_at, granted_by, expires_at`

// PutGrant stores g, replacing the grant of the same (AgentID, Workspace, Server, Tool)
// if there is one: granting again updates Actions, GrantedAt, GrantedBy and
// ExpiresAt but keeps the existing ID, so references to it (tokens issued
// with it) stay valid. A new row takes g.ID, or a new uuid when empty; a
// zero GrantedAt is stored as now. It returns the row as stored. A given ID
// that belongs to another grant is an error wrapping [ErrConflict].
func (db *DB) PutGrant(ctx context.Context, g Grant) (Grant, error) {
	if (g.AgentID == "") == (g.Workspace == "") || g.Server == "" || g.Tool == "" {
		return Grant{}, fmt.Errorf("putting grant (%q, %q, %q, %q): one of agent and workspace, server and tool must be set",
			g.AgentID, g.Workspace, g.Server, g.Tool)
	}
	id := g.ID
	if id == "" {
		id = uuid.NewString()
	}
	actions, err := listArg(g.Actions)
	if err != nil {
		return Grant{}, fmt.Errorf("putting grant to %q: actions: %w", g.AgentID, err)
	}
	var out Grant
	err = db.atomic(ctx, func(q querier) error {
		var err error
		out, err = scanGrant(q.QueryRowContext(ctx,
			`INSERT INTO mcp_policies (`+grantColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (agent_id, workspace, server_id, tool_name) DO UPDATE SET
				actions = excluded.actions,
				granted_at = excluded.granted_at,
				granted_by = excluded.granted_by,
				expires_at = excluded.expires_at
			RETURNING `+grantColumns,
			id, g.AgentID, g.Workspace, g.Server, g.Tool, actions, toNanos(normalize(g.GrantedAt)), g.GrantedBy, optNanos(g.ExpiresAt)))
		return err
	})
	if err != nil {
		if db.dialect.isConflict(err) { // g.ID belongs to another grant
			return Grant{}, fmt.Errorf("putting grant %q to %q: %w", id, g.AgentID, ErrConflict)
		}
		return Grant{}, fmt.Errorf("putting grant to %q: %w", g.AgentID, err)
	}
	return out, nil
}

// DeleteGrant deletes the grant with the given id and returns it, so the
// caller can audit what was revoked. An unknown id is an error wrapping
// [ErrNotFound].
func (db *DB) DeleteGrant(ctx context.Context, id string) (Grant, error) {
	var out Grant
	err := db.atomic(ctx, func(q querier) error {
		var err error
		out, err = scanGrant(q.QueryRowContext(ctx,
			`DELETE FROM mcp_policies WHERE id = $1 RETURNING `+grantColumns, id))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Grant{}, fmt.Errorf("deleting grant %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Grant{}, fmt.Errorf("deleting grant %q: %w", id, err)
	}
	return out, nil
}

// ListGrants returns the grants of agentID, or every grant (to agents and to
// workspaces) when it is "", ordered by agent, workspace, server and tool. Expired grants are included: expiry is
// the policy's call, and operators want to see them.
func (db *DB) ListGrants(ctx context.Context, agentID string) ([]Grant, error) {
	q := `SELECT ` + grantColumns + ` FROM mcp_policies`
	var args []any
	if agentID != "" {
		q += ` WHERE agent_id = $1`
		args = append(args, agentID)
	}
	q += ` ORDER BY agent_id, workspace, server_id, tool_name`
	rows, err := db.reader().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing grants: %w", err)
	}
	defer rows.Close()
	var out []Grant
	for rows.Next() {
		g, err := scanGrant(rows)
		if err != nil {
			return nil, fmt.Errorf("listing grants: %w", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing grants: %w", err)
	}
	return out, nil
}

func scanGrant(sc scanner) (Grant, error) {
	var g Grant
	var actions string
	var granted int64
	var expires sql.NullInt64
	if err := sc.Scan(&g.ID, &g.AgentID, &g.Workspace, &g.Server, &g.Tool, &actions, &granted, &g.GrantedBy, &expires); err != nil {
		return Grant{}, err
	}
	var err error
	if g.Actions, err = parseList(actions); err != nil {
		return Grant{}, fmt.Errorf("grant %q actions: %w", g.ID, err)
	}
	g.GrantedAt, g.ExpiresAt = fromNanos(granted), optTime(expires)
	return g, nil
}
