package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Invocation is one audit row (table mcp_invocations): a tool invocation,
// denied ones included, or an operation on servers, grants or keys. Its
// fields are exactly those of audit.Record, in the same order, so the two
// convert into each other with a plain Go conversion.
type Invocation struct {
	ID             string
	Kind           string // "invocation" or "operation"
	CorrelationID  string
	AgentID        string
	Server         string
	Tool           string
	ParamsHash     string
	Success        bool
	ResultSummary  string
	Error          string
	ErrorCode      string
	Attempts       int
	LatencyMS      float64
	PolicyDecision string // "ALLOW" or "DENY"
	PolicyRule     string
	PolicyRevision uint64
	CachedDecision bool
	IdempotencyKey string
	TicketID       string
	TaskID         string
	ServedBy       string
	Operation      string
	Replica        string
	InvokedAt      time.Time
}

// InvocationFilter selects audit rows. Its fields are exactly those of
// audit.Filter, in the same order. Zero fields do not filter. Since is
// inclusive and Until exclusive, so consecutive windows neither overlap nor
// leave gaps.
type InvocationFilter struct {
	Kind     string
	AgentID  string
	Server   string
	Tool     string
	Decision string // policy decision: "ALLOW" or "DENY"
	Success  *bool
	Since    time.Time
	Until    time.Time
	// Limit bounds a page of [DB.QueryInvocations]: 100 when <= 0, at most
	// 1000. Cursor is the next value of the previous page; "" starts at the
	// newest row.
	Limit  int
	Cursor string
}

// Page sizes of [DB.QueryInvocations].
const (
	DefaultInvocationLimit = 100
	MaxInvocationLimit     = 1000
)

// The row kind [DB.InvocationStatsByTool] aggregates; audit.KindInvocation.
const kindInvocation = "invocation"

const invocationColumns = `id, kind, correlation_id, agent_id, server_id, tool_name, params_hash, success,
	result_summary, error_message, error_code, attempts, latency_ms, policy_decision, policy_rule,
	policy_revision, cached_decision, idempotency_key, ticket_id, task_id, served_by, operation,
	replica, invoked_at`

// invocationColumnCount is the number of columns in invocationColumns.
const invocationColumnCount = 24

// InsertInvocations appends rows to the audit log in one transaction, so a
// batch from the audit writer lands whole or not at all. Rows with an empty ID get a new uuid and rows with a zero InvokedAt
// get now, written back into rows. An ID already stored (or repeated in
// rows) is an error wrapping [ErrConflict], and nothing is inserted.
func (db *DB) InsertInvocations(ctx context.Context, rows []Invocation) error {
	if len(rows) == 0 {
		return nil
	}
	ids := make([]string, len(rows))
	times := make([]time.Time, len(rows))
	for i, r := range rows {
		ids[i], times[i] = r.ID, normalize(r.InvokedAt)
		if ids[i] == "" {
			ids[i] = uuid.NewString()
		}
	}
	// One prepared single-row statement executed per row: SQLite resolves
	// numbered parameters by a linear search, so a many-row VALUES list
	// costs time quadratic in its parameters (it was 40% of a busy
	// gateway's CPU), while a prepared statement is parsed once.
	var q strings.Builder
	q.WriteString(`INSERT INTO mcp_invocations (` + invocationColumns + `) VALUES (`)
	for c := range invocationColumnCount {
		if c > 0 {
			q.WriteString(", ")
		}
		q.WriteString("$" + strconv.Itoa(c+1))
	}
	q.WriteByte(')')
	err := db.Transact(ctx, func(tx *DB) error {
		stmt, err := tx.tx.PrepareContext(ctx, q.String())
		if err != nil {
			return err
		}
		defer stmt.Close()
		for i := range rows {
			r := &rows[i]
			_, err := stmt.ExecContext(ctx, ids[i], r.Kind, r.CorrelationID, r.AgentID, r.Server, r.Tool, r.ParamsHash,
				boolInt(r.Success), r.ResultSummary, r.Error, r.ErrorCode, r.Attempts, r.LatencyMS,
				r.PolicyDecision, r.PolicyRule, int64(r.PolicyRevision), boolInt(r.CachedDecision),
				r.IdempotencyKey, r.TicketID, r.TaskID, r.ServedBy, r.Operation, r.Replica, toNanos(times[i]))
			if err != nil {
				if db.dialect.isConflict(err) {
					return ErrConflict
				}
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("inserting %d audit rows: %w", len(rows), err)
	}
	for i := range rows {
		rows[i].ID, rows[i].InvokedAt = ids[i], times[i]
	}
	return nil
}

// QueryInvocations returns one page of the audit rows f selects, newest
// first (ties in time broken by ID, descending), and the cursor of the next
// page, "" when there is none. The cursor stays valid while rows are added:
// a page starts strictly after the last row of the previous one. A cursor
// that this store did not produce is an error wrapping [ErrInvalid].
func (db *DB) QueryInvocations(ctx context.Context, f InvocationFilter) (rows []Invocation, next string, err error) {
	var w where
	w.filter(f)
	if f.Cursor != "" {
		at, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", fmt.Errorf("querying audit log: %w", err)
		}
		w.add2(`(invoked_at < %s OR (invoked_at = %[1]s AND id < %s))`, at, id)
	}
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = DefaultInvocationLimit
	case limit > MaxInvocationLimit:
		limit = MaxInvocationLimit
	}
	// One extra row tells whether there is a next page.
	w.args = append(w.args, limit+1)
	q := `SELECT ` + invocationColumns + ` FROM mcp_invocations` + w.sql() +
		` ORDER BY invoked_at DESC, id DESC LIMIT $` + strconv.Itoa(len(w.args))
	sqlRows, err := db.reader().QueryContext(ctx, q, w.args...)
	if err != nil {
		return nil, "", fmt.Errorf("querying audit log: %w", err)
	}
	defer sqlRows.Close()
	for sqlRows.Next() {
		var r Invocation
		var success, cached bool
		var revision, at int64
		if err := sqlRows.Scan(&r.ID, &r.Kind, &r.CorrelationID, &r.AgentID, &r.Server, &r.Tool, &r.ParamsHash,
			&success, &r.ResultSummary, &r.Error, &r.ErrorCode, &r.Attempts, &r.LatencyMS, &r.PolicyDecision,
			&r.PolicyRule, &revision, &cached, &r.IdempotencyKey, &r.TicketID, &r.TaskID, &r.ServedBy,
			&r.Operation, &r.Replica, &at); err != nil {
			return nil, "", fmt.Errorf("querying audit log: %w", err)
		}
		r.Success, r.CachedDecision = success, cached
		r.PolicyRevision, r.InvokedAt = uint64(revision), fromNanos(at)
		rows = append(rows, r)
	}
	if err := sqlRows.Err(); err != nil {
		return nil, "", fmt.Errorf("querying audit log: %w", err)
	}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		next = encodeCursor(toNanos(last.InvokedAt), last.ID)
	}
	return rows, next, nil
}

// CountInvocations counts the audit rows f selects; Limit and Cursor are
// ignored, so the count is of every page together.
func (db *DB) CountInvocations(ctx context.Context, f InvocationFilter) (int64, error) {
	var w where
	w.filter(f)
	var n int64
	if err := db.reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM mcp_invocations`+w.sql(), w.args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting audit rows: %w", err)
	}
	return n, nil
}

// PurgeInvocations deletes the audit rows from before before (exclusive),
// for retention, and returns how many it deleted.
func (db *DB) PurgeInvocations(ctx context.Context, before time.Time) (int64, error) {
	if before.IsZero() {
		return 0, nil // nothing is older than the beginning of time
	}
	return db.execCount(ctx, "purging audit log",
		`DELETE FROM mcp_invocations WHERE invoked_at < $1`, toNanos(before))
}

// InvocationStats aggregates the invocations of one tool, for dashboards
// that would otherwise page through the whole audit log.
type InvocationStats struct {
	Server string
	Tool   string
	Calls  int64
	// Successes and Failures add up to Calls; Failures includes the calls
	// the policy denied, which Denied counts on their own.
	Successes    int64
	Failures     int64
	Denied       int64
	AvgLatencyMS float64
	MaxLatencyMS float64
	// Retries is the number of attempts beyond the first, summed.
	Retries int64
	First   time.Time // the oldest invocation counted
	Last    time.Time // the newest invocation counted
}

// InvocationStatsByTool aggregates rows of kind "invocation" per server and
// tool, sorted by server then tool. Of f it honors Server, Tool, AgentID,
// Since and Until; the other fields are ignored.
func (db *DB) InvocationStatsByTool(ctx context.Context, f InvocationFilter) ([]InvocationStats, error) {
	var w where
	w.filter(InvocationFilter{Kind: kindInvocation, AgentID: f.AgentID, Server: f.Server, Tool: f.Tool,
		Since: f.Since, Until: f.Until})
	// CASTs keep SUM's type an integer in PostgreSQL, where it widens.
	q := `SELECT server_id, tool_name, COUNT(*),
		CAST(SUM(CASE WHEN success = 1 THEN 1 ELSE 0 END) AS BIGINT),
		CAST(SUM(CASE WHEN success = 1 THEN 0 ELSE 1 END) AS BIGINT),
		CAST(SUM(CASE WHEN policy_decision = 'DENY' THEN 1 ELSE 0 END) AS BIGINT),
		AVG(latency_ms), MAX(latency_ms),
		CAST(SUM(CASE WHEN attempts > 1 THEN attempts - 1 ELSE 0 END) AS BIGINT),
		MIN(invoked_at), MAX(invoked_at)
		FROM mcp_invocations` + w.sql() + `
		GROUP BY server_id, tool_name
		ORDER BY server_id, tool_name`
	rows, err := db.reader().QueryContext(ctx, q, w.args...)
	if err != nil {
		return nil, fmt.Errorf("aggregating audit log: %w", err)
	}
	defer rows.Close()
	var out []InvocationStats
	for rows.Next() {
		var s InvocationStats
		var first, last int64
		if err := rows.Scan(&s.Server, &s.Tool, &s.Calls, &s.Successes, &s.Failures, &s.Denied,
			&s.AvgLatencyMS, &s.MaxLatencyMS, &s.Retries, &first, &last); err != nil {
			return nil, fmt.Errorf("aggregating audit log: %w", err)
		}
		s.First, s.Last = fromNanos(first), fromNanos(last)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("aggregating audit log: %w", err)
	}
	return out, nil
}

// where builds a WHERE clause with numbered placeholders.
type where struct {
	conds []string
	args  []any
}

// add appends cond, whose one %s becomes the placeholder of v.
func (w *where) add(cond string, v any) {
	w.args = append(w.args, v)
	w.conds = append(w.conds, fmt.Sprintf(cond, "$"+strconv.Itoa(len(w.args))))
}

// add2 appends cond, whose %s verbs become the placeholders of v1 and v2 in
// turn (%[1]s repeats the first).
func (w *where) add2(cond string, v1, v2 any) {
	w.args = append(w.args, v1, v2)
	n := len(w.args)
	w.conds = append(w.conds, fmt.Sprintf(cond, "$"+strconv.Itoa(n-1), "$"+strconv.Itoa(n)))
}

// filter adds the conditions of f's row-selecting fields.
func (w *where) filter(f InvocationFilter) {
	for _, eq := range []struct{ col, v string }{
		{"kind", f.Kind},
		{"agent_id", f.AgentID},
		{"server_id", f.Server},
		{"tool_name", f.Tool},
		{"policy_decision", f.Decision},
	} {
		if eq.v != "" {
			w.add(eq.col+` = %s`, eq.v)
		}
	}
	if f.Success != nil {
		w.add(`success = %s`, boolInt(*f.Success))
	}
	if !f.Since.IsZero() {
		w.add(`invoked_at >= %s`, toNanos(f.Since))
	}
	if !f.Until.IsZero() {
		w.add(`invoked_at < %s`, toNanos(f.Until))
	}
}

func (w *where) sql() string {
	if len(w.conds) == 0 {
		return ""
	}
	return ` WHERE ` + strings.Join(w.conds, ` AND `)
}

// encodeCursor and decodeCursor turn the sort key of the last row of a page
// into an opaque, URL-safe string and back.
func encodeCursor(at int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at, 10) + ":" + id))
}

func decodeCursor(cursor string) (at int64, id string, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return 0, "", fmt.Errorf("malformed cursor: %w", ErrInvalid)
	}
	nanos, id, ok := strings.Cut(string(raw), ":")
	if !ok || id == "" {
		return 0, "", fmt.Errorf("malformed cursor: %w", ErrInvalid)
	}
	at, err = strconv.ParseInt(nanos, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("malformed cursor: %w", ErrInvalid)
	}
	return at, id, nil
}
