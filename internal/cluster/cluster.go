// Package cluster is what replicas of the gateway sharing one PostgreSQL
// store know of each other: a heartbeat row per replica, and a change feed
// (LISTEN/NOTIFY) that tells the others to reload the part of the shared
// state one of them changed, at once instead of when a cache expires.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// Channel is the notification channel of the change feed.
const Channel = "switchboard_changes"

// Heartbeats: every heartbeatEvery each replica stamps its row; one not
// stamped for ReplicaTimeout is considered gone.
const (
	heartbeatEvery = 2 * time.Second
	// ReplicaTimeout is how long a replica's row may go unstamped before
	// the others consider it gone.
	ReplicaTimeout = 10 * time.Second
)

// Kinds of change announced on the feed.
const (
	KindServers  = "servers"  // runtime-registered servers or overrides
	KindPolicy   = "policy"   // grants and tokens
	KindKey      = "key"      // an API key revoked (key: its hash)
	KindPins     = "pins"     // a tool definition approved (key: the server)
	KindBreaker  = "breaker"  // one circuit breaker (key: its key)
	KindBreakers = "breakers" // every circuit breaker (after a gap in the feed)
)

// change is the payload of a notification.
type change struct {
	Replica string `json:"replica"`
	Kind    string `json:"kind"`
	Key     string `json:"key,omitempty"`
}

// Handlers apply the other replicas' changes, by kind; a kind without a
// handler is ignored. Resync, if set, is called when the feed resumed after
// a gap: everything may have changed.
type Handlers struct {
	Apply  map[string]func(ctx context.Context, key string) error
	Resync func(ctx context.Context)
}

// Options describe this replica.
type Options struct {
	Logger  *slog.Logger
	Version string
	// Addr is the listen address, published so that other replicas can
	// pass requests to this one.
	Addr string
	// Scheme is how replicas are reached: "http" or "https".
	Scheme string
}

// Cluster publishes this replica's changes and applies the others'.
type Cluster struct {
	db      *store.DB
	id      string
	started time.Time
	o       Options
	// listening is closed once Run listens to the feed (at once on
	// SQLite, or when listening failed): from then on no change is missed.
	listening  chan struct{}
	listenOnce sync.Once
}

// ReplicaName identifies this gateway process: host and pid.
func ReplicaName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "switchboard"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// New describes replica id on db. Nothing runs until Run; Publish works at
// once.
func New(db *store.DB, id string, opts *Options) *Cluster {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Scheme == "" {
		o.Scheme = "http"
	}
	return &Cluster{db: db, id: id, started: time.Now(), o: o, listening: make(chan struct{})}
}

// Listening is closed once Run listens to the other replicas' changes; a
// replica reports ready only then, or a change made meanwhile would be
// missed.
func (c *Cluster) Listening() <-chan struct{} { return c.listening }

func (c *Cluster) markListening() { c.listenOnce.Do(func() { close(c.listening) }) }

// ID is this replica's id.
func (c *Cluster) ID() string { return c.id }

// Run stamps this replica's heartbeat and, on PostgreSQL, applies the other
// replicas' changes with h, until ctx is done; then it removes this
// replica's row.
func (c *Cluster) Run(ctx context.Context, h Handlers) error {
	host, _ := os.Hostname()
	var wg sync.WaitGroup
	wg.Go(func() { c.heartbeats(ctx, host) })
	if c.db.IsPostgres() {
		wg.Go(func() { c.listen(ctx, h) })
	} else {
		c.markListening()
	}
	wg.Wait()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := c.db.DeleteReplica(dctx, c.id); err != nil {
		c.o.Logger.Debug("removing replica row", "error", err)
	}
	return nil
}

func (c *Cluster) heartbeats(ctx context.Context, host string) {
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for beat := 0; ; beat++ {
		if beat%30 == 0 { // about once a minute: drop expired shared idempotency results
			if _, err := c.db.PurgeIdempotent(ctx, time.Now()); err != nil && ctx.Err() == nil {
				c.o.Logger.Debug("purging idempotency results", "error", err)
			}
		}
		err := c.db.Heartbeat(ctx, store.Replica{ID: c.id, Host: host, PID: os.Getpid(), Version: c.o.Version,
			Address: c.o.Addr, StartedAt: c.started})
		if err != nil && ctx.Err() == nil {
			c.o.Logger.Warn("replica heartbeat", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Publish tells the other replicas that kind (and key) changed. It never
// fails the change itself: a replica that misses it catches up on its next
// resync. A no-op on SQLite, which no other replica shares.
func (c *Cluster) Publish(kind, key string) {
	if c == nil || !c.db.IsPostgres() {
		return
	}
	b, _ := json.Marshal(change{Replica: c.id, Kind: kind, Key: key})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.db.Notify(ctx, Channel, string(b)); err != nil {
		c.o.Logger.Warn("notifying replicas", "kind", kind, "error", err)
	}
}

func (c *Cluster) listen(ctx context.Context, h Handlers) {
	ch, err := c.db.Listen(ctx, Channel)
	if err != nil {
		c.markListening()
		c.o.Logger.Error("listening for replica changes; this replica will not see the others' changes", "error", err)
		return
	}
	// What changed between this replica's start (it read the store) and
	// now is read again, as after a gap in the feed; only then is nothing
	// missed.
	c.resync(ctx, h)
	c.markListening()
	for n := range ch {
		if n.Resync {
			c.o.Logger.Info("replica notifications resumed; reloading shared state")
			c.resync(ctx, h)
			continue
		}
		var ch change
		if json.Unmarshal([]byte(n.Payload), &ch) != nil || ch.Replica == c.id {
			continue
		}
		c.apply(ctx, h, ch)
	}
}

// apply reloads what another replica changed.
func (c *Cluster) apply(ctx context.Context, h Handlers, ch change) {
	f := h.Apply[ch.Kind]
	if f == nil {
		return
	}
	if err := f(ctx, ch.Key); err != nil {
		c.o.Logger.Warn("applying another replica's change", "kind", ch.Kind, "error", err)
	}
}

// ReplicaAddr finds the base URL of another replica from its heartbeat row,
// so a stateless caller's retry can be passed to the replica its call is
// parked on. A replica listening on every interface is reached by its host
// name.
func (c *Cluster) ReplicaAddr(ctx context.Context, id string) (string, error) {
	rs, err := c.db.Replicas(ctx, time.Now().Add(-ReplicaTimeout))
	if err != nil {
		return "", err
	}
	for _, r := range rs {
		if r.ID != id {
			continue
		}
		host, port, err := net.SplitHostPort(r.Address)
		if err != nil {
			return "", fmt.Errorf("replica %s listens on %q: %w", id, r.Address, err)
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = r.Host
		}
		return c.o.Scheme + "://" + net.JoinHostPort(host, port), nil
	}
	return "", fmt.Errorf("replica %s is not alive", id)
}

// SpendOnce records in the store that a stateless caller's requestState
// was answered, so every replica refuses a replay of it; false when it was
// spent before.
func (c *Cluster) SpendOnce(ctx context.Context, nonce string, expires time.Time) (bool, error) {
	mark := make([]byte, 8)
	_, _ = rand.Read(mark)
	mine := c.id + "/" + hex.EncodeToString(mark)
	got, err := c.db.PutIdempotent(ctx, store.IdempotentResult{Key: "requestState:" + nonce, Fingerprint: mine,
		Result: []byte("answered"), CreatedAt: time.Now(), ExpiresAt: expires.Add(time.Minute)})
	if err != nil {
		return false, err
	}
	return got.Fingerprint == mine, nil
}

// View lists the live replicas for GET /api/v1/cluster.
func (c *Cluster) View(ctx context.Context) (api.ClusterView, error) {
	rows, err := c.db.Replicas(ctx, time.Now().Add(-ReplicaTimeout))
	if err != nil {
		return api.ClusterView{}, err
	}
	v := api.ClusterView{Self: c.id, Backend: "sqlite", Replicas: make([]api.ReplicaView, len(rows))}
	if c.db.IsPostgres() {
		v.Backend = "postgres"
	}
	for i, r := range rows {
		v.Replicas[i] = api.ReplicaView{ID: r.ID, Host: r.Host, PID: r.PID, Version: r.Version, Address: r.Address,
			StartedAt: r.StartedAt, HeartbeatAt: r.HeartbeatAt, Self: r.ID == c.id}
	}
	return v, nil
}

// resync reloads every part of the shared state.
func (c *Cluster) resync(ctx context.Context, h Handlers) {
	for _, kind := range []string{KindServers, KindPolicy, KindBreakers} {
		c.apply(ctx, h, change{Kind: kind})
	}
	if h.Resync != nil {
		h.Resync(ctx)
	}
}
