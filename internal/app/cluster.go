package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/resilience"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// Replicas of the gateway share one PostgreSQL store. Each runs its own
// upstream sessions and processes; what they share (servers registered at
// runtime, grants and tokens, API keys, circuit breakers) changes in the
// store, and a notification on clusterChannel tells the others to reload
// that part at once, instead of waiting for a cache to expire.
const clusterChannel = "switchboard_changes"

// Heartbeats: every heartbeatEvery each replica stamps its row; one not
// stamped for replicaTimeout is considered gone.
const (
	heartbeatEvery = 2 * time.Second
	replicaTimeout = 10 * time.Second
)

// change is the payload of a notification.
type change struct {
	Replica string `json:"replica"`
	Kind    string `json:"kind"` // servers | policy | key | breaker | pins
	Key     string `json:"key,omitempty"`
}

// cluster publishes this replica's changes and applies the others'.
type cluster struct {
	a       *App
	db      *store.DB // the App's, kept: App.Close drops its own reference
	id      string
	started time.Time
	logger  *slog.Logger
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closed  sync.Once
}

func newCluster(a *App, version string) *cluster {
	ctx, cancel := context.WithCancel(context.Background())
	c := &cluster{a: a, db: a.db, id: a.sec.replica, started: time.Now(), logger: a.logger, cancel: cancel}
	host, _ := os.Hostname()
	addr := a.cfg.Settings.Listen // settings do not change on reload
	c.wg.Go(func() { c.heartbeats(ctx, host, version, addr) })
	if c.db.IsPostgres() {
		c.wg.Go(func() { c.listen(ctx) })
	}
	return c
}

// close stops the loops and removes this replica's row.
func (c *cluster) close() {
	if c == nil {
		return
	}
	c.closed.Do(func() {
		c.cancel()
		c.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := c.db.DeleteReplica(ctx, c.id); err != nil {
			c.logger.Debug("removing replica row", "error", err)
		}
	})
}

func (c *cluster) heartbeats(ctx context.Context, host, version, addr string) {
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for beat := 0; ; beat++ {
		if beat%30 == 0 { // about once a minute: drop expired shared idempotency results
			if _, err := c.db.PurgeIdempotent(ctx, time.Now()); err != nil && ctx.Err() == nil {
				c.logger.Debug("purging idempotency results", "error", err)
			}
		}
		err := c.db.Heartbeat(ctx, store.Replica{ID: c.id, Host: host, PID: os.Getpid(), Version: version,
			Address: addr, StartedAt: c.started})
		if err != nil && ctx.Err() == nil {
			c.logger.Warn("replica heartbeat", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// publish tells the other replicas that kind (and key) changed. It never
// fails the change itself: a replica that misses it catches up on its next
// resync.
func (c *cluster) publish(kind, key string) {
	if c == nil || !c.db.IsPostgres() {
		return
	}
	b, _ := json.Marshal(change{Replica: c.id, Kind: kind, Key: key})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.db.Notify(ctx, clusterChannel, string(b)); err != nil {
		c.logger.Warn("notifying replicas", "kind", kind, "error", err)
	}
}

func (c *cluster) listen(ctx context.Context) {
	ch, err := c.db.Listen(ctx, clusterChannel)
	if err != nil {
		c.logger.Error("listening for replica changes; this replica will not see the others' changes", "error", err)
		return
	}
	for n := range ch {
		if n.Resync {
			c.logger.Info("replica notifications resumed; reloading shared state")
			c.apply(ctx, change{Kind: "servers"})
			c.apply(ctx, change{Kind: "policy"})
			c.apply(ctx, change{Kind: "breakers"})
			c.a.sec.authn.ForgetAll() // a key revoked meanwhile must not stay cached
			continue
		}
		var ch change
		if json.Unmarshal([]byte(n.Payload), &ch) != nil || ch.Replica == c.id {
			continue
		}
		c.apply(ctx, ch)
	}
}

// apply reloads what another replica changed.
func (c *cluster) apply(ctx context.Context, ch change) {
	a := c.a
	var err error
	switch ch.Kind {
	case "servers":
		err = a.reg.syncFromStore(ctx)
	case "policy":
		err = a.sec.engine.Reload(ctx)
		if err == nil {
			a.events.Publish("policy.changed", map[string]any{"revision": a.sec.engine.Revision(), "reason": "another replica"})
		}
	case "key":
		a.sec.authn.Forget(ch.Key)
	case "pins": // a tool definition approved: serve it here too
		a.reg.reapply(ch.Key)
	case "breaker":
		var row store.BreakerState
		if row, err = c.db.GetBreaker(ctx, ch.Key); err == nil {
			a.sec.restoreBreaker(row)
		}
	case "breakers":
		var rows []store.BreakerState
		if rows, err = c.db.ListBreakers(ctx); err == nil {
			for _, row := range rows {
				a.sec.restoreBreaker(row)
			}
		}
	}
	if err != nil {
		c.logger.Warn("applying another replica's change", "kind", ch.Kind, "error", err)
	}
}

// restoreBreaker sets a breaker to a state persisted by another replica
// (or by this one before a restart); false for a row it cannot read.
func (sec *security) restoreBreaker(row store.BreakerState) (resilience.State, bool) {
	var st resilience.State
	if st.UnmarshalText([]byte(row.State)) != nil {
		return st, false
	}
	sec.breakers.Restore(resilience.BreakerSnapshot{Key: row.Key, State: st, Failures: row.Failures, Successes: row.Successes,
		HalfOpenRequests: row.HalfOpenRequests, LastFailureAt: row.LastFailureAt, OpenedAt: row.OpenedAt, Generation: row.Generation})
	return st, true
}
