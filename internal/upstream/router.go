package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newProtocol is the first protocol version in which servers may not send
// requests of their own (they embed them in results: multi round-trip,
// SEP-2322) and the log level travels in each request's _meta instead of
// logging/setLevel (SEP-2575). The SDK does not export the constant.
const newProtocol = "2026-07-28"

// usesNewProtocol reports whether cs negotiated newProtocol or later.
func usesNewProtocol(cs *mcp.ClientSession) bool {
	init := cs.InitializeResult()
	return init != nil && init.ProtocolVersion >= newProtocol
}

// notifyTimeout bounds the delivery of one notification to a peer.
// Notifications are delivered on the session's reader, in order (notify.go),
// so a peer that stops reading would otherwise stall the session for
// everyone sharing it.
const notifyTimeout = 5 * time.Second

// Multi round-trip bounds, as in the SDK's own client middleware.
const (
	maxRounds     = 10
	maxShedRounds = 3
)

// progressTokenKey is the _meta key of a request's progress token.
const progressTokenKey = "progressToken"

// reservedMetaKeys are the _meta keys the SDK sets per session under the
// new protocol. A caller's values (a downstream client's own protocol
// version, say) must not reach the upstream, where they would describe the
// wrong session: a legacy server would even take the request for a
// new-protocol one.
var reservedMetaKeys = []string{
	mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo, mcp.MetaKeyClientCapabilities, mcp.MetaKeySubscriptionID,
}

// router delivers what one upstream session sends during calls to the peers
// the calls were made for.
//
// A per-peer session's router has a fixed peer: everything goes to it. A
// shared session's router attributes by the calls in flight: progress by a
// progress token that is unique per call, everything else to the one peer
// with calls in flight, if there is exactly one. Input requests embedded in
// a call's result (new protocol) are attributed to that call exactly.
type router struct {
	server    string
	log       *slog.Logger
	fixed     Peer // per-peer session: its peer; nil on a shared session
	seq       *atomic.Uint64
	onUpdated func(server string, p *mcp.ResourceUpdatedNotificationParams)

	mu       sync.Mutex
	calls    map[string]*peerCalls    // in-flight calls by peer ID; "" is calls without a peer
	progress map[string]progressRoute // by the token sent upstream
}

// peerCalls are the calls of one peer in flight on a session.
type peerCalls struct {
	peer  Peer
	calls []*callInfo
}

// progressRoute leads an upstream progress token back to its call and the
// token the call's peer chose.
type progressRoute struct {
	call  *callInfo
	token any
}

func newRouter(server string, log *slog.Logger, fixed Peer, seq *atomic.Uint64, onUpdated func(string, *mcp.ResourceUpdatedNotificationParams)) *router {
	return &router{
		server:    server,
		log:       log,
		fixed:     fixed,
		seq:       seq,
		onUpdated: onUpdated,
		calls:     make(map[string]*peerCalls),
		progress:  make(map[string]progressRoute),
	}
}

// begin registers a call on the session and returns the _meta to send with
// it: the caller's, minus the per-session reserved keys, with the progress
// token replaced by one unique to this call (dropped when there is no peer
// to report progress to) and, on a new-protocol session, the peer's log
// level unless the caller chose one. end unregisters the call.
func (r *router) begin(c *callInfo, in mcp.Meta, level mcp.LoggingLevel, newProto bool) (out mcp.Meta, end func()) {
	out = maps.Clone(in)
	for _, k := range reservedMetaKeys {
		delete(out, k)
	}
	var id string
	if c.peer != nil {
		id = c.peer.ID()
	}
	var token string
	r.mu.Lock()
	pc := r.calls[id]
	if pc == nil {
		pc = &peerCalls{peer: c.peer}
		r.calls[id] = pc
	}
	pc.calls = append(pc.calls, c)
	if orig, ok := out[progressTokenKey]; ok {
		delete(out, progressTokenKey)
		if c.peer != nil && orig != nil {
			token = fmt.Sprintf("switchboard-%d", r.seq.Add(1))
			r.progress[token] = progressRoute{call: c, token: orig}
			out[progressTokenKey] = token
		}
	}
	r.mu.Unlock()
	if _, ok := out[mcp.MetaKeyLogLevel]; newProto && level != "" && !ok {
		if out == nil {
			out = mcp.Meta{}
		}
		out[mcp.MetaKeyLogLevel] = level
	}
	if newProto && c.peer != nil {
		// A new-protocol server asks only for what the client declares in
		// the request: declare what this caller can answer, not what the
		// gateway could relay for someone else.
		if out == nil {
			out = mcp.Meta{}
		}
		out[mcp.MetaKeyClientCapabilities] = capabilitiesMeta(peerCapabilities(c.peer))
	}
	return out, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		pc.calls = slices.DeleteFunc(pc.calls, func(x *callInfo) bool { return x == c })
		if len(pc.calls) == 0 && r.calls[id] == pc {
			delete(r.calls, id)
		}
		if token != "" {
			delete(r.progress, token)
		}
	}
}

// Refusals, as JSON-RPC errors for the upstream. Not "method not found",
// which the SDK rewrites into a message about the method.
func (r *router) errNoCall(what string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("%s refused: no client call in progress on server %q", what, r.server)}
}

func (r *router) errAmbiguous(what string, n int) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("%s refused: %d callers have calls in progress on server %q, which shares one session between them, so the gateway cannot tell which of them it is for", what, n, r.server)}
}

func (r *router) errUnsupported(what string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("%s refused: the client of this call does not support it", what)}
}

// peerFor finds the peer a message of kind what (for errors) belongs to,
// and a call of that peer in flight, if there is one, whose context to
// relay it with.
func (r *router) peerFor(ctx context.Context, what string) (Peer, *callInfo, error) {
	if c, ok := callFrom(ctx); ok { // read off the call's own stream, or part of its multi round-trip
		switch {
		case r.fixed != nil:
			return r.fixed, c, nil
		case c.peer == nil:
			return nil, nil, r.errNoCall(what)
		}
		return c.peer, c, nil
	}
	if r.fixed != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.fixed, r.anyCallLocked(), nil
	}
	return r.sole(what)
}

// anyCallLocked is the latest call in flight on a per-peer session, or nil.
func (r *router) anyCallLocked() *callInfo {
	for _, pc := range r.calls {
		if n := len(pc.calls); n > 0 {
			return pc.calls[n-1]
		}
	}
	return nil
}

// sole is the only peer with calls in flight, and its latest call. Calls
// without a peer count as one more caller: a request from the server may be
// for them, and must not go to someone else's client.
func (r *router) sole(what string) (Peer, *callInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var only *peerCalls
	peers := 0
	for id, pc := range r.calls {
		if id != "" {
			only = pc
			peers++
		}
	}
	switch callers := len(r.calls); {
	case peers == 0:
		return nil, nil, r.errNoCall(what)
	case callers > 1:
		return nil, nil, r.errAmbiguous(what, callers)
	}
	return only.peer, only.calls[len(only.calls)-1], nil
}

// progressTo relays a progress notification to the peer whose call has its
// token, with the token that peer chose.
func (r *router) progressTo(ctx context.Context, p *mcp.ProgressNotificationParams) {
	token, _ := p.ProgressToken.(string)
	r.mu.Lock()
	route, ok := r.progress[token]
	r.mu.Unlock()
	if !ok {
		r.log.Debug("upstream progress dropped: no call has its token")
		return
	}
	q := *p
	q.ProgressToken = route.token
	ctx, cancel := notifyContext(ctx, route.call)
	defer cancel()
	if err := route.call.peer.NotifyProgress(ctx, &q); err != nil {
		r.log.Debug("upstream progress not delivered", "error", err)
	}
}

// logTo relays a log message to the peer it is attributed to.
func (r *router) logTo(ctx context.Context, p *mcp.LoggingMessageParams) {
	peer, call, err := r.peerFor(ctx, "log message")
	if err != nil {
		r.log.Debug("upstream log message dropped", "reason", err)
		return
	}
	ctx, cancel := notifyContext(ctx, call)
	defer cancel()
	if err := peer.Log(ctx, p); err != nil {
		r.log.Debug("upstream log message not delivered", "error", err)
	}
}

// notifyContext bounds a notification's delivery, in the context of call.
func notifyContext(ctx context.Context, call *callInfo) (context.Context, context.CancelFunc) {
	ctx, cancel := callContext(ctx, call)
	ctx, cancelTimeout := context.WithTimeout(ctx, notifyTimeout)
	return ctx, func() {
		cancelTimeout()
		cancel()
	}
}

func (r *router) onResourceUpdated(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	if r.onUpdated == nil || req.Params == nil {
		return
	}
	p := *req.Params
	if _, ok := p.Meta[mcp.MetaKeySubscriptionID]; ok { // names this session's subscription, nobody else's
		p.Meta = maps.Clone(p.Meta)
		delete(p.Meta, mcp.MetaKeySubscriptionID)
	}
	r.onUpdated(r.server, &p)
}

func (r *router) sample(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	const what = "sampling/createMessage"
	peer, call, err := r.peerFor(ctx, what)
	if err != nil {
		return nil, err
	}
	if !canSample(peer.Capabilities()) {
		return nil, r.errUnsupported(what)
	}
	ctx, cancel := callContext(ctx, call)
	defer cancel()
	return peer.CreateMessage(ctx, p)
}

func (r *router) elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	const what = "elicitation/create"
	peer, call, err := r.peerFor(ctx, what)
	if err != nil {
		return nil, err
	}
	mode := p.Mode
	if mode == "" && p.URL != "" {
		mode = "url"
	}
	if !canElicit(peer.Capabilities(), mode) {
		return nil, r.errUnsupported(what)
	}
	ctx, cancel := callContext(ctx, call)
	defer cancel()
	return peer.Elicit(ctx, p)
}

func (r *router) listRoots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	const what = "roots/list"
	peer, call, err := r.peerFor(ctx, what)
	if err != nil {
		return nil, err
	}
	if !canListRoots(peer.Capabilities()) {
		return nil, r.errUnsupported(what)
	}
	ctx, cancel := callContext(ctx, call)
	defer cancel()
	return peer.ListRoots(ctx, p)
}

// rootsMiddleware answers roots/list by asking the peer: the SDK client has
// no roots handler, only the static list of Client.AddRoots.
func (r *router) rootsMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "roots/list" {
			return next(ctx, method, req)
		}
		p, _ := req.GetParams().(*mcp.ListRootsParams)
		if p == nil {
			p = &mcp.ListRootsParams{}
		}
		res, err := r.listRoots(ctx, p)
		if err != nil {
			return nil, err
		}
		return res, nil
	}
}

// multiRoundTrip fulfils the input requests a new-protocol server embeds in
// a call's result, then repeats the call with the answers. It replaces the
// SDK's middleware, which answers roots from the client's static list
// instead of asking the peer. The call's context attributes every input
// request to the call's own peer.
func (r *router) multiRoundTrip(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call", "prompts/get", "resources/read":
		default:
			return next(ctx, method, req)
		}
		shed := 0
		for round := 1; ; round++ {
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			if rt := resultType(res); rt != "" && rt != "complete" && rt != "input_required" {
				// Neither an answer nor a question: passing it on as a
				// complete result would hand the caller something the
				// server did not say.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
					Message: fmt.Sprintf("server %q answered %s with an unknown resultType %q", r.server, method, rt)}
			}
			asks, state, ok := inputRequired(res)
			if !ok {
				return res, nil
			}
			if c, _ := callFrom(ctx); c != nil && c.peer != nil && stateless(c.peer) {
				return res, nil // the caller answers by repeating its request
			}
			if len(asks) == 0 { // the server sheds load: ask again
				if shed++; shed >= maxShedRounds {
					return nil, fmt.Errorf("multi round-trip: server still busy after %d rounds", shed)
				}
			}
			if round >= maxRounds {
				return nil, fmt.Errorf("multi round-trip: no result after %d rounds", round)
			}
			answers, err := r.fulfil(ctx, asks)
			if err != nil {
				return nil, err
			}
			if req, err = withAnswers(req, answers, state); err != nil {
				return nil, err
			}
		}
	}
}

// resultType is the resultType a result arrived with ("" when absent). The
// SDK keeps it unexported and reports only whether it is input_required.
func resultType(res mcp.Result) string {
	switch res.(type) {
	case *mcp.CallToolResult, *mcp.GetPromptResult, *mcp.ReadResourceResult:
	default:
		return ""
	}
	v := reflect.ValueOf(res)
	if v.IsNil() {
		return ""
	}
	f := v.Elem().FieldByName("resultType")
	if !f.IsValid() || f.Kind() != reflect.String {
		return ""
	}
	return f.String()
}

// inputRequired returns the input requests of a result that asks for input.
func inputRequired(res mcp.Result) (mcp.InputRequestMap, string, bool) {
	switch res := res.(type) {
	case *mcp.CallToolResult:
		return res.InputRequests, res.RequestState, res.NeedsInput()
	case *mcp.GetPromptResult:
		return res.InputRequests, res.RequestState, res.NeedsInput()
	case *mcp.ReadResourceResult:
		return res.InputRequests, res.RequestState, res.NeedsInput()
	}
	return nil, "", false
}

// withAnswers is the request of the next round: a copy of req's params
// carrying the answers and the server's state.
func withAnswers(req mcp.Request, answers mcp.InputResponseMap, state string) (mcp.Request, error) {
	cs, _ := req.GetSession().(*mcp.ClientSession)
	switch p := req.GetParams().(type) {
	case *mcp.CallToolParams:
		q := *p
		q.InputResponses, q.RequestState = answers, state
		return &mcp.ClientRequest[*mcp.CallToolParams]{Session: cs, Params: &q}, nil
	case *mcp.GetPromptParams:
		q := *p
		q.InputResponses, q.RequestState = answers, state
		return &mcp.ClientRequest[*mcp.GetPromptParams]{Session: cs, Params: &q}, nil
	case *mcp.ReadResourceParams:
		q := *p
		q.InputResponses, q.RequestState = answers, state
		return &mcp.ClientRequest[*mcp.ReadResourceParams]{Session: cs, Params: &q}, nil
	}
	return nil, fmt.Errorf("multi round-trip: unsupported params %T", req.GetParams())
}

// fulfil answers input requests one at a time, in the order of their IDs:
// they may all go to one person.
func (r *router) fulfil(ctx context.Context, asks mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	answers := make(mcp.InputResponseMap, len(asks))
	for _, id := range slices.Sorted(maps.Keys(asks)) {
		a, err := r.answer(ctx, asks[id])
		if err != nil {
			return nil, fmt.Errorf("multi round-trip: input request %q: %w", id, err)
		}
		answers[id] = a
	}
	return answers, nil
}

func (r *router) answer(ctx context.Context, ask mcp.InputRequest) (mcp.InputResponse, error) {
	switch p := ask.(type) {
	case *mcp.ElicitParams:
		return r.elicit(ctx, p)
	case *mcp.CreateMessageParams:
		return r.sample(ctx, p)
	case *mcp.CreateMessageWithToolsParams:
		base, err := samplingBase(p)
		if err != nil {
			return nil, err
		}
		return r.sample(ctx, base)
	case *mcp.ListRootsParams:
		return r.listRoots(ctx, p)
	}
	return nil, fmt.Errorf("unsupported input request %T", ask)
}

// samplingBase is p without tools, as the SDK hands it to a client's
// CreateMessageHandler: a peer relays basic sampling only.
func samplingBase(p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageParams, error) {
	msgs := make([]*mcp.SamplingMessage, 0, len(p.Messages))
	for _, m := range p.Messages {
		if len(m.Content) > 1 {
			return nil, errors.New("sampling message has several content blocks, which the gateway does not relay")
		}
		var c mcp.Content
		if len(m.Content) == 1 {
			c = m.Content[0]
		}
		msgs = append(msgs, &mcp.SamplingMessage{Role: m.Role, Content: c})
	}
	return &mcp.CreateMessageParams{
		Meta:             p.Meta,
		IncludeContext:   p.IncludeContext,
		MaxTokens:        p.MaxTokens,
		Messages:         msgs,
		Metadata:         p.Metadata,
		ModelPreferences: p.ModelPreferences,
		StopSequences:    p.StopSequences,
		SystemPrompt:     p.SystemPrompt,
		Temperature:      p.Temperature,
	}, nil
}

// newClient returns an SDK client whose server-to-client traffic goes
// through r. It declares caps, and installs the sampling and elicitation
// handlers only where caps declares them, since the SDK infers the
// capabilities from the handlers. base carries any further handlers.
func newClient(impl *mcp.Implementation, log *slog.Logger, r *router, caps *mcp.ClientCapabilities, base mcp.ClientOptions) *mcp.Client {
	o := base
	o.Logger = log
	o.Capabilities = caps
	o.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true} // r.multiRoundTrip instead
	// Fallbacks: the connection relays these as it reads them (notify.go).
	o.ProgressNotificationHandler = func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) { r.progressTo(ctx, req.Params) }
	o.LoggingMessageHandler = func(ctx context.Context, req *mcp.LoggingMessageRequest) { r.logTo(ctx, req.Params) }
	o.ResourceUpdatedHandler = r.onResourceUpdated
	if caps.Sampling != nil {
		o.CreateMessageHandler = func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return r.sample(ctx, req.Params)
		}
	}
	if caps.Elicitation != nil {
		o.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return r.elicit(ctx, req.Params)
		}
	}
	c := mcp.NewClient(impl, &o)
	c.AddSendingMiddleware(r.multiRoundTrip)
	c.AddReceivingMiddleware(r.rootsMiddleware)
	return c
}
