package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// APIKey is a stored API key (table api_keys). Its fields are exactly those
// of identity.Key, in the same order, so the two convert into each other with
// a plain Go conversion. Only the hash of the secret is ever stored.
type APIKey struct {
	ID           string
	Hash         string // hex SHA-256 of the secret; unique
	Prefix       string // the first characters of the secret, for humans to tell keys apart
	AgentID      string
	Roles        []string
	Workspace    string
	Admin        bool
	AllowServers []string
	DenyServers  []string
	// WorkspacePolicy: the key carries a workspace policy (seed 003).
	WorkspacePolicy bool
	CreatedAt       time.Time
	CreatedBy       string
	ExpiresAt       *time.Time
	RevokedAt       *time.Time
}

const apiKeyColumns = `id, hash, prefix, agent_id, roles, workspace, admin, allow_servers, deny_servers,
	workspace_policy, created_at, created_by, expires_at, revoked_at`

// CreateAPIKey stores k. A zero CreatedAt is stored as now. It fails with
// an error wrapping [ErrConflict] when the ID or the hash is taken.
func (db *DB) CreateAPIKey(ctx context.Context, k APIKey) error {
	if k.ID == "" {
		return errors.New("creating api key: empty id")
	}
	if k.Hash == "" {
		return fmt.Errorf("creating api key %q: empty hash", k.ID)
	}
	roles, err := listArg(k.Roles)
	if err != nil {
		return fmt.Errorf("creating api key %q: roles: %w", k.ID, err)
	}
	allow, err := listArg(k.AllowServers)
	if err != nil {
		return fmt.Errorf("creating api key %q: allowed servers: %w", k.ID, err)
	}
	deny, err := listArg(k.DenyServers)
	if err != nil {
		return fmt.Errorf("creating api key %q: denied servers: %w", k.ID, err)
	}
	err = db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx,
			`INSERT INTO api_keys (`+apiKeyColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			k.ID, k.Hash, k.Prefix, k.AgentID, roles, k.Workspace, boolInt(k.Admin), allow, deny,
			boolInt(k.WorkspacePolicy), toNanos(normalize(k.CreatedAt)), k.CreatedBy, optNanos(k.ExpiresAt), optNanos(k.RevokedAt))
		return err
	})
	if err != nil {
		if db.dialect.isConflict(err) {
			return fmt.Errorf("creating api key %q: %w", k.ID, ErrConflict)
		}
		return fmt.Errorf("creating api key %q: %w", k.ID, err)
	}
	return nil
}

// APIKeyByHash returns the key whose secret hashes to hash, or an error
// wrapping [ErrNotFound]. Revoked and expired keys are returned too: the
// caller decides, so it can tell "revoked" from "unknown" in its logs.
// Errors never repeat the hash, which is as good as a credential for lookups.
func (db *DB) APIKeyByHash(ctx context.Context, hash string) (APIKey, error) {
	k, err := scanAPIKey(db.reader().QueryRowContext(ctx,
		`SELECT `+apiKeyColumns+` FROM api_keys WHERE hash = $1`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return APIKey{}, fmt.Errorf("looking up api key by hash: %w", ErrNotFound)
	}
	if err != nil {
		return APIKey{}, fmt.Errorf("looking up api key by hash: %w", err)
	}
	return k, nil
}

// ListAPIKeys returns every key, revoked ones included, oldest first (ties
// broken by ID, so the order is stable).
func (db *DB) ListAPIKeys(ctx context.Context) ([]APIKey, error) {
	rows, err := db.reader().QueryContext(ctx,
		`SELECT `+apiKeyColumns+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("listing api keys: %w", err)
	}
	defer rows.Close()
	var out []APIKey
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("listing api keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing api keys: %w", err)
	}
	return out, nil
}

// RevokeAPIKey marks the key revoked at at (now when zero) and returns it.
// Revoking again keeps the first revocation time, so the audit trail shows
// when the key really stopped working. An unknown id is an error wrapping
// [ErrNotFound].
func (db *DB) RevokeAPIKey(ctx context.Context, id string, at time.Time) (APIKey, error) {
	var k APIKey
	err := db.atomic(ctx, func(q querier) error {
		var err error
		k, err = scanAPIKey(q.QueryRowContext(ctx,
			`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1
			RETURNING `+apiKeyColumns,
			id, toNanos(normalize(at))))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return APIKey{}, fmt.Errorf("revoking api key %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return APIKey{}, fmt.Errorf("revoking api key %q: %w", id, err)
	}
	return k, nil
}

func scanAPIKey(sc scanner) (APIKey, error) {
	var k APIKey
	var roles, allow, deny string
	var admin, policy bool
	var created int64
	var expires, revoked sql.NullInt64
	if err := sc.Scan(&k.ID, &k.Hash, &k.Prefix, &k.AgentID, &roles, &k.Workspace, &admin, &allow, &deny,
		&policy, &created, &k.CreatedBy, &expires, &revoked); err != nil {
		return APIKey{}, err
	}
	var err error
	if k.Roles, err = parseList(roles); err != nil {
		return APIKey{}, fmt.Errorf("api key %q roles: %w", k.ID, err)
	}
	if k.AllowServers, err = parseList(allow); err != nil {
		return APIKey{}, fmt.Errorf("api key %q allowed servers: %w", k.ID, err)
	}
	if k.DenyServers, err = parseList(deny); err != nil {
		return APIKey{}, fmt.Errorf("api key %q denied servers: %w", k.ID, err)
	}
	k.Admin, k.WorkspacePolicy = admin, policy
	k.CreatedAt = fromNanos(created)
	k.ExpiresAt, k.RevokedAt = optTime(expires), optTime(revoked)
	return k, nil
}
