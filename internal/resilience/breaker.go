package resilience

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults applied by BreakerSettings when a field is zero (the seed's
// CIRCUIT_FAILURE_THRESHOLD, CIRCUIT_COOLDOWN, CIRCUIT_HALF_OPEN_MAX_REQUESTS).
const (
	DefaultFailureThreshold = 5
	DefaultCooldown         = 60 * time.Second
	DefaultHalfOpenMax      = 3
)

// Sentinels returned by Breaker.Allow; the caller maps them to one status
// (503) in one place.
var (
	// ErrOpen means the breaker is open and the call was not attempted.
	ErrOpen = errors.New("circuit open")
	// ErrTooManyRequests means the breaker is half-open and has already
	// admitted its quota of trial calls.
	ErrTooManyRequests = errors.New("too many requests in half-open")
)

// State is a circuit breaker state.
type State int

// The breaker states. The numeric values match the seed's metrics gauge
// (0=CLOSED, 1=OPEN, 2=HALF_OPEN).
const (
	Closed State = iota
	Open
	HalfOpen
)

// String returns the upper-case name used by the API and the state store.
func (s State) String() string {
	switch s {
	case Closed:
		return "CLOSED"
	case Open:
		return "OPEN"
	case HalfOpen:
		return "HALF_OPEN"
	default:
		return fmt.Sprintf("State(%d)", int(s))
	}
}

// MarshalText makes State encode as its name in JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses a name produced by String, so persisted state can be
// read back.
func (s *State) UnmarshalText(b []byte) error {
	switch strings.ToUpper(string(b)) {
	case "CLOSED":
		*s = Closed
	case "OPEN":
		*s = Open
	case "HALF_OPEN":
		*s = HalfOpen
	default:
		return fmt.Errorf("unknown breaker state %q", b)
	}
	return nil
}

// BreakerSettings configures a Breaker. The zero value is valid and means the
// documented defaults.
type BreakerSettings struct {
	// FailureThreshold is the number of consecutive failures in Closed that
	// opens the breaker. Zero or negative means DefaultFailureThreshold (5).
	FailureThreshold int
	// Cooldown is how long the breaker stays Open before admitting trial calls
	// in HalfOpen. Zero or negative means DefaultCooldown (60s).
	Cooldown time.Duration
	// HalfOpenMax is both the number of trial calls admitted in HalfOpen and
	// the number of successes that closes the breaker again. Zero or negative
	// means DefaultHalfOpenMax (3).
	HalfOpenMax int
	// OnStateChange, if set, is called after every transition, outside the
	// breaker's lock (it may call back into the Breaker), in order (see
	// OnChange).
	OnStateChange func(key string, from, to State)
	// OnChange, if set, receives a fresh snapshot after every recorded
	// outcome that changed the breaker and after every transition, so the
	// owner can persist it and Restore it after a restart. A success in
	// Closed with no failures counted changes nothing and stays silent, so
	// the hot path costs nothing. It runs outside the breaker's lock, on the
	// goroutine of some caller of this breaker, and may call back into the
	// Breaker; keep it quick (hand off to a channel to do I/O).
	//
	// OnStateChange and OnChange calls for one breaker are delivered one at a
	// time, in the order the changes happened, so the last snapshot delivered
	// is always the current one.
	OnChange func(s BreakerSnapshot)
	// Clock supplies the time for the cooldown. Nil means SystemClock.
	Clock Clock
}

func (s BreakerSettings) withDefaults() BreakerSettings {
	if s.FailureThreshold <= 0 {
		s.FailureThreshold = DefaultFailureThreshold
	}
	if s.Cooldown <= 0 {
		s.Cooldown = DefaultCooldown
	}
	if s.HalfOpenMax <= 0 {
		s.HalfOpenMax = DefaultHalfOpenMax
	}
	s.Clock = clockOrSystem(s.Clock)
	return s
}

// BreakerSnapshot is a point-in-time copy of a Breaker, shaped like the seed's
// CircuitBreakerMetrics and circuit_breakers table, for the API and for
// persistence.
type BreakerSnapshot struct {
	Key   string `json:"circuit_key"`
	State State  `json:"state"`
	// Failures is the current count of consecutive failures.
	Failures int `json:"failure_count"`
	// Successes is the count of successful trial calls in HalfOpen.
	Successes int `json:"success_count"`
	// HalfOpenRequests is the count of trial calls admitted in HalfOpen.
	HalfOpenRequests int       `json:"half_open_requests"`
	LastFailureAt    time.Time `json:"last_failure_time,omitzero"`
	OpenedAt         time.Time `json:"opened_at,omitzero"`
	// Generation increases on every transition; results of calls admitted
	// in an older generation are ignored.
	Generation uint64 `json:"generation"`
}

// Breaker is a two-step circuit breaker for one key (server+tool). It is
// safe for concurrent use.
type Breaker struct {
	key string

	mu               sync.Mutex
	s                BreakerSettings // withDefaults applied; replaced by Breakers.SetSettings
	state            State
	generation       uint64
	failures         int
	successes        int
	halfOpenRequests int
	lastFailureAt    time.Time
	openedAt         time.Time

	// Notifications wait in pending and are delivered, in order, by whichever
	// caller set delivering; see flush.
	pending    []breakerEvent
	delivering bool
}

type transition struct{ from, to State }

// breakerEvent is one batch of notifications, with the callbacks captured
// under the lock so a concurrent SetSettings cannot tear them.
type breakerEvent struct {
	ts            []transition
	onStateChange func(key string, from, to State)
	onChange      func(BreakerSnapshot) // nil: the snapshot did not change
	snap          BreakerSnapshot
}

// NewBreaker returns a closed breaker for key.
func NewBreaker(key string, s BreakerSettings) *Breaker {
	return &Breaker{key: key, s: s.withDefaults()}
}

// Key returns the key the breaker was created for.
func (b *Breaker) Key() string { return b.key }

// Allow asks to make one call. On success the caller must call done exactly
// once with the call's outcome (extra calls are ignored). Only transport or
// protocol failures should be reported as failures: a tool result with
// IsError is a success for the breaker. Outcomes of calls admitted before a
// later state change are ignored. If the breaker rejects the call, err wraps
// ErrOpen or ErrTooManyRequests.
func (b *Breaker) Allow() (done func(success bool), err error) {
	b.mu.Lock()
	ts := b.refresh(nil)
	switch b.state {
	case Open:
		b.unlockAndNotify(ts, len(ts) > 0)
		return nil, fmt.Errorf("breaker %q: %w", b.key, ErrOpen)
	case HalfOpen:
		if b.halfOpenRequests >= b.s.HalfOpenMax {
			b.unlockAndNotify(ts, len(ts) > 0)
			return nil, fmt.Errorf("breaker %q: %w", b.key, ErrTooManyRequests)
		}
		b.halfOpenRequests++
	}
	gen := b.generation
	b.unlockAndNotify(ts, len(ts) > 0)

	var called atomic.Bool
	return func(success bool) {
		if called.Swap(true) {
			return
		}
		b.report(gen, success)
	}, nil
}

// Ignore gives back a call admitted by Allow whose outcome says nothing of
// the protected operation's health (it never reached it: its server was
// down, the caller gave up first). It frees the half-open slot the call
// held; counters are untouched. Call it instead of done, and at most once.
func (b *Breaker) Ignore() {
	b.mu.Lock()
	if b.state == HalfOpen && b.halfOpenRequests > 0 {
		b.halfOpenRequests--
	}
	b.mu.Unlock()
}

// State returns the current state, moving Open to HalfOpen if the cooldown
// has passed.
func (b *Breaker) State() State {
	b.mu.Lock()
	ts := b.refresh(nil)
	st := b.state
	b.unlockAndNotify(ts, len(ts) > 0)
	return st
}

// Snapshot returns a copy of the breaker's current state and counters.
func (b *Breaker) Snapshot() BreakerSnapshot {
	b.mu.Lock()
	ts := b.refresh(nil)
	snap := b.snapshotLocked()
	b.unlockAndNotify(ts, len(ts) > 0)
	return snap
}

// snapshotLocked copies the state as it is, without refreshing. b.mu is held.
func (b *Breaker) snapshotLocked() BreakerSnapshot {
	return BreakerSnapshot{
		Key:              b.key,
		State:            b.state,
		Failures:         b.failures,
		Successes:        b.successes,
		HalfOpenRequests: b.halfOpenRequests,
		LastFailureAt:    b.lastFailureAt,
		OpenedAt:         b.openedAt,
		Generation:       b.generation,
	}
}

func (b *Breaker) report(gen uint64, success bool) {
	b.mu.Lock()
	ts := b.refresh(nil)
	if gen != b.generation {
		b.unlockAndNotify(ts, len(ts) > 0)
		return
	}
	now := b.s.Clock.Now()
	changed := true
	switch {
	case success && b.state == Closed:
		// The hot path: a success with nothing to forget changes nothing.
		changed = b.failures != 0
		b.failures = 0
	case success && b.state == HalfOpen:
		b.successes++
		if b.successes >= b.s.HalfOpenMax {
			ts = b.setState(ts, Closed, now)
		}
	case !success && b.state == Closed:
		b.failures++
		b.lastFailureAt = now
		if b.failures >= b.s.FailureThreshold {
			ts = b.setState(ts, Open, now)
		}
	case !success && b.state == HalfOpen:
		b.failures++
		b.lastFailureAt = now
		ts = b.setState(ts, Open, now)
	default:
		changed = false
	}
	b.unlockAndNotify(ts, changed || len(ts) > 0)
}

// refresh moves Open to HalfOpen once the cooldown has passed. b.mu is held.
func (b *Breaker) refresh(ts []transition) []transition {
	if b.state != Open {
		return ts
	}
	now := b.s.Clock.Now()
	if now.Sub(b.openedAt) >= b.s.Cooldown {
		ts = b.setState(ts, HalfOpen, now)
	}
	return ts
}

// setState changes state, starts a new generation and resets the counters
// that belong to a generation. b.mu is held.
func (b *Breaker) setState(ts []transition, to State, now time.Time) []transition {
	from := b.state
	if from == to {
		return ts
	}
	b.state = to
	b.generation++
	b.successes = 0
	b.halfOpenRequests = 0
	switch to {
	case Closed:
		b.failures = 0
		b.openedAt = time.Time{}
	case Open:
		b.openedAt = now
	}
	return append(ts, transition{from, to})
}

// unlockAndNotify queues the notifications for ts (and a snapshot for
// OnChange if changed), releases b.mu, and delivers what is queued unless
// another caller is already delivering. b.mu is held on entry.
func (b *Breaker) unlockAndNotify(ts []transition, changed bool) {
	ev := breakerEvent{ts: ts}
	if len(ts) > 0 {
		ev.onStateChange = b.s.OnStateChange
	}
	if changed && b.s.OnChange != nil {
		ev.onChange = b.s.OnChange
		ev.snap = b.snapshotLocked()
	}
	if ev.onStateChange == nil && ev.onChange == nil {
		b.mu.Unlock()
		return
	}
	b.pending = append(b.pending, ev)
	if b.delivering {
		b.mu.Unlock() // the current deliverer will pick it up, in order
		return
	}
	b.delivering = true
	b.mu.Unlock()
	b.flush()
}

// flush delivers queued notifications one at a time, outside the lock, until
// the queue is empty. Only the caller that set b.delivering runs it; a
// callback that calls back into the breaker only queues more. If a callback
// panics, the next notifying caller takes over the rest of the queue.
func (b *Breaker) flush() {
	defer func() {
		if r := recover(); r != nil {
			b.mu.Lock()
			b.delivering = false
			b.mu.Unlock()
			panic(r)
		}
	}()
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.pending = nil
			b.delivering = false
			b.mu.Unlock()
			return
		}
		ev := b.pending[0]
		b.pending[0] = breakerEvent{}
		b.pending = b.pending[1:]
		b.mu.Unlock()
		if ev.onStateChange != nil {
			for _, t := range ev.ts {
				ev.onStateChange(b.key, t.from, t.to)
			}
		}
		if ev.onChange != nil {
			ev.onChange(ev.snap)
		}
	}
}

// restore overwrites the state from a persisted snapshot; see
// Breakers.Restore. existing says whether calls may be in flight, whose
// outcomes must then be ignored.
func (b *Breaker) restore(s BreakerSnapshot, existing bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.s.Clock.Now()
	gen := s.Generation
	if existing && gen <= b.generation {
		gen = b.generation + 1
	}
	b.generation = gen
	b.failures = max(s.Failures, 0)
	b.successes = 0
	b.halfOpenRequests = 0
	b.lastFailureAt = s.LastFailureAt
	b.openedAt = time.Time{}
	switch s.State {
	case Open:
		b.state = Open
		b.openedAt = s.OpenedAt
		if b.openedAt.IsZero() || b.openedAt.After(now) {
			b.openedAt = now // unknown or from a clock ahead of ours: a full cooldown
		}
	case HalfOpen:
		// The trial calls of the previous process are lost; start a fresh
		// half-open round on the next access.
		b.state = Open
		b.openedAt = s.OpenedAt
		if b.openedAt.IsZero() || now.Sub(b.openedAt) < b.s.Cooldown {
			b.openedAt = now.Add(-b.s.Cooldown)
		}
	default:
		b.state = Closed
	}
}

// setSettings swaps the settings of a live breaker. The new thresholds take
// effect at the next check; the state is left alone.
func (b *Breaker) setSettings(s BreakerSettings) {
	b.mu.Lock()
	b.s = s.withDefaults()
	b.mu.Unlock()
}

// Breakers is a set of breakers keyed by server+tool, created lazily with
// shared settings. It is safe for concurrent use.
type Breakers struct {
	mu sync.Mutex // held across SetSettings so concurrent reloads cannot interleave
	s  BreakerSettings
	m  map[string]*Breaker
}

// NewBreakers returns an empty set whose breakers all use s.
func NewBreakers(s BreakerSettings) *Breakers {
	return &Breakers{s: s, m: make(map[string]*Breaker)}
}

// Settings returns the settings last given to NewBreakers or SetSettings, as
// given (zero fields still mean the defaults).
func (bs *Breakers) Settings() BreakerSettings {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return bs.s
}

// SetSettings hot-reloads the settings of every breaker, existing and future,
// without resetting their state: a lowered threshold applies at the next
// failure, a changed cooldown at the next check of an open breaker.
func (bs *Breakers) SetSettings(s BreakerSettings) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.s = s
	for _, b := range bs.m {
		b.setSettings(s)
	}
}

// Restore creates or overwrites the breaker for s.Key from persisted state,
// so a restart neither forgets a failing upstream nor hammers it at once.
// Open keeps OpenedAt, so the cooldown continues from when it opened (a zero
// or future OpenedAt restarts it). HalfOpen comes back as Open with its
// cooldown elapsed: the next Allow starts a fresh round of trial calls.
// Closed keeps its failure count; an unknown state is treated as Closed.
// Outcomes of calls in flight on an existing breaker are ignored afterwards.
// Restore itself calls neither OnStateChange nor OnChange.
func (bs *Breakers) Restore(s BreakerSnapshot) {
	bs.mu.Lock()
	b, existing := bs.m[s.Key]
	if !existing {
		b = NewBreaker(s.Key, bs.s)
		bs.m[s.Key] = b
	}
	bs.mu.Unlock()
	b.restore(s, existing)
}

// Forget drops the breaker for key, for a server or tool that is gone, so the
// set does not grow forever. Holders of the old *Breaker keep a working but
// detached breaker; the next Get creates a fresh closed one.
func (bs *Breakers) Forget(key string) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	delete(bs.m, key)
}

// MoveServer re-keys every breaker of server from (old "old:tool" or
// "old") to the same key under server name to, state and counters kept, so
// a renamed server's failing tools stay guarded instead of starting over
// closed while the old keys linger. A breaker already under a new key is
// replaced. The moved breakers' generations are bumped so their state wins
// over any stored under the new key; holders of an old *Breaker keep a
// working but detached one, and the trial calls they hold in HalfOpen are
// not counted by the new one. It returns the snapshots under the new keys
// (sorted), for persistence; neither OnStateChange nor OnChange is called.
func (bs *Breakers) MoveServer(from, to string) []BreakerSnapshot {
	if from == to {
		return nil
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	var moved []BreakerSnapshot
	for key, b := range bs.m {
		var newKey string
		switch {
		case key == from:
			newKey = to
		case strings.HasPrefix(key, from+":"):
			newKey = to + key[len(from):]
		default:
			continue
		}
		b.mu.Lock()
		nb := &Breaker{key: newKey, s: b.s, state: b.state, generation: b.generation + 1, failures: b.failures,
			successes: b.successes, lastFailureAt: b.lastFailureAt, openedAt: b.openedAt}
		b.mu.Unlock()
		delete(bs.m, key)
		bs.m[newKey] = nb
		moved = append(moved, nb.snapshotLocked())
	}
	slices.SortFunc(moved, func(a, b BreakerSnapshot) int { return strings.Compare(a.Key, b.Key) })
	return moved
}

// Key builds the breaker key for a tool on a server, "server:tool" as in the
// seed's circuit_breakers table.
func Key(server, tool string) string { return server + ":" + tool }

// Get returns the breaker for key, creating a closed one on first use.
func (bs *Breakers) Get(key string) *Breaker {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b, ok := bs.m[key]
	if !ok {
		b = NewBreaker(key, bs.s)
		bs.m[key] = b
	}
	return b
}

// All returns snapshots of every breaker created so far, sorted by key.
func (bs *Breakers) All() []BreakerSnapshot {
	bs.mu.Lock()
	list := make([]*Breaker, 0, len(bs.m))
	for _, b := range bs.m {
		list = append(list, b)
	}
	bs.mu.Unlock()
	out := make([]BreakerSnapshot, 0, len(list))
	for _, b := range list {
		out = append(out, b.Snapshot())
	}
	slices.SortFunc(out, func(a, b BreakerSnapshot) int { return strings.Compare(a.Key, b.Key) })
	return out
}
