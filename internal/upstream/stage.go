package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// Staged is a server started next to the running ones and not yet serving
// under its name: a config reload builds and starts every new or changed
// server first, and swaps them in only when all of them started, so a
// reload that fails leaves the running servers untouched. Commit or Discard
// it.
type Staged struct {
	m    *Manager
	s    *supervisor
	once sync.Once
}

// Name is the server's name.
func (st *Staged) Name() string { return st.s.name }

// Stage builds a supervisor for srv outside the manager's name table and,
// when connect is set, connects it and waits for the result. Its
// Options.OnTransition and OnDiscovery callbacks are held back (the last of
// each kept) until Commit, so nothing the server reports before it serves
// reaches the catalog or the store. A failed connect is returned and the
// staged server stopped.
//
// A stdio server that cannot run twice at once (it locks a file or binds a
// port) fails to stage while its old process runs.
func (m *Manager) Stage(ctx context.Context, srv *config.Server, connect bool) (*Staged, error) {
	if srv == nil || srv.Name == "" {
		return nil, errors.New("staging upstream: server has no name")
	}
	cfg := srv.Clone()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, fmt.Errorf("staging upstream %q: %w", cfg.Name, ErrClosed)
	}
	s := newSupervisor(m.ctx, cfg, &m.opts, m.log, &m.seq)
	s.hold = &holdback{held: true}
	m.wg.Go(s.run)
	m.mu.Unlock()
	st := &Staged{m: m, s: s}
	if connect {
		if err := m.start(ctx, s, cmdConnect); err != nil {
			st.Discard()
			return nil, err
		}
	}
	return st, nil
}

// Commit puts the staged server in place of the server of the same name
// (stopped without a drain, as Remove does; waited for unless ctx ends
// first), then lets its callbacks through: its current state is reported
// as a transition from DISCONNECTED, then its last discovery.
func (m *Manager) Commit(ctx context.Context, st *Staged) error {
	if st.m != m {
		return errors.New("committing an upstream staged by another manager")
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		st.Discard()
		return fmt.Errorf("committing upstream %q: %w", st.s.name, ErrClosed)
	}
	old := m.servers[st.s.name]
	m.servers[st.s.name] = st.s
	m.mu.Unlock()
	var err error
	if old != nil {
		old.cancel()
		select {
		case <-old.exited: // its last reports are made before the new one's
		case <-ctx.Done():
			err = fmt.Errorf("stopping the old upstream %q: %w", st.s.name, ctx.Err())
		}
	}
	st.once.Do(func() { st.s.hold.release(st.s) })
	return err
}

// Discard stops a staged server that was not committed. Idempotent; a no-op
// after Commit.
func (st *Staged) Discard() {
	st.once.Do(func() {
		st.s.cancel()
		<-st.s.exited
	})
}

// holdback keeps a staged supervisor's reports until it is committed. A
// nil holdback holds nothing.
type holdback struct {
	mu    sync.Mutex
	held  bool
	trans *Transition
	disc  *Discovery
}

// transition keeps t and reports true while held.
func (h *holdback) transition(t Transition) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.trans = &t
	}
	return h.held
}

// discovery keeps d and reports true while held.
func (h *holdback) discovery(d Discovery) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.disc = &d
	}
	return h.held
}

func (h *holdback) holding() bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// release reports what was held and lets later reports through. It holds
// the lock while it reports, so a report the supervisor makes meanwhile
// comes after, in order.
func (h *holdback) release(s *supervisor) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = false
	if t := h.trans; t != nil {
		cur := s.snapshot()
		t.From, t.To, t.Callable = StateDisconnected, cur.State, cur.Callable()
		if cb := s.opts.OnTransition; cb != nil && t.From != t.To {
			cb(*t)
		}
	}
	if d := h.disc; d != nil {
		if cb := s.opts.OnDiscovery; cb != nil {
			cb(*d)
		}
	}
}
