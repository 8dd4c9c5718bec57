package upstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// loop is the state of a supervisor's run goroutine; nothing else touches
// it. What other goroutines read (the Status, the serving session) lives in
// the supervisor behind its mutex.
type loop struct {
	s *supervisor

	att     *attempt
	waiters []chan reply // Connect callers (and calls starting it) waiting for att
	sess    *session     // adopted session: serving, or draining

	redisc    *rediscovery
	again     bool         // a change arrived while redisc was running
	rdWaiting []chan reply // Rediscover callers answered by redisc
	rdNext    []chan reply // Rediscover callers waiting for the next run
	debounce  timer

	// Restart policy.
	want     bool        // the server should run: restart it when it fails
	restart  timer       // the next automatic restart
	history  []time.Time // automatic restarts within the restart window
	failures int         // failed restarts in a row: the backoff exponent
	// connected: the server has connected at least once, so a package
	// runner has what it downloads and no longer needs the first-start
	// allowance.
	connected bool

	health timer
	probe  *probe
	idle   timer

	// Draining (Disconnect).
	draining     bool
	drainTimer   timer
	drainWaiters []drainWaiter
	afterDrain   []chan reply // Connect callers: connect once the drain ends
}

type drainWaiter struct {
	reply   chan reply
	pending int
}

// timer is a time.Timer that is off until set, whose channel is nil while
// off, for use in a select. With Go 1.23 timers, Stop and Reset leave no
// stale tick behind.
type timer struct {
	t     *time.Timer
	armed bool
}

func (t *timer) set(d time.Duration) {
	if t.t == nil {
		t.t = time.NewTimer(d)
	} else {
		t.t.Reset(d)
	}
	t.armed = true
}

func (t *timer) stop() {
	if t.t != nil {
		t.t.Stop()
	}
	t.armed = false
}

// c is the channel to select on: nil while off.
func (t *timer) c() <-chan time.Time {
	if !t.armed {
		return nil
	}
	return t.t.C
}

// fired records that the tick was received.
func (t *timer) fired() { t.armed = false }

// run is the supervisor goroutine. It returns after s.ctx is cancelled and
// everything it started has stopped.
func (s *supervisor) run() {
	defer close(s.exited)
	defer s.logf.Close()
	l := &loop{s: s}
	defer func() {
		for _, t := range []*timer{&l.debounce, &l.restart, &l.health, &l.idle, &l.drainTimer} {
			t.stop()
		}
	}()
	for {
		var (
			attDone <-chan attemptResult
			ended   <-chan struct{}
			changed <-chan struct{}
			rediscC <-chan rediscoveryResult
			probeC  <-chan probeResult
			callsC  <-chan struct{}
		)
		if l.att != nil {
			attDone = l.att.done
		}
		if l.sess != nil {
			ended, changed = l.sess.ended, l.sess.changed
			if l.draining {
				callsC = l.sess.callDone
			}
		}
		if l.redisc != nil {
			rediscC = l.redisc.done
		}
		if l.probe != nil {
			probeC = l.probe.done
		}

		select {
		case <-s.ctx.Done():
			l.shutdown()
			return

		case c := <-s.cmds:
			l.command(c)

		case res := <-attDone:
			l.attemptDone(res)

		case <-ended:
			l.sessionEnded()

		case <-changed:
			// A fixed window from the first notification: a server that
			// keeps announcing changes cannot postpone re-discovery forever.
			if !l.debounce.armed {
				l.debounce.set(rediscoverDelay)
			}

		case <-l.debounce.c():
			l.debounce.fired()
			if l.redisc != nil {
				l.again = true
				continue
			}
			l.rediscover()

		case res := <-rediscC:
			l.rediscovered(res)

		case <-l.restart.c():
			l.restart.fired()
			l.restartNow()

		case <-l.health.c():
			l.health.fired()
			l.healthTick()

		case res := <-probeC:
			l.probed(res)

		case <-s.ratePoke:
			l.checkRate()

		case <-l.idle.c():
			l.idle.fired()
			l.idleTick()

		case <-callsC:
			if l.sess.calls.Load() == 0 {
				l.finishDrain()
			}

		case <-l.drainTimer.c():
			l.drainTimer.fired()
			s.log.Warn("upstream drain timed out; aborting the calls in flight",
				"timeout", s.lc.drain, "calls", l.sess.calls.Load())
			l.finishDrain()
		}
	}
}

func (l *loop) command(c command) {
	s := l.s
	switch c.kind {
	case cmdConnect:
		// An operator's connect: whatever the failures so far, try now.
		l.want = true
		l.history, l.failures = nil, 0
		l.restart.stop()
		switch {
		case l.draining:
			l.afterDrain = append(l.afterDrain, c.reply)
		case l.sess != nil:
			c.reply <- reply{}
		case l.att != nil:
			l.waiters = append(l.waiters, c.reply)
		default:
			l.waiters = append(l.waiters, c.reply)
			l.begin(nil)
		}

	case cmdDemand:
		switch {
		case l.sess != nil && !l.draining:
			c.reply <- reply{}
		case l.att != nil:
			l.waiters = append(l.waiters, c.reply)
		case !l.draining && s.snapshot().OnDemand:
			l.want = true
			l.waiters = append(l.waiters, c.reply)
			l.begin(nil)
		default:
			c.reply <- reply{err: s.unavailable(nil)}
		}

	case cmdDisconnect:
		l.want = false
		l.restart.stop()
		for _, w := range l.afterDrain {
			w <- reply{err: &UnavailableError{Server: s.name, State: StateDisconnected, Reason: "connect canceled by disconnect", cause: context.Canceled}}
		}
		l.afterDrain = nil
		if l.att != nil {
			l.abort("connect aborted by disconnect")
		}
		switch {
		case l.draining:
			l.drainWaiters = append(l.drainWaiters, drainWaiter{c.reply, int(l.sess.calls.Load())})
		case l.sess != nil:
			l.beginDrain(c.reply)
		default:
			s.transition(StateDisconnected, "", func(st *Status) {
				s.idleStopped = false
				st.NextRestartAt = time.Time{}
			})
			c.reply <- reply{}
		}

	case cmdNeedsAuth:
		if l.sess == nil || l.sess != c.sess || l.draining {
			c.reply <- reply{} // that session is gone already
			return
		}
		l.needsAuth(c.reason, l.ended(nil))
		l.settle(l.closeSession())
		c.reply <- reply{}

	case cmdRediscover:
		if l.sess == nil || l.draining {
			c.reply <- reply{err: s.unavailable(nil)}
			return
		}
		l.sess.pending.Or(uint32(kindAll))
		l.rdNext = append(l.rdNext, c.reply)
		if l.redisc != nil {
			l.again = true
			return
		}
		l.debounce.stop() // this run covers what the notifications announced
		l.rediscover()
	}
}

// begin starts a connect attempt; mutate, if set, edits the Status in the
// transition to CONNECTING.
//
// Until it first connects, a package runner (npx, uvx, docker run...) gets
// firstStartFactor times the startup timeout: it may be downloading the
// server, and being killed mid-download is what breaks a package cache.
func (l *loop) begin(mutate func(*Status)) {
	s := l.s
	timeout := s.lc.startup
	installing := s.lc.runner != "" && !l.connected
	if installing {
		timeout *= firstStartFactor
		s.log.Info("upstream first start of a package runner: allowing longer while it may download packages",
			"runner", s.lc.runner, "timeout", timeout)
		s.logf.marker("first start of %s: allowing %s while it may download packages", s.lc.runner, timeout)
	}
	l.att = s.startAttempt(timeout)
	s.transition(StateConnecting, "", func(st *Status) {
		st.NextRestartAt = time.Time{}
		s.installSince = time.Time{}
		if installing {
			s.installSince = time.Now()
		}
		if mutate != nil {
			mutate(st)
		}
	})
}

// abort stops a connect attempt and answers its waiters with why.
func (l *loop) abort(why string) {
	l.att.cancel()
	res := <-l.att.done
	l.att = nil
	l.s.update(func(*Status) { l.s.installSince = time.Time{} })
	if res.sess != nil {
		l.s.teardown(res.sess)
	}
	for _, w := range l.waiters {
		w <- reply{err: &UnavailableError{Server: l.s.name, State: StateDisconnected, Reason: why, cause: context.Canceled}}
	}
	l.waiters = nil
}

func (l *loop) attemptDone(res attemptResult) {
	s := l.s
	timeout := l.att.timeout
	l.att = nil
	waiters := l.waiters
	l.waiters = nil
	s.update(func(*Status) { s.installSince = time.Time{} })
	if res.sess == nil {
		if reason := authReason(res.err); reason != "" {
			l.needsAuth(reason, nil)
			err := s.unavailable(res.err)
			for _, w := range waiters {
				w <- reply{err: err}
			}
			return
		}
		s.log.Warn("upstream connect failed", "reason", res.reason)
		// A start that timed out may have been busy (downloading, building
		// a cache): its restart waits at least as long as it was given,
		// rather than killing the next one mid-way in a tight loop.
		var floor time.Duration
		if errors.Is(res.err, context.DeadlineExceeded) {
			floor = timeout
		}
		l.failAfter(res.reason, !res.permanent, floor, nil)
		err := s.unavailable(res.err)
		for _, w := range waiters {
			w <- reply{err: err}
		}
		return
	}

	sess := res.sess
	l.sess = sess
	l.failures = 0
	l.connected = true
	now := time.Now()
	sess.lastActive.Store(now.UnixNano())
	s.stats.Store(newCallStats(s.lc.degradedWindow))
	s.publish(res.disc)
	init := sess.cs.InitializeResult()
	s.transition(StateConnected, "", func(st *Status) {
		s.live, s.cur = sess, sess
		st.ConnectedAt = now
		if st.StartedAt.IsZero() {
			st.StartedAt = now // sse/http: the session; stdio: set at process start
		}
		st.PID = sess.pid
		st.Health.ConsecutiveFailures = 0
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
	l.health.set(s.lc.health.interval)
	if s.lc.idle > 0 {
		l.idle.set(s.lc.idle)
	}
	for _, w := range waiters {
		w <- reply{}
	}
}

// needsAuth moves to NEEDS_AUTH with reason: the server's OAuth grant is
// missing or refused, and only an operator's authorization (then
// [Manager.Connect]) helps, so nothing is retried meanwhile. mutate, if
// set, edits the Status in the transition.
func (l *loop) needsAuth(reason string, mutate func(*Status)) {
	s := l.s
	s.log.Warn("upstream needs authorization", "reason", reason)
	l.want = false
	l.restart.stop()
	s.transition(StateNeedsAuth, reason, func(st *Status) {
		st.NextRestartAt = time.Time{}
		if mutate != nil {
			mutate(st)
		}
	})
}

// fail moves to ERROR with reason after a failure. With retry, the server
// is restarted after a backoff, unless it is in a crash loop, which then
// becomes the reason. mutate, if set, edits the Status in the transition.
func (l *loop) fail(reason string, retry bool, mutate func(*Status)) {
	l.failAfter(reason, retry, 0, mutate)
}

// failAfter is fail with a restart no sooner than floor from now.
func (l *loop) failAfter(reason string, retry bool, floor time.Duration, mutate func(*Status)) {
	s := l.s
	var next time.Time
	if retry {
		var loopReason string
		next, loopReason = l.planRestart(floor)
		if loopReason != "" {
			s.log.Error("upstream in a crash loop: not restarting it until it is connected again", "reason", loopReason, "last_failure", reason)
			reason = loopReason
		}
	} else {
		l.want = false
	}
	s.transition(StateError, reason, func(st *Status) {
		st.NextRestartAt = next
		if mutate != nil {
			mutate(st)
		}
	})
	if !next.IsZero() {
		l.restart.set(time.Until(next))
	}
}

// planRestart decides when to restart the server after a failure, no
// sooner than floor from now: the zero time if it should not be (it is not
// wanted, or restarts are off), with a reason if that is because it is in a
// crash loop.
func (l *loop) planRestart(floor time.Duration) (time.Time, string) {
	lc := &l.s.lc
	if !l.want || !lc.restart {
		return time.Time{}, ""
	}
	now := time.Now()
	kept := l.history[:0]
	for _, t := range l.history {
		if now.Sub(t) < lc.window {
			kept = append(kept, t)
		}
	}
	l.history = kept
	if len(l.history) >= lc.maxRestarts {
		l.want = false
		return time.Time{}, fmt.Sprintf("crash loop: %d restarts in %ss", len(l.history), strconv.FormatFloat(lc.window.Seconds(), 'f', -1, 64))
	}
	d := max(lc.backoff(l.failures), floor)
	l.failures++
	return now.Add(d), ""
}

func (l *loop) restartNow() {
	if l.att != nil || l.sess != nil || !l.want {
		return
	}
	l.history = append(l.history, time.Now())
	l.s.log.Info("upstream restarting", "restarts_in_window", len(l.history))
	l.begin(func(st *Status) { st.Restarts++ })
}

// closeSession tears the adopted session down and forgets it. The caller
// records the end in the Status, then calls settle.
func (l *loop) closeSession() *session {
	sess := l.sess
	l.sess = nil
	l.debounce.stop()
	l.again = false
	l.health.stop()
	l.idle.stop()
	sess.cancel()
	if l.redisc != nil {
		<-l.redisc.done
		l.redisc = nil
	}
	if l.probe != nil {
		<-l.probe.done
		l.probe = nil
	}
	l.s.teardown(sess)
	return sess
}

// ended is the Status edit of a session's end, with mutate's.
func (l *loop) ended(mutate func(*Status)) func(*Status) {
	s := l.s
	return func(st *Status) {
		s.live, s.cur = nil, nil
		st.Draining = false
		if mutate != nil {
			mutate(st)
		}
	}
}

// settle marks the end of dead as recorded, for the calls that wait to
// report the new state, and answers the Rediscover callers.
func (l *loop) settle(dead *session) {
	close(dead.settled)
	err := l.s.unavailable(nil)
	for _, w := range append(l.rdWaiting, l.rdNext...) {
		w <- reply{err: err}
	}
	l.rdWaiting, l.rdNext = nil, nil
}

// sessionEnded handles a session that ended on its own: a crash, a lost
// connection.
func (l *loop) sessionEnded() {
	if l.draining {
		l.finishDrain()
		return
	}
	s := l.s
	dead := l.closeSession()
	// An SSE session ends when a request of it cannot be sent, so a refused
	// grant can end the session before the call or probe that met it
	// reports: the cause is then in the session's own error, and it is
	// still a grant to renew, not a server to restart.
	if reason := authReason(dead.waitErr); reason != "" {
		l.needsAuth(dead.redact.String(reason), l.ended(nil))
		l.settle(dead)
		return
	}
	reason := s.endReason(dead)
	s.log.Warn("upstream session ended", "reason", reason)
	expired := errors.Is(dead.waitErr, mcp.ErrSessionMissing)
	l.fail(reason, true, l.ended(func(*Status) { s.expired = expired }))
	l.settle(dead)
}

// beginDrain starts a Disconnect: new calls are refused at once (the state
// becomes DISCONNECTED), the calls in flight may finish within the drain
// timeout, then the session stops.
func (l *loop) beginDrain(r chan reply) {
	s := l.s
	var pending int
	s.transition(StateDisconnected, "", func(st *Status) {
		s.live = nil
		s.idleStopped = false
		pending = int(l.sess.calls.Load())
		st.Draining = true
		st.NextRestartAt = time.Time{}
	})
	l.draining = true
	l.health.stop()
	l.idle.stop()
	l.drainWaiters = append(l.drainWaiters, drainWaiter{r, pending})
	if pending == 0 {
		l.finishDrain()
		return
	}
	s.log.Info("upstream draining", "calls", pending)
	l.drainTimer.set(s.lc.drain)
}

// finishDrain stops the drained session and answers the Disconnect callers,
// then starts the server again if a Connect came meanwhile.
func (l *loop) finishDrain() {
	s := l.s
	l.drainTimer.stop()
	dead := l.closeSession()
	l.draining = false
	s.transition(StateDisconnected, "", l.ended(nil))
	l.settle(dead)
	for _, w := range l.drainWaiters {
		w.reply <- reply{pending: w.pending}
	}
	l.drainWaiters = nil
	if len(l.afterDrain) > 0 {
		l.waiters = append(l.waiters, l.afterDrain...)
		l.afterDrain = nil
		l.want = true
		l.begin(nil)
	}
}

func (l *loop) rediscover() {
	l.redisc = l.s.startRediscovery(l.sess)
	if l.redisc != nil {
		l.rdWaiting = append(l.rdWaiting, l.rdNext...)
		l.rdNext = nil
	}
}

func (l *loop) rediscovered(res rediscoveryResult) {
	s := l.s
	l.redisc = nil
	var r reply
	if res.err != nil {
		msg := l.sess.redact.Error(res.err)
		s.log.Warn("upstream re-discovery failed", "error", msg)
		r.err = &relayError{msg: fmt.Sprintf("re-discovering server %q: %s", s.name, msg), err: res.err}
	} else {
		s.publish(res.disc)
		r.disc = res.disc
	}
	for _, w := range l.rdWaiting {
		w <- r
	}
	l.rdWaiting = nil
	if l.again {
		l.again = false
		l.rediscover()
	}
}

func (l *loop) healthTick() {
	s := l.s
	if l.sess == nil || l.draining {
		return
	}
	interval := s.lc.health.interval
	l.health.set(interval)
	if l.probe != nil {
		return // still running: its timeout is the interval
	}
	if last := l.sess.lastOK.Load(); last != 0 && time.Since(time.Unix(0, last)) < interval {
		// A call succeeded within the interval: as good as a probe.
		s.update(func(st *Status) {
			h := &st.Health
			h.LastCheck, h.LastCheckOK, h.LastCheckPassive, h.LastCheckError = time.Unix(0, last), true, true, ""
			h.ConsecutiveFailures = 0
		})
		return
	}
	l.probe = s.startProbe(l.sess)
}

func (l *loop) probed(res probeResult) {
	s := l.s
	l.probe = nil
	var h Health
	s.update(func(st *Status) {
		st.Health.LastCheck, st.Health.LastCheckOK, st.Health.LastCheckPassive = res.at, res.ok, false
		st.Health.ResponseTime = res.rt
		st.Health.LastCheckError = res.err
		st.Health.ChecksTotal++
		if res.ok {
			st.Health.ConsecutiveFailures = 0
		} else {
			st.Health.ChecksFailed++
			st.Health.ConsecutiveFailures++
		}
		h = st.Health
	})
	h.ErrorRate, h.WindowCalls = s.stats.Load().rate()
	if !res.ok {
		s.log.Warn("upstream health check failed", "method", h.Method, "error", res.err, "consecutive", h.ConsecutiveFailures)
	}
	if res.authReason != "" && l.sess != nil && !l.draining {
		l.needsAuth(res.authReason, l.ended(nil))
		l.settle(l.closeSession())
		return
	}
	if cb := s.opts.OnHealth; cb != nil && !s.hold.holding() {
		cb(HealthReport{Server: s.name, Method: h.Method, OK: res.ok, ResponseTime: res.rt, Error: res.err, At: res.at, Health: h})
	}
	if res.ok || h.ConsecutiveFailures < healthFailures || l.sess == nil || l.draining {
		return
	}
	// ERROR first: the teardown of a hung server can take a while (the SDK
	// gives each cancellation notice 5s to reach it), and no call should
	// wait for it meanwhile.
	l.fail(fmt.Sprintf("health check failed %d times in a row: %s", h.ConsecutiveFailures, res.err), true, l.ended(nil))
	l.settle(l.closeSession())
}

// checkRate moves between CONNECTED and DEGRADED as the error rate crosses
// the threshold.
func (l *loop) checkRate() {
	s := l.s
	if l.sess == nil || l.draining {
		return
	}
	rate, n := s.stats.Load().rate()
	over := n >= s.lc.degradedWindow && rate > s.lc.degradedRate
	switch state := s.snapshot().State; {
	case state == StateConnected && over:
		reason := fmt.Sprintf("%.0f%% of the last %d calls failed", rate*100, n)
		s.log.Warn("upstream degraded", "reason", reason)
		s.transition(StateDegraded, reason, nil)
	case state == StateDegraded && !over:
		s.log.Info("upstream recovered from degraded")
		s.transition(StateConnected, "", nil)
	}
}

// idleTick stops the session if it has had no calls for the idle timeout.
// The check and the change of state happen under s.mu, where calls are
// counted in, so no call can slip onto a session being stopped.
func (l *loop) idleTick() {
	s := l.s
	if l.sess == nil || l.draining {
		return
	}
	sess := l.sess
	var left time.Duration
	s.mu.Lock()
	if sess.calls.Load() > 0 {
		left = s.lc.idle
	} else if since := time.Since(time.Unix(0, sess.lastActive.Load())); since < s.lc.idle {
		left = s.lc.idle - since
	}
	var t Transition
	var changed bool
	if left == 0 {
		t, changed = s.setState(StateDisconnected, "idle", func(*Status) {
			s.live = nil
			s.idleStopped = true
		})
	}
	s.mu.Unlock()
	if left > 0 {
		l.idle.set(left)
		return
	}
	s.report(t, changed)
	s.log.Info("upstream stopped: idle", "idle_timeout", s.lc.idle)
	l.want = false
	dead := l.closeSession()
	s.update(l.ended(nil))
	l.settle(dead)
}

// shutdown stops everything for Remove and Close: no draining, no restart.
func (l *loop) shutdown() {
	s := l.s
	stopped := &UnavailableError{Server: s.name, State: StateDisconnected, Reason: "upstream stopped", cause: context.Canceled}
	if l.att != nil {
		l.abort("upstream stopped")
	}
	for _, w := range l.afterDrain {
		w <- reply{err: stopped}
	}
	l.afterDrain = nil
	if l.sess != nil {
		dead := l.closeSession()
		l.draining = false
		s.transition(StateDisconnected, "", l.ended(nil))
		l.settle(dead)
	}
	for _, w := range l.drainWaiters {
		w.reply <- reply{pending: w.pending}
	}
	l.drainWaiters = nil
	s.transition(StateDisconnected, "", func(st *Status) { st.NextRestartAt = time.Time{} })
}
