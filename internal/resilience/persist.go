package resilience

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// BreakerStore keeps circuit breaker states, so a breaker survives a
// restart and replicas share it.
type BreakerStore interface {
	SaveBreaker(ctx context.Context, s store.BreakerState) error
	GetBreaker(ctx context.Context, key string) (store.BreakerState, error)
	ListBreakers(ctx context.Context) ([]store.BreakerState, error)
	MoveBreakers(ctx context.Context, from, to string) ([]string, error)
}

// BreakerPersister writes breaker snapshots to the store in the
// background, newest per key, so a breaker's state survives a restart
// without a database write on the call path. Set it as the breakers'
// OnChange (Save) and run it (Run).
type BreakerPersister struct {
	db     BreakerStore
	logger *slog.Logger
	// announce is told of every persisted state change (the other
	// replicas then load it); nil: nobody.
	announce func(key string)
	states   map[string]State // last persisted state per key; flush only

	flushMu sync.Mutex // one flush at a time: Run's and the last one
	mu      sync.Mutex
	pending map[string]BreakerSnapshot
	wake    chan struct{}
}

// NewBreakerPersister writes to db; announce, if set, is told of each
// persisted change of state.
func NewBreakerPersister(db BreakerStore, announce func(key string), logger *slog.Logger) *BreakerPersister {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &BreakerPersister{db: db, logger: logger, announce: announce, pending: map[string]BreakerSnapshot{},
		states: map[string]State{}, wake: make(chan struct{}, 1)}
}

// Save queues s; it never blocks.
func (p *BreakerPersister) Save(s BreakerSnapshot) {
	p.mu.Lock()
	if cur, ok := p.pending[s.Key]; !ok || s.Generation >= cur.Generation {
		p.pending[s.Key] = s
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run writes queued snapshots until ctx is done, then writes what is
// pending (bounded by 5 s).
func (p *BreakerPersister) Run(ctx context.Context) error {
	for {
		select {
		case <-p.wake:
			p.flush(context.WithoutCancel(ctx))
		case <-ctx.Done():
			// A state saved just before the end must survive the restart
			// that usually follows.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			p.flush(fctx)
			return nil
		}
	}
}

// Flush writes what is pending now.
func (p *BreakerPersister) Flush(ctx context.Context) { p.flush(ctx) }

func (p *BreakerPersister) flush(ctx context.Context) {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.mu.Lock()
	batch := p.pending
	p.pending = map[string]BreakerSnapshot{}
	p.mu.Unlock()
	for _, s := range batch {
		err := p.db.SaveBreaker(ctx, store.BreakerState{Key: s.Key, State: s.State.String(), Failures: s.Failures,
			Successes: s.Successes, HalfOpenRequests: s.HalfOpenRequests, LastFailureAt: s.LastFailureAt,
			OpenedAt: s.OpenedAt, Generation: s.Generation})
		if err != nil {
			p.logger.Warn("saving circuit breaker state", "key", s.Key, "error", err)
			continue
		}
		if prev, seen := p.states[s.Key]; seen && prev == s.State {
			continue
		}
		p.states[s.Key] = s.State
		if p.announce != nil {
			p.announce(s.Key)
		}
	}
}

// RestoreBreaker sets a breaker of bs to a state persisted by another
// replica (or by this one before a restart); false for a row it cannot
// read.
func RestoreBreaker(bs *Breakers, row store.BreakerState) (State, bool) {
	var st State
	if st.UnmarshalText([]byte(row.State)) != nil {
		return st, false
	}
	bs.Restore(BreakerSnapshot{Key: row.Key, State: st, Failures: row.Failures, Successes: row.Successes,
		HalfOpenRequests: row.HalfOpenRequests, LastFailureAt: row.LastFailureAt, OpenedAt: row.OpenedAt, Generation: row.Generation})
	return st, true
}

// MoveServer carries a renamed server's circuit breakers over to its new
// name, in the store (rows this replica may never have loaded) and in
// memory; the in-memory state, the freshest here, is then saved over the
// moved rows. A store failure is logged: the rename has happened, and the
// breakers only start closed.
func (p *BreakerPersister) MoveServer(ctx context.Context, bs *Breakers, from, to string) {
	if _, err := p.db.MoveBreakers(context.WithoutCancel(ctx), from, to); err != nil {
		p.logger.Warn("moving circuit breakers of a renamed server", "from", from, "to", to, "error", err)
	}
	for _, s := range bs.MoveServer(from, to) {
		p.Save(s)
	}
}
