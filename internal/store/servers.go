package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Server is a registered upstream server (table mcp_servers).
type Server struct {
	ID          string // uuid, assigned by CreateServer when empty
	Name        string // unique
	Source      string // "config" (from switchboard.yaml) or "api" (registered at runtime)
	Transport   string // "stdio" | "sse" | "http"
	Description string
	Config      json.RawMessage // the full server definition as JSON (opaque to the store)
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Values of [Server.Source].
const (
	SourceConfig = "config"
	SourceAPI    = "api"
)

const serverColumns = `id, name, source, transport, description, config, created_at, updated_at`

// Matching a server by id or name. The id wins when one server's name is
// another's id, so an id always means the same row.
const (
	serverByIDOrName = `(id = $1 OR name = $1)`
	idFirst          = `ORDER BY CASE WHEN id = $1 THEN 0 ELSE 1 END LIMIT 1`
)

func checkServer(s *Server) error {
	if s == nil {
		return errors.New("nil server")
	}
	if s.Name == "" {
		return errors.New("server name is empty")
	}
	if len(s.Config) > 0 && !json.Valid(s.Config) {
		return errors.New("server config is not valid JSON")
	}
	return nil
}

func serverName(s *Server) string {
	if s == nil {
		return ""
	}
	return s.Name
}

// CreateServer inserts s. It fails with [ErrConflict] if the name (or a given
// ID) is taken. On success it fills s.ID when empty and s.CreatedAt and
// s.UpdatedAt when zero, with the values stored.
func (db *DB) CreateServer(ctx context.Context, s *Server) error {
	if err := checkServer(s); err != nil {
		return fmt.Errorf("creating server %q: %w", serverName(s), err)
	}
	id := s.ID
	if id == "" {
		id = uuid.NewString()
	}
	created, updated := normalize(s.CreatedAt), normalize(s.UpdatedAt)
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx,
			`INSERT INTO mcp_servers (`+serverColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			id, s.Name, s.Source, s.Transport, s.Description, jsonArg(s.Config), toNanos(created), toNanos(updated))
		return err
	})
	if err != nil {
		if db.dialect.isConflict(err) {
			return fmt.Errorf("creating server %q: %w", s.Name, ErrConflict)
		}
		return fmt.Errorf("creating server %q: %w", s.Name, err)
	}
	s.ID, s.CreatedAt, s.UpdatedAt = id, created, updated
	return nil
}

// UpsertServer inserts s, or updates the server of the same name. An existing
// row keeps its ID and CreatedAt, which are copied into s, so servers loaded
// from the config file keep stable ids across restarts. UpdatedAt is set to
// now either way. A new row takes s.ID when set, else a new uuid.
func (db *DB) UpsertServer(ctx context.Context, s *Server) error {
	if err := checkServer(s); err != nil {
		return fmt.Errorf("upserting server %q: %w", serverName(s), err)
	}
	id := s.ID
	if id == "" {
		id = uuid.NewString()
	}
	t := now()
	created := normalize(s.CreatedAt)
	var createdN, updatedN int64
	err := db.atomic(ctx, func(q querier) error {
		return q.QueryRowContext(ctx,
			`INSERT INTO mcp_servers (`+serverColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (name) DO UPDATE SET
				source = excluded.source,
				transport = excluded.transport,
				description = excluded.description,
				config = excluded.config,
				updated_at = excluded.updated_at
			RETURNING id, created_at, updated_at`,
			id, s.Name, s.Source, s.Transport, s.Description, jsonArg(s.Config), toNanos(created), toNanos(t),
		).Scan(&id, &createdN, &updatedN)
	})
	if err != nil {
		if db.dialect.isConflict(err) { // s.ID belongs to another server
			return fmt.Errorf("upserting server %q: %w", s.Name, ErrConflict)
		}
		return fmt.Errorf("upserting server %q: %w", s.Name, err)
	}
	s.ID, s.CreatedAt, s.UpdatedAt = id, fromNanos(createdN), fromNanos(updatedN)
	return nil
}

// GetServer returns the server with the given id or name, or an error
// wrapping [ErrNotFound].
func (db *DB) GetServer(ctx context.Context, idOrName string) (*Server, error) {
	s, err := scanServer(db.reader().QueryRowContext(ctx,
		`SELECT `+serverColumns+` FROM mcp_servers WHERE `+serverByIDOrName+` `+idFirst, idOrName))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("getting server %q: %w", idOrName, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("getting server %q: %w", idOrName, err)
	}
	return s, nil
}

// ListServers returns every server, sorted by name.
func (db *DB) ListServers(ctx context.Context) ([]*Server, error) {
	rows, err := db.reader().QueryContext(ctx, `SELECT `+serverColumns+` FROM mcp_servers ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing servers: %w", err)
	}
	defer rows.Close()
	var out []*Server
	for rows.Next() {
		s, err := scanServer(rows)
		if err != nil {
			return nil, fmt.Errorf("listing servers: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing servers: %w", err)
	}
	return out, nil
}

// DeleteServer deletes the server with the given id or name together with its
// tools and connection history, or returns an error wrapping [ErrNotFound].
func (db *DB) DeleteServer(ctx context.Context, idOrName string) error {
	err := db.Transact(ctx, func(tx *DB) error {
		id, _, err := resolveServer(ctx, tx.tx, idOrName)
		if err != nil {
			return err
		}
		// The foreign keys cascade too; deleting explicitly keeps this
		// correct even on a connection where enforcement is off.
		for _, q := range []string{
			`DELETE FROM mcp_tools WHERE server_id = $1`,
			`DELETE FROM tool_pins WHERE server_id = $1`,
			`DELETE FROM default_access_overrides WHERE server_id = $1`,
			`DELETE FROM server_connection_history WHERE server_id = $1`,
			`DELETE FROM mcp_servers WHERE id = $1`,
		} {
			if _, err := tx.tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting server %q: %w", idOrName, err)
	}
	return nil
}

// resolveServer returns the id and name of the server with the given id or
// name, or ErrNotFound itself, for the caller to wrap with its operation.
func resolveServer(ctx context.Context, q querier, idOrName string) (id, name string, err error) {
	err = q.QueryRowContext(ctx,
		`SELECT id, name FROM mcp_servers WHERE `+serverByIDOrName+` `+idFirst, idOrName).Scan(&id, &name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", ErrNotFound
	}
	if err != nil {
		return "", "", fmt.Errorf("looking up server: %w", err)
	}
	return id, name, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanServer(sc scanner) (*Server, error) {
	var s Server
	var config []byte
	var created, updated int64
	if err := sc.Scan(&s.ID, &s.Name, &s.Source, &s.Transport, &s.Description, &config, &created, &updated); err != nil {
		return nil, err
	}
	if len(config) > 0 {
		s.Config = json.RawMessage(config)
	}
	s.CreatedAt, s.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &s, nil
}

// RenameServer gives the server with the given id a new name (and
// config), keeping its id, tools and history. ErrNotFound if there is no
// such server, ErrConflict if the name is taken.
func (db *DB) RenameServer(ctx context.Context, id, newName string, config json.RawMessage) error {
	if newName == "" {
		return fmt.Errorf("renaming server %q: empty name", id)
	}
	var n int64
	err := db.atomic(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx,
			`UPDATE mcp_servers SET name = $2, config = $3, updated_at = $4 WHERE id = $1`,
			id, newName, jsonArg(config), toNanos(now()))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	switch {
	case err != nil && db.dialect.isConflict(err):
		return fmt.Errorf("renaming server %q to %q: %w", id, newName, ErrConflict)
	case err != nil:
		return fmt.Errorf("renaming server %q to %q: %w", id, newName, err)
	case n == 0:
		return fmt.Errorf("renaming server %q: %w", id, ErrNotFound)
	}
	return nil
}
