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
	// breaker's lock (it may call back into the Breaker). Under concurrency,
	// calls for one key may be delivered out of order; read Snapshot for the
	// current truth.
	OnStateChange func(key string, from, to State)
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
	s   BreakerSettings

	mu               sync.Mutex
	state            State
	generation       uint64
	failures         int
	successes        int
	halfOpenRequests int
	lastFailureAt    time.Time
	openedAt         time.Time
}

type transition struct{ from, to State }

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
	var ts []transition
	ts = b.refresh(ts)
	switch b.state {
	case Open:
		b.mu.Unlock()
		b.notify(ts)
		return nil, fmt.Errorf("breaker %q: %w", b.key, ErrOpen)
	case HalfOpen:
		if b.halfOpenRequests >= b.s.HalfOpenMax {
			b.mu.Unlock()
			b.notify(ts)
			return nil, fmt.Errorf("breaker %q: %w", b.key, ErrTooManyRequests)
		}
		b.halfOpenRequests++
	}
	gen := b.generation
	b.mu.Unlock()
	b.notify(ts)

	var called atomic.Bool
	return func(success bool) {
		if called.Swap(true) {
			return
		}
		b.report(gen, success)
	}, nil
}

// State returns the current state, moving Open to HalfOpen if the cooldown
// has passed.
func (b *Breaker) State() State {
	b.mu.Lock()
	ts := b.refresh(nil)
	st := b.state
	b.mu.Unlock()
	b.notify(ts)
	return st
}

// Snapshot returns a copy of the breaker's current state and counters.
func (b *Breaker) Snapshot() BreakerSnapshot {
	b.mu.Lock()
	ts := b.refresh(nil)
	snap := BreakerSnapshot{
		Key:              b.key,
		State:            b.state,
		Failures:         b.failures,
		Successes:        b.successes,
		HalfOpenRequests: b.halfOpenRequests,
		LastFailureAt:    b.lastFailureAt,
		OpenedAt:         b.openedAt,
		Generation:       b.generation,
	}
	b.mu.Unlock()
	b.notify(ts)
	return snap
}

func (b *Breaker) report(gen uint64, success bool) {
	b.mu.Lock()
	ts := b.refresh(nil)
	if gen != b.generation {
		b.mu.Unlock()
		b.notify(ts)
		return
	}
	now := b.s.Clock.Now()
	switch {
	case success && b.state == Closed:
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
	}
	b.mu.Unlock()
	b.notify(ts)
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

func (b *Breaker) notify(ts []transition) {
	if b.s.OnStateChange == nil {
		return
	}
	for _, t := range ts {
		b.s.OnStateChange(b.key, t.from, t.to)
	}
}

// Breakers is a set of breakers keyed by server+tool, created lazily with
// shared settings. It is safe for concurrent use.
type Breakers struct {
	s  BreakerSettings
	mu sync.Mutex
	m  map[string]*Breaker
}

// NewBreakers returns an empty set whose breakers all use s.
func NewBreakers(s BreakerSettings) *Breakers {
	return &Breakers{s: s, m: make(map[string]*Breaker)}
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
