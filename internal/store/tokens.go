package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrTokenUsed is wrapped by the error of [DB.UseToken] when a single-use
// token was already spent, so a replayed approval is told apart from an
// unknown one.
var ErrTokenUsed = errors.New("token already used")

// Token is a stored approval for a high-risk call (table mcp_tokens). Its
// fields are exactly those of authz.Token, in the same order, so the two
// convert into each other with a plain Go conversion. ID is the hash of the
// secret the caller presents, never the secret.
type Token struct {
	ID         string
	AgentID    string
	Server     string
	Tool       string
	ArgsDigest string
	SingleUse  bool
	GrantID    string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	UsedAt     *time.Time
	Revoked    bool
}

const tokenColumns = `token_id, agent_id, server_id, tool_name, args_digest, single_use, grant_id,
	created_at, expires_at, used_at, revoked`

// PutToken stores t. A zero CreatedAt is stored as now; ExpiresAt is
// required, since an approval that never lapses is a standing grant in
// disguise. A taken ID is an error wrapping [ErrConflict].
func (db *DB) PutToken(ctx context.Context, t Token) error {
	if t.ID == "" {
		return errors.New("putting token: empty id")
	}
	if t.ExpiresAt.IsZero() {
		return fmt.Errorf("putting token for %q: no expiry", t.AgentID)
	}
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx,
			`INSERT INTO mcp_tokens (`+tokenColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			t.ID, t.AgentID, t.Server, t.Tool, t.ArgsDigest, boolInt(t.SingleUse), t.GrantID,
			toNanos(normalize(t.CreatedAt)), toNanos(t.ExpiresAt), optNanos(t.UsedAt), boolInt(t.Revoked))
		return err
	})
	if err != nil {
		// The id is a hash of a secret: errors name the agent instead.
		if db.dialect.isConflict(err) {
			return fmt.Errorf("putting token for %q: %w", t.AgentID, ErrConflict)
		}
		return fmt.Errorf("putting token for %q: %w", t.AgentID, err)
	}
	return nil
}

// GetToken returns the token with the given id, or an error wrapping
// [ErrNotFound]. Used, revoked and expired tokens are returned too; judging
// them is the caller's business.
func (db *DB) GetToken(ctx context.Context, id string) (Token, error) {
	t, err := scanToken(db.reader().QueryRowContext(ctx,
		`SELECT `+tokenColumns+` FROM mcp_tokens WHERE token_id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, fmt.Errorf("getting token: %w", ErrNotFound)
	}
	if err != nil {
		return Token{}, fmt.Errorf("getting token: %w", err)
	}
	return t, nil
}

// UseToken marks the token used at at (now when zero). It is one
// conditional UPDATE, so of any number of concurrent callers, in this
// process or another replica, exactly one succeeds: the others get an error
// wrapping [ErrTokenUsed]. An unknown id is an error wrapping [ErrNotFound].
// It does not look at Revoked or ExpiresAt; check those with [DB.GetToken]
// first.
func (db *DB) UseToken(ctx context.Context, id string, at time.Time) error {
	n, err := db.execCount(ctx, "using token",
		`UPDATE mcp_tokens SET used_at = $2 WHERE token_id = $1 AND used_at IS NULL`, id, toNanos(normalize(at)))
	if err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	var exists int
	err = db.reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM mcp_tokens WHERE token_id = $1`, id).Scan(&exists)
	switch {
	case err != nil:
		return fmt.Errorf("using token: %w", err)
	case exists == 0:
		return fmt.Errorf("using token: %w", ErrNotFound)
	}
	return fmt.Errorf("using token: %w", ErrTokenUsed)
}

// RevokeToken marks the token revoked. Revoking twice is not an error; an
// unknown id is an error wrapping [ErrNotFound].
func (db *DB) RevokeToken(ctx context.Context, id string) error {
	n, err := db.execCount(ctx, "revoking token", `UPDATE mcp_tokens SET revoked = 1 WHERE token_id = $1`, id)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("revoking token: %w", ErrNotFound)
	}
	return nil
}

// RevokeGrantTokens revokes every token issued with the grant, so revoking
// a grant also withdraws the approvals that came with it. It returns how
// many tokens it newly revoked. An empty grantID is refused: it would match
// every token issued on its own.
func (db *DB) RevokeGrantTokens(ctx context.Context, grantID string) (int64, error) {
	if grantID == "" {
		return 0, errors.New("revoking tokens of grant: empty grant id")
	}
	return db.execCount(ctx, fmt.Sprintf("revoking tokens of grant %q", grantID),
		`UPDATE mcp_tokens SET revoked = 1 WHERE grant_id = $1 AND revoked = 0`, grantID)
}

// PurgeTokens deletes the tokens that expired before expiredBefore, used or
// not, and returns how many; expired tokens can never be accepted again, so
// keeping them only grows the table.
func (db *DB) PurgeTokens(ctx context.Context, expiredBefore time.Time) (int64, error) {
	if expiredBefore.IsZero() {
		return 0, nil // nothing expired before the beginning of time
	}
	return db.execCount(ctx, "purging tokens",
		`DELETE FROM mcp_tokens WHERE expires_at < $1`, toNanos(expiredBefore))
}

// execCount runs one writing statement and returns the rows it affected.
func (db *DB) execCount(ctx context.Context, what, query string, args ...any) (int64, error) {
	var n int64
	err := db.atomic(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return n, nil
}

func scanToken(sc scanner) (Token, error) {
	var t Token
	var singleUse, revoked bool
	var created, expires int64
	var used sql.NullInt64
	if err := sc.Scan(&t.ID, &t.AgentID, &t.Server, &t.Tool, &t.ArgsDigest, &singleUse, &t.GrantID,
		&created, &expires, &used, &revoked); err != nil {
		return Token{}, err
	}
	t.SingleUse, t.Revoked = singleUse, revoked
	t.CreatedAt, t.ExpiresAt, t.UsedAt = fromNanos(created), fromNanos(expires), optTime(used)
	return t, nil
}
