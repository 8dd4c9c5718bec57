package upstream

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Peer is the downstream client a request is made for. Upstream traffic that
// belongs to the request (progress, log messages, sampling, elicitation and
// roots requests) is relayed to it. The front's adapter around
// *mcp.ServerSession implements it.
//
// Its methods are called from the upstream sessions' goroutines, concurrently
// and possibly after the request that introduced the peer has returned (a
// per-peer session relays log messages between calls), so they must be safe
// for concurrent use and fail rather than block once Done is closed.
//
// For a message that belongs to a call, ctx carries the values of the
// context the call was made with (it ends with the call): the downstream
// request's, from which the go-sdk server learns to send the message on that
// request's stream, ahead of its response.
type Peer interface {
	ID() string                            // unique per downstream session
	Done() <-chan struct{}                 // closed when the downstream session ends
	Capabilities() *mcp.ClientCapabilities // what the downstream client declared (may be nil)
	NotifyProgress(ctx context.Context, p *mcp.ProgressNotificationParams) error
	Log(ctx context.Context, p *mcp.LoggingMessageParams) error
	CreateMessage(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
	Elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)
	ListRoots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error)
}

// A StatelessPeer is a caller of the stateless revision (2026-07-28 and
// later): it has no session of its own to receive requests on, and answers
// input requests by repeating its request with the answers; it lives for
// one call. An input_required result of a new-protocol server is returned
// to it as it is rather than fulfilled; such a server gets it on the shared
// session. Anything a classic server asks during the call goes to the
// peer's methods, which hand it to the caller in a result of their own; a
// classic sse/http server gets it on a session that serves only that call
// while it runs, so that those requests are attributed to it (a session
// of its own, or a pooled one: see [PooledPeer]).
type StatelessPeer interface {
	Peer
	Stateless() bool
}

// A PooledPeer is a [StatelessPeer] whose calls may reuse the session a
// classic sse/http server opened for an earlier call of the same client,
// once that call has ended: a stateless caller has no session of its own,
// so a session per call would cost the server a handshake for every call,
// where a direct client of that server keeps one session for all of them.
// PoolKey names the client (the caller's identity); calls whose peers
// declare different capabilities never share a session.
type PooledPeer interface {
	StatelessPeer
	PoolKey() string
}

// poolKey is the key under which p's per-peer sessions are pooled, "" when
// they are not: the peer's client and the capabilities its session
// declares upstream.
func poolKey(p Peer) string {
	pp, ok := p.(PooledPeer)
	if !ok || !pp.Stateless() {
		return ""
	}
	k := pp.PoolKey()
	if k == "" {
		return ""
	}
	caps, err := json.Marshal(capabilitiesMeta(peerCapabilities(p)))
	if err != nil {
		return ""
	}
	return k + "\x00" + string(caps)
}

// stateless reports whether p is a [StatelessPeer] that says so.
func stateless(p Peer) bool {
	sp, ok := p.(StatelessPeer)
	return ok && sp.Stateless()
}

type peerKey struct{}

// WithPeer returns ctx carrying p. [Manager.CallTool], [Manager.ReadResource],
// [Manager.GetPrompt], [Manager.Complete] and [Manager.SetLoggingLevel] read it
// to relay what the upstream sends during the request to p; a nil p leaves ctx
// as it is.
func WithPeer(ctx context.Context, p Peer) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerFrom returns the peer stored in ctx by [WithPeer].
func PeerFrom(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok && p != nil
}

// callInfo marks the context of one relayed call. The multi-round-trip
// middleware finds it in the context of the call whose result asked for
// input, which attributes that input request exactly, whatever the session.
type callInfo struct {
	peer Peer            // nil for a call made without a peer (REST)
	ctx  context.Context // the context the call was made with
}

// callContext is ctx with the values of call's context, ending when either
// ends; just ctx without a call.
func callContext(ctx context.Context, call *callInfo) (context.Context, context.CancelFunc) {
	if call == nil || call.ctx == nil {
		return context.WithCancel(ctx)
	}
	merged, cancel := context.WithCancel(call.ctx)
	stop := context.AfterFunc(ctx, cancel)
	return merged, func() {
		stop()
		cancel()
	}
}

type callKey struct{}

func callFrom(ctx context.Context) (*callInfo, bool) {
	c, ok := ctx.Value(callKey{}).(*callInfo)
	return c, ok
}

// Capability checks. A nil set of capabilities declares nothing.

func canSample(c *mcp.ClientCapabilities) bool { return c != nil && c.Sampling != nil }

func canListRoots(c *mcp.ClientCapabilities) bool {
	return c != nil && (c.RootsV2 != nil || c.Roots.ListChanged)
}

// canElicit reports whether c accepts an elicitation in mode ("" is form).
// A client that declares neither mode supports form, for compatibility with
// the protocol versions before modes existed.
func canElicit(c *mcp.ClientCapabilities, mode string) bool {
	if c == nil || c.Elicitation == nil {
		return false
	}
	e := c.Elicitation
	if mode == "url" {
		return e.URL != nil
	}
	return e.Form != nil || e.URL == nil
}

// capabilitiesMeta is c in the form of the per-request _meta of the new
// protocol. Built by hand: mcp.ClientCapabilities marshals an absent roots
// capability as present (go-sdk #607).
func capabilitiesMeta(c *mcp.ClientCapabilities) map[string]any {
	m := map[string]any{}
	if c.Sampling != nil {
		m["sampling"] = c.Sampling
	}
	if c.Elicitation != nil {
		m["elicitation"] = c.Elicitation
	}
	if c.RootsV2 != nil {
		m["roots"] = c.RootsV2
	}
	return m
}

// peerCapabilities is what a per-peer session declares upstream: the peer's
// own sampling, elicitation and roots support, nothing the gateway could not
// relay (sampling with tools, roots list_changed, experimental features).
func peerCapabilities(p Peer) *mcp.ClientCapabilities {
	c := p.Capabilities()
	out := &mcp.ClientCapabilities{}
	if canSample(c) {
		out.Sampling = &mcp.SamplingCapabilities{Context: c.Sampling.Context}
	}
	if c != nil && c.Elicitation != nil {
		e := *c.Elicitation
		out.Elicitation = &e
	}
	if canListRoots(c) {
		out.RootsV2 = &mcp.RootCapabilities{}
	}
	return out
}

// sharedCapabilities is what a shared (primary) session declares upstream:
// everything the gateway can relay, so that servers offer the features that
// need it; each request is then checked against the capabilities of the peer
// it is attributed to.
func sharedCapabilities() *mcp.ClientCapabilities {
	return &mcp.ClientCapabilities{
		Sampling:    &mcp.SamplingCapabilities{},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		RootsV2:     &mcp.RootCapabilities{},
	}
}
