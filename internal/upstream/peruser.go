package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"
)

// Per-user sessions. A server with `credentials: per_user` is called with
// each caller's own credential (Options.UserCredential): every call goes
// on a session of that caller's, opened with the credential, pooled per
// caller under the server's own session and closed after
// user_session_idle_seconds (else Options.UserSessionIdle) without calls. The server's own session, which
// lists its tools and hears its notifications, connects as the caller
// who most recently linked an account (Options.DiscoveryCredential).
//
// What the server sends during a call on a caller's session reaches that
// call's client, attributed as on a shared session (router).

// UserCredential is what a per_user server is sent as one caller: an OAuth
// handler (their linked account) or headers (a personal credential).
type UserCredential struct {
	// Subject is the caller; their sessions are pooled under it.
	Subject string
	OAuth   auth.OAuthHandler
	Headers map[string]string // SECRET
}

// key tells apart the sessions of one caller opened with different
// credentials: a personal credential replaced on another replica is not
// sent again from a session still open here.
func (c UserCredential) key() string {
	if len(c.Headers) == 0 {
		return c.Subject
	}
	h := sha256.New()
	names := make([]string, 0, len(c.Headers))
	for k := range c.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Fprintf(h, "%s\x00%s\x00", k, c.Headers[k])
	}
	return c.Subject + "\x00" + hex.EncodeToString(h.Sum(nil)[:8])
}

// UserAuthRequiredError fails a call to a per_user server when the caller
// has no usable credential of their own: nothing linked, or their grant
// was refused. Reason says why and how to link one; it holds no secret.
// The call did not reach the server.
type UserAuthRequiredError struct {
	Server  string
	Subject string
	Reason  string
}

func (e *UserAuthRequiredError) Error() string {
	return fmt.Sprintf("server %q needs an account of your own (upstream_auth_required): %s", e.Server, e.Reason)
}

// userSession is the session of one caller to a per_user server.
type userSession struct {
	key    string
	cred   UserCredential
	router *router
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{}
	ended  chan struct{}

	cs     *mcp.ClientSession // set before ready on success
	err    error              // set before ready on failure
	redact *redactor

	// Guarded by the primary session's peerMu.
	active   int
	lastUsed time.Time
}

// userError turns a credential's failure into the caller's
// UserAuthRequiredError, keeping any other error as it is.
func (s *supervisor) userError(subject string, err error) error {
	var u *UserAuthRequiredError
	if errors.As(err, &u) {
		return u
	}
	if reason := authReason(err); reason != "" {
		return &UserAuthRequiredError{Server: s.name, Subject: subject, Reason: reason}
	}
	return err
}

// acquireUser returns the session of the caller in ctx under sess,
// opening it with their credential if there is none yet. The caller must
// releaseUser it.
func (s *supervisor) acquireUser(ctx context.Context, sess *session) (*userSession, error) {
	if s.opts.UserCredential == nil {
		return nil, &UserAuthRequiredError{Server: s.name, Reason: "this gateway keeps no per-user credentials"}
	}
	cred, err := s.opts.UserCredential(ctx, s.cfg)
	if err != nil {
		return nil, s.userError(cred.Subject, err)
	}
	key := cred.key()
	sess.peerMu.Lock()
	if sess.peersShut {
		sess.peerMu.Unlock()
		return nil, errSessionEnded
	}
	if sess.users == nil {
		sess.users = map[string]*userSession{}
	}
	us := sess.users[key]
	if us != nil && closed(us.ended) {
		delete(sess.users, key)
		us = nil
	}
	if us == nil {
		us = &userSession{key: key, cred: cred, ready: make(chan struct{}), ended: make(chan struct{}),
			router: newRouter(s.name, s.log, nil, s.seq, s.opts.OnResourceUpdated)}
		us.ctx, us.cancel = context.WithCancel(sess.ctx)
		sess.users[key] = us
		sess.peerWG.Go(func() { s.runUser(sess, us) })
	}
	us.active++
	sess.peerMu.Unlock()

	select {
	case <-us.ready:
	case <-ctx.Done():
		s.releaseUser(sess, us)
		return nil, ctx.Err()
	}
	if us.err != nil {
		s.releaseUser(sess, us)
		return nil, us.err
	}
	return us, nil
}

func (s *supervisor) releaseUser(sess *session, us *userSession) {
	sess.peerMu.Lock()
	us.active--
	us.lastUsed = time.Now()
	sess.peerMu.Unlock()
}

// dropUser closes us: the next call of its caller opens a new one.
func (s *supervisor) dropUser(sess *session, us *userSession) {
	sess.peerMu.Lock()
	if sess.users[us.key] == us {
		delete(sess.users, us.key)
	}
	sess.peerMu.Unlock()
	us.cancel()
}

// dropUserSessions closes the sessions of subject ("" = every caller):
// their credential changed.
func (s *supervisor) dropUserSessions(subject string) {
	s.mu.RLock()
	sess := s.cur
	s.mu.RUnlock()
	if sess == nil {
		return
	}
	sess.peerMu.Lock()
	var gone []*userSession
	for k, us := range sess.users {
		if subject == "" || us.cred.Subject == subject {
			delete(sess.users, k)
			gone = append(gone, us)
		}
	}
	sess.peerMu.Unlock()
	for _, us := range gone {
		us.cancel()
	}
}

// runUser opens us and closes it when it has been idle for
// user_session_idle_seconds (else Options.UserSessionIdle), when the server ends it, or when the primary
// session ends.
func (s *supervisor) runUser(sess *session, us *userSession) {
	defer us.cancel()
	forget := func() {
		sess.peerMu.Lock()
		if sess.users[us.key] == us {
			delete(sess.users, us.key)
		}
		sess.peerMu.Unlock()
	}
	cs, err := s.connectUser(us)
	if err != nil {
		s.log.Debug("upstream per-user session failed", "subject", us.cred.Subject, "error", err)
		us.err = err
		forget()
		close(us.ended)
		close(us.ready)
		return
	}
	us.cs = cs
	var waitErr error
	go func() {
		waitErr = cs.Wait()
		close(us.ended)
	}()
	close(us.ready)
	s.log.Debug("upstream per-user session opened", "subject", us.cred.Subject)

	limit := s.opts.UserSessionIdle
	if d := s.cfg.UserSessionIdle.Duration(); d > 0 {
		limit = d
	}
	idle := time.NewTimer(limit)
	defer idle.Stop()
	reason := ""
	for reason == "" {
		select {
		case <-us.ctx.Done():
			reason = "closed"
		case <-us.ended:
			reason = "ended by server"
		case <-idle.C:
			sess.peerMu.Lock()
			switch left := limit - time.Since(us.lastUsed); {
			case us.active > 0:
				idle.Reset(limit)
			case left > 0:
				idle.Reset(left)
			default:
				reason = "idle"
				if sess.users[us.key] == us {
					delete(sess.users, us.key) // under the lock acquireUser takes
				}
			}
			sess.peerMu.Unlock()
		}
	}
	forget()
	us.cancel()
	if err := cs.Close(); err != nil {
		s.log.Debug("upstream per-user session close", "error", us.redact.Error(err))
	}
	<-us.ended
	s.log.Debug("upstream per-user session closed", "subject", us.cred.Subject, "reason", reason, "error", us.redact.Error(waitErr))
}

// connectUser connects a session with the caller's credential.
func (s *supervisor) connectUser(us *userSession) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(us.ctx, s.lc.startup)
	defer cancel()
	t, red, err := s.httpTransportAs(us.ctx, us.router, &us.cred)
	if err != nil {
		return nil, err
	}
	us.redact = red
	client := newClient(s.opts.Implementation, s.log, us.router, sharedCapabilities(), mcp.ClientOptions{})
	cs, err := client.Connect(ctx, t, s.sessionOptions())
	if err != nil {
		if e := s.userError(us.cred.Subject, err); e != err {
			return nil, e
		}
		return nil, fmt.Errorf("opening a session of your own on server %q: %s", s.name, red.Error(err))
	}
	return cs, nil
}

// discoveryCredential is the credential of a per_user server's own
// session; when there is none, a handler that fails the connect with the
// reason, which the supervisor shows as NEEDS_AUTH.
func (s *supervisor) discoveryCredential(ctx context.Context) UserCredential {
	if s.opts.DiscoveryCredential == nil {
		return UserCredential{OAuth: noCredential{"this gateway keeps no per-user credentials"}}
	}
	c, err := s.opts.DiscoveryCredential(ctx, s.cfg)
	if err != nil {
		reason := err.Error()
		var u *UserAuthRequiredError
		if errors.As(err, &u) {
			reason = u.Reason
		}
		return UserCredential{OAuth: noCredential{reason}}
	}
	return c
}

// noCredential is the OAuth handler of a per_user server's own session
// while no caller linked an account: every request fails with reason.
type noCredential struct{ reason string }

func (n noCredential) TokenSource(context.Context) (oauth2.TokenSource, error) {
	return nil, needsAuth{n.reason}
}

func (n noCredential) Authorize(context.Context, *http.Request, *http.Response) error {
	return needsAuth{n.reason}
}

// needsAuth is an [AuthRequired] error.
type needsAuth struct{ reason string }

func (e needsAuth) Error() string      { return "authorization required: " + e.reason }
func (e needsAuth) AuthReason() string { return e.reason }

// DropUserSessions closes the per-user sessions of subject ("" = every
// caller) on server, as when their credential changed; the next call
// opens one with the new credential. An unknown server is not an error.
func (m *Manager) DropUserSessions(server, subject string) {
	s, err := m.get(server)
	if err != nil {
		return
	}
	s.dropUserSessions(subject)
}

// isUserAuthRequired reports whether err is a caller's missing credential.
func isUserAuthRequired(err error) bool {
	var u *UserAuthRequiredError
	return errors.As(err, &u)
}
