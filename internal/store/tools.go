package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Tool is one discovered tool (table mcp_tools).
type Tool struct {
	ServerID     string
	Name         string // namespaced, e.g. "demo.echo"
	OriginalName string
	Description  string
	Definition   json.RawMessage // the full MCP tool JSON as the upstream sent it
	IsExternal   bool            // true for tools of upstream servers (vs. the gateway's own)
	Valid        bool            // false when the catalog rejected it
	RejectReason string
	DiscoveredAt time.Time
}

const toolColumns = `t.server_id, t.name, t.original_name, t.description, t.definition,
	t.is_external, t.valid, t.reject_reason, t.discovered_at`

// ReplaceServerTools atomically replaces every tool row of the server.
//
// serverID may also be the server's name; an unknown server is an error
// wrapping [ErrNotFound], and two tools of one name an error wrapping
// [ErrConflict]. Either way the previous rows stay. On success each tool's
// ServerID is set to the server's id and a zero DiscoveredAt to the stored
// time; on failure the tools are left untouched.
func (db *DB) ReplaceServerTools(ctx context.Context, serverID string, tools []*Tool) error {
	discovered := make([]time.Time, len(tools))
	t := now()
	for i, tool := range tools {
		if tool == nil {
			return fmt.Errorf("replacing tools of server %q: tool %d is nil", serverID, i)
		}
		if tool.Name == "" {
			return fmt.Errorf("replacing tools of server %q: tool %d has no name", serverID, i)
		}
		if len(tool.Definition) > 0 && !json.Valid(tool.Definition) {
			return fmt.Errorf("replacing tools of server %q: definition of tool %q is not valid JSON", serverID, tool.Name)
		}
		discovered[i] = t
		if !tool.DiscoveredAt.IsZero() {
			discovered[i] = normalize(tool.DiscoveredAt)
		}
	}

	var id string
	err := db.Transact(ctx, func(tx *DB) error {
		var err error
		if id, _, err = resolveServer(ctx, tx.tx, serverID); err != nil {
			return err
		}
		if _, err := tx.tx.ExecContext(ctx, `DELETE FROM mcp_tools WHERE server_id = $1`, id); err != nil {
			return err
		}
		for i, tool := range tools {
			_, err := tx.tx.ExecContext(ctx,
				`INSERT INTO mcp_tools (server_id, name, original_name, description, definition,
					is_external, valid, reject_reason, discovered_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
				id, tool.Name, tool.OriginalName, tool.Description, jsonArg(tool.Definition),
				boolInt(tool.IsExternal), boolInt(tool.Valid), tool.RejectReason, toNanos(discovered[i]))
			if err != nil {
				if db.dialect.isConflict(err) {
					return fmt.Errorf("tool %q: %w", tool.Name, ErrConflict)
				}
				return fmt.Errorf("inserting tool %q: %w", tool.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("replacing tools of server %q: %w", serverID, err)
	}
	for i, tool := range tools {
		tool.ServerID, tool.DiscoveredAt = id, discovered[i]
	}
	return nil
}

// ListTools returns the tools of the server with the given id (or name), or
// of every server when serverID is "", sorted by server name then tool name.
// An unknown server has no tools: the result is empty, not an error.
func (db *DB) ListTools(ctx context.Context, serverID string) ([]*Tool, error) {
	q := `SELECT ` + toolColumns + ` FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id`
	var args []any
	if serverID != "" {
		q += ` WHERE t.server_id = $1 OR s.name = $1`
		args = append(args, serverID)
	}
	q += ` ORDER BY s.name, t.name`
	rows, err := db.reader().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing tools: %w", err)
	}
	defer rows.Close()
	var out []*Tool
	for rows.Next() {
		var tool Tool
		var def []byte
		var discovered int64
		if err := rows.Scan(&tool.ServerID, &tool.Name, &tool.OriginalName, &tool.Description, &def,
			&tool.IsExternal, &tool.Valid, &tool.RejectReason, &discovered); err != nil {
			return nil, fmt.Errorf("listing tools: %w", err)
		}
		if len(def) > 0 {
			tool.Definition = json.RawMessage(def)
		}
		tool.DiscoveredAt = fromNanos(discovered)
		out = append(out, &tool)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing tools: %w", err)
	}
	return out, nil
}
