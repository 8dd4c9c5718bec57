package upstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// errSessionEnded is returned for a per-peer session requested while the
// primary session is being torn down.
var errSessionEnded = errors.New("upstream session ended")

// errNoClassic is returned for a per-peer session that a server of the new
// revision did not open as a classic one (it refused the handshake, or
// answered it with the new revision): the call goes on the shared session
// instead.
var errNoClassic = errors.New("the server offers no classic session")

// errPeerGone is returned for a per-peer session requested for a peer whose
// Done is closed.
var errPeerGone = errors.New("the client's session has ended")

// peerSession is a session to an sse/http server dedicated to one peer, so
// that what the server sends on it reaches that peer and nobody else. It is
// owned by the primary session it was opened under: it never outlives it.
type peerSession struct {
	peer Peer
	id   string
	// pool is the key of a pooled session (see [PooledPeer]), "" for a
	// session of one peer. A pooled session serves one call at a time (so
	// that what the server sends on it belongs to that call), outlives the
	// call, and is closed when idle.
	pool   string
	router *router
	ctx    context.Context // its lifetime; cancelled to close it
	cancel context.CancelFunc
	ready  chan struct{} // closed when the connect finished
	ended  chan struct{} // closed when the session is over (or never started)

	cs  *mcp.ClientSession // set before ready on success
	err error              // set before ready on failure

	// Guarded by the primary session's peerMu.
	active   int       // calls holding it
	lastUsed time.Time // when the last call released it
}

// ownSession reports whether a call of peer under the shared session sess
// gets a session of its own, on a server that uses per-peer sessions. A
// server may send requests of its own only on a classic session: there,
// its requests reach the right client only on that client's own session.
// A new-revision server embeds its requests in the call's result, and
// anything else it sends during a call on the call's own response stream,
// which the call's context attributes exactly; the shared session, which
// knows the server's tools (their x-mcp-header parameters become
// Mcp-Param-* headers), then serves everyone. So a client gets its own
// session on such a server only where that session would be classic: a
// classic client of an auto server that speaks both revisions (see
// [supervisor.peerSessionOptions]), until the server refuses one.
func (s *supervisor) ownSession(sess *session, peer Peer) bool {
	if sess.noClassic.Load() {
		return false
	}
	if !usesNewProtocol(sess.cs) {
		return true
	}
	if stateless(peer) {
		return false
	}
	o := s.peerSessionOptions()
	return o != nil && o.ProtocolVersion < newProtocol
}

// answered reports whether err, a failed handshake, is the server's answer
// (an error response, or a result the SDK cannot use) rather than a failure
// to reach it or a transient one.
func answered(err error) bool {
	var e *jsonrpc.Error
	if errors.As(err, &e) && e.Code != codeRejected {
		return true
	}
	return !Transient(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// usesPeerSessions reports whether calls that carry a peer get a session of
// their own. A stdio server has one session (its stdin/stdout), which every
// caller shares.
func (s *supervisor) usesPeerSessions() bool {
	return s.cfg.Transport == config.TransportHTTP || s.cfg.Transport == config.TransportSSE
}

// acquirePeer returns the session of peer p under the primary session sess,
// opening it if there is none yet; concurrent first calls share one opening.
// The caller must releasePeer it.
func (s *supervisor) acquirePeer(ctx context.Context, sess *session, p Peer) (*peerSession, error) {
	if closed(p.Done()) {
		return nil, errPeerGone // no session for a client that cannot get its answer
	}
	id, pool := p.ID(), poolKey(p)
	sess.peerMu.Lock()
	if sess.peersShut {
		sess.peerMu.Unlock()
		return nil, errSessionEnded
	}
	var ps *peerSession
	if pool != "" {
		ps = s.idlePooledLocked(sess, pool)
	} else {
		ps = sess.peers[id]
	}
	if ps != nil && closed(ps.ended) {
		s.forgetLocked(sess, ps)
		ps = nil
	}
	if ps == nil {
		fixed := p
		if pool != "" {
			// Its calls come one at a time, each from another peer: the
			// router attributes by the call in flight, as a shared one.
			fixed = nil
			id = fmt.Sprintf("pool-%d", s.seq.Add(1))
		}
		ps = &peerSession{
			peer:   p,
			id:     id,
			pool:   pool,
			router: newRouter(s.name, s.log, fixed, s.seq, s.opts.OnResourceUpdated),
			ready:  make(chan struct{}),
			ended:  make(chan struct{}),
		}
		ps.ctx, ps.cancel = context.WithCancel(sess.ctx)
		sess.peers[id] = ps
		sess.peerWG.Go(func() { s.runPeer(sess, ps) })
	}
	ps.active++
	sess.peerMu.Unlock()

	select {
	case <-ps.ready:
	case <-ctx.Done():
		s.releasePeer(sess, ps)
		return nil, ctx.Err()
	}
	if ps.err != nil {
		s.releasePeer(sess, ps)
		return nil, ps.err
	}
	return ps, nil
}

// idlePooledLocked returns an open pooled session of key pool that no call
// holds, or nil. Called with sess.peerMu held.
func (s *supervisor) idlePooledLocked(sess *session, pool string) *peerSession {
	for _, ps := range sess.peers {
		if ps.pool == pool && ps.active == 0 && closed(ps.ready) && ps.err == nil && !closed(ps.ended) {
			return ps
		}
	}
	return nil
}

func (s *supervisor) releasePeer(sess *session, ps *peerSession) {
	sess.peerMu.Lock()
	ps.active--
	ps.lastUsed = time.Now()
	sess.peerMu.Unlock()
}

// openPeer returns p's open session under sess, or nil: for settings that
// are worth sending to a session but not worth opening one for. The caller
// must releasePeer it.
func (s *supervisor) openPeer(sess *session, p Peer) *peerSession {
	sess.peerMu.Lock()
	defer sess.peerMu.Unlock()
	ps := sess.peers[p.ID()]
	if ps == nil || !closed(ps.ready) || ps.err != nil || closed(ps.ended) {
		return nil
	}
	ps.active++
	return ps
}

// dropPeer closes ps (the server forgot it); the next call opens a new one.
func (s *supervisor) dropPeer(sess *session, ps *peerSession) {
	sess.peerMu.Lock()
	s.forgetLocked(sess, ps)
	sess.peerMu.Unlock()
	ps.cancel()
}

func (s *supervisor) forgetLocked(sess *session, ps *peerSession) {
	if sess.peers[ps.id] == ps {
		delete(sess.peers, ps.id)
	}
}

// shutPeers closes every per-peer session of sess and waits for them; no
// new one can be opened afterwards. sess.ctx must be cancelled already.
func (s *supervisor) shutPeers(sess *session) {
	sess.peerMu.Lock()
	sess.peersShut = true
	sess.peerMu.Unlock()
	sess.peerWG.Wait()
}

// runPeer opens ps and closes it when its peer goes away, when it has been
// idle for Options.PeerSessionIdle, when the server ends it, or when the
// primary session ends.
func (s *supervisor) runPeer(sess *session, ps *peerSession) {
	defer ps.cancel()
	cs, err := s.connectPeer(sess, ps)
	if err != nil {
		s.log.Debug("upstream per-client session failed", "error", err)
		ps.err = err
		sess.peerMu.Lock()
		s.forgetLocked(sess, ps)
		sess.peerMu.Unlock()
		close(ps.ended)
		close(ps.ready)
		return
	}
	ps.cs = cs
	var waitErr error
	go func() {
		waitErr = cs.Wait()
		close(ps.ended)
	}()
	close(ps.ready)
	s.log.Debug("upstream per-client session opened")

	idle := time.NewTimer(s.opts.PeerSessionIdle)
	defer idle.Stop()
	peerDone := ps.peer.Done()
	if ps.pool != "" {
		peerDone = nil // it outlives the call that opened it
	}
	reason := ""
	for reason == "" {
		select {
		case <-peerDone:
			reason = "client gone"
		case <-ps.ctx.Done():
			reason = "closed"
		case <-ps.ended:
			reason = "ended by server"
		case <-idle.C:
			sess.peerMu.Lock()
			switch left := s.opts.PeerSessionIdle - time.Since(ps.lastUsed); {
			case ps.active > 0:
				idle.Reset(s.opts.PeerSessionIdle)
			case left > 0:
				idle.Reset(left)
			default:
				reason = "idle"
			}
			if reason != "" {
				s.forgetLocked(sess, ps) // under the lock that acquirePeer takes
			}
			sess.peerMu.Unlock()
		}
	}
	sess.peerMu.Lock()
	s.forgetLocked(sess, ps)
	sess.peerMu.Unlock()
	if reason == "client gone" {
		s.forgetLevel(ps.peer)
	}
	ps.cancel()
	if err := cs.Close(); err != nil {
		s.log.Debug("upstream per-client session close", "error", sess.redact.Error(err))
	}
	<-ps.ended
	s.log.Debug("upstream per-client session closed", "reason", reason, "error", sess.redact.Error(waitErr))
}

// connectPeer connects a session for ps with the primary session's
// transport settings and the peer's capabilities.
func (s *supervisor) connectPeer(sess *session, ps *peerSession) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(ps.ctx, s.lc.startup)
	defer cancel()
	t, _, err := s.httpTransport(ps.ctx, ps.router)
	if err != nil {
		return nil, err
	}
	client := newClient(s.opts.Implementation, s.log, ps.router, peerCapabilities(ps.peer), mcp.ClientOptions{})
	cs, err := client.Connect(ctx, t, s.peerSessionOptions())
	// Under a shared session of the new revision, a per-peer session is
	// opened only to be a classic one (ownSession). A server that refuses
	// the handshake, or answers it with the new revision, has none to
	// offer: from now on its clients' calls use the shared session.
	noClassic := func(why string) error {
		if !sess.noClassic.Swap(true) {
			s.log.Info("upstream offers no classic session to a client; its clients' calls use the shared session", "why", why)
		}
		return fmt.Errorf("%w: %s", errNoClassic, why)
	}
	if err != nil {
		msg := fmt.Sprintf("opening a session for the client on server %q: %s", s.name, sess.redact.Error(err))
		if usesNewProtocol(sess.cs) && ctx.Err() == nil && answered(err) {
			return nil, noClassic(msg)
		}
		if authReason(err) != "" {
			// Kept reachable: the relay puts the server in NEEDS_AUTH.
			return nil, &relayError{msg: msg, err: err}
		}
		return nil, errors.New(msg)
	}
	if usesNewProtocol(cs) && usesNewProtocol(sess.cs) {
		if err := cs.Close(); err != nil {
			s.log.Debug("upstream per-client session close", "error", sess.redact.Error(err))
		}
		return nil, noClassic("it answered the classic handshake with " + cs.InitializeResult().ProtocolVersion)
	}
	if level := s.level(ps.peer); level != "" && !usesNewProtocol(cs) {
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: level}); err != nil {
			s.log.Debug("upstream per-client log level not set", "error", sess.redact.Error(err))
		}
	}
	return cs, nil
}

// httpTransport builds an sse/http transport whose streams live as long as
// lifetime and relay through r, and the redactor of its settings.
func (s *supervisor) httpTransport(lifetime context.Context, r *router) (mcp.Transport, *redactor, error) {
	if s.cfg.PerUser() {
		// The server's own session (the tool list) goes as a caller who
		// linked an account (peruser.go).
		cred := s.discoveryCredential(lifetime)
		return s.httpTransportAs(lifetime, r, &cred)
	}
	return s.httpTransportAs(lifetime, r, nil)
}

// httpTransportAs is httpTransport sending cred, when not nil, instead of
// the server's own OAuth handler, and its headers besides the configured
// ones.
func (s *supervisor) httpTransportAs(lifetime context.Context, r *router, cred *UserCredential) (mcp.Transport, *redactor, error) {
	u, err := url.Parse(s.cfg.URL)
	if err != nil || u.Host == "" {
		return nil, nil, errors.New("invalid url") // url.Parse's message would repeat the URL, credentials included
	}
	headers := s.cfg.ResolvedHeaders()
	if cred != nil {
		maps.Copy(headers, cred.Headers)
	}
	red := newRedactor(u, s.cfg.URL, headers)
	client := *httpClient(s.opts.HTTPClient, u, headers)
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	// Closest to the wire, each message is bounded (bound.go); so the SDK's
	// own bound, which would end the session, is off.
	legacy := s.cfg.Transport == config.TransportSSE
	bounded := &boundTransport{base: base, limit: s.lc.maxResult, legacy: legacy, log: s.replies}
	client.Transport = &eventTransport{base: bounded, r: r, maxEvent: s.lc.maxResult + maxEventOverhead}
	if s.opts.Tracer != nil {
		client.Transport = &traceTransport{base: client.Transport}
	}
	if s.opts.Identity != nil && !legacy {
		if assert := s.opts.Identity(s.cfg); assert != nil && s.cfg.Identity != nil {
			client.Transport = &identityTransport{base: client.Transport, host: u.Host,
				header: s.cfg.Identity.IdentityHeader(), assert: assert}
		}
	}
	var oauth auth.OAuthHandler
	switch {
	case cred != nil:
		oauth = cred.OAuth
	case s.opts.OAuth != nil:
		oauth = s.opts.OAuth(s.cfg)
	}
	var inner mcp.Transport
	if legacy {
		if oauth != nil {
			// The SSE transport has no OAuth hook: the token goes as a
			// header, and a 401 fails the connect or call.
			client.Transport = &bearerTransport{base: client.Transport, host: u.Host, oauth: oauth}
		}
		inner = &mcp.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: &client, MaxEventSize: -1}
	} else {
		inner = &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: &client, MaxEventSize: -1, OAuthHandler: oauth}
	}
	return &lifetimeTransport{inner: inner, ctx: lifetime}, red, nil
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
