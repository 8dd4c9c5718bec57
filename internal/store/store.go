// Package store persists the gateway's state (registered upstream servers, their
// discovered tools and their connection history) behind one database/sql wrapper.
//
// Every call takes a context and [DB.Transact] composes several calls into one
// atomic unit. The schema is created by embedded migrations (one set per
// dialect, with the same tables and columns) before [Open] returns. One SQL
// text serves both dialects, SQLite for a single gateway and PostgreSQL for
// replicas sharing state: $N placeholders, TEXT ids, timestamps as integer
// unix nanoseconds (UTC), JSON documents as TEXT, booleans as 0/1 integers.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrNotFound is wrapped by every error that reports a missing server, so
// callers can map it to "404" with [errors.Is] without parsing messages.
var ErrNotFound = errors.New("not found")

// ErrConflict is wrapped by every error that reports a violated uniqueness
// rule (a taken server name, a duplicate tool name), so callers can map it to
// "409" with [errors.Is].
var ErrConflict = errors.New("already exists")

// ErrInvalid is wrapped by every error that reports a malformed argument the
// caller passed through from its own client (a bad page cursor), so callers
// can map it to "400" with [errors.Is].
var ErrInvalid = errors.New("invalid argument")

// Options configures [Open]. A nil *Options means defaults.
type Options struct {
	// Logger receives notices about migrations and the storage engine. Nil
	// discards them. The store never logs row contents.
	Logger *slog.Logger
	// Durable makes SQLite sync every commit to disk (synchronous=FULL),
	// so a committed row survives a power loss or an OS crash, not only a
	// crash of the process (synchronous=NORMAL, the default). The gateway
	// sets it with audit_durability: durable, where a call's answer
	// promises that its audit row is on disk. PostgreSQL commits durably
	// by its own configuration.
	Durable bool
}

// querier is what both *sql.DB and *sql.Tx offer, so every data method can run
// either on a pool or inside a transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// DB is a handle on the store. The *DB returned by [Open] is safe for
// concurrent use and must be closed with [DB.Close]. The *DB passed to the
// function given to [DB.Transact] is bound to that transaction: it must not be
// used concurrently, nor after the function returns.
type DB struct {
	dialect *dialect
	logger  *slog.Logger

	// Set on the handle returned by Open; nil on a transaction's handle.
	// On SQLite write has exactly one connection, which serializes writers
	// inside the process; read may be the same pool (in-memory databases).
	// On PostgreSQL both are the same pool, and the server orders writers.
	write     *sql.DB
	read      *sql.DB
	closeOnce sync.Once
	closeErr  error

	// Change notifications: shared by the handle returned by Open and its
	// transactions' handles.
	note *notifier

	// Set on a transaction's handle. depth counts nested Transact calls,
	// which become savepoints. pending holds the SQLite notifications sent
	// in the transaction (or savepoint), delivered when it commits.
	tx      *sql.Tx
	depth   int
	pending *[]pendingNote
}

// reader is where queries run: inside a transaction they must see its own
// uncommitted writes, outside they use the read pool so they never wait for
// a writer.
func (db *DB) reader() querier {
	if db.tx != nil {
		return db.tx
	}
	return db.read
}

// Close releases the database. It is idempotent and safe to call concurrently;
// every call returns the result of the first. Calling it on a transaction's
// handle is a programming error reported as an error.
func (db *DB) Close() error {
	if db.tx != nil {
		return errors.New("closing store: Close called on a transaction's handle")
	}
	db.closeOnce.Do(func() {
		db.note.close()
		var errs []error
		if db.read != db.write {
			errs = append(errs, db.read.Close())
		}
		errs = append(errs, db.write.Close())
		if err := errors.Join(errs...); err != nil {
			db.closeErr = fmt.Errorf("closing store: %w", err)
		}
	})
	return db.closeErr
}

// Ping reports whether the database is reachable, for readiness probes.
func (db *DB) Ping(ctx context.Context) error {
	if db.tx != nil {
		return nil
	}
	if err := db.write.PingContext(ctx); err != nil {
		return fmt.Errorf("pinging store: %w", err)
	}
	if db.read != db.write {
		if err := db.read.PingContext(ctx); err != nil {
			return fmt.Errorf("pinging store: %w", err)
		}
	}
	return nil
}

// Transact runs fn in a transaction; fn's *DB uses the tx. Commit on nil error,
// rollback otherwise.
//
// fn's error is returned unwrapped so [errors.Is] sees what fn returned. A
// panic in fn rolls the transaction back and is re-raised. Calling Transact on
// a transaction's handle nests: the inner call becomes a savepoint, so its
// failure undoes only its own work unless the error is propagated outward.
//
// fn must do all of its work through its argument: on SQLite, where writes
// are serialized, a write through the outer handle would wait for the
// transaction that is waiting for it, until ctx ends; on PostgreSQL it would
// run outside the transaction, and wait for any row the transaction locked.
func (db *DB) Transact(ctx context.Context, fn func(tx *DB) error) error {
	if db.tx != nil {
		return db.savepoint(ctx, fn)
	}
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	txdb := &DB{dialect: db.dialect, logger: db.logger, note: db.note, tx: tx, pending: new([]pendingNote)}
	committed := false
	defer func() {
		if !committed {
			// Reached on error and on panic. The error (or panic) from fn is
			// what the caller needs; a rollback failure can only mean the
			// transaction is already gone, which database/sql handles.
			_ = tx.Rollback()
		}
	}()
	if err := fn(txdb); err != nil {
		return err
	}
	committed = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing transaction: %w", err)
	}
	for _, p := range *txdb.pending {
		db.note.hub.publish(db.note, p.channel, p.payload)
	}
	return nil
}

// atomic runs fn, a single statement, on db's writer. Inside a transaction
// it runs in a savepoint: in PostgreSQL a failed statement aborts the whole
// transaction, and the store promises that an expected failure (ErrConflict)
// leaves the caller's transaction usable, as SQLite does anyway.
func (db *DB) atomic(ctx context.Context, fn func(q querier) error) error {
	if db.tx == nil {
		return fn(db.write)
	}
	return db.savepoint(ctx, func(tx *DB) error { return fn(tx.tx) })
}

// savepoint runs fn inside a savepoint of db's transaction.
func (db *DB) savepoint(ctx context.Context, fn func(tx *DB) error) error {
	name := fmt.Sprintf("switchboard_sp%d", db.depth+1)
	if _, err := db.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("creating savepoint: %w", err)
	}
	inner := &DB{dialect: db.dialect, logger: db.logger, note: db.note, tx: db.tx, depth: db.depth + 1,
		pending: new([]pendingNote)}
	// A panic skips the cleanup below on purpose: it unwinds through the
	// outermost Transact, which rolls back the whole transaction.
	if err := fn(inner); err != nil {
		// Undo fn's work even when ctx is what failed it.
		uctx := context.WithoutCancel(ctx)
		if _, rbErr := db.tx.ExecContext(uctx, "ROLLBACK TO SAVEPOINT "+name); rbErr != nil {
			return errors.Join(err, fmt.Errorf("rolling back to savepoint: %w", rbErr))
		}
		if _, relErr := db.tx.ExecContext(uctx, "RELEASE SAVEPOINT "+name); relErr != nil {
			return errors.Join(err, fmt.Errorf("releasing savepoint: %w", relErr))
		}
		return err
	}
	if _, err := db.tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return fmt.Errorf("releasing savepoint: %w", err)
	}
	*db.pending = append(*db.pending, *inner.pending...)
	return nil
}

// now is the timestamp the store assigns: UTC and without a monotonic
// reading, so a value filled in by the store compares equal to the same
// value read back.
func now() time.Time { return time.Now().UTC() }

// toNanos and fromNanos convert between time.Time and the stored INTEGER
// unix nanoseconds, which sort correctly and survive both dialects unchanged.
func toNanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// normalize returns t as it will read back from the store, or now() when t is
// zero.
func normalize(t time.Time) time.Time {
	if t.IsZero() {
		return now()
	}
	return fromNanos(toNanos(t))
}

// jsonArg is the bind value of a JSON document: TEXT (not BLOB, which is how
// a []byte would bind), or NULL when empty.
func jsonArg(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	return string(raw)
}

// optNanos binds an optional instant: NULL when absent, so "never" is not
// confused with some far-off time.
func optNanos(t *time.Time) any {
	if t == nil {
		return nil
	}
	return toNanos(*t)
}

// zeroNanos binds a time that may be zero as NULL, since the zero time.Time
// has no unix-nanosecond representation.
func zeroNanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return toNanos(t)
}

// optTime reads back what optNanos stored.
func optTime(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

// zeroTime reads back what zeroNanos stored.
func zeroTime(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromNanos(n.Int64)
}

// boolInt binds a boolean as the 0/1 INTEGER both dialects store, so queries
// can compare against literals (success = 1) the same way everywhere.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// listArg binds a string list as a JSON array. nil is stored as [] so that
// every list reads back the same way, empty and non-nil.
func listArg(list []string) (string, error) {
	if list == nil {
		list = []string{}
	}
	raw, err := json.Marshal(list)
	if err != nil {
		return "", err
	}
	return string(raw), nil
}

// parseList reads back what listArg stored, as a non-nil slice.
func parseList(raw string) ([]string, error) {
	out := []string{}
	if raw == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("decoding list: %w", err)
	}
	if out == nil { // the document was "null"
		out = []string{}
	}
	return out, nil
}
