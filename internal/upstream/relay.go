package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callSpec describes a call to relay.
type callSpec struct {
	op     func() string // what the call does, for errors: `calling tool "x"`
	method string        // the MCP method, for its span
	target string        // the tool or prompt named, for its span
	uri    string        // the resource read, for its span
	meta   mcp.Meta      // the caller's _meta
	shared bool          // always on the primary session, even with a peer
}

// relay runs one call on the server: on the peer's own session (sse/http
// with a peer in ctx) or on the primary one. The call is aborted if its
// session is torn down meanwhile, and a call that failed because the primary
// session ended reports the server's new state. The call is counted in
// flight on the primary session (for draining and idleness) and its outcome
// in the server's error rate.
//
// A server that is DISCONNECTED and starts on demand is started first.
//
// A session the server no longer knows (an HTTP server that restarted
// answers 404) is replaced, and the call retried once: the server rejected
// the request without running it. The primary session is replaced through
// the supervisor, with a re-discovery, so the server's status shows it.
func relay[R any](ctx context.Context, m *Manager, server string, spec callSpec, call func(context.Context, *mcp.ClientSession, mcp.Meta) (R, error)) (R, error) {
	var zero R
	s, err := m.get(server)
	if err != nil {
		return zero, err
	}
	peer, _ := PeerFrom(ctx)
	info := &callInfo{peer: peer, ctx: ctx}
	ctx = context.WithValue(ctx, callKey{}, info)
	st := relayState{perPeer: peer != nil && !spec.shared && s.usesPeerSessions()}
	heal := func() error {
		st.healed = true
		s.log.Info("upstream session expired; reconnecting")
		return m.Connect(ctx, server)
	}
	for {
		sess, err := s.acquire()
		if err != nil {
			switch {
			case !st.healed && s.isExpired():
				if err := heal(); err != nil {
					return zero, err
				}
				continue
			case !st.started && s.startable():
				st.started = true
				s.log.Info("upstream starting on demand")
				if err := m.start(ctx, s, cmdDemand); err != nil {
					return zero, err
				}
				continue
			}
			return zero, err
		}
		res, err, next := relayOn(ctx, s, sess, server, spec, info, &st, call)
		s.release(ctx, sess, err, next == stepDone)
		switch next {
		case stepRetry:
			continue
		case stepHeal:
			if err := heal(); err != nil {
				return zero, err
			}
			continue
		}
		return res, err
	}
}

// relayState is what a relayed call has tried so far.
type relayState struct {
	perPeer bool // on the peer's own session
	healed  bool // reconnected an expired session
	redone  bool // replaced an expired per-peer session
	started bool // started the server on demand
}

// relayStep says what relay does after one try.
type relayStep int

const (
	stepDone  relayStep = iota
	stepRetry           // try again
	stepHeal            // reconnect the expired primary session, then try again
)

// relayOn tries the call once on sess.
func relayOn[R any](ctx context.Context, s *supervisor, sess *session, server string, spec callSpec, info *callInfo, st *relayState,
	call func(context.Context, *mcp.ClientSession, mcp.Meta) (R, error)) (R, error, relayStep) {
	var zero R
	peer := info.peer
	sent := false // whether the request may have reached the upstream
	unavailable := func(cause error) error {
		u := s.unavailable(cause)
		u.Sent = sent
		return u
	}
	failed := func(err error) error {
		if tl, ok := tooLarge(err); ok {
			// Not the upstream's protocol error, though it arrived as one:
			// the reply the filter put in place of one over the limit.
			err = tl
		}
		return &relayError{msg: fmt.Sprintf("%s on server %q: %s", spec.op(), server, sess.redact.Error(err)), err: err, sent: sent}
	}

	r, cs, lifetime := sess.router, sess.cs, sess.ctx
	var ps *peerSession
	var us *userSession // per_user: the caller's own session (peruser.go)
	if s.cfg.PerUser() && !spec.shared {
		var err error
		if us, err = s.acquireUser(ctx, sess); err != nil {
			return zero, err, stepDone
		}
		r, cs, lifetime = us.router, us.cs, us.ctx
	} else if st.perPeer && s.ownSession(sess, peer) {
		var err error
		switch ps, err = s.acquirePeer(ctx, sess, peer); {
		case errors.Is(err, errNoClassic):
			// On the shared session, as every later call of a classic client.
		case err != nil:
			if reason := authReason(err); reason != "" {
				// Opening the caller's own session needed a token the
				// gateway could not get: as for a call, below.
				s.requireAuth(ctx, sess, sess.redact.String(reason))
				return zero, unavailable(err), stepDone
			}
			if ctx.Err() == nil && sess.ctx.Err() != nil && s.lost(ctx, sess, err) {
				return zero, unavailable(err), stepDone
			}
			if errors.Is(err, ctx.Err()) {
				return zero, failed(err), stepDone
			}
			return zero, err, stepDone // says what failed, redacted
		default:
			r, cs, lifetime = ps.router, ps.cs, ps.ctx
		}
	}
	if lvl, ok := spec.meta[mcp.MetaKeyLogLevel]; ok && peer != nil && stateless(peer) && !usesNewProtocol(cs) {
		// A stateless caller names its log level per request; a classic
		// session has one level, set by logging/setLevel (on a shared
		// stdio session the last caller's wins, as for classic callers).
		if l, _ := lvl.(string); l != "" && (ps != nil || sess.statelessLevel.Load() != l) {
			if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: mcp.LoggingLevel(l)}); err != nil {
				s.log.Debug("setting the upstream log level for a stateless caller", "error", sess.redact.Error(err))
			} else if ps == nil {
				sess.statelessLevel.Store(l)
			}
		}
	}
	meta, end := r.begin(info, spec.meta, s.level(peer), usesNewProtocol(cs))
	sent = true
	var res R
	var err error
	if s.opts.Tracer != nil {
		callCtx, sp := s.startSpan(ctx, server, spec)
		res, err = runOn(callCtx, lifetime, cs, injectMeta(callCtx, meta), call)
		endSpan(sp, err)
	} else {
		res, err = runOn(ctx, lifetime, cs, meta, call)
	}
	end()
	if us != nil {
		s.releaseUser(sess, us)
	}
	if ps != nil {
		s.releasePeer(sess, ps)
	} else if spec.method == "logging/setLevel" {
		sess.statelessLevel.Store("") // a classic caller set the session's level
	}
	if err == nil {
		return res, nil, stepDone
	}
	if ctx.Err() != nil {
		return zero, failed(err), stepDone
	}
	if us != nil {
		if e := s.userError(us.cred.Subject, err); e != err {
			// The caller's own grant was refused: theirs to fix, not
			// the server's state.
			s.dropUser(sess, us)
			return zero, e, stepDone
		}
		if errors.Is(err, mcp.ErrSessionMissing) && !st.redone {
			st.redone = true
			s.dropUser(sess, us)
			return zero, err, stepRetry
		}
		return zero, &relayError{msg: fmt.Sprintf("%s on server %q: %s", spec.op(), server, us.redact.Error(err)), err: err, sent: sent}, stepDone
	}
	if reason := authReason(err); reason != "" {
		// The grant is missing or refused: the server needs an operator,
		// and every call would fail the same way until then.
		s.requireAuth(ctx, sess, sess.redact.String(reason))
		sent = false // refused before the server ran it
		return zero, unavailable(err), stepDone
	}
	expired := errors.Is(err, mcp.ErrSessionMissing)
	if ps != nil {
		if expired && !st.redone {
			// The server forgot the peer's session. If it restarted, it
			// forgot the primary one too: a ping finds out, and ends
			// the primary session if so, before the retry.
			st.redone = true
			s.dropPeer(sess, ps)
			if perr := sess.cs.Ping(ctx, nil); errors.Is(perr, mcp.ErrSessionMissing) {
				s.lost(ctx, sess, perr)
			}
			return zero, err, stepRetry
		}
		if sess.ctx.Err() != nil && s.lost(ctx, sess, err) {
			if !st.healed && sessionForgotten(sess, err) {
				return zero, err, stepHeal
			}
			return zero, unavailable(err), stepDone
		}
		return zero, failed(err), stepDone
	}
	if s.lost(ctx, sess, err) {
		if !st.healed && sessionForgotten(sess, err) {
			return zero, err, stepHeal
		}
		return zero, unavailable(err), stepDone
	}
	return zero, failed(err), stepDone
}

// sessionForgotten reports whether a lost session ended because the server
// no longer knew it (an HTTP server that restarted answers 404), as the
// call's error or the session's own end (its event stream may hear the 404
// first) says. Such a server did not run the request: it is safe to
// reconnect and retry. Call it only after lost returned true, when
// sess.ended is closed.
func sessionForgotten(sess *session, err error) bool {
	return errors.Is(err, mcp.ErrSessionMissing) || errors.Is(sess.waitErr, mcp.ErrSessionMissing)
}

// runOn runs call on cs, aborting it when lifetime ends.
func runOn[R any](ctx, lifetime context.Context, cs *mcp.ClientSession, meta mcp.Meta, call func(context.Context, *mcp.ClientSession, mcp.Meta) (R, error)) (R, error) {
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(lifetime, cancel)
	defer stop()
	return call(callCtx, cs, meta)
}

// lost reports whether err means the session is gone, waiting until the
// supervisor has recorded that in Status (so the caller reports the right
// state), or until ctx ends.
func (s *supervisor) lost(ctx context.Context, sess *session, err error) bool {
	if sess.ctx.Err() == nil {
		if !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, mcp.ErrSessionMissing) &&
			!errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return false
		}
		// The connection broke under the call; the SDK winds the session
		// down (stdio: stops the process) before the supervisor hears of it.
		t := time.NewTimer(s.lc.shutdown + killWait)
		defer t.Stop()
		select {
		case <-sess.ended:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	select {
	case <-sess.settled:
		return true
	case <-ctx.Done():
		return false
	}
}

// isExpired reports whether the last session ended because the server forgot it.
func (s *supervisor) isExpired() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.expired && !s.status.State.serving()
}

func peerID(p Peer) string {
	if p == nil {
		return ""
	}
	return p.ID()
}

// level is the log level p asked this server for, or "".
func (s *supervisor) level(p Peer) mcp.LoggingLevel {
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	return s.levels[peerID(p)].level
}

// setLevel records p's log level, and forgets those of peers that are gone.
func (s *supervisor) setLevel(p Peer, level mcp.LoggingLevel) {
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	for id, l := range s.levels {
		if l.peer != nil && closed(l.peer.Done()) {
			delete(s.levels, id)
		}
	}
	s.levels[peerID(p)] = peerLevel{peer: p, level: level}
}

// forgetLevel forgets the log level of a peer that is gone.
func (s *supervisor) forgetLevel(p Peer) {
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	delete(s.levels, p.ID())
}

// resubscribe renews the resource subscriptions on a new session, and
// forgets those whose subscribers are all gone.
func (s *supervisor) resubscribe(ctx context.Context, sess *session) {
	s.relayMu.Lock()
	var uris []string
	for uri, peers := range s.subs {
		if prune(peers); len(peers) == 0 {
			delete(s.subs, uri)
			continue
		}
		uris = append(uris, uri)
	}
	s.relayMu.Unlock()
	for _, uri := range uris {
		if err := sess.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			s.log.Warn("upstream resubscribe failed", "uri", uri, "error", sess.redact.Error(err))
		}
	}
}

// subscribe adds p to the subscribers of uri, and reports whether it is the
// first (live) one: the one to subscribe upstream.
func (s *supervisor) subscribe(uri string, p Peer) (first bool) {
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	peers := s.subs[uri]
	if peers == nil {
		peers = make(map[string]Peer)
		s.subs[uri] = peers
	}
	prune(peers)
	first = len(peers) == 0
	peers[peerID(p)] = p
	return first
}

// unsubscribe removes p from the subscribers of uri, and reports whether it
// was the last (live) one: the one to unsubscribe upstream.
func (s *supervisor) unsubscribe(uri string, p Peer) (last bool) {
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	peers := s.subs[uri]
	if _, ok := peers[peerID(p)]; !ok {
		return false
	}
	delete(peers, peerID(p))
	if prune(peers); len(peers) > 0 {
		return false
	}
	delete(s.subs, uri)
	return true
}

// prune drops the subscribers that are gone.
func prune(peers map[string]Peer) {
	for id, p := range peers {
		if p != nil && closed(p.Done()) {
			delete(peers, id)
		}
	}
}

// relayError is an upstream call's failure with its text redacted; the
// original stays reachable for errors.Is and errors.As (e.g. *jsonrpc.Error).
type relayError struct {
	msg  string
	err  error
	sent bool // the request may have reached the upstream
}

func (e *relayError) Error() string { return e.msg }
func (e *relayError) Unwrap() error { return e.err }
