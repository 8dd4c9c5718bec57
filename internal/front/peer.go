package front

import (
	"context"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Peer is one downstream client session as the upstream side sees it: where
// progress, log messages and sampling, elicitation and roots requests that
// belong to its calls are sent. It implements upstream.Peer.
type Peer struct {
	ss   *mcp.ServerSession
	done chan struct{}
}

// ID identifies the session. Sessions without an id (stdio, stateless HTTP)
// are told apart by pointer.
func (p *Peer) ID() string {
	if id := p.ss.ID(); id != "" {
		return id
	}
	return sessionKey(p.ss)
}

// Done is closed when the client session ends.
func (p *Peer) Done() <-chan struct{} { return p.done }

// Capabilities returns what the client declared in initialize (nil if it
// has not, or speaks a protocol without initialize).
func (p *Peer) Capabilities() *mcp.ClientCapabilities {
	ip := p.ss.InitializeParams()
	if ip == nil {
		return nil
	}
	return ip.Capabilities
}

// NotifyProgress relays a progress notification to the client.
func (p *Peer) NotifyProgress(ctx context.Context, params *mcp.ProgressNotificationParams) error {
	return p.ss.NotifyProgress(ctx, params)
}

// Log relays a log message; the SDK drops it if it is below the level the
// client set.
func (p *Peer) Log(ctx context.Context, params *mcp.LoggingMessageParams) error {
	return p.ss.Log(ctx, params)
}

// CreateMessage asks the client to sample.
func (p *Peer) CreateMessage(ctx context.Context, params *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return p.ss.CreateMessage(ctx, params)
}

// Elicit asks the client's user for input.
func (p *Peer) Elicit(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return p.ss.Elicit(ctx, params)
}

// ListRoots asks the client for its roots.
func (p *Peer) ListRoots(ctx context.Context, params *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	return p.ss.ListRoots(ctx, params)
}

// peerSet keeps one Peer per live session, so an upstream can key
// per-client state (sessions, subscriptions) on it. A session's entry goes
// when the session ends.
type peerSet struct {
	mu sync.Mutex
	m  map[*mcp.ServerSession]*Peer
}

func (s *peerSet) get(ss *mcp.ServerSession) *Peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.m[ss]; ok {
		return p
	}
	p := &Peer{ss: ss, done: make(chan struct{})}
	s.m[ss] = p
	// Owned by the session: Wait returns when the session ends, however it
	// ends, and the goroutine with it.
	go func() {
		_ = ss.Wait() // how it ended does not matter here
		s.mu.Lock()
		delete(s.m, ss)
		s.mu.Unlock()
		close(p.done)
	}()
	return p
}

func sessionKey(ss *mcp.ServerSession) string {
	return fmt.Sprintf("session-%p", ss)
}
