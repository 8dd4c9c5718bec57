package upstream

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// changeKind says which lists a list_changed notification invalidated.
type changeKind uint32

const (
	kindTools changeKind = 1 << iota
	kindResources
	kindPrompts

	kindAll = kindTools | kindResources | kindPrompts
)

// rediscoverDelay debounces a burst of list_changed notifications (a server
// registering tools one by one) into one re-discovery.
const rediscoverDelay = 50 * time.Millisecond

// stderrDrainTimeout bounds the wait for a dead child's stderr to reach EOF.
// Anything still holding the pipe after the process group was killed (a
// daemon that left the group) gets its pipe closed under it.
const stderrDrainTimeout = time.Second

type cmdKind int

const (
	cmdConnect cmdKind = iota
	cmdDisconnect
)

// command is a lifecycle request to the supervisor goroutine. reply is
// buffered so that the supervisor never blocks on a caller who gave up.
type command struct {
	kind  cmdKind
	reply chan error
}

// supervisor owns one upstream server. Its run goroutine is the only one that
// changes State, starts or stops sessions and calls OnTransition and
// OnDiscovery, which is what keeps those callbacks ordered. Connect attempts,
// re-discoveries and session watchers run in goroutines that run waits for.
type supervisor struct {
	name   string
	cfg    *config.Server
	opts   *Options
	log    *slog.Logger
	stderr lineRing

	ctx    context.Context // cancelled to stop the supervisor (Remove, Close)
	cancel context.CancelFunc
	cmds   chan command
	exited chan struct{} // closed when run returns

	seq *atomic.Uint64 // the Manager's progress token counter

	mu     sync.RWMutex // guards the fields below; read on every call
	status Status
	live   *session // the serving session; non-nil only while CONNECTED or DEGRADED
	disc   Discovery
	// expired: the last session ended because the server forgot it (an HTTP
	// server that restarted answers 404 to the old session id). The next
	// call reconnects instead of failing.
	expired bool

	relayMu sync.Mutex                 // guards the fields below
	levels  map[string]peerLevel       // log level per peer ID ("" for calls without a peer)
	subs    map[string]map[string]Peer // subscribers of resource URIs, by peer ID ("" with a nil Peer: calls without one)
}

// peerLevel is the log level a peer asked a server for.
type peerLevel struct {
	peer  Peer // nil for calls without a peer
	level mcp.LoggingLevel
}

// session is one connection to the server, from the connect attempt that
// makes it to the teardown that ends it.
type session struct {
	cs *mcp.ClientSession
	// ctx is the session's lifetime: cancelling it aborts relayed calls and a
	// running re-discovery, and (sse) the event stream.
	ctx    context.Context
	cancel context.CancelFunc
	redact *redactor

	// stdio only; written during the connect attempt, before the session is shared.
	cmd        *exec.Cmd
	pid        int
	startErr   error
	stderrPipe *os.File
	stderrDone chan struct{} // closed when the stderr reader returns
	lastStderr string        // read after stderrDone

	ended   chan struct{} // closed when cs.Wait returns
	waitErr error         // cs.Wait's result; read after ended
	settled chan struct{} // closed once the end of the session is recorded in Status

	pending atomic.Uint32 // changeKinds announced by list_changed and not yet re-discovered
	changed chan struct{} // capacity 1: wakes the supervisor

	router *router // relays what the server sends during calls on this session

	peerMu    sync.Mutex
	peers     map[string]*peerSession // per-peer sessions opened under this one (sse/http), by peer ID
	peersShut bool                    // torn down: no more per-peer sessions
	peerWG    sync.WaitGroup          // one per per-peer session goroutine
}

func newSession(parent context.Context) *session {
	sess := &session{
		ended:   make(chan struct{}),
		settled: make(chan struct{}),
		changed: make(chan struct{}, 1),
		peers:   make(map[string]*peerSession),
	}
	sess.ctx, sess.cancel = context.WithCancel(parent)
	return sess
}

// notify records a list_changed notification. It runs inside the SDK's
// notification handler, so it only flags the change; the supervisor does the
// listing.
func (sess *session) notify(k changeKind) {
	sess.pending.Or(uint32(k))
	select {
	case sess.changed <- struct{}{}:
	default:
	}
}

func newSupervisor(parent context.Context, cfg *config.Server, opts *Options, log *slog.Logger, seq *atomic.Uint64) *supervisor {
	s := &supervisor{
		name:   cfg.Name,
		cfg:    cfg,
		opts:   opts,
		seq:    seq,
		levels: make(map[string]peerLevel),
		subs:   make(map[string]map[string]Peer),
		log:    log.With("server", cfg.Name),
		cmds:   make(chan command),
		exited: make(chan struct{}),
		status: Status{
			Name:      cfg.Name,
			Transport: cfg.Transport,
			State:     StateDisconnected,
			Since:     time.Now(),
		},
		disc: Discovery{Server: cfg.Name},
	}
	s.ctx, s.cancel = context.WithCancel(parent)
	return s
}

// attempt is a connect in progress, in its own goroutine so that the
// supervisor stays free to abort it.
type attempt struct {
	cancel context.CancelFunc
	done   chan attemptResult // capacity 1
}

type attemptResult struct {
	sess   *session // set on success
	disc   Discovery
	err    error  // the failure, unredacted: only for errors.Is
	reason string // the failure, redacted: for Status and logs
}

type rediscovery struct {
	done chan rediscoveryResult // capacity 1
}

type rediscoveryResult struct {
	disc Discovery
	err  error
}

// run is the supervisor goroutine. It returns after s.ctx is cancelled and
// everything it started has stopped.
func (s *supervisor) run() {
	defer close(s.exited)
	var (
		att        *attempt
		waiters    []chan error // Connect callers waiting for att
		sess       *session     // adopted, serving session
		redisc     *rediscovery
		again      bool // a change arrived while redisc was running
		debounce   = time.NewTimer(rediscoverDelay)
		debouncing bool
	)
	debounce.Stop()
	defer debounce.Stop()

	// abort stops a connect attempt and answers its waiters with why.
	abort := func(why string) {
		att.cancel()
		res := <-att.done
		att = nil
		if res.sess != nil {
			s.teardown(res.sess)
		}
		for _, w := range waiters {
			w <- &UnavailableError{Server: s.name, State: StateDisconnected, Reason: why, cause: context.Canceled}
		}
		waiters = nil
	}
	// stopSession ends the serving session: deliberately (to DISCONNECTED,
	// reason "") or because it died (to ERROR with the reason). expired
	// records that the server forgot the session, before any caller waiting
	// for settled looks.
	stopSession := func(to State, reason func() string, expired bool) {
		debounce.Stop()
		debouncing, again = false, false
		sess.cancel()
		if redisc != nil {
			<-redisc.done
			redisc = nil
		}
		s.teardown(sess)
		s.transition(to, reason(), func(st *Status) {
			s.live = nil
			s.expired = expired
		})
		close(sess.settled)
		sess = nil
	}

	for {
		var (
			attDone   <-chan attemptResult
			ended     <-chan struct{}
			changed   <-chan struct{}
			rediscC   <-chan rediscoveryResult
			debounceC <-chan time.Time
		)
		if att != nil {
			attDone = att.done
		}
		if sess != nil {
			ended, changed = sess.ended, sess.changed
		}
		if redisc != nil {
			rediscC = redisc.done
		}
		if debouncing {
			debounceC = debounce.C
		}

		select {
		case <-s.ctx.Done():
			if att != nil {
				abort("upstream stopped")
			}
			if sess != nil {
				stopSession(StateDisconnected, func() string { return "" }, false)
			}
			s.transition(StateDisconnected, "", nil)
			return

		case c := <-s.cmds:
			switch c.kind {
			case cmdConnect:
				switch {
				case sess != nil:
					c.reply <- nil
				case att != nil:
					waiters = append(waiters, c.reply)
				default:
					waiters = append(waiters, c.reply)
					att = s.startAttempt()
					s.transition(StateConnecting, "", nil)
				}
			case cmdDisconnect:
				if att != nil {
					abort("connect aborted by disconnect")
				}
				if sess != nil {
					stopSession(StateDisconnected, func() string { return "" }, false)
				}
				s.transition(StateDisconnected, "", nil)
				c.reply <- nil
			}

		case res := <-attDone:
			att = nil
			if res.sess == nil {
				s.log.Warn("upstream connect failed", "reason", res.reason)
				s.transition(StateError, res.reason, nil)
				for _, w := range waiters {
					w <- &UnavailableError{Server: s.name, State: StateError, Reason: res.reason, cause: res.err}
				}
				waiters = nil
				continue
			}
			sess = res.sess
			s.publish(res.disc)
			init := sess.cs.InitializeResult()
			s.transition(StateConnected, "", func(st *Status) {
				s.live = sess
				st.ConnectedAt = time.Now()
				st.PID = sess.pid
				st.ServerInfo, st.Capabilities, st.ProtocolVersion, st.Instructions = nil, nil, "", ""
				if init != nil {
					st.ServerInfo = init.ServerInfo
					st.Capabilities = init.Capabilities
					st.ProtocolVersion = init.ProtocolVersion
					st.Instructions = init.Instructions
				}
			})
			s.log.Info("upstream connected",
				"tools", len(res.disc.Tools), "resources", len(res.disc.Resources),
				"templates", len(res.disc.Templates), "prompts", len(res.disc.Prompts))
			for _, w := range waiters {
				w <- nil
			}
			waiters = nil

		case <-ended:
			dead := sess
			stopSession(StateError, func() string {
				reason := s.endReason(dead)
				s.log.Warn("upstream session ended", "reason", reason)
				return reason
			}, errors.Is(dead.waitErr, mcp.ErrSessionMissing))

		case <-changed:
			// A fixed window from the first notification: a server that
			// keeps announcing changes cannot postpone re-discovery forever.
			if !debouncing {
				debounce.Reset(rediscoverDelay)
				debouncing = true
			}

		case <-debounceC:
			debouncing = false
			if redisc != nil {
				again = true
				continue
			}
			redisc = s.startRediscovery(sess)

		case res := <-rediscC:
			redisc = nil
			if res.err != nil {
				s.log.Warn("upstream re-discovery failed", "error", sess.redact.Error(res.err))
			} else {
				s.publish(res.disc)
			}
			if again {
				again = false
				redisc = s.startRediscovery(sess)
			}
		}
	}
}

// transition moves to state to, recording reason as LastError, and reports
// the change. mutate, if set, edits the Status (and other fields guarded by
// s.mu) in the same critical section. Only the run goroutine calls it.
func (s *supervisor) transition(to State, reason string, mutate func(*Status)) {
	now := time.Now()
	s.mu.Lock()
	from := s.status.State
	s.status.State = to
	s.status.LastError = reason
	if from != to {
		s.status.Since = now
		s.expired = false
	}
	if mutate != nil {
		mutate(&s.status)
	}
	s.mu.Unlock()
	if from == to {
		return
	}
	s.log.Debug("upstream state", "from", from, "to", to, "reason", reason)
	if cb := s.opts.OnTransition; cb != nil {
		cb(Transition{Server: s.name, From: from, To: to, Error: reason, At: now})
	}
}

// publish makes d the server's current discovery and reports it.
func (s *supervisor) publish(d Discovery) {
	s.mu.Lock()
	s.disc = d
	s.mu.Unlock()
	if cb := s.opts.OnDiscovery; cb != nil {
		cb(d)
	}
}

func (s *supervisor) startAttempt() *attempt {
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.ConnectTimeout)
	a := &attempt{cancel: cancel, done: make(chan attemptResult, 1)}
	go func() {
		defer cancel()
		a.done <- s.connect(ctx)
	}()
	return a
}

// startRediscovery re-lists what the pending notifications invalidated. It
// returns nil when nothing is pending (an earlier run already covered it).
func (s *supervisor) startRediscovery(sess *session) *rediscovery {
	kinds := changeKind(sess.pending.Swap(0))
	if kinds == 0 {
		return nil
	}
	s.mu.RLock()
	prev := s.disc
	s.mu.RUnlock()
	r := &rediscovery{done: make(chan rediscoveryResult, 1)}
	go func() {
		ctx, cancel := context.WithTimeout(sess.ctx, s.opts.ConnectTimeout)
		defer cancel()
		d, err := s.discover(ctx, sess, kinds, prev)
		r.done <- rediscoveryResult{disc: d, err: err}
	}()
	return r
}

// connect starts the server, initializes the session and discovers it. On
// failure it has already cleaned up everything it started.
func (s *supervisor) connect(ctx context.Context) attemptResult {
	sess := newSession(s.ctx)
	fail := func(what string, err error) attemptResult {
		s.teardown(sess)
		reason := what + ": " + sess.redact.Error(err)
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			reason = fmt.Sprintf("connect timed out after %s (%s)", s.opts.ConnectTimeout, reason)
			err = errors.Join(err, ctx.Err())
		case ctx.Err() != nil:
			reason = "connect canceled"
			err = errors.Join(err, ctx.Err())
		case sess.cmd != nil && sess.cmd.ProcessState != nil:
			// It died on its own; how says more than the broken pipe.
			reason += "; process exited: " + sess.cmd.ProcessState.String()
		}
		if sess.lastStderr != "" {
			reason += "; stderr: " + sess.lastStderr
		}
		return attemptResult{err: err, reason: reason}
	}

	sess.router = newRouter(s.name, s.log, nil, s.seq, s.opts.OnResourceUpdated)
	t, err := s.transport(sess)
	if err != nil {
		return fail("preparing transport", err)
	}
	s.log.Info("upstream connecting", "transport", s.cfg.Transport, "target", s.target())
	// Until the attempt succeeds, its deadline also bounds the session
	// lifetime (and with it the sse event stream opened by Connect).
	stop := context.AfterFunc(ctx, sess.cancel)
	// The session is shared by every caller (stdio) or by the calls without
	// a peer (sse/http): it declares all that the gateway can relay, and the
	// router checks each request against the capabilities of its peer.
	client := newClient(s.opts.Implementation, s.log, sess.router, sharedCapabilities(), mcp.ClientOptions{
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { sess.notify(kindTools) },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { sess.notify(kindResources) },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { sess.notify(kindPrompts) },
	})
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		stop()
		if sess.startErr != nil {
			return fail("starting process", err)
		}
		return fail("initializing", err)
	}
	sess.cs = cs
	go func() {
		sess.waitErr = cs.Wait()
		close(sess.ended)
	}()
	d, err := s.discover(ctx, sess, kindAll, Discovery{Server: s.name})
	if err != nil {
		stop()
		return fail("discovering", err)
	}
	s.resubscribe(ctx, sess)
	if !stop() { // the deadline hit just now and is cancelling the session
		return fail("discovering", ctx.Err())
	}
	return attemptResult{sess: sess, disc: d}
}

// target names what is being connected to, safe to log: the command (not
// its arguments, which may carry tokens) or the URL without credentials.
func (s *supervisor) target() string {
	if s.cfg.Transport == config.TransportStdio {
		return s.cfg.Command
	}
	u, err := url.Parse(s.cfg.URL)
	if err != nil {
		return "(invalid url)"
	}
	return safeURL(u)
}

// transport builds the SDK transport of one connect attempt.
func (s *supervisor) transport(sess *session) (mcp.Transport, error) {
	switch s.cfg.Transport {
	case config.TransportStdio:
		cmd, err := s.command()
		if err != nil {
			return nil, err
		}
		// Our own pipe rather than an io.Writer: exec.Cmd.Wait would wait for
		// a copying goroutine that grandchildren holding stderr keep alive.
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("creating stderr pipe: %w", err)
		}
		cmd.Stderr = pw
		sess.cmd = cmd
		inner := &mcp.CommandTransport{Command: cmd, TerminateDuration: s.opts.ShutdownTimeout}
		return &lifetimeTransport{inner: inner, ctx: sess.ctx, wrap: sess.router.wrap, started: func(err error) {
			pw.Close() // the child has its copy
			if err != nil {
				pr.Close()
				sess.startErr = err
				return
			}
			sess.pid = cmd.Process.Pid
			sess.stderrPipe = pr
			sess.stderrDone = make(chan struct{})
			go func() {
				defer close(sess.stderrDone)
				sess.lastStderr = readLines(pr, &s.stderr, s.log)
			}()
			s.mu.Lock()
			s.status.PID = sess.pid
			s.mu.Unlock()
		}}, nil

	case config.TransportHTTP, config.TransportSSE:
		t, red, err := s.httpTransport(sess.ctx, sess.router)
		if err != nil {
			return nil, err
		}
		sess.redact = red
		return t, nil

	default:
		return nil, fmt.Errorf("unknown transport %q", s.cfg.Transport)
	}
}

// discover lists the kinds of things the server declares, following
// pagination, starting from prev for the kinds not listed. Only a tools
// failure is an error: a server whose tools work is useful even if its
// resources or prompts are broken.
func (s *supervisor) discover(ctx context.Context, sess *session, kinds changeKind, prev Discovery) (Discovery, error) {
	caps := &mcp.ServerCapabilities{}
	if init := sess.cs.InitializeResult(); init != nil && init.Capabilities != nil {
		caps = init.Capabilities
	}
	d := prev
	d.Server = s.name
	if kinds&kindTools != 0 {
		d.Tools = nil
		if caps.Tools != nil {
			tools, err := collect(sess.cs.Tools(ctx, nil))
			if err != nil {
				return prev, fmt.Errorf("listing tools: %w", err)
			}
			d.Tools = tools
		}
	}
	warn := func(what string, err error) {
		s.log.Warn("upstream discovery incomplete", "list", what, "error", sess.redact.Error(err))
	}
	if kinds&kindResources != 0 {
		d.Resources, d.Templates = nil, nil
		if caps.Resources != nil {
			if rs, err := collect(sess.cs.Resources(ctx, nil)); err != nil {
				warn("resources", err)
				d.Resources = prev.Resources
			} else {
				d.Resources = rs
			}
			if ts, err := collect(sess.cs.ResourceTemplates(ctx, nil)); err != nil {
				warn("resource templates", err)
				d.Templates = prev.Templates
			} else {
				d.Templates = ts
			}
		}
	}
	if kinds&kindPrompts != 0 {
		d.Prompts = nil
		if caps.Prompts != nil {
			if ps, err := collect(sess.cs.Prompts(ctx, nil)); err != nil {
				warn("prompts", err)
				d.Prompts = prev.Prompts
			} else {
				d.Prompts = ps
			}
		}
	}
	return d, nil
}

func collect[T any](seq iter.Seq2[T, error]) ([]T, error) {
	var out []T
	for v, err := range seq {
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// teardown stops everything a session started: the MCP session (stdio: the
// SDK closes stdin, then sends SIGTERM, then SIGKILL), whatever is left of
// the process group, and the stderr reader. It is safe on a session that
// never got further than building its transport.
func (s *supervisor) teardown(sess *session) {
	sess.cancel()
	s.shutPeers(sess)
	if sess.cs != nil {
		if err := sess.cs.Close(); err != nil {
			s.log.Debug("upstream session close", "error", sess.redact.Error(err))
		}
		<-sess.ended
	}
	if sess.pid > 0 {
		if err := killProcessGroup(sess.pid); err != nil {
			s.log.Warn("upstream process group kill", "pid", sess.pid, "error", err)
		}
		s.mu.Lock()
		if s.status.PID == sess.pid {
			s.status.PID = 0
		}
		s.mu.Unlock()
	}
	if sess.stderrDone != nil {
		t := time.NewTimer(stderrDrainTimeout)
		select {
		case <-sess.stderrDone:
		case <-t.C:
			sess.stderrPipe.Close()
			<-sess.stderrDone
		}
		t.Stop()
		sess.stderrPipe.Close()
	}
}

// endReason says why a serving session ended on its own. It reads state the
// teardown has settled (the process state, the last stderr line).
func (s *supervisor) endReason(sess *session) string {
	if sess.cmd != nil {
		reason := "process exited"
		if ps := sess.cmd.ProcessState; ps != nil {
			reason += ": " + ps.String()
		} else if sess.waitErr != nil {
			reason += ": " + sess.redact.Error(sess.waitErr)
		}
		if sess.lastStderr != "" {
			reason += "; stderr: " + sess.lastStderr
		}
		return reason
	}
	if sess.waitErr != nil {
		return "connection lost: " + sess.redact.Error(sess.waitErr)
	}
	return "connection closed by server"
}

// request sends a lifecycle command and waits for its answer. errGone means
// the supervisor stopped (the server was removed) before answering.
func (s *supervisor) request(ctx context.Context, kind cmdKind) error {
	reply := make(chan error, 1)
	select {
	case s.cmds <- command{kind: kind, reply: reply}:
	case <-s.exited:
		return errGone
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errGone = errors.New("upstream removed")

// serving returns the serving session, or why there is none.
func (s *supervisor) serving() (*session, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.live == nil || !s.status.State.serving() {
		return nil, &UnavailableError{Server: s.name, State: s.status.State, Reason: s.status.LastError}
	}
	return s.live, nil
}

func (s *supervisor) snapshot() Status {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.status
}
