package telemetry

import (
	"sync"
	"time"
)

// Event is one thing that happened in the gateway, for live views (the
// dashboard, `switchboard status --watch`) and integrations.
type Event struct {
	// Seq increases by one per event of this process.
	Seq  uint64    `json:"seq"`
	Type string    `json:"type"` // e.g. "server.status_changed", "invocation.completed", "policy.changed"
	At   time.Time `json:"at"`
	// Data is the event's payload, JSON-encodable.
	Data any `json:"data,omitempty"`
}

// Bus fans events out to subscribers. A slow subscriber loses events
// rather than slowing the gateway: each has a bounded buffer and is told
// how many it missed. Safe for concurrent use.
type Bus struct {
	mu   sync.Mutex
	seq  uint64
	subs map[*Subscription]struct{}
}

// NewBus returns an empty bus.
func NewBus() *Bus { return &Bus{subs: map[*Subscription]struct{}{}} }

// Subscription receives the events published after it was made.
type Subscription struct {
	C       <-chan Event
	c       chan Event
	bus     *Bus
	mu      sync.Mutex
	dropped int
}

// Subscribe starts receiving events into a buffer of size n (default 256).
// Call Close when done.
func (b *Bus) Subscribe(n int) *Subscription {
	if n <= 0 {
		n = 256
	}
	c := make(chan Event, n)
	s := &Subscription{C: c, c: c, bus: b}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Close stops the subscription and closes C. Idempotent.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	if _, ok := s.bus.subs[s]; ok {
		delete(s.bus.subs, s)
		close(s.c)
	}
}

// Dropped returns, and resets, how many events were lost because the
// buffer was full.
func (s *Subscription) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.dropped
	s.dropped = 0
	return n
}

// Publish sends an event of the given type to every subscriber, without
// blocking.
func (b *Bus) Publish(typ string, data any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	ev := Event{Seq: b.seq, Type: typ, At: time.Now().UTC(), Data: data}
	for s := range b.subs {
		select {
		case s.c <- ev:
		default:
			s.mu.Lock()
			s.dropped++
			s.mu.Unlock()
		}
	}
}
