package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
)

// Manager owns the supervisors of all upstream servers. It is safe for
// concurrent use. Lifecycle methods (Connect, Disconnect, Remove, Close) may
// block for as long as a server takes to start or stop; the read methods
// (Status, Session, Discovery, ...) never wait for them.
type Manager struct {
	opts Options
	log  *slog.Logger
	ctx  context.Context // parent of every supervisor; never cancelled itself

	ownHTTP bool          // opts.HTTPClient is ours to clean up
	seq     atomic.Uint64 // numbers the progress tokens sent upstream

	mu      sync.RWMutex
	servers map[string]*supervisor
	closed  bool
	wg      sync.WaitGroup // one per supervisor goroutine
}

// NewManager returns a Manager with no servers. A nil opts means defaults.
func NewManager(opts *Options) *Manager {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 5 * time.Second
	}
	if o.PeerSessionIdle <= 0 {
		o.PeerSessionIdle = 5 * time.Minute
	}
	if o.UserSessionIdle <= 0 {
		o.UserSessionIdle = o.PeerSessionIdle
	}
	r := &o.Restart
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 5
	}
	if r.Window <= 0 {
		r.Window = 5 * time.Minute
	}
	if r.BackoffInitial <= 0 {
		r.BackoffInitial = 500 * time.Millisecond
	}
	if r.BackoffMax <= 0 {
		r.BackoffMax = 30 * time.Second
	}
	r.BackoffMax = max(r.BackoffMax, r.BackoffInitial)
	if o.HealthInterval <= 0 {
		o.HealthInterval = 30 * time.Second
	}
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = 5 * time.Second
	}
	if !(o.DegradedErrorRate > 0 && o.DegradedErrorRate <= 1) {
		o.DegradedErrorRate = 0.5
	}
	if o.DegradedWindowCalls <= 0 {
		o.DegradedWindowCalls = 20
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = config.DefaultMaxResultBytes
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.BaseEnv == nil {
		o.BaseEnv = defaultBaseEnv
	}
	o.BaseEnv = slices.Clone(o.BaseEnv)
	if o.Implementation == nil {
		o.Implementation = &mcp.Implementation{Name: "switchboard", Version: "dev"}
	}
	if o.Guard == nil {
		g, err := netguard.New(netguard.Policy{}, nil)
		if err != nil {
			panic(err) // the default policy always compiles
		}
		o.Guard = g
	}
	ownHTTP := o.HTTPClient == nil
	if ownHTTP {
		o.HTTPClient = defaultHTTPClient(o.Guard)
	}
	return &Manager{
		opts:    o,
		ownHTTP: ownHTTP,
		log:     o.Logger,
		ctx:     context.Background(),
		servers: make(map[string]*supervisor),
	}
}

// Add registers a server in state DISCONNECTED (does not connect). ErrExists on duplicate name.
// The Manager keeps its own copy of srv.
func (m *Manager) Add(srv *config.Server) error {
	if srv == nil || srv.Name == "" {
		return errors.New("adding upstream: server has no name")
	}
	cfg := srv.Clone()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("adding upstream %q: %w", cfg.Name, ErrClosed)
	}
	if _, ok := m.servers[cfg.Name]; ok {
		return fmt.Errorf("adding upstream %q: %w", cfg.Name, ErrExists)
	}
	s := newSupervisor(m.ctx, cfg, &m.opts, m.log, &m.seq)
	m.servers[cfg.Name] = s
	m.wg.Go(s.run)
	return nil
}

func (m *Manager) get(name string) (*supervisor, error) {
	m.mu.RLock()
	s := m.servers[name]
	m.mu.RUnlock()
	if s == nil {
		return nil, fmt.Errorf("upstream %q: %w", name, ErrNotFound)
	}
	return s, nil
}

// Connect starts/connects the server and discovers it; it blocks until CONNECTED or ERROR (or ctx done)
// and returns the failure. Connecting an already CONNECTED server is a no-op.
//
// It is the operator's connect: it starts a server in ERROR at once, even in
// a crash loop, whose count starts over. After a failure, the server is
// restarted with backoff like after a crash, unless the failure is a
// configuration problem (command not found). During a [Manager.Disconnect]'s
// drain, Connect waits for the drain to end, then connects.
//
// A failure is an *UnavailableError in state ERROR. When ctx ends first, the
// attempt carries on in the background (bounded by the startup timeout)
// and Connect returns ctx's error.
func (m *Manager) Connect(ctx context.Context, name string) error {
	s, err := m.get(name)
	if err != nil {
		return err
	}
	if s.snapshot().State.serving() {
		return nil
	}
	return m.start(ctx, s, cmdConnect)
}

// start sends a connect command (cmdConnect, cmdDemand) and waits for it.
func (m *Manager) start(ctx context.Context, s *supervisor, kind cmdKind) error {
	name := s.name
	switch err := s.request(ctx, kind).err; {
	case errors.Is(err, errGone):
		return fmt.Errorf("upstream %q: %w", name, ErrNotFound)
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return fmt.Errorf("connecting upstream %q: %w", name, err)
	default:
		return err
	}
}

// Disconnect drains the server, then closes the session (stdio: stops the
// process) → DISCONNECTED. Idempotent. It returns the number of calls that
// were in flight when it began.
//
// Draining: the state becomes DISCONNECTED at once, with Status.Draining
// set, and new calls fail with an *UnavailableError (DISCONNECTED,
// "draining: ..."). The calls in flight may finish, for up to
// Options.DrainTimeout; then they are aborted (*UnavailableError) and the
// session closes. A second Disconnect during the drain waits for the same
// end. It also aborts a connect in progress and cancels a scheduled restart.
//
// When ctx ends first, the drain and stop carry on in the background and
// Disconnect returns ctx's error. Remove and Close do not drain.
func (m *Manager) Disconnect(ctx context.Context, name string) (pending int, err error) {
	s, err := m.get(name)
	if err != nil {
		return 0, err
	}
	r := s.request(ctx, cmdDisconnect)
	switch {
	case errors.Is(r.err, errGone):
		return 0, nil // removed meanwhile: disconnected all the same
	case r.err != nil:
		return 0, fmt.Errorf("disconnecting upstream %q: %w", name, r.err)
	}
	return r.pending, nil
}

// Rediscover lists everything the server offers again now, publishes it
// (Options.OnDiscovery) and returns it. The server must be CONNECTED or
// DEGRADED: otherwise the error is an *UnavailableError. A listing that
// fails leaves the last discovery in place and returns the (redacted)
// failure.
func (m *Manager) Rediscover(ctx context.Context, name string) (Discovery, error) {
	s, err := m.get(name)
	if err != nil {
		return Discovery{}, err
	}
	r := s.request(ctx, cmdRediscover)
	switch {
	case errors.Is(r.err, errGone):
		return Discovery{}, fmt.Errorf("upstream %q: %w", name, ErrNotFound)
	case r.err != nil && ctx.Err() != nil && errors.Is(r.err, ctx.Err()):
		return Discovery{}, fmt.Errorf("re-discovering upstream %q: %w", name, r.err)
	case r.err != nil:
		return Discovery{}, r.err
	}
	return r.disc, nil
}

// Remove disconnects (without draining) and forgets the server. ErrNotFound if unknown.
// The name is free for Add as soon as Remove is called; Remove waits for the
// old server to stop unless ctx ends first.
func (m *Manager) Remove(ctx context.Context, name string) error {
	m.mu.Lock()
	s := m.servers[name]
	delete(m.servers, name)
	m.mu.Unlock()
	if s == nil {
		return fmt.Errorf("upstream %q: %w", name, ErrNotFound)
	}
	s.cancel()
	select {
	case <-s.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("removing upstream %q: %w", name, ctx.Err())
	}
}

// Close disconnects every server and waits for all goroutines and child
// processes. Idempotent. It does not drain: calls in flight are aborted, and
// every stdio server is stopped within its shutdown timeout (its whole
// process group is killed at the end of it), all servers at once.
// If ctx ends first, Close returns its error while the servers finish stopping.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	all := slices.Collect(maps.Values(m.servers))
	clear(m.servers)
	m.mu.Unlock()
	for _, s := range all {
		s.cancel()
	}
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		if m.ownHTTP {
			m.opts.HTTPClient.CloseIdleConnections() // their goroutines would outlive us
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("closing upstreams: %w", ctx.Err())
	}
}

// Status returns the current status of one server.
func (m *Manager) Status(name string) (Status, error) {
	s, err := m.get(name)
	if err != nil {
		return Status{}, err
	}
	return s.snapshot(), nil
}

// Statuses returns the status of every server, sorted by name.
func (m *Manager) Statuses() []Status {
	m.mu.RLock()
	all := slices.Collect(maps.Values(m.servers))
	m.mu.RUnlock()
	out := make([]Status, 0, len(all))
	for _, s := range all {
		out = append(out, s.snapshot())
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Config returns a copy of the configuration a server was added with.
func (m *Manager) Config(name string) (*config.Server, error) {
	s, err := m.get(name)
	if err != nil {
		return nil, err
	}
	return s.cfg.Clone(), nil
}

// Discovery returns what the server offered at its last (re-)discovery. It is
// kept after the session ends; it is empty before the first connect.
func (m *Manager) Discovery(name string) (Discovery, error) {
	s, err := m.get(name)
	if err != nil {
		return Discovery{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.disc, nil
}

// Stderr returns the last lines (at most 200) a stdio server wrote to stderr,
// oldest first, across restarts. It is nil for an unknown server.
func (m *Manager) Stderr(name string) []string {
	s, err := m.get(name)
	if err != nil {
		return nil
	}
	return s.stderr.snapshot()
}

// Session returns the live session, or *UnavailableError when the server is not CONNECTED/DEGRADED.
// Calls made directly on it are not aborted by Disconnect; prefer CallTool and friends.
func (m *Manager) Session(name string) (*mcp.ClientSession, error) {
	s, err := m.get(name)
	if err != nil {
		return nil, err
	}
	sess, err := s.serving()
	if err != nil {
		return nil, err
	}
	return sess.cs, nil
}

// CallTool calls a tool by its ORIGINAL name on the server. Arguments are passed through untouched
// (params.Arguments may be a json.RawMessage). A transport failure that ends the session moves the
// server to ERROR, and the call returns an *UnavailableError.
//
// A call to a server that is DISCONNECTED with Status.OnDemand starts it
// first, waiting up to its startup timeout. Calls count towards the
// server's error rate (DEGRADED) and, when successful, as passing health
// checks; they keep an idle_timeout from stopping it.
//
// A tool's own failure is a result with IsError, not an error. With a [Peer]
// in ctx, what the server sends during the call is relayed to it (see
// [WithPeer] and the package documentation). Cancelling ctx cancels the call
// upstream (notifications/cancelled).
func (m *Manager) CallTool(ctx context.Context, server string, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	var p mcp.CallToolParams
	if params != nil {
		p = *params
	}
	spec := callSpec{op: func() string { return fmt.Sprintf("calling tool %q", p.Name) }, meta: p.Meta,
		method: "tools/call", target: p.Name}
	return relayParams(ctx, m, server, spec, p, (*mcp.ClientSession).CallTool)
}

// relayParams relays a request whose params are p. The SDK writes to the
// params it sends, so each attempt sends its own copy of p, carrying that
// attempt's meta.
func relayParams[P any, PP interface {
	*P
	SetMeta(map[string]any)
}, R any](ctx context.Context, m *Manager, server string, spec callSpec, p P, send func(*mcp.ClientSession, context.Context, PP) (R, error)) (R, error) {
	return relay(ctx, m, server, spec, func(ctx context.Context, cs *mcp.ClientSession, meta mcp.Meta) (R, error) {
		q := p
		PP(&q).SetMeta(meta)
		return send(cs, ctx, &q)
	})
}

// noResult adapts a session method that returns only an error to
// relayParams.
func noResult[PP any](send func(*mcp.ClientSession, context.Context, PP) error) func(*mcp.ClientSession, context.Context, PP) (struct{}, error) {
	return func(cs *mcp.ClientSession, ctx context.Context, q PP) (struct{}, error) {
		return struct{}{}, send(cs, ctx, q)
	}
}

// ReadResource reads a resource by its original URI on the server; failures are as for CallTool.
func (m *Manager) ReadResource(ctx context.Context, server string, params *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	var p mcp.ReadResourceParams
	if params != nil {
		p = *params
	}
	spec := callSpec{op: func() string { return fmt.Sprintf("reading resource %q", p.URI) }, meta: p.Meta,
		method: "resources/read", uri: p.URI}
	return relayParams(ctx, m, server, spec, p, (*mcp.ClientSession).ReadResource)
}

// GetPrompt gets a prompt by its original name on the server; failures are as for CallTool.
func (m *Manager) GetPrompt(ctx context.Context, server string, params *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	var p mcp.GetPromptParams
	if params != nil {
		p = *params
	}
	spec := callSpec{op: func() string { return fmt.Sprintf("getting prompt %q", p.Name) }, meta: p.Meta,
		method: "prompts/get", target: p.Name}
	return relayParams(ctx, m, server, spec, p, (*mcp.ClientSession).GetPrompt)
}

// Complete asks the server for completions of a prompt or resource template
// argument, by their original names; failures are as for CallTool.
func (m *Manager) Complete(ctx context.Context, server string, params *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	var p mcp.CompleteParams
	if params != nil {
		p = *params
	}
	spec := callSpec{op: func() string { return "completing" }, meta: p.Meta, method: "completion/complete"}
	return relayParams(ctx, m, server, spec, p, (*mcp.ClientSession).Complete)
}

// SetLoggingLevel sets the level of the log messages the server sends to the
// [Peer] in ctx (or to the calls without one); failures are as for CallTool.
//
// The Manager remembers the level per peer and server and applies it to every
// session it opens for the peer later. A per-peer session that is not open
// yet is not opened for it. On a new-protocol session the level travels with
// each of the peer's calls instead (logging/setLevel no longer exists). On a
// legacy shared session (stdio) the level is the server's, for every caller:
// the last one set wins.
func (m *Manager) SetLoggingLevel(ctx context.Context, server string, params *mcp.SetLoggingLevelParams) error {
	var p mcp.SetLoggingLevelParams
	if params != nil {
		p = *params
	}
	s, err := m.get(server)
	if err != nil {
		return err
	}
	peer, _ := PeerFrom(ctx)
	s.setLevel(peer, p.Level)
	op := func() string { return fmt.Sprintf("setting log level %q", p.Level) }
	if peer != nil && s.usesPeerSessions() {
		sess, err := s.serving()
		if err != nil {
			return err
		}
		ps := s.openPeer(sess, peer)
		if ps == nil {
			return nil // applied when the peer's session opens
		}
		defer s.releasePeer(sess, ps)
		if usesNewProtocol(ps.cs) {
			return nil
		}
		if err := ps.cs.SetLoggingLevel(ctx, &p); err != nil {
			return &relayError{msg: fmt.Sprintf("%s on server %q: %s", op(), server, sess.redact.Error(err)), err: err}
		}
		return nil
	}
	_, err = relayParams(ctx, m, server, callSpec{op: op, meta: p.Meta, shared: true, method: "logging/setLevel"}, p,
		noResult(func(cs *mcp.ClientSession, ctx context.Context, q *mcp.SetLoggingLevelParams) error {
			if usesNewProtocol(cs) {
				return nil
			}
			return cs.SetLoggingLevel(ctx, q)
		}))
	return err
}

// Subscribe asks the server for notifications/resources/updated about a
// resource, reported to Options.OnResourceUpdated, on behalf of the [Peer] in
// ctx (or of the calls without one); failures are as for CallTool.
//
// Subscriptions are made on the primary session, which outlives idle
// per-peer sessions, and renewed after every reconnect. The server is asked
// once per resource: the first subscriber subscribes, later ones are only
// counted, and the last one's [Manager.Unsubscribe] ends it. Subscribers
// whose Done is closed stop counting; the subscription of a resource nobody
// live wants is not renewed on reconnect.
func (m *Manager) Subscribe(ctx context.Context, server string, params *mcp.SubscribeParams) error {
	var p mcp.SubscribeParams
	if params != nil {
		p = *params
	}
	s, err := m.get(server)
	if err != nil {
		return err
	}
	peer, _ := PeerFrom(ctx)
	// Counted first, so that a reconnect meanwhile renews it as well.
	if !s.subscribe(p.URI, peer) {
		return nil
	}
	_, err = relayParams(ctx, m, server, callSpec{op: func() string { return fmt.Sprintf("subscribing to %q", p.URI) }, meta: p.Meta, shared: true,
		method: "resources/subscribe", uri: p.URI}, p,
		noResult((*mcp.ClientSession).Subscribe))
	if err != nil {
		s.unsubscribe(p.URI, peer)
	}
	return err
}

// Unsubscribe ends the [Manager.Subscribe] of the [Peer] in ctx; failures are
// as for CallTool. The server is told when the last subscriber leaves; the
// subscription is forgotten even when the server cannot be told.
func (m *Manager) Unsubscribe(ctx context.Context, server string, params *mcp.UnsubscribeParams) error {
	var p mcp.UnsubscribeParams
	if params != nil {
		p = *params
	}
	s, err := m.get(server)
	if err != nil {
		return err
	}
	peer, _ := PeerFrom(ctx)
	if !s.unsubscribe(p.URI, peer) {
		return nil
	}
	_, err = relayParams(ctx, m, server, callSpec{op: func() string { return fmt.Sprintf("unsubscribing from %q", p.URI) }, meta: p.Meta, shared: true,
		method: "resources/unsubscribe", uri: p.URI}, p,
		noResult((*mcp.ClientSession).Unsubscribe))
	return err
}
