package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// UpstreamToken is an OAuth grant the gateway holds for an upstream server
// (table upstream_tokens). The store keeps it opaque: Sealed is sealed by
// the caller with the secret keyring, and only ExpiresAt and Problem, which
// say nothing secret, are readable.
//
// Version makes writes comparable between replicas: every write of the
// grant increments it, and [DB.ReplaceUpstreamToken] succeeds only on the
// version it read. The lease ([DB.LeaseUpstreamToken]) says which replica
// is refreshing the grant, so that one refresh is in flight per grant
// however many replicas notice its expiry at once.
type UpstreamToken struct {
	Server string
	// Subject is "" for the server's own credential; reserved for the
	// credentials of individual callers.
	Subject string
	Sealed  string
	// ExpiresAt is when the access token expires; zero when the
	// authorization server did not say.
	ExpiresAt time.Time
	// Problem says why the grant cannot be used any more (a refresh the
	// authorization server refused); "" while it can.
	Problem    string
	Version    int64
	LeaseOwner string
	LeaseUntil time.Time // zero when no lease is held
	UpdatedAt  time.Time
}

const upstreamTokenColumns = `server, subject, sealed, expires_at, problem, version, lease_owner, lease_until, updated_at`

// UpstreamToken returns the grant of server for subject, or an error
// wrapping [ErrNotFound].
func (db *DB) UpstreamToken(ctx context.Context, server, subject string) (UpstreamToken, error) {
	t, err := getUpstreamToken(ctx, db.reader(), server, subject)
	if err != nil {
		return t, fmt.Errorf("reading the upstream token of %q: %w", server, err)
	}
	return t, nil
}

func getUpstreamToken(ctx context.Context, q querier, server, subject string) (UpstreamToken, error) {
	var t UpstreamToken
	var expires, leaseUntil, updated int64
	err := q.QueryRowContext(ctx, `SELECT `+upstreamTokenColumns+` FROM upstream_tokens WHERE server = $1 AND subject = $2`,
		server, subject).Scan(&t.Server, &t.Subject, &t.Sealed, &expires, &t.Problem, &t.Version, &t.LeaseOwner, &leaseUntil, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return t, ErrNotFound
	}
	if err != nil {
		return t, err
	}
	t.ExpiresAt = zeroTime(sql.NullInt64{Int64: expires, Valid: expires != 0})
	t.LeaseUntil = zeroTime(sql.NullInt64{Int64: leaseUntil, Valid: leaseUntil != 0})
	t.UpdatedAt = fromNanos(updated)
	return t, nil
}

func checkUpstreamToken(t UpstreamToken) error {
	if t.Server == "" || t.Sealed == "" {
		return fmt.Errorf("server and sealed grant are required: %w", ErrInvalid)
	}
	return nil
}

// PutUpstreamToken stores t as the grant of its server and subject,
// whatever was stored before (a new authorization replaces the old one):
// the version becomes the old one plus one (1 for a new row) and any lease
// is released. It returns the row stored. A zero UpdatedAt is now.
func (db *DB) PutUpstreamToken(ctx context.Context, t UpstreamToken) (UpstreamToken, error) {
	if err := checkUpstreamToken(t); err != nil {
		return t, fmt.Errorf("storing the upstream token of %q: %w", t.Server, err)
	}
	var out UpstreamToken
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO upstream_tokens (`+upstreamTokenColumns+`)
			VALUES ($1, $2, $3, $4, $5, 1, '', 0, $6)
			ON CONFLICT (server, subject) DO UPDATE SET
				sealed = excluded.sealed,
				expires_at = excluded.expires_at,
				problem = excluded.problem,
				version = upstream_tokens.version + 1,
				lease_owner = '',
				lease_until = 0,
				updated_at = excluded.updated_at`,
			t.Server, t.Subject, t.Sealed, nanosOrZero(t.ExpiresAt), t.Problem, toNanos(normalize(t.UpdatedAt)))
		if err != nil {
			return err
		}
		out, err = getUpstreamToken(ctx, q, t.Server, t.Subject)
		return err
	})
	if err != nil {
		return t, fmt.Errorf("storing the upstream token of %q: %w", t.Server, err)
	}
	return out, nil
}

// ReplaceUpstreamToken stores t over the grant of its server and subject
// only if the stored version is still t.Version: the compare-and-swap of a
// refresh, which also releases the lease. It returns the row stored, or an
// error wrapping [ErrConflict] when another write came first (or
// [ErrNotFound] when the grant was deleted).
func (db *DB) ReplaceUpstreamToken(ctx context.Context, t UpstreamToken) (UpstreamToken, error) {
	if err := checkUpstreamToken(t); err != nil {
		return t, fmt.Errorf("replacing the upstream token of %q: %w", t.Server, err)
	}
	var out UpstreamToken
	err := db.Transact(ctx, func(tx *DB) error {
		q := tx.tx
		res, err := q.ExecContext(ctx, `UPDATE upstream_tokens SET sealed = $1, expires_at = $2, problem = $3,
				version = version + 1, lease_owner = '', lease_until = 0, updated_at = $4
			WHERE server = $5 AND subject = $6 AND version = $7`,
			t.Sealed, nanosOrZero(t.ExpiresAt), t.Problem, toNanos(normalize(t.UpdatedAt)), t.Server, t.Subject, t.Version)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			if _, err := getUpstreamToken(ctx, q, t.Server, t.Subject); err != nil {
				return err
			}
			return fmt.Errorf("version %d was replaced meanwhile: %w", t.Version, ErrConflict)
		}
		out, err = getUpstreamToken(ctx, q, t.Server, t.Subject)
		return err
	})
	if err != nil {
		return t, fmt.Errorf("replacing the upstream token of %q: %w", t.Server, err)
	}
	return out, nil
}

// LeaseUpstreamToken gives holder the right to refresh version of the
// grant of server and subject until until, if no other holder has a lease
// that is live at now and the version is still the stored one. It reports
// whether holder has the lease. A holder that already has it extends it.
func (db *DB) LeaseUpstreamToken(ctx context.Context, server, subject string, version int64, holder string, now, until time.Time) (bool, error) {
	if holder == "" {
		return false, fmt.Errorf("leasing the upstream token of %q: empty holder: %w", server, ErrInvalid)
	}
	n, err := db.execCount(ctx, fmt.Sprintf("leasing the upstream token of %q", server),
		`UPDATE upstream_tokens SET lease_owner = $1, lease_until = $2
		WHERE server = $3 AND subject = $4 AND version = $5
			AND (lease_owner = '' OR lease_owner = $1 OR lease_until <= $6)`,
		holder, toNanos(until), server, subject, version, toNanos(now))
	return n == 1, err
}

// ReleaseUpstreamToken gives up holder's lease on the grant of server and
// subject, as after a refresh that failed without replacing the grant. A
// lease held by another holder is left alone.
func (db *DB) ReleaseUpstreamToken(ctx context.Context, server, subject, holder string) error {
	_, err := db.execCount(ctx, fmt.Sprintf("releasing the upstream token of %q", server),
		`UPDATE upstream_tokens SET lease_owner = '', lease_until = 0
		WHERE server = $1 AND subject = $2 AND lease_owner = $3`, server, subject, holder)
	return err
}

// DeleteUpstreamToken forgets the grant of server for subject, as when the
// server is removed or its authorization revoked. A grant not stored is
// not an error: the outcome is the same.
func (db *DB) DeleteUpstreamToken(ctx context.Context, server, subject string) error {
	_, err := db.execCount(ctx, fmt.Sprintf("deleting the upstream token of %q", server),
		`DELETE FROM upstream_tokens WHERE server = $1 AND subject = $2`, server, subject)
	return err
}

// nanosOrZero stores the zero time as 0 rather than as a large negative
// number, so that "unknown" reads back as the zero time.
func nanosOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return toNanos(t)
}

// UserUpstreamTokens lists the grants of callers (subject not "") of
// server, or of every server when server is "", for subject, or for every
// caller when subject is "": the credentials linked under `credentials:
// per_user`. The newest comes first.
func (db *DB) UserUpstreamTokens(ctx context.Context, server, subject string) ([]UpstreamToken, error) {
	rows, err := db.reader().QueryContext(ctx, `SELECT `+upstreamTokenColumns+` FROM upstream_tokens
		WHERE subject <> '' AND ($1 = '' OR server = $1) AND ($2 = '' OR subject = $2)
		ORDER BY updated_at DESC, server, subject`, server, subject)
	if err != nil {
		return nil, fmt.Errorf("listing the upstream tokens of callers: %w", err)
	}
	defer rows.Close()
	var out []UpstreamToken
	for rows.Next() {
		var t UpstreamToken
		var expires, leaseUntil, updated int64
		if err := rows.Scan(&t.Server, &t.Subject, &t.Sealed, &expires, &t.Problem, &t.Version, &t.LeaseOwner, &leaseUntil, &updated); err != nil {
			return nil, fmt.Errorf("listing the upstream tokens of callers: %w", err)
		}
		t.ExpiresAt = zeroTime(sql.NullInt64{Int64: expires, Valid: expires != 0})
		t.LeaseUntil = zeroTime(sql.NullInt64{Int64: leaseUntil, Valid: leaseUntil != 0})
		t.UpdatedAt = fromNanos(updated)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the upstream tokens of callers: %w", err)
	}
	return out, nil
}
