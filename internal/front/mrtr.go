package front

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/secrets"
)

// Multi round-trip requests (SEP-2322) for callers of the stateless
// revision. Such a caller has no session on which the gateway could send
// it a request; it gets an input_required result instead, answers the
// input requests, and repeats its request with the answers and the
// requestState of that result. Two kinds of state travel in requestState,
// always sealed with the gateway's key and bound to the caller, the method,
// the name and an expiry:
//
//   - "up": the upstream speaks the new revision and returned input_required
//     itself. Its input requests go to the caller as they are, and its own
//     requestState rides inside ours: the retry may land on any replica.
//   - "park": the upstream is a classic server that sent a request of its own
//     (sampling, elicitation, roots) while serving the call. The call stays
//     parked on this replica, its upstream request held, until the caller
//     repeats the request with the answers (or InputTimeout passes, and the
//     held request is answered with an error).

// Sealer seals and opens requestState. *secrets.Keyring implements it;
// replicas that share a key accept each other's state.
type Sealer interface {
	Seal(plaintext string) (string, error)
	Open(value string) (plaintext string, sealed bool, err error)
}

// Defaults of the multi round-trip machinery.
const (
	// DefaultInputTimeout is how long a caller has to answer an
	// input_required result: the state expires, and a parked call's held
	// upstream request is answered with an error.
	DefaultInputTimeout = 5 * time.Minute
	// maxStateBytes bounds a requestState a caller sends back; ours are far
	// smaller unless an upstream's own state is huge.
	maxStateBytes = 256 << 10
	// stateVersion tells our states from anything else.
	stateVersion = 1
)

// Kinds of requestState.
const (
	stateUp   = "up"
	statePark = "park"
)

// inputState is what a requestState carries, sealed.
type inputState struct {
	V       int    `json:"v"`
	Kind    string `json:"k"`
	Caller  string `json:"c,omitempty"`
	Scope   string `json:"s,omitempty"` // the front's server, "" on /mcp
	Method  string `json:"m"`
	Name    string `json:"n"`
	Expires int64  `json:"e"` // unix milliseconds
	Nonce   string `json:"x"`
	Up      string `json:"u,omitempty"`   // the upstream's requestState
	Park    string `json:"p,omitempty"`   // the parked call
	Round   int    `json:"r,omitempty"`   // the parked call's round it answers
	Replica string `json:"rep,omitempty"` // where the call is parked
}

// errState is the spec's answer to a requestState that fails verification:
// invalid params.
func errState(format string, a ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState: " + fmt.Sprintf(format, a...)}
}

// mrtr holds the parked calls and the seal of one front.
type mrtr struct {
	sealer  Sealer
	timeout time.Duration
	replica string
	shared  func(ctx context.Context, nonce string, expires time.Time) (first bool, err error)

	mu     sync.Mutex
	parked map[string]*parked
	used   map[string]int64 // nonces of "up" states already answered -> expiry
	closed bool
}

func newMRTR(sealer Sealer, timeout time.Duration, replica string) *mrtr {
	if sealer == nil {
		// Without a configured key the state is good on this process only.
		raw := make([]byte, secrets.KeySize)
		_, _ = rand.Read(raw)
		k, err := secrets.NewKeyring(raw)
		if err != nil {
			panic(err) // a 32-byte key cannot be refused
		}
		sealer = k
	}
	if timeout <= 0 {
		timeout = DefaultInputTimeout
	}
	return &mrtr{sealer: sealer, timeout: timeout, replica: replica,
		parked: map[string]*parked{}, used: map[string]int64{}}
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (m *mrtr) seal(st inputState) (string, error) {
	st.V = stateVersion
	st.Nonce = randomID()
	st.Expires = time.Now().Add(m.timeout).UnixMilli()
	b, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	return m.sealer.Seal(string(b))
}

// open verifies a requestState the caller sent back for (caller, method,
// name) on the front of scope.
func (m *mrtr) open(value, scope, caller, method, name string) (inputState, error) {
	var st inputState
	if len(value) > maxStateBytes {
		return st, errState("%d bytes, more than the %d accepted", len(value), maxStateBytes)
	}
	plain, sealed, err := m.sealer.Open(value)
	if err != nil || !sealed {
		return st, errState("it was not issued by this gateway or has been altered")
	}
	if err := json.Unmarshal([]byte(plain), &st); err != nil || st.V != stateVersion {
		return st, errState("it was not issued by this gateway or has been altered")
	}
	switch {
	case st.Caller != caller:
		return st, errState("it was issued to another caller")
	case st.Scope != scope:
		return st, errState("it was issued by another endpoint")
	case st.Method != method || st.Name != name:
		return st, errState("it was issued for %s %q, not %s %q", st.Method, st.Name, method, name)
	case time.Now().UnixMilli() > st.Expires:
		return st, errState("it expired; start the request again")
	}
	return st, nil
}

// peek opens a requestState without checking what it is bound to: enough
// to know where its call is parked.
func (m *mrtr) peek(value string) (inputState, bool) {
	var st inputState
	if len(value) > maxStateBytes {
		return st, false
	}
	plain, sealed, err := m.sealer.Open(value)
	if err != nil || !sealed || json.Unmarshal([]byte(plain), &st) != nil || st.V != stateVersion {
		return st, false
	}
	return st, true
}

// spend marks an "up" state answered; a second use is a replay. With a
// shared record (Options.Spend) replicas refuse each other's replays too.
func (m *mrtr) spend(ctx context.Context, st inputState) error {
	if m.shared != nil {
		first, err := m.shared(ctx, st.Nonce, time.UnixMilli(st.Expires))
		switch {
		case err != nil:
			return fmt.Errorf("recording the use of a requestState: %w", err)
		case !first:
			return errState("it was already answered; use the requestState of the latest result")
		}
		return nil
	}
	now := time.Now().UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.used[st.Nonce]; ok {
		return errState("it was already answered; use the requestState of the latest result")
	}
	if len(m.used) >= 1024 && len(m.used)%1024 == 0 {
		maps.DeleteFunc(m.used, func(_ string, exp int64) bool { return exp < now })
	}
	m.used[st.Nonce] = st.Expires
	return nil
}

// close cancels every parked call.
func (m *mrtr) close() {
	m.mu.Lock()
	m.closed = true
	ps := slices.Collect(maps.Values(m.parked))
	m.mu.Unlock()
	for _, p := range ps {
		p.cancel()
	}
}

// parked is one call of a stateless caller being served: it runs on its own
// (the caller's request may end between rounds), and what the upstream asks
// during it waits here for the caller's next round.
type parked struct {
	id     string
	cancel context.CancelFunc
	done   chan struct{} // closed when the call returned

	mu      sync.Mutex
	ss      *mcp.ServerSession // the current round's session
	rctx    context.Context    // the current round's request context
	seq     int
	round   int                  // rounds handed to the caller so far
	pending []*inputAsk          // asked by the upstream, not yet handed out
	out     map[string]*inputAsk // handed out, not yet answered, by id
	wake    chan struct{}        // signalled when pending grows
	res     mcp.Result           // set before done is closed
	err     error
	expiry  *time.Timer // cancels the call when the caller does not come back
}

// inputAsk is one request of the upstream waiting for the caller's answer.
type inputAsk struct {
	id    string
	req   mcp.InputRequest
	reply chan mcp.InputResponse // buffered 1
}

// attach makes the request of (ctx, req) the current round: notifications
// of the call go there.
func (p *parked) attach(ctx context.Context, req mcp.Request) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	p.mu.Lock()
	p.ss, p.rctx = ss, ctx
	p.mu.Unlock()
}

// current is the current round's session and request context.
func (p *parked) current() (*mcp.ServerSession, context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ss, p.rctx
}

// ask hands req to the caller and waits for the answer: the upstream's
// request stays open meanwhile.
func (p *parked) ask(ctx context.Context, req mcp.InputRequest) (mcp.InputResponse, error) {
	p.mu.Lock()
	p.seq++
	a := &inputAsk{id: fmt.Sprintf("switchboard-%d", p.seq), req: req, reply: make(chan mcp.InputResponse, 1)}
	p.pending = append(p.pending, a)
	select {
	case p.wake <- struct{}{}:
	default:
	}
	p.mu.Unlock()
	select {
	case r := <-a.reply:
		return r, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("the caller did not answer the input request: %w", context.Cause(ctx))
	}
}

// serveStateless serves one round of a multi round-trip method (tools/call,
// prompts/get, resources/read) for a stateless caller. run forwards the
// request upstream with the upstream's state (when continuing one) and the
// answers; it is called with a ctx that outlives the caller's request.
// build makes the method's result type out of input requests and a state.
func (f *Front) serveStateless(ctx context.Context, req mcp.Request, method, name string, answers mcp.InputResponseMap, state string,
	run func(ctx context.Context, upState string, answers mcp.InputResponseMap) (mcp.Result, error),
	build func(asks mcp.InputRequestMap, state string) mcp.Result) (mcp.Result, error) {
	m := f.mrtr
	caller := callerIdentity(ctx, req).ID
	var upState string
	if state != "" {
		st, err := m.open(state, f.scope, caller, method, name)
		if err != nil {
			return nil, err
		}
		switch st.Kind {
		case statePark:
			return f.resumeParked(ctx, req, st, answers, caller, method, name, build)
		case stateUp:
			if err := m.spend(ctx, st); err != nil {
				return nil, err
			}
			upState = st.Up
		default:
			return nil, errState("unknown kind %q", st.Kind)
		}
	}
	p, err := f.park(ctx, req, func(ctx context.Context) (mcp.Result, error) { return run(ctx, upState, answers) })
	if err != nil {
		return nil, err
	}
	return f.awaitParked(ctx, req, p, caller, method, name, build)
}

// park starts the call on its own, detached from the caller's request but
// keeping its values (identity, and the request the SDK writes progress
// for), bounded by the input timeout per round and owned by the front.
func (f *Front) park(ctx context.Context, req mcp.Request, run func(context.Context) (mcp.Result, error)) (*parked, error) {
	m := f.mrtr
	reqCtx := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &parked{id: randomID(), cancel: cancel, done: make(chan struct{}),
		out: map[string]*inputAsk{}, wake: make(chan struct{}, 1)}
	// The first round's request, before the call starts: what it sends
	// (progress, logs) goes there from its first message.
	p.attach(reqCtx, req)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		cancel()
		return nil, errors.New("the gateway is shutting down")
	}
	m.parked[p.id] = p
	m.mu.Unlock()

	var caps *mcp.ClientCapabilities
	var ss *mcp.ServerSession
	if c, ok := reqCtx.Value(fastCapsKey{}).(*mcp.ClientCapabilities); ok {
		caps = c // decoded by the fast path already
	} else if sr, ok := req.(interface {
		ClientCapabilities() *mcp.ClientCapabilities
	}); ok {
		caps = sr.ClientCapabilities()
	}
	ss, _ = req.GetSession().(*mcp.ServerSession)
	peer := &Peer{ss: ss, done: p.done, park: p, caps: caps, client: callerIdentity(reqCtx, req).ID}
	ctx = f.withPeer(ctx, peer)
	go func() {
		defer func() {
			cancel()
			m.mu.Lock()
			delete(m.parked, p.id)
			m.mu.Unlock()
		}()
		res, err := run(ctx)
		p.mu.Lock()
		p.res, p.err = res, err
		if p.expiry != nil {
			p.expiry.Stop()
		}
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// awaitParked waits for p to finish or to ask for input, whichever comes
// first, and answers the caller's request accordingly. A caller that goes
// away mid-round cancels the call: under the stateless revision, a request
// that ends is a cancellation.
func (f *Front) awaitParked(ctx context.Context, req mcp.Request, p *parked, caller, method, name string,
	build func(mcp.InputRequestMap, string) mcp.Result) (mcp.Result, error) {
	m := f.mrtr
	p.attach(ctx, req)
	for {
		select {
		case <-p.done:
			// Finished (the upstream answered, gave up or timed out): its
			// outcome, not questions nobody waits for any more.
			return f.finishParked(p, caller, method, name, build)
		default:
		}
		p.mu.Lock()
		if len(p.pending) > 0 || len(p.out) > 0 {
			asks := make(mcp.InputRequestMap, len(p.pending)+len(p.out))
			for _, a := range p.pending {
				p.out[a.id] = a
			}
			p.pending = nil
			for id, a := range p.out {
				asks[id] = a.req
			}
			p.round++
			round := p.round
			p.mu.Unlock()
			state, err := m.seal(inputState{Kind: statePark, Scope: f.scope, Caller: caller, Method: method, Name: name,
				Park: p.id, Round: round, Replica: m.replica})
			if err != nil {
				p.cancel()
				return nil, fmt.Errorf("sealing requestState: %w", err)
			}
			f.expireParked(p, round)
			return build(asks, state), nil
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			return f.finishParked(p, caller, method, name, build)
		case <-p.wake:
		case <-ctx.Done():
			p.cancel()
			return nil, ctx.Err()
		}
	}
}

// expireParked cancels p if the caller has not come back for round within
// the input timeout. One timer per call: a new round replaces it, and the
// end of the call stops it.
func (f *Front) expireParked(p *parked, round int) {
	t := time.AfterFunc(f.mrtr.timeout, func() {
		p.mu.Lock()
		stale := p.round == round
		p.mu.Unlock()
		if stale {
			p.cancel()
		}
	})
	p.mu.Lock()
	if p.expiry != nil {
		p.expiry.Stop()
	}
	p.expiry = t
	p.mu.Unlock()
}

// finishParked answers with the call's outcome. An upstream of the new
// revision that asked for input itself gets its state sealed into ours.
func (f *Front) finishParked(p *parked, caller, method, name string, build func(mcp.InputRequestMap, string) mcp.Result) (mcp.Result, error) {
	p.mu.Lock()
	res, err := p.res, p.err
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	asks, up, ok := needsInput(res)
	if !ok {
		return res, nil
	}
	state, err := f.mrtr.seal(inputState{Kind: stateUp, Scope: f.scope, Caller: caller, Method: method, Name: name, Up: up})
	if err != nil {
		return nil, fmt.Errorf("sealing requestState: %w", err)
	}
	if asks == nil {
		asks = mcp.InputRequestMap{} // the upstream sheds load: ask again
	}
	return build(asks, state), nil
}

// needsInput returns the input requests and state of a result that asks
// for input.
func needsInput(res mcp.Result) (mcp.InputRequestMap, string, bool) {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		return r.InputRequests, r.RequestState, r.NeedsInput()
	case *mcp.GetPromptResult:
		return r.InputRequests, r.RequestState, r.NeedsInput()
	case *mcp.ReadResourceResult:
		return r.InputRequests, r.RequestState, r.NeedsInput()
	}
	return nil, "", false
}

// resumeParked delivers the caller's answers to its parked call and waits
// for the next round.
func (f *Front) resumeParked(ctx context.Context, req mcp.Request, st inputState, answers mcp.InputResponseMap, caller, method, name string,
	build func(mcp.InputRequestMap, string) mcp.Result) (mcp.Result, error) {
	m := f.mrtr
	if st.Replica != m.replica {
		return nil, errState("the call is parked on replica %q; send the request there (or route by requestState)", st.Replica)
	}
	m.mu.Lock()
	p := m.parked[st.Park]
	m.mu.Unlock()
	if p == nil {
		return nil, errState("the call it continues is no longer waiting (it ended, timed out or was cancelled)")
	}
	p.mu.Lock()
	if st.Round != p.round {
		p.mu.Unlock()
		return nil, errState("it was already answered; use the requestState of the latest result")
	}
	p.round++ // this round is spent, whatever the answers
	for id, a := range p.out {
		r, ok := answers[id]
		if !ok || r == nil {
			continue // asked again below
		}
		delete(p.out, id)
		a.reply <- r
	}
	p.mu.Unlock()
	return f.awaitParked(ctx, req, p, caller, method, name, build)
}
