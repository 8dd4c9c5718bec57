package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Escalation is one event a human operator is told of (table
// escalations): a call that failed after its retries and fallbacks, or a
// high-risk call waiting for approval. DeliveredAt is nil until the
// webhook accepted it.
type Escalation struct {
	ID            string
	Event         string // "call_failed" or "approval_requested"
	CorrelationID string
	AgentID       string
	Server        string
	Tool          string
	ErrorCode     string
	Error         string
	Attempts      int
	ApprovalID    string
	CreatedAt     time.Time

	DeliveredAt      *time.Time
	DeliveryAttempts int
	DeliveryError    string
	AckedAt          *time.Time
	AckedBy          string
}

const escalationColumns = `id, event, correlation_id, agent_id, server, tool, error_code, error, attempts, approval_id,
	created_at, delivered_at, delivery_attempts, delivery_error, acked_at, acked_by`

// CreateEscalation stores e; a zero CreatedAt is stored as now.
func (db *DB) CreateEscalation(ctx context.Context, e Escalation) error {
	if e.ID == "" || e.Event == "" {
		return fmt.Errorf("creating an escalation: id and event are required: %w", ErrInvalid)
	}
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO escalations (id, event, correlation_id, agent_id, server, tool, error_code, error,
			attempts, approval_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			e.ID, e.Event, e.CorrelationID, e.AgentID, e.Server, e.Tool, e.ErrorCode, e.Error, e.Attempts, e.ApprovalID,
			toNanos(normalize(e.CreatedAt)))
		return err
	})
	if err != nil {
		return fmt.Errorf("creating escalation %q: %w", e.ID, err)
	}
	return nil
}

// EscalationFilter selects escalations. Zero fields select everything.
type EscalationFilter struct {
	// Unacked keeps those no operator acknowledged yet.
	Unacked bool
	// Undelivered keeps those the webhook has not accepted yet.
	Undelivered bool
	// Limit bounds the answer; 0 means 1000.
	Limit int
}

// Escalations lists escalations, newest first; undelivered ones are listed
// oldest first, the order they are delivered in.
func (db *DB) Escalations(ctx context.Context, f EscalationFilter) ([]Escalation, error) {
	q := `SELECT ` + escalationColumns + ` FROM escalations WHERE 1 = 1`
	order := ` ORDER BY created_at DESC, id DESC`
	if f.Unacked {
		q += ` AND acked_at IS NULL`
	}
	if f.Undelivered {
		q += ` AND delivered_at IS NULL`
		order = ` ORDER BY created_at, id`
	}
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	rows, err := db.reader().QueryContext(ctx, q+order+` LIMIT $1`, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("listing escalations: %w", err)
	}
	defer rows.Close()
	out := []Escalation{}
	for rows.Next() {
		e, err := scanEscalation(rows)
		if err != nil {
			return nil, fmt.Errorf("listing escalations: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing escalations: %w", err)
	}
	return out, nil
}

// Escalation returns one escalation, or an error wrapping [ErrNotFound].
func (db *DB) Escalation(ctx context.Context, id string) (Escalation, error) {
	e, err := scanEscalation(db.reader().QueryRowContext(ctx, `SELECT `+escalationColumns+` FROM escalations WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Escalation{}, fmt.Errorf("escalation %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Escalation{}, fmt.Errorf("escalation %q: %w", id, err)
	}
	return e, nil
}

// EscalationDelivered records that the webhook accepted escalation id at
// at; a record delivered already keeps its first delivery time.
func (db *DB) EscalationDelivered(ctx context.Context, id string, at time.Time) error {
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `UPDATE escalations SET delivered_at = $2, delivery_attempts = delivery_attempts + 1, delivery_error = ''
			WHERE id = $1 AND delivered_at IS NULL`, id, toNanos(normalize(at)))
		return err
	})
	if err != nil {
		return fmt.Errorf("marking escalation %q delivered: %w", id, err)
	}
	return nil
}

// EscalationDeliveryFailed records a failed delivery attempt and why.
func (db *DB) EscalationDeliveryFailed(ctx context.Context, id, why string) error {
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `UPDATE escalations SET delivery_attempts = delivery_attempts + 1, delivery_error = $2
			WHERE id = $1 AND delivered_at IS NULL`, id, why)
		return err
	})
	if err != nil {
		return fmt.Errorf("noting a failed delivery of escalation %q: %w", id, err)
	}
	return nil
}

// AckEscalation records that by acknowledged escalation id, and returns it.
// An acknowledged escalation keeps its first acknowledgement. An unknown id
// is an error wrapping [ErrNotFound].
func (db *DB) AckEscalation(ctx context.Context, id, by string, at time.Time) (Escalation, error) {
	var out Escalation
	err := db.Transact(ctx, func(tx *DB) error {
		if _, err := tx.tx.ExecContext(ctx, `UPDATE escalations SET acked_at = $2, acked_by = $3 WHERE id = $1 AND acked_at IS NULL`,
			id, toNanos(normalize(at)), by); err != nil {
			return err
		}
		var err error
		out, err = scanEscalation(tx.tx.QueryRowContext(ctx, `SELECT `+escalationColumns+` FROM escalations WHERE id = $1`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		return err
	})
	if err != nil {
		return Escalation{}, fmt.Errorf("acknowledging escalation %q: %w", id, err)
	}
	return out, nil
}

func scanEscalation(sc scanner) (Escalation, error) {
	var e Escalation
	var created int64
	var delivered, acked sql.NullInt64
	if err := sc.Scan(&e.ID, &e.Event, &e.CorrelationID, &e.AgentID, &e.Server, &e.Tool, &e.ErrorCode, &e.Error, &e.Attempts,
		&e.ApprovalID, &created, &delivered, &e.DeliveryAttempts, &e.DeliveryError, &acked, &e.AckedBy); err != nil {
		return Escalation{}, err
	}
	e.CreatedAt = fromNanos(created)
	e.DeliveredAt = optTime(delivered)
	e.AckedAt = optTime(acked)
	return e, nil
}

// The states of an [Approval].
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	// ApprovalUsed: approved, and the caller's retry took its token.
	ApprovalUsed = "used"
)

// Approval is a request for a human to approve one high-risk call (table
// approvals): the caller, the tool and the digest of the arguments.
type Approval struct {
	ID            string
	AgentID       string
	Server        string
	Tool          string // the server's own name
	Name          string // namespaced
	ArgsDigest    string
	CorrelationID string
	Status        string
	RequestedAt   time.Time
	// ExpiresAt ends a pending request, a denial and an unused approval.
	ExpiresAt time.Time
	DecidedAt *time.Time
	DecidedBy string
	Reason    string
	// TokenSecret is the approval token of an approved request, until the
	// caller's retry takes it.
	TokenSecret string
	UsedAt      *time.Time
}

const approvalColumns = `id, agent_id, server, tool, name, args_digest, correlation_id, status, requested_at, expires_at,
	decided_at, decided_by, reason, token_secret, used_at`

// CreateApproval stores a, normally pending.
func (db *DB) CreateApproval(ctx context.Context, a Approval) error {
	if a.ID == "" || a.AgentID == "" || a.Server == "" || a.Tool == "" || a.Status == "" {
		return fmt.Errorf("creating an approval: id, agent, server, tool and status are required: %w", ErrInvalid)
	}
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO approvals (id, agent_id, server, tool, name, args_digest, correlation_id, status,
			requested_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			a.ID, a.AgentID, a.Server, a.Tool, a.Name, a.ArgsDigest, a.CorrelationID, a.Status,
			toNanos(normalize(a.RequestedAt)), toNanos(a.ExpiresAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("creating approval %q: %w", a.ID, err)
	}
	return nil
}

// Approval returns one approval, or an error wrapping [ErrNotFound].
func (db *DB) Approval(ctx context.Context, id string) (Approval, error) {
	a, err := scanApproval(db.reader().QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, fmt.Errorf("approval %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Approval{}, fmt.Errorf("approval %q: %w", id, err)
	}
	return a, nil
}

// Approvals lists approvals, newest first; status "" lists every state.
func (db *DB) Approvals(ctx context.Context, status string, limit int) ([]Approval, error) {
	if limit <= 0 {
		limit = 1000
	}
	q := `SELECT ` + approvalColumns + ` FROM approvals`
	args := []any{limit}
	if status != "" {
		q += ` WHERE status = $2`
		args = append(args, status)
	}
	rows, err := db.reader().QueryContext(ctx, q+` ORDER BY requested_at DESC, id DESC LIMIT $1`, args...)
	if err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	defer rows.Close()
	out := []Approval{}
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, fmt.Errorf("listing approvals: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	return out, nil
}

// OpenApproval returns the newest approval of this call (agent, server,
// tool, argument digest) that is pending, approved or denied and has not
// expired at now, or an error wrapping [ErrNotFound].
func (db *DB) OpenApproval(ctx context.Context, agentID, server, tool, digest string, now time.Time) (Approval, error) {
	a, err := scanApproval(db.reader().QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE agent_id = $1 AND server = $2 AND tool = $3 AND args_digest = $4 AND status <> $5 AND expires_at > $6
		ORDER BY requested_at DESC, id DESC LIMIT 1`, agentID, server, tool, digest, ApprovalUsed, toNanos(now)))
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, fmt.Errorf("open approval of %s on %s.%s: %w", agentID, server, tool, ErrNotFound)
	}
	if err != nil {
		return Approval{}, fmt.Errorf("open approval of %s on %s.%s: %w", agentID, server, tool, err)
	}
	return a, nil
}

// DecideApproval moves a pending approval to status (approved or denied),
// recording who, why, when, until when it holds and, for an approval, the
// token the caller's retry takes. An approval that is no longer pending is
// an error wrapping [ErrConflict]; an unknown one wraps [ErrNotFound].
func (db *DB) DecideApproval(ctx context.Context, id, status, by, reason, secret string, at, expires time.Time) (Approval, error) {
	var out Approval
	err := db.Transact(ctx, func(tx *DB) error {
		res, err := tx.tx.ExecContext(ctx, `UPDATE approvals SET status = $2, decided_at = $3, decided_by = $4, reason = $5,
			token_secret = $6, expires_at = $7 WHERE id = $1 AND status = $8`,
			id, status, toNanos(normalize(at)), by, reason, secret, toNanos(expires), ApprovalPending)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		out, err = scanApproval(tx.tx.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = $1`, id))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return ErrNotFound
		case err != nil:
			return err
		case n == 0:
			return fmt.Errorf("it is %s, not pending: %w", out.Status, ErrConflict)
		}
		return nil
	})
	if err != nil {
		return Approval{}, fmt.Errorf("deciding approval %q: %w", id, err)
	}
	out.TokenSecret = ""
	return out, nil
}

// TakeApproval hands the token of an approved approval to one caller: it
// marks the approval used, clears the stored token and returns it. Exactly
// one of concurrent takers gets it; the others get an error wrapping
// [ErrConflict].
func (db *DB) TakeApproval(ctx context.Context, id string, at time.Time) (string, error) {
	var secret string
	err := db.Transact(ctx, func(tx *DB) error {
		a, err := scanApproval(tx.tx.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = $1`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		res, err := tx.tx.ExecContext(ctx, `UPDATE approvals SET status = $2, token_secret = '', used_at = $3 WHERE id = $1 AND status = $4`,
			id, ApprovalUsed, toNanos(normalize(at)), ApprovalApproved)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("it is %s: %w", a.Status, ErrConflict)
		}
		secret = a.TokenSecret
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("taking approval %q: %w", id, err)
	}
	return secret, nil
}

func scanApproval(sc scanner) (Approval, error) {
	var a Approval
	var requested, expires int64
	var decided, used sql.NullInt64
	if err := sc.Scan(&a.ID, &a.AgentID, &a.Server, &a.Tool, &a.Name, &a.ArgsDigest, &a.CorrelationID, &a.Status, &requested, &expires,
		&decided, &a.DecidedBy, &a.Reason, &a.TokenSecret, &used); err != nil {
		return Approval{}, err
	}
	a.RequestedAt = fromNanos(requested)
	a.ExpiresAt = fromNanos(expires)
	a.DecidedAt = optTime(decided)
	a.UsedAt = optTime(used)
	return a, nil
}
