package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Notification is a change announced with [DB.Notify] and received from
// [DB.Listen].
type Notification struct {
	Channel string
	Payload string
	// Resync reports that the listener lost its connection and may have
	// missed notifications in between: the receiver must reload everything
	// it caches from the channel's tables. Payload is empty.
	Resync bool
	// Self reports that the notification was sent by this DB handle, so the
	// receiver may skip reloading what it just wrote. Best effort: it may be
	// false for the handle's own notifications (on PostgreSQL, those sent
	// inside a [DB.Transact]), never true for another's.
	Self bool
}

// MaxNotifyPayload is the largest payload [DB.Notify] accepts, in bytes:
// PostgreSQL's limit is 8000, less on some builds. Larger changes should
// send a key and let the receiver read the rows.
const MaxNotifyPayload = 7000

const (
	// maxChannelLen is PostgreSQL's identifier limit (NAMEDATALEN-1): LISTEN
	// would silently truncate a longer channel name, pg_notify refuses it.
	maxChannelLen = 63
	// listenBuffer is how many notifications a listener's channel holds.
	listenBuffer = 1024
	// listenIdle is how long a PostgreSQL listener waits for a notification
	// before checking its connection is alive: a silently dropped TCP
	// connection would otherwise go unnoticed for the kernel's keepalive
	// time, and changes with it.
	listenIdle = 30 * time.Second
	// listenPingTimeout bounds that check.
	listenPingTimeout = 10 * time.Second
	// Reconnection delays of a PostgreSQL listener, doubling from min to max.
	reconnectMin = 100 * time.Millisecond
	reconnectMax = 5 * time.Second
)

// errClosed is returned by Notify and Listen on a closed DB.
var errClosed = errors.New("store is closed")

// notifier is the change-notification state of a DB, shared with its
// transaction handles.
type notifier struct {
	logger *slog.Logger

	// PostgreSQL: listenCfg is nil on SQLite.
	listenCfg *pgx.ConnConfig // connection of each listener, not from the pool
	secrets   []string        // scrubbed from connection errors
	pool      *sql.DB
	sem       chan struct{} // held while using conn
	conn      *sql.Conn     // pinned connection Notify sends on; nil until used or after it broke
	pid       atomic.Uint32 // backend pid of conn, 0 when none: how listeners tell Self

	// SQLite: the listeners of this process on the same database file.
	hub *hub

	dropped atomic.Uint64

	mu      sync.Mutex
	closed  bool
	nextID  int
	cancels map[int]context.CancelFunc // of the running listeners
	wg      sync.WaitGroup             // the running listeners
}

func newSQLiteNotifier(logger *slog.Logger, t sqliteTarget) *notifier {
	key := "" // private to this DB
	if !t.memory {
		if abs, err := filepath.Abs(t.path); err == nil {
			key = abs
		}
	}
	return &notifier{logger: logger, hub: acquireHub(key), cancels: map[int]context.CancelFunc{}}
}

func newPostgresNotifier(logger *slog.Logger, pool *sql.DB, listenCfg *pgx.ConnConfig, secrets []string) *notifier {
	return &notifier{logger: logger, pool: pool, listenCfg: listenCfg, secrets: secrets,
		sem: make(chan struct{}, 1), cancels: map[int]context.CancelFunc{}}
}

// IsPostgres reports whether the store is PostgreSQL, the engine replicas
// can share; the gateway turns its cluster features on with it.
func (db *DB) IsPostgres() bool { return db.dialect.name == "postgres" }

// DroppedNotifications counts the notifications this DB's SQLite listeners
// lost because their buffer was full. PostgreSQL listeners never drop: the
// server queues for them.
func (db *DB) DroppedNotifications() uint64 { return db.note.dropped.Load() }

// Notify publishes a change to every listener of channel, so that other
// replicas can drop what they cache. Payload is at most [MaxNotifyPayload]
// bytes of UTF-8; channel at most 63 bytes.
//
// On PostgreSQL it reaches every replica listening on the database; inside
// a [DB.Transact] it is sent at commit and not at all on rollback, as
// PostgreSQL does. On SQLite (one process) it reaches the listeners of this
// process on the same file, the same way at commit; it never blocks: a
// listener whose buffer is full loses it (see [DB.DroppedNotifications]).
func (db *DB) Notify(ctx context.Context, channel, payload string) error {
	if err := checkNotify(channel, payload); err != nil {
		return fmt.Errorf("notifying %q: %w", channel, err)
	}
	n := db.note
	if n.isClosed() {
		return fmt.Errorf("notifying %q: %w", channel, errClosed)
	}
	switch {
	case n.listenCfg == nil && db.tx != nil:
		*db.pending = append(*db.pending, pendingNote{channel, payload})
	case n.listenCfg == nil:
		n.hub.publish(n, channel, payload)
	case db.tx != nil:
		if _, err := db.tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
			return fmt.Errorf("notifying %q: %w", channel, err)
		}
	default:
		if err := n.notifyPostgres(ctx, channel, payload); err != nil {
			return fmt.Errorf("notifying %q: %w", channel, err)
		}
	}
	return nil
}

// pendingNote is a notification held until its SQLite transaction commits.
type pendingNote struct{ channel, payload string }

func checkNotify(channel, payload string) error {
	switch {
	case channel == "":
		return fmt.Errorf("empty channel: %w", ErrInvalid)
	case len(channel) > maxChannelLen:
		return fmt.Errorf("channel longer than %d bytes: %w", maxChannelLen, ErrInvalid)
	case len(payload) > MaxNotifyPayload:
		return fmt.Errorf("payload of %d bytes is over %d: %w", len(payload), MaxNotifyPayload, ErrInvalid)
	case !utf8.ValidString(channel) || !utf8.ValidString(payload) ||
		strings.ContainsRune(channel, 0) || strings.ContainsRune(payload, 0):
		// PostgreSQL text cannot hold them; refuse on SQLite too, so that a
		// test there does not hide the failure.
		return fmt.Errorf("channel or payload is not UTF-8 text without NUL: %w", ErrInvalid)
	}
	return nil
}

// notifyPostgres sends on the pinned connection, whose backend pid tells
// this handle's notifications from the others'.
func (n *notifier) notifyPostgres(ctx context.Context, channel, payload string) error {
	select {
	case n.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-n.sem }()
	if n.isClosed() {
		return errClosed
	}
	if n.conn == nil {
		conn, err := n.pool.Conn(ctx)
		if err != nil {
			return err
		}
		var pid uint32
		if err := conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			dropConn(conn)
			return err
		}
		n.conn = conn
		n.pid.Store(pid)
	}
	if _, err := n.conn.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		// The connection may be broken: take a fresh one next time.
		n.pid.Store(0)
		dropConn(n.conn)
		n.conn = nil
		return err
	}
	return nil
}

// dropConn closes conn rather than returning it to the pool.
func dropConn(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// Listen returns the notifications sent on channel from now on, until ctx
// ends or the DB is closed; then the returned channel is closed.
//
// On PostgreSQL the listener has a connection of its own (outside the pool,
// since it sits in LISTEN for its whole life). When that connection breaks
// it reconnects, backing off from 100 ms to 5 s, then delivers a
// Notification with Resync set, because changes made in between are lost.
// It never drops a notification: while the receiver lags, PostgreSQL
// queues them. On SQLite, see [DB.Notify].
func (db *DB) Listen(ctx context.Context, channel string) (<-chan Notification, error) {
	if err := checkNotify(channel, ""); err != nil {
		return nil, fmt.Errorf("listening on %q: %w", channel, err)
	}
	n := db.note
	ctx, done, err := n.track(ctx)
	if err != nil {
		return nil, fmt.Errorf("listening on %q: %w", channel, err)
	}
	out := make(chan Notification, listenBuffer)
	if n.listenCfg == nil {
		s := &subscriber{owner: n, ch: out}
		n.hub.subscribe(channel, s)
		context.AfterFunc(ctx, func() {
			n.hub.unsubscribe(channel, s)
			close(out)
			done()
		})
		return out, nil
	}
	conn, err := n.connectListener(ctx, channel)
	if err != nil {
		done()
		return nil, fmt.Errorf("listening on %q: %w", channel, err)
	}
	go func() {
		defer done()
		defer close(out)
		n.pump(ctx, channel, conn, out)
	}()
	return out, nil
}

// track registers a listener, whose work must end with the returned ctx,
// and then call done. Close cancels ctx and waits for done.
func (n *notifier) track(ctx context.Context) (_ context.Context, done func(), _ error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, nil, errClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	id := n.nextID
	n.nextID++
	n.cancels[id] = cancel
	n.wg.Add(1)
	return ctx, func() {
		cancel()
		n.mu.Lock()
		delete(n.cancels, id)
		n.mu.Unlock()
		n.wg.Done()
	}, nil
}

func (n *notifier) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// close stops every listener, waits for them and releases the notify
// connection. The caller closes the pool afterwards.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	for _, cancel := range n.cancels {
		cancel()
	}
	n.mu.Unlock()
	n.wg.Wait()
	if n.hub != nil {
		n.hub.release()
	}
	if n.sem != nil {
		n.sem <- struct{}{}
		if n.conn != nil {
			n.pid.Store(0)
			_ = n.conn.Close()
			n.conn = nil
		}
		<-n.sem
	}
}

// connectListener opens a listener's connection and subscribes it.
func (n *notifier) connectListener(ctx context.Context, channel string) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, n.listenCfg.Copy())
	if err != nil {
		return nil, redact(fmt.Errorf("connecting: %w", err), n.secrets)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		closeListener(ctx, conn)
		return nil, err
	}
	return conn, nil
}

func closeListener(ctx context.Context, conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = conn.Close(ctx) // closing the socket is what matters, and it always happens
}

// pump delivers conn's notifications to out until ctx ends, reconnecting
// when conn breaks.
func (n *notifier) pump(ctx context.Context, channel string, conn *pgx.Conn, out chan<- Notification) {
	defer func() {
		if conn != nil {
			closeListener(ctx, conn)
		}
	}()
	send := func(note Notification) bool {
		select {
		case out <- note:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		note, err := waitNotification(ctx, conn)
		if err == nil {
			if note != nil && !send(Notification{Channel: note.Channel, Payload: note.Payload,
				Self: note.PID != 0 && note.PID == n.pid.Load()}) {
				return
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		n.logger.Warn("store listener lost its connection; reconnecting", "channel", channel,
			"error", redact(err, n.secrets))
		closeListener(ctx, conn)
		if conn = n.reconnect(ctx, channel); conn == nil {
			return
		}
		n.logger.Info("store listener reconnected", "channel", channel)
		if !send(Notification{Channel: channel, Resync: true}) {
			return
		}
	}
}

// waitNotification returns the next notification on conn, or nil with a
// nil error when none came for a while and conn proved alive.
func waitNotification(ctx context.Context, conn *pgx.Conn) (*pgconn.Notification, error) {
	wctx, cancel := context.WithTimeout(ctx, listenIdle)
	note, err := conn.WaitForNotification(wctx)
	cancel()
	if err == nil || ctx.Err() != nil {
		return note, err
	}
	if wctx.Err() != nil && !conn.IsClosed() {
		// pgx keeps a connection whose read merely timed out.
		pctx, cancel := context.WithTimeout(ctx, listenPingTimeout)
		defer cancel()
		return nil, conn.Ping(pctx)
	}
	return nil, err
}

// reconnect connects a new listener for channel, backing off between
// attempts, or returns nil when ctx ends first.
func (n *notifier) reconnect(ctx context.Context, channel string) *pgx.Conn {
	delay := reconnectMin
	for {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		conn, err := n.connectListener(ctx, channel)
		if err == nil {
			return conn
		}
		if ctx.Err() != nil {
			return nil
		}
		n.logger.Warn("store listener cannot reconnect", "channel", channel, "retry_in", min(2*delay, reconnectMax), "error", err)
		delay = min(2*delay, reconnectMax)
	}
}

// hub delivers SQLite notifications among the DB handles of this process
// that share one database file (or, for a private database, one handle).
type hub struct {
	key  string // absolute path of the file; "" for a private hub
	refs int    // guarded by hubs.mu

	mu   sync.Mutex
	subs map[string]map[*subscriber]struct{} // by channel
}

// subscriber is one SQLite listener.
type subscriber struct {
	owner *notifier // the DB that listens
	ch    chan Notification
}

// hubs holds the shared hubs, by file.
var hubs = struct {
	mu sync.Mutex
	m  map[string]*hub
}{m: map[string]*hub{}}

// acquireHub returns the hub of the file key, or a private one when key is
// empty. Each call is paired with a release.
func acquireHub(key string) *hub {
	if key == "" {
		return &hub{subs: map[string]map[*subscriber]struct{}{}, refs: 1}
	}
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	h := hubs.m[key]
	if h == nil {
		h = &hub{key: key, subs: map[string]map[*subscriber]struct{}{}}
		hubs.m[key] = h
	}
	h.refs++
	return h
}

func (h *hub) release() {
	if h.key == "" {
		return
	}
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	if h.refs--; h.refs == 0 {
		delete(hubs.m, h.key)
	}
}

func (h *hub) subscribe(channel string, s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[channel] == nil {
		h.subs[channel] = map[*subscriber]struct{}{}
	}
	h.subs[channel][s] = struct{}{}
}

// unsubscribe removes s, after which nothing is sent on s.ch.
func (h *hub) unsubscribe(channel string, s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[channel], s)
	if len(h.subs[channel]) == 0 {
		delete(h.subs, channel)
	}
}

// publish queues the notification for every subscriber of channel without
// waiting: the sender may be inside a transaction that a slow receiver
// must not hold up.
func (h *hub) publish(from *notifier, channel, payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[channel] {
		select {
		case s.ch <- Notification{Channel: channel, Payload: payload, Self: s.owner == from}:
		default:
			if c := s.owner.dropped.Add(1); c&(c-1) == 0 { // 1, 2, 4, ...: a trace, not a flood
				s.owner.logger.Warn("store listener is not keeping up; notifications dropped", "channel", channel)
			}
		}
	}
}
