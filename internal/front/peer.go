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
//
// A caller of the stateless revision (2026-07-28) has no session: its Peer
// lives for one call (parked), declares the capabilities of that call's
// request, and hands what the upstream asks for during the call to the
// caller in an input_required result.
type Peer struct {
	ss   *mcp.ServerSession
	done <-chan struct{}
	park *parked                 // stateless caller: the call being served
	caps *mcp.ClientCapabilities // stateless caller: from the request's _meta
	// client is a stateless caller's identity: its calls may share the
	// sessions a classic upstream opened for its earlier calls
	// (upstream.PooledPeer).
	client string
}

// ID identifies the session. Sessions without an id (stdio, stateless HTTP)
// are told apart by pointer; a stateless caller's call by its park id.
func (p *Peer) ID() string {
	if p.park != nil {
		return "call-" + p.park.id
	}
	if id := p.ss.ID(); id != "" {
		return id
	}
	return sessionKey(p.ss)
}

// PoolKey names the client of a stateless caller's call, whose sessions
// on a classic sse/http upstream later calls of the same client may reuse
// (see upstream.PooledPeer).
func (p *Peer) PoolKey() string {
	if p.park == nil {
		return ""
	}
	return "caller:" + p.client
}

// Done is closed when the client session ends (for a stateless caller: when
// its call ends).
func (p *Peer) Done() <-chan struct{} { return p.done }

// Stateless reports whether the peer is a caller of the stateless revision
// (see upstream.StatelessPeer).
func (p *Peer) Stateless() bool { return p.park != nil }

// Capabilities returns what the client declared in initialize, or in the
// request for a stateless caller (nil if nothing).
func (p *Peer) Capabilities() *mcp.ClientCapabilities {
	if p.park != nil {
		return p.caps
	}
	ip := p.ss.InitializeParams()
	if ip == nil {
		return nil
	}
	return ip.Capabilities
}

// NotifyProgress relays a progress notification to the client.
func (p *Peer) NotifyProgress(ctx context.Context, params *mcp.ProgressNotificationParams) error {
	ss, ctx, cancel := p.session(ctx)
	defer cancel()
	if ss == nil {
		return nil // a call served without a session asked for no progress
	}
	return ss.NotifyProgress(ctx, params)
}

// Log relays a log message; the SDK drops it if it is below the level the
// client set.
func (p *Peer) Log(ctx context.Context, params *mcp.LoggingMessageParams) error {
	ss, ctx, cancel := p.session(ctx)
	defer cancel()
	if ss == nil {
		return nil // a call served without a session set no log level
	}
	return ss.Log(ctx, params)
}

// session is where a notification for the peer goes, and the context to
// send it with. A stateless caller's call spans several requests (one per
// round), each on a session of its own: a notification goes on the
// current one, with that request's context (the SDK writes it on that
// request's response stream), for as long as ctx lasts.
func (p *Peer) session(ctx context.Context) (*mcp.ServerSession, context.Context, context.CancelFunc) {
	if p.park == nil {
		return p.ss, ctx, func() {}
	}
	ss, rctx := p.park.current()
	if ss == nil {
		return p.ss, ctx, func() {}
	}
	merged, cancel := context.WithCancel(rctx)
	stop := context.AfterFunc(ctx, cancel)
	return ss, merged, func() {
		stop()
		cancel()
	}
}

// CreateMessage asks the client to sample.
func (p *Peer) CreateMessage(ctx context.Context, params *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	if p.park != nil {
		r, err := p.park.ask(ctx, params)
		if err != nil {
			return nil, err
		}
		switch r := r.(type) {
		case *mcp.CreateMessageResult:
			return r, nil
		case *mcp.CreateMessageWithToolsResult:
			return samplingResult(r)
		}
		return nil, fmt.Errorf("the client answered a sampling request with %T", r)
	}
	return p.ss.CreateMessage(ctx, params)
}

// Elicit asks the client's user for input.
func (p *Peer) Elicit(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if p.park != nil {
		r, err := p.park.ask(ctx, params)
		if err != nil {
			return nil, err
		}
		if er, ok := r.(*mcp.ElicitResult); ok {
			return er, nil
		}
		return nil, fmt.Errorf("the client answered an elicitation with %T", r)
	}
	return p.ss.Elicit(ctx, params)
}

// ListRoots asks the client for its roots.
func (p *Peer) ListRoots(ctx context.Context, params *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	if p.park != nil {
		r, err := p.park.ask(ctx, params)
		if err != nil {
			return nil, err
		}
		if lr, ok := r.(*mcp.ListRootsResult); ok {
			return lr, nil
		}
		return nil, fmt.Errorf("the client answered roots/list with %T", r)
	}
	return p.ss.ListRoots(ctx, params)
}

// samplingResult is r with one content block, as CreateMessage returns it.
func samplingResult(r *mcp.CreateMessageWithToolsResult) (*mcp.CreateMessageResult, error) {
	if len(r.Content) > 1 {
		return nil, fmt.Errorf("the client answered a sampling request with %d content blocks; one was asked for", len(r.Content))
	}
	var c mcp.Content
	if len(r.Content) == 1 {
		c = r.Content[0]
	}
	return &mcp.CreateMessageResult{Meta: r.Meta, Content: c, Model: r.Model, Role: r.Role, StopReason: r.StopReason}, nil
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
	done := make(chan struct{})
	p := &Peer{ss: ss, done: done}
	s.m[ss] = p
	// Owned by the session: Wait returns when the session ends, however it
	// ends, and the goroutine with it.
	go func() {
		_ = ss.Wait() // how it ended does not matter here
		s.mu.Lock()
		delete(s.m, ss)
		s.mu.Unlock()
		close(done)
	}()
	return p
}

func sessionKey(ss *mcp.ServerSession) string {
	return fmt.Sprintf("session-%p", ss)
}
