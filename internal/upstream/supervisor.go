package upstream

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/url"
	"os"
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
	cmdConnect    cmdKind = iota // an operator's connect: start, forgetting a crash loop
	cmdDemand                    // a call's: start a DISCONNECTED server that starts on demand
	cmdDisconnect                // drain, then stop
	cmdRediscover                // list everything again now
	cmdNeedsAuth                 // a call found the server needs authorizing
)

// command is a lifecycle request to the supervisor goroutine. reply is
// buffered so that the supervisor never blocks on a caller who gave up.
type command struct {
	kind  cmdKind
	reply chan reply

	sess   *session // cmdNeedsAuth: the session the call failed on
	reason string   // cmdNeedsAuth: why, redacted
}

// reply answers a command.
type reply struct {
	err     error
	pending int       // cmdDisconnect: calls in flight when it began
	disc    Discovery // cmdRediscover
}

// supervisor owns one upstream server. Its run goroutine (loop.go) is the
// only one that changes State, starts or stops sessions and calls
// OnTransition, OnDiscovery and OnHealth, which is what keeps those
// callbacks ordered. Connect attempts, re-discoveries, health probes and
// session watchers run in goroutines that run waits for.
type supervisor struct {
	name    string
	cfg     *config.Server
	opts    *Options
	lc      lifecycle
	log     *slog.Logger
	stderr  lineRing
	logf    *logFile  // nil without Options.LogDirectory
	replies *replyLog // what the message filters replaced or dropped

	ctx    context.Context // cancelled to stop the supervisor (Remove, Close)
	cancel context.CancelFunc
	cmds   chan command
	exited chan struct{} // closed when run returns

	seq *atomic.Uint64 // the Manager's progress token counter

	// hold keeps the callbacks of a staged supervisor back until it is
	// committed (see Manager.Stage); nil for every other supervisor.
	hold *holdback

	stats    atomic.Pointer[callStats] // the current session's recent calls
	ratePoke chan struct{}             // capacity 1: the DEGRADED condition changed

	mu     sync.RWMutex // guards the fields below; read on every call
	status Status
	live   *session // the serving session; non-nil only while CONNECTED or DEGRADED
	cur    *session // the session that runs, serving or draining; for InFlight
	disc   Discovery
	// expired: the last session ended because the server forgot it (an HTTP
	// server that restarted answers 404 to the old session id). The next
	// call reconnects instead of failing.
	expired bool
	// idleStopped: stopped for being idle, so the next call starts it.
	idleStopped bool
	// installSince: the running connect is a package runner's first start
	// (see firstStartFactor), begun then; zero otherwise. For Status.Detail.
	installSince time.Time
	// askNewest: with protocol_version auto, the server refused the
	// 2025-11-25 handshake, so sessions ask for the newest revision.
	askNewest atomic.Bool

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
	// statelessLevel is the log level last set on a classic session for a
	// stateless caller (see relayOn), so it is sent only when it changes.
	statelessLevel atomic.Value // string
	// ctx is the session's lifetime: cancelling it aborts relayed calls, a
	// running re-discovery or health probe, and (sse) the event stream.
	ctx    context.Context
	cancel context.CancelFunc
	redact *redactor

	// stdio only; written during the connect attempt, before the session is shared.
	proc       *process
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

	calls      atomic.Int64  // relayed calls in flight
	callDone   chan struct{} // capacity 1: a call ended (for draining)
	lastActive atomic.Int64  // UnixNano of the last call's start or end (for idleness)
	lastOK     atomic.Int64  // UnixNano of the last successful call (passive health)

	router *router // relays what the server sends during calls on this session

	peerMu    sync.Mutex
	peers     map[string]*peerSession // per-peer sessions opened under this one (sse/http), by peer ID
	peersShut bool                    // torn down: no more per-peer sessions
	// noClassic: the server (new revision) opened no classic per-peer
	// session; classic clients' calls use this session (ownSession).
	noClassic atomic.Bool
	peerWG    sync.WaitGroup // one per per-peer session goroutine
	// users are the per-caller sessions of a per_user server (peruser.go),
	// by credential; guarded by peerMu, closed with the per-peer ones.
	users map[string]*userSession
}

func newSession(parent context.Context) *session {
	sess := &session{
		ended:    make(chan struct{}),
		settled:  make(chan struct{}),
		changed:  make(chan struct{}, 1),
		callDone: make(chan struct{}, 1),
		peers:    make(map[string]*peerSession),
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
	lc := resolveLifecycle(cfg, opts)
	log = log.With("server", cfg.Name)
	s := &supervisor{
		name:     cfg.Name,
		cfg:      cfg,
		opts:     opts,
		lc:       lc,
		seq:      seq,
		levels:   make(map[string]peerLevel),
		subs:     make(map[string]map[string]Peer),
		log:      log,
		cmds:     make(chan command),
		exited:   make(chan struct{}),
		ratePoke: make(chan struct{}, 1),
		status: Status{
			Name:      cfg.Name,
			Transport: cfg.Transport,
			State:     StateDisconnected,
			Since:     time.Now(),
			OnDemand:  lc.onDemand,
			Health:    Health{Method: lc.health.method},
		},
		disc:    Discovery{Server: cfg.Name},
		replies: newReplyLog(log),
	}
	if cfg.Transport == config.TransportStdio && config.NameRE.MatchString(cfg.Name) {
		s.logf = newLogFile(opts.LogDirectory, cfg.Name, log)
	}
	s.stats.Store(newCallStats(lc.degradedWindow))
	s.ctx, s.cancel = context.WithCancel(parent)
	return s
}

// attempt is a connect in progress, in its own goroutine so that the
// supervisor stays free to abort it.
type attempt struct {
	cancel  context.CancelFunc
	done    chan attemptResult // capacity 1
	timeout time.Duration      // the startup timeout it was given
}

type attemptResult struct {
	sess      *session // set on success
	disc      Discovery
	err       error  // the failure, unredacted: only for errors.Is
	reason    string // the failure, redacted: for Status and logs
	permanent bool   // a configuration problem: retrying cannot help
}

type rediscovery struct {
	done chan rediscoveryResult // capacity 1
}

type rediscoveryResult struct {
	disc Discovery
	err  error
}

// setState moves to state to, recording reason as LastError; mutate, if
// set, edits the Status (and other fields guarded by s.mu) in the same
// critical section. It returns the change to report, if any. s.mu must be
// held; only the run goroutine calls it.
func (s *supervisor) setState(to State, reason string, mutate func(*Status)) (Transition, bool) {
	now := time.Now()
	from := s.status.State
	s.status.State = to
	s.status.LastError = reason
	if from != to {
		s.status.Since = now
		s.expired = false
	}
	if to != StateDisconnected {
		s.idleStopped = false
	}
	if mutate != nil {
		mutate(&s.status)
	}
	s.status.OnDemand = to == StateDisconnected && (s.lc.onDemand || s.idleStopped)
	if from == to {
		return Transition{}, false
	}
	return Transition{Server: s.name, From: from, To: to, Error: reason, At: now, Callable: s.status.Callable()}, true
}

// report logs and reports a state change made by setState, outside s.mu.
func (s *supervisor) report(t Transition, changed bool) {
	if !changed {
		return
	}
	s.log.Debug("upstream state", "from", t.From, "to", t.To, "reason", t.Error)
	if s.hold.transition(t) {
		return
	}
	if cb := s.opts.OnTransition; cb != nil {
		cb(t)
	}
}

// transition is setState and report in one. Only the run goroutine calls it.
func (s *supervisor) transition(to State, reason string, mutate func(*Status)) {
	s.mu.Lock()
	t, changed := s.setState(to, reason, mutate)
	s.mu.Unlock()
	s.report(t, changed)
}

// update edits the Status without a change of state.
func (s *supervisor) update(mutate func(*Status)) {
	s.mu.Lock()
	mutate(&s.status)
	s.mu.Unlock()
}

// publish makes d the server's current discovery and reports it.
func (s *supervisor) publish(d Discovery) {
	s.mu.Lock()
	s.disc = d
	s.mu.Unlock()
	if s.hold.discovery(d) {
		return
	}
	if cb := s.opts.OnDiscovery; cb != nil {
		cb(d)
	}
}

// startAttempt starts a connect bounded by timeout.
func (s *supervisor) startAttempt(timeout time.Duration) *attempt {
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	a := &attempt{cancel: cancel, done: make(chan attemptResult, 1), timeout: timeout}
	go func() {
		defer cancel()
		a.done <- s.connect(ctx, timeout)
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
		ctx, cancel := context.WithTimeout(sess.ctx, s.lc.startup)
		defer cancel()
		d, err := s.discover(ctx, sess, kinds, prev)
		d.Announced = ListChanges{Tools: kinds&kindTools != 0, Resources: kinds&kindResources != 0, Prompts: kinds&kindPrompts != 0}
		r.done <- rediscoveryResult{disc: d, err: err}
	}()
	return r
}

// connect starts the server, initializes the session and discovers it. On
// failure it has already cleaned up everything it started.
func (s *supervisor) connect(ctx context.Context, timeout time.Duration) attemptResult {
	sess := newSession(s.ctx)
	fail := func(what string, err error) attemptResult {
		s.teardown(sess)
		if s.lc.runner == "npx" {
			// Its processes are gone: an install they left half written
			// would break every later start.
			if d := repairNpxInstall(s.ctx, s.cfg.Args, childEnv(s.opts.Getenv, s.opts.BaseEnv, s.cfg.EnvPassthrough, s.cfg.Env), s.cfg.Cwd, s.log); d != "" {
				s.logf.marker("removed the incomplete npx install %s left by this failed start", d)
			}
		}
		reason := what + ": " + sess.redact.Error(err)
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			reason = fmt.Sprintf("connect timed out after %s (%s)", timeout, reason)
			err = errors.Join(err, ctx.Err())
		case ctx.Err() != nil:
			reason = "connect canceled"
			err = errors.Join(err, ctx.Err())
		case sess.proc != nil && sess.proc.exitState() != "":
			// It died on its own; how says more than the broken pipe.
			reason += "; process exited: " + sess.proc.exitState()
		}
		if sess.lastStderr != "" {
			reason += "; stderr: " + sess.lastStderr
		}
		return attemptResult{err: err, reason: reason, permanent: sess.startErr != nil && ctx.Err() == nil}
	}

	sess.router = newRouter(s.name, s.log, nil, s.seq, s.opts.OnResourceUpdated)
	if err := s.checkDestinations(ctx); err != nil {
		s.teardown(sess)
		return attemptResult{err: err, reason: err.Error(), permanent: true}
	}
	t, err := s.transport(sess)
	if err != nil {
		var nf *notFoundError
		if errors.As(err, &nf) {
			s.teardown(sess)
			s.logf.marker("not started: %s", nf)
			return attemptResult{err: err, reason: nf.Error(), permanent: true}
		}
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
	cs, err := client.Connect(ctx, t, s.sessionOptions())
	if err != nil {
		stop()
		if sess.startErr != nil {
			return fail("starting process", err)
		}
		s.noteHandshakeRefused(err)
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
		inner := &procTransport{cmd: cmd, shutdown: s.lc.shutdown, limit: s.lc.maxResult, replies: s.replies, started: func(p *process, err error) {
			pw.Close() // the child has its copy
			if err != nil {
				pr.Close()
				sess.startErr = err
				s.logf.marker("start failed: %v", err)
				return
			}
			sess.proc = p
			sess.pid = p.pid
			sess.stderrPipe = pr
			sess.stderrDone = make(chan struct{})
			s.logf.marker("process started (pid %d)", p.pid)
			go func() {
				defer close(sess.stderrDone)
				sess.lastStderr = readLines(pr, &s.stderr, s.logf, s.log)
			}()
			s.update(func(st *Status) {
				st.PID = p.pid
				st.StartedAt = time.Now()
			})
		}}
		return &lifetimeTransport{inner: inner, ctx: sess.ctx, wrap: sess.router.wrap}, nil

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

// teardown stops everything a session started: the MCP session (stdio:
// closing it stops the process, see [process.stop]), whatever is left of
// the process group, and the stderr reader. It is safe on a session that
// never got further than building its transport.
func (s *supervisor) teardown(sess *session) {
	sess.cancel()
	s.shutPeers(sess)
	if sess.cs != nil {
		if err := sess.cs.Close(); err != nil {
			s.log.Warn("upstream session close", "error", sess.redact.Error(err))
		}
		<-sess.ended
	} else if sess.proc != nil {
		// Started, but the session never came up: stop the process here.
		if err := sess.proc.Close(); err != nil {
			s.log.Warn("upstream process stop", "error", err)
		}
	}
	if sess.pid > 0 {
		if err := killProcessGroup(sess.pid); err != nil {
			s.log.Warn("upstream process group kill", "pid", sess.pid, "error", err)
		}
		exit := sess.proc.exitState()
		if exit != "" {
			s.logf.marker("process %d exited: %s", sess.pid, exit)
		} else {
			s.logf.marker("process %d could not be reaped", sess.pid)
		}
		s.update(func(st *Status) {
			if st.PID == sess.pid {
				st.PID = 0
				st.StartedAt = time.Time{}
			}
			if exit != "" {
				st.LastExit = exit
			}
		})
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
	if sess.proc != nil {
		reason := "process exited"
		if exit := sess.proc.exitState(); exit != "" {
			reason += ": " + exit
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
func (s *supervisor) request(ctx context.Context, kind cmdKind) reply {
	ch := make(chan reply, 1)
	select {
	case s.cmds <- command{kind: kind, reply: ch}:
	case <-s.exited:
		return reply{err: errGone}
	case <-ctx.Done():
		return reply{err: ctx.Err()}
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return reply{err: ctx.Err()}
	}
}

var errGone = errors.New("upstream removed")

// requireAuth tells the supervisor that a call on sess found the server
// needs authorizing, and waits until the NEEDS_AUTH state is recorded, so
// that the call reports it.
func (s *supervisor) requireAuth(ctx context.Context, sess *session, reason string) {
	ch := make(chan reply, 1)
	select {
	case s.cmds <- command{kind: cmdNeedsAuth, reply: ch, sess: sess, reason: reason}:
	case <-s.exited:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// serving returns the serving session, or why there is none.
func (s *supervisor) serving() (*session, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.live == nil || !s.status.State.serving() {
		return nil, s.unavailableLocked(nil)
	}
	return s.live, nil
}

// acquire is serving for a relayed call: the call is counted in flight
// until release. Counting under s.mu is what lets Disconnect and the idle
// timer see every call that got the session.
func (s *supervisor) acquire() (*session, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.live == nil || !s.status.State.serving() {
		return nil, s.unavailableLocked(nil)
	}
	s.live.calls.Add(1)
	s.live.lastActive.Store(time.Now().UnixNano())
	return s.live, nil
}

// release ends a call counted by acquire, recording its outcome unless the
// call is tried again.
func (s *supervisor) release(ctx context.Context, sess *session, err error, final bool) {
	now := time.Now().UnixNano()
	sess.lastActive.Store(now)
	if err == nil {
		sess.lastOK.Store(now)
	}
	if stats := s.stats.Load(); final && stats.record(callFailed(ctx, err), s.lc.degradedRate) {
		select {
		case s.ratePoke <- struct{}{}:
		default:
		}
	}
	sess.calls.Add(-1)
	select {
	case sess.callDone <- struct{}{}:
	default:
	}
}

// startable reports whether a call should start the server: it is
// DISCONNECTED with on-demand start, and not draining.
func (s *supervisor) startable() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.status.OnDemand && !s.status.Draining
}

// unavailableLocked is why the server cannot serve now. s.mu must be held.
func (s *supervisor) unavailableLocked(cause error) *UnavailableError {
	reason := s.status.LastError
	if s.status.Draining {
		reason = "draining: disconnect in progress"
	}
	return &UnavailableError{Server: s.name, State: s.status.State, Reason: reason, cause: cause}
}

func (s *supervisor) unavailable(cause error) *UnavailableError {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.unavailableLocked(cause)
}

func (s *supervisor) snapshot() Status {
	s.mu.RLock()
	st := s.status
	if st.State == StateConnecting && !s.installSince.IsZero() {
		st.Detail = fmt.Sprintf("installing packages, %d s", int(time.Since(s.installSince).Seconds()))
	}
	if s.cur != nil {
		st.InFlight = int(s.cur.calls.Load())
	}
	s.mu.RUnlock()
	st.Health.ErrorRate, st.Health.WindowCalls = s.stats.Load().rate()
	return st
}
