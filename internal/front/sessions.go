package front

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

// Defaults of [SessionOptions], chosen from the measured cost of an idle
// Streamable HTTP session (docs/security.md#sessions): about 9 KB of live
// memory (heap and its goroutine's stack), but some 35 KB of process RSS
// once garbage collection has its way. The total cap bounds the worst case
// near 200 MB over the baseline; one identity alone, to a fifth of that.
const (
	DefaultMaxSessions            = 5000
	DefaultMaxSessionsPerIdentity = 1000
)

// The limits a refusal or an eviction names, as labels of
// [SessionOptions.OnEvict] and [SessionOptions.OnRefuse].
const (
	LimitIdentity = "identity"
	LimitTotal    = "total"
)

// CodeTooManySessions is the stable code (in the JSON-RPC error's data) of
// an initialize, or a legacy SSE stream, refused because a session cap is
// reached and every session under it is busy.
const CodeTooManySessions = "too_many_sessions"

// codeTooManySessionsRPC is the JSON-RPC error code of that refusal: the
// front's code for a request the gateway could not serve ([RPCGatewayError]).
const codeTooManySessionsRPC = RPCGatewayError

// SessionOptions configure [NewSessions]. nil means defaults.
type SessionOptions struct {
	// MaxSessions caps the live sessions of all handlers sharing the
	// Sessions (config front.max_sessions). Zero or negative means
	// DefaultMaxSessions.
	MaxSessions int
	// MaxSessionsPerIdentity caps the live sessions of one caller identity
	// (config front.max_sessions_per_identity). Zero or negative means
	// DefaultMaxSessionsPerIdentity.
	MaxSessionsPerIdentity int
	// Logger receives debug records of evictions and refusals; nil
	// discards them.
	Logger *slog.Logger
	// OnLive, if set, is called with the number of live sessions each time
	// it changes (a gauge). It is called with the table's lock held: it
	// must not block nor call back into the Sessions.
	OnLive func(n int)
	// OnEvict, if set, is called once per session ended to make room, with
	// the limit (LimitIdentity or LimitTotal) that required it.
	OnEvict func(limit string)
	// OnRefuse, if set, is called once per session refused, with the limit
	// that could not be met.
	OnRefuse func(limit string)
}

// Sessions bounds the live MCP sessions of the stateful HTTP endpoints
// (Streamable HTTP and legacy SSE), in total and per caller identity. When
// a new session would exceed a cap, the least recently used idle session
// (of that identity for the per-identity cap, of anyone for the total cap)
// is ended through the SDK, as a DELETE would end it: its next request
// gets 404 and the client re-initializes, as the spec says. A session is
// idle when no HTTP request of it is in flight (an open GET stream is
// one), and no MCP request of it is being handled. When every session
// under the cap is busy, the new session is refused: 429 for the
// per-identity cap, 503 for the total, with a JSON-RPC error naming the
// cap and its setting.
//
// Handlers given the same Sessions (see [HTTPOptions.Sessions]) share its
// caps. Safe for concurrent use; it starts no goroutine.
type Sessions struct {
	max, perIdentity  int
	logger            *slog.Logger
	onLive            func(int)
	onEvict, onRefuse func(string)

	mu   sync.Mutex
	live int // sessions counted: bound, reserved for an initialize, SSE streams
	byID map[string]*sessionEntry
	idle list.List // of *sessionEntry: idle bound sessions, least recently used first
	ids  map[string]*identitySessions
}

// identitySessions is one identity's share of the table. It is removed
// when its count drops to zero, so callers that come and go leave nothing.
type identitySessions struct {
	live int
	idle list.List // as Sessions.idle, this identity's only
}

// sessionEntry is one counted session. An entry without id is a slot: an
// initialize whose session id is not known yet, or an SSE stream (which
// ends with its GET and is never evicted).
type sessionEntry struct {
	id       string
	identity string
	uses     int    // requests in flight, HTTP and MCP
	gone     bool   // no longer counted (ended, evicted, or released)
	end      func() // ends the session through the SDK
	// idleAll and idleOwn are the entry's elements in Sessions.idle and its
	// identity's idle list while it is idle, nil otherwise.
	idleAll, idleOwn *list.Element
}

// NewSessions returns an empty session table with the caps of opts.
func NewSessions(opts *SessionOptions) *Sessions {
	var o SessionOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxSessionsPerIdentity <= 0 {
		o.MaxSessionsPerIdentity = DefaultMaxSessionsPerIdentity
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	noop := func(string) {}
	if o.OnEvict == nil {
		o.OnEvict = noop
	}
	if o.OnRefuse == nil {
		o.OnRefuse = noop
	}
	if o.OnLive == nil {
		o.OnLive = func(int) {}
	}
	return &Sessions{
		max:         o.MaxSessions,
		perIdentity: o.MaxSessionsPerIdentity,
		logger:      o.Logger,
		onLive:      o.OnLive,
		onEvict:     o.OnEvict,
		onRefuse:    o.OnRefuse,
		byID:        map[string]*sessionEntry{},
		ids:         map[string]*identitySessions{},
	}
}

// Live returns the number of sessions counted against the total cap.
func (s *Sessions) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

// capError is a refusal: the limit that could not be met.
type capError struct {
	limit string // LimitIdentity or LimitTotal
	max   int
}

func (e *capError) Error() string {
	if e.limit == LimitIdentity {
		return fmt.Sprintf("too many MCP sessions for this caller: %d are open and all are busy "+
			"(limit front.max_sessions_per_identity = %d); end unused sessions with DELETE, or raise the setting", e.max, e.max)
	}
	return fmt.Sprintf("too many MCP sessions on this gateway: %d are open and all are busy "+
		"(limit front.max_sessions = %d); try again later, or raise the setting", e.max, e.max)
}

func (e *capError) setting() string {
	if e.limit == LimitIdentity {
		return "front.max_sessions_per_identity"
	}
	return "front.max_sessions"
}

// reserve counts a new session of identity, in use by the caller until
// [Sessions.release]. To stay within the caps it first ends the least
// recently used idle sessions it must (at most one each, unless the caps
// shrank), outside the lock. It fails with a *capError when there are not
// enough idle sessions to end.
func (s *Sessions) reserve(identity string) (*sessionEntry, error) {
	s.mu.Lock()
	own := s.ids[identity]
	ownLive, ownIdle := 0, 0
	if own != nil {
		ownLive, ownIdle = own.live, own.idle.Len()
	}
	needOwn := max(0, ownLive+1-s.perIdentity)
	needAll := max(0, s.live+1-s.max)
	// Ending one of the identity's sessions also makes room in the total,
	// and those are in the global idle list too: needAll <= idle suffices.
	var refused *capError
	switch {
	case needOwn > ownIdle:
		refused = &capError{limit: LimitIdentity, max: s.perIdentity}
	case needAll > s.idle.Len():
		refused = &capError{limit: LimitTotal, max: s.max}
	}
	if refused != nil {
		s.mu.Unlock()
		s.onRefuse(refused.limit)
		s.logger.Debug("mcp session refused", "limit", refused.limit, "max", refused.max, "identity", identity)
		return nil, refused
	}
	type victim struct {
		e     *sessionEntry
		limit string
	}
	var victims []victim
	for range needOwn {
		e := own.idle.Front().Value.(*sessionEntry)
		s.removeLocked(e)
		victims = append(victims, victim{e, LimitIdentity})
	}
	for range needAll - len(victims) {
		e := s.idle.Front().Value.(*sessionEntry)
		s.removeLocked(e)
		victims = append(victims, victim{e, LimitTotal})
	}
	e := &sessionEntry{identity: identity, uses: 1}
	if own = s.ids[identity]; own == nil { // removeLocked may have dropped it
		own = &identitySessions{}
		s.ids[identity] = own
	}
	own.live++
	s.live++
	s.onLive(s.live)
	s.mu.Unlock()

	for _, v := range victims {
		s.onEvict(v.limit)
		s.logger.Debug("mcp session evicted", "limit", v.limit, "identity", v.e.identity)
		v.e.end()
	}
	return e, nil
}

// bind gives the slot e the session id the SDK chose and the way to end
// that session. The session stays in use until e's reservation is
// released.
func (s *Sessions) bind(e *sessionEntry, id string, end func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.gone || e.id != "" {
		return
	}
	e.id, e.end = id, end
	s.byID[id] = e
}

// use marks the session id busy on behalf of a request of identity and
// returns the function that ends the use. ok is false if the table does
// not know the session (never was, or has ended): its requests get 404.
// A request of another identity does not count as a use: the SDK refuses
// it (the session is bound to its creator), and it must not make another
// caller's session look recently used.
func (s *Sessions) use(id, identity string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byID[id]
	if e == nil {
		return nil, false
	}
	if e.identity != identity {
		return func() {}, true
	}
	s.acquireLocked(e)
	return func() { s.release(e) }, true
}

// hold is use on behalf of an MCP request of the session, whose identity
// the session's own: nil-safe, and a no-op for an unknown id.
func (s *Sessions) hold(id string) (release func()) {
	if s == nil || id == "" {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byID[id]
	if e == nil {
		return func() {}
	}
	s.acquireLocked(e)
	return func() { s.release(e) }
}

func (s *Sessions) acquireLocked(e *sessionEntry) {
	if e.uses == 0 && e.idleAll != nil {
		s.idle.Remove(e.idleAll)
		s.ids[e.identity].idle.Remove(e.idleOwn)
		e.idleAll, e.idleOwn = nil, nil
	}
	e.uses++
}

// release ends one use of e. A bound session whose last use ended becomes
// the most recently used idle one; a slot never bound (the initialize
// created no session) or an SSE stream stops being counted.
func (s *Sessions) release(e *sessionEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.gone {
		return
	}
	e.uses--
	if e.uses > 0 {
		return
	}
	if e.id == "" {
		s.removeLocked(e)
		return
	}
	e.idleAll = s.idle.PushBack(e)
	e.idleOwn = s.ids[e.identity].idle.PushBack(e)
}

// forget stops counting the session id, which the SDK has ended (DELETE,
// idle timeout, failed initialize, eviction). Unknown ids are ignored.
func (s *Sessions) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.byID[id]; e != nil {
		s.removeLocked(e)
	}
}

// removeLocked stops counting e.
func (s *Sessions) removeLocked(e *sessionEntry) {
	if e.gone {
		return
	}
	e.gone = true
	if e.id != "" {
		delete(s.byID, e.id)
	}
	own := s.ids[e.identity]
	if e.idleAll != nil {
		s.idle.Remove(e.idleAll)
		own.idle.Remove(e.idleOwn)
		e.idleAll, e.idleOwn = nil, nil
	}
	if own.live--; own.live == 0 {
		delete(s.ids, e.identity)
	}
	s.live--
	s.onLive(s.live)
}

type sessionsKey struct{}

// withSessions returns ctx carrying s. The guard puts it on the ctx of an
// initialize request, which the SDK makes the session's own: every MCP
// request of the session is handled under it, so [sessionUse] finds the
// table that counts the session.
func withSessions(ctx context.Context, s *Sessions) context.Context {
	return context.WithValue(ctx, sessionsKey{}, s)
}

func sessionsFrom(ctx context.Context) *Sessions {
	s, _ := ctx.Value(sessionsKey{}).(*Sessions)
	return s
}

// sessionUse keeps a session busy while one of its MCP requests is
// handled. A client may drop the POST of a long tool call (the SDK keeps
// the call running, its result goes to the event store for a resuming
// GET): without this, the session would look idle and be evicted with the
// call in flight, and ending it would wait for the call. Notifications are
// left out: they are handled after their POST has been answered, so
// counting them would reorder sessions by when the SDK got round to them,
// and they hold nothing up.
func sessionUse(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if s := sessionsFrom(ctx); s != nil && req != nil && !strings.HasPrefix(method, "notifications/") {
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
				defer s.hold(ss.ID())()
			}
		}
		return next(ctx, method, req)
	}
}

// endNotifier passes the SDK's word that a Streamable HTTP session ended on
// to the session table. Every way a session ends (DELETE, idle timeout, a
// failed initialize, eviction, a broken connection) closes its connection,
// and closing the connection tells the event store.
type endNotifier struct {
	mcp.EventStore
	ended func(sessionID string)
}

// SessionClosed implements [mcp.EventStore]. The SDK calls it with the
// connection's lock held; forget takes only the table's.
func (n endNotifier) SessionClosed(ctx context.Context, sessionID string) error {
	n.ended(sessionID)
	return n.EventStore.SessionClosed(ctx, sessionID)
}

// callerIdentityKey is whom the per-identity cap counts a request against:
// the identity the front door verified, else the bearer token's user, else
// "" (all anonymous callers share one budget).
func callerIdentityKey(r *http.Request) string {
	if id, ok := authz.IdentityFrom(r.Context()); ok {
		return id.ID
	}
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		return ti.UserID
	}
	return ""
}

// serveCounted serves a request of a stateful endpoint under the session
// caps. initID is the id of the lone initialize request that starts a
// Streamable HTTP session, nil for any other request.
func (g *httpGuard) serveCounted(w http.ResponseWriter, r *http.Request, initID json.RawMessage) {
	identity := callerIdentityKey(r)
	switch {
	case g.sse && r.Method == http.MethodGet:
		// A legacy SSE session lives exactly as long as this GET: it is
		// counted, never idle, and gone when the stream ends.
		slot, err := g.sessions.reserve(identity)
		if err != nil {
			g.refuseSession(w, nil, err)
			return
		}
		defer g.sessions.release(slot)
		g.next.ServeHTTP(w, r)
	case g.sse:
		g.next.ServeHTTP(w, r) // a POST to a session whose GET counts it
	case initID != nil:
		g.serveInitialize(w, r, identity, initID)
	case r.Header.Get(sessionIDHeader) != "":
		// An open standalone GET stream counts as a use for as long as it
		// is open, so a session with one is never evicted: the client
		// behind it is connected and listening, and an abandoned stream
		// ends with its TCP connection. A client that holds the cap's worth
		// of streams open is refused more, not served at the expense of
		// its own live sessions.
		release, ok := g.sessions.use(r.Header.Get(sessionIDHeader), identity)
		if !ok {
			// Ended or evicted: the SDK forgot it too, or is about to (an
			// eviction ends the session right after forgetting it, so a
			// request racing it must not reach the closing session).
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		defer release()
		g.next.ServeHTTP(w, r)
	default:
		g.next.ServeHTTP(w, r) // creates no lasting session
	}
}

// serveInitialize reserves a slot for the session an initialize starts,
// binds it to the session id the SDK answers with, and lets the slot go if
// the SDK started no session.
func (g *httpGuard) serveInitialize(w http.ResponseWriter, r *http.Request, identity string, initID json.RawMessage) {
	slot, err := g.sessions.reserve(identity)
	if err != nil {
		g.refuseSession(w, initID, err)
		return
	}
	defer g.sessions.release(slot)
	// The SDK makes this request's ctx the session's (detached from the
	// request's end): MCP requests find the table there, and ending the
	// session later goes through the SDK with the same identity.
	ctx := withSessions(r.Context(), g.sessions)
	sessionCtx := context.WithoutCancel(ctx)
	sw := &sessionStartWriter{ResponseWriter: w}
	sw.started = func(h http.Header) {
		if id := h.Get(sessionIDHeader); id != "" {
			g.sessions.bind(slot, id, func() { g.endSession(sessionCtx, id) })
		}
	}
	g.next.ServeHTTP(sw, r.WithContext(ctx))
}

// endSession ends a session as a client's DELETE would: the SDK closes it,
// forgets it (later requests get 404), frees its goroutine and its events.
// ctx is the session's own, whose token user the SDK checks.
func (g *httpGuard) endSession(ctx context.Context, id string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, "/", nil)
	if err != nil {
		g.logger.Warn("ending mcp session", "error", err)
		return
	}
	req.Header.Set(sessionIDHeader, id)
	g.next.ServeHTTP(discardResponse{}, req)
}

// refuseSession answers a session the caps refuse: 429 when the caller's
// own cap is reached (its own sessions are busy), 503 when the gateway's
// total is, with a JSON-RPC error that names the cap and its setting.
func (g *httpGuard) refuseSession(w http.ResponseWriter, rawID json.RawMessage, err error) {
	ce, _ := err.(*capError)
	status := http.StatusServiceUnavailable
	if ce != nil && ce.limit == LimitIdentity {
		status = http.StatusTooManyRequests
	}
	var id jsonrpc.ID // none for an SSE GET: encoded without one, as the SDK does
	if len(rawID) > 0 {
		var v any
		if json.Unmarshal(rawID, &v) == nil {
			id, _ = jsonrpc.MakeID(v)
		}
	}
	jerr := &jsonrpc.Error{Code: codeTooManySessionsRPC, Message: err.Error()}
	if ce != nil {
		jerr.Data, _ = json.Marshal(map[string]any{"code": CodeTooManySessions, "limit": ce.limit,
			"setting": ce.setting(), "max": ce.max})
	}
	b, encErr := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: jerr})
	if encErr != nil {
		http.Error(w, err.Error(), status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// sessionStartWriter calls started with the response headers just before
// they are sent, so a session is counted under its id before its client
// can learn the id and use it.
type sessionStartWriter struct {
	http.ResponseWriter
	once    sync.Once
	started func(http.Header)
}

func (w *sessionStartWriter) send() { w.once.Do(func() { w.started(w.ResponseWriter.Header()) }) }

func (w *sessionStartWriter) WriteHeader(code int) {
	w.send()
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionStartWriter) Write(b []byte) (int, error) {
	w.send()
	return w.ResponseWriter.Write(b)
}

// FlushError serves http.ResponseController, which the SDK flushes SSE
// events through.
func (w *sessionStartWriter) FlushError() error {
	w.send()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the writer's other abilities.
func (w *sessionStartWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// discardResponse takes the SDK's answer to a DELETE the gateway sends
// itself.
type discardResponse struct{}

func (discardResponse) Header() http.Header         { return http.Header{} }
func (discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (discardResponse) WriteHeader(int)             {}
