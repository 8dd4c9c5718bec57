// Package front is the downstream MCP server: the catalog served as an MCP
// server over Streamable HTTP, SSE and stdio — either the whole catalog
// under namespaced names (/mcp), or one upstream under its own names
// (/servers/{name}/mcp, a transparent endpoint).
//
// Proxied tools, resources and prompts are registered raw on a go-sdk
// mcp.Server and kept in step with the catalog, so the SDK does what it does
// best (pagination, list_changed notifications for every protocol version,
// per-session log levels and resource subscriptions); calls are forwarded
// through a Caller (the invoke pipeline) with the arguments as the client
// sent them and the calling session attached, so that what the upstream sends
// while serving a call reaches that client.
package front

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

// What a Front forwards goes through a collaborator declared by the
// handlers that use it: tools/call ([ToolCaller]), resources
// ([ResourceRelay]), prompts ([PromptGetter]), completions ([Completer]) and
// logging/setLevel ([LevelSetter]). server is "" on the aggregate front
// (names and URIs are namespaced) and the server's name on a transparent
// front (names and URIs are the upstream's).

// ToolCaller runs a tools/call (direct, or through the call_tool
// meta-tool) through the pipeline.
type ToolCaller interface {
	CallTool(ctx context.Context, c invoke.Call) (*invoke.Result, error)
}

// ResourceRelay reads resources and relays subscriptions to them.
type ResourceRelay interface {
	ReadResource(ctx context.Context, server string, p *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error)
	Subscribe(ctx context.Context, server string, p *mcp.SubscribeParams) error
	Unsubscribe(ctx context.Context, server string, p *mcp.UnsubscribeParams) error
}

// PromptGetter renders prompts.
type PromptGetter interface {
	GetPrompt(ctx context.Context, server string, p *mcp.GetPromptParams) (*mcp.GetPromptResult, error)
}

// Completer relays completion/complete.
type Completer interface {
	Complete(ctx context.Context, server string, p *mcp.CompleteParams) (*mcp.CompleteResult, error)
}

// LevelSetter relays logging/setLevel.
type LevelSetter interface {
	SetLoggingLevel(ctx context.Context, server string, p *mcp.SetLoggingLevelParams) error
}

// Caller is everything a Front forwards, what [New] takes.
// *invoke.Pipeline implements it.
type Caller interface {
	ToolCaller
	ResourceRelay
	PromptGetter
	Completer
	LevelSetter
}

// Options configure a Front. nil means defaults.
type Options struct {
	Logger *slog.Logger
	// Implementation is announced to clients; default {Name: "switchboard"}.
	Implementation *mcp.Implementation
	// Instructions, if set, are sent to clients in initialize.
	Instructions string
	// Server, if set, makes this a transparent front for that one upstream:
	// only its items, under their original names and URIs.
	Server string
	// WithPeer attaches the calling downstream session to the ctx of a
	// forwarded request, so the upstream side can relay what belongs to it.
	// nil: nothing is attached.
	WithPeer func(ctx context.Context, p *Peer) context.Context
	// Visible reports whether a caller may see a tool in tools/list; nil
	// shows every tool. Calls are authorized by the pipeline either way.
	Visible func(id authz.Identity, t catalog.Tool) bool
	// ServerVisible reports whether a caller may see a server's resources,
	// templates and prompts in their lists; nil shows them all. Reads are
	// authorized by the pipeline either way.
	ServerVisible func(id authz.Identity, server string) bool
	// ToolExposure is ExposeAll (default) or ExposeSearch: then tools/list
	// shows only the meta-tools search_tools and call_tool, which reach
	// every tool the caller may call. Ignored on a transparent front.
	ToolExposure string
	// MetaToolPrefix, if set, namespaces the meta-tools like a server's
	// tools (prefix + separator + name, e.g. switchboard.search_tools), for
	// clients configured with the old names. "" (default): unprefixed.
	MetaToolPrefix string
	// Searcher serves search_tools; required for ExposeSearch.
	Searcher Searcher
	// Sealer seals the requestState of input_required results given to
	// callers of the stateless revision. Replicas given the same key accept
	// each other's state. nil: a random key of this process.
	Sealer Sealer
	// InputTimeout is how long a stateless caller has to answer an
	// input_required result; zero means DefaultInputTimeout.
	InputTimeout time.Duration
	// Replica names this process among the gateway's replicas, in the
	// state of calls parked here.
	Replica string
	// ReplicaAddr returns the base URL (http://host:port) of another
	// replica, to pass it a retry of a call parked there. nil: retries are
	// served where they land (one replica, or sticky routing).
	ReplicaAddr func(ctx context.Context, replica string) (string, error)
	// Spend records that a requestState was answered, in a record all
	// replicas share, and reports whether this was the first time. nil: a
	// record of this process.
	Spend func(ctx context.Context, nonce string, expires time.Time) (first bool, err error)
	// Tracer, if set, makes a span of every request received, continuing
	// the caller's trace (traceparent in _meta or in the HTTP headers).
	// nil: tracing is off and costs nothing.
	Tracer trace.Tracer
}

// Keys of a tools/call's _meta that the gateway reads and removes before
// forwarding (see [invoke.NewCall]): they are for the gateway, not the
// upstream (an approval token must never reach a third-party server).
const (
	MetaIdempotencyKey = invoke.MetaIdempotencyKey
	MetaApprovalToken  = invoke.MetaApprovalToken
	MetaCorrelationID  = invoke.MetaCorrelationID
	MetaTicketID       = invoke.MetaTicketID
	MetaTaskID         = invoke.MetaTaskID
	// MetaServedBy is set on a result's _meta when a fallback tool served
	// the call: the namespaced name of that tool.
	MetaServedBy = invoke.MetaPrefix + "served-by"
)

// IdentityExtraKey is the auth.TokenInfo.Extra key under which the HTTP
// front door leaves the caller's authz.Identity.
const IdentityExtraKey = "switchboard/identity"

// ProtocolVersions are the MCP versions the front speaks: every version of
// the SDK, the legacy ones (2024-11-05 to 2025-11-25, with sessions) and the
// stateless ones (2026-07-28 and later, served per request; see
// [Front.StreamableHandler]).
var ProtocolVersions = mcp.SupportedProtocolVersions()

// ErrorMetaKey is the _meta key under which an isError result produced by
// the gateway itself (not by the upstream tool) carries its stable code; like
// every key the gateway reads or writes, it is under [invoke.MetaPrefix].
const ErrorMetaKey = invoke.MetaPrefix + "error"

// Front serves the catalog (or one server of it) as one MCP server. Create
// it with [New], stop following the catalog with [Front.Close].
type Front struct {
	cat *catalog.Catalog
	// synced is the catalog snapshot whose tools are registered with the
	// SDK (syncLocked stores it when it is done): calls are routed by it,
	// not by the catalog's newest, which the SDK may not know yet.
	synced   atomic.Pointer[catalog.Snapshot]
	logger   *slog.Logger
	server   *mcp.Server
	scope    string // Options.Server
	withPeer func(context.Context, *Peer) context.Context
	visible  func(authz.Identity, catalog.Tool) bool
	srvVis   func(authz.Identity, string) bool
	searcher Searcher

	// The parts of New's Caller, each used by its own handlers.
	toolCaller    ToolCaller
	resourceRelay ResourceRelay
	promptGetter  PromptGetter
	completer     Completer
	levelSetter   LevelSetter

	// metaSearch and metaCall are the meta-tools' names in search mode,
	// "" otherwise.
	metaSearch, metaCall string
	metaTools            []*mcp.Tool
	peers                peerSet
	mrtr                 *mrtr
	replicaAddr          func(context.Context, string) (string, error)
	tracer               trace.Tracer // nil: off

	// noFastPath turns the tools/call fast path off (tests compare it
	// with the SDK's path).
	noFastPath bool
	fastServed atomic.Int64 // calls the fast path answered (for tests)
	impl       *mcp.Implementation
	// headerTools are the served tools whose input schema mentions
	// x-mcp-header (see hasHeaderParams); syncLocked keeps it.
	fastMu      sync.RWMutex
	headerTools map[string]bool

	mu          sync.Mutex        // serializes sync; held while the catalog calls us
	tools       map[string]string // registered tool name -> definition hash
	shadowed    map[string]bool   // upstream tools hidden by a meta-tool's name (warned once)
	resources   map[string]string // key -> JSON of the definition served
	templates   map[string]string
	prompts     map[string]string
	unsubscribe func()
}

// New builds the MCP server and registers the current catalog on it. It
// follows catalog changes until Close.
func New(cat *catalog.Catalog, caller Caller, opts *Options) *Front {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Implementation == nil {
		o.Implementation = &mcp.Implementation{Name: "switchboard", Version: "dev"}
	}
	if o.WithPeer == nil {
		o.WithPeer = func(ctx context.Context, _ *Peer) context.Context { return ctx }
	}
	f := &Front{
		cat:         cat,
		logger:      o.Logger,
		scope:       o.Server,
		withPeer:    o.WithPeer,
		visible:     o.Visible,
		srvVis:      o.ServerVisible,
		searcher:    o.Searcher,
		peers:       peerSet{m: map[*mcp.ServerSession]*Peer{}},
		mrtr:        newMRTR(o.Sealer, o.InputTimeout, o.Replica),
		replicaAddr: o.ReplicaAddr,
		tracer:      o.Tracer,
		tools:       map[string]string{},
		resources:   map[string]string{},
		templates:   map[string]string{},
		prompts:     map[string]string{},

		toolCaller:    caller,
		resourceRelay: caller,
		promptGetter:  caller,
		completer:     caller,
		levelSetter:   caller,
	}
	f.mrtr.shared = o.Spend
	f.impl = o.Implementation
	f.server = mcp.NewServer(o.Implementation, &mcp.ServerOptions{
		Instructions: o.Instructions,
		// The SDK logs every session start and end at info; that is debug
		// detail for a gateway serving many clients.
		Logger: slog.New(&demoteHandler{o.Logger.Handler()}),
		// Declared up front: the catalog may be empty at initialize time and
		// fill up later, and clients only listen for list_changed on
		// capabilities they were told about. Completion, subscription and
		// logging are relayed to whichever upstream owns the item; an
		// upstream without the feature answers with its own error.
		Capabilities: &mcp.ServerCapabilities{
			Tools:       &mcp.ToolCapabilities{ListChanged: true},
			Resources:   &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
			Prompts:     &mcp.PromptCapabilities{ListChanged: true},
			Completions: &mcp.CompletionCapabilities{},
			Logging:     &mcp.LoggingCapabilities{},
		},
		CompletionHandler: func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			res, err := f.completer.Complete(f.peerCtx(ctx, req.Session), f.scope, req.Params)
			return res, rpcError(err)
		},
		SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
			return rpcError(f.resourceRelay.Subscribe(f.peerCtx(ctx, req.Session), f.scope, req.Params))
		},
		UnsubscribeHandler: func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			return rpcError(f.resourceRelay.Unsubscribe(f.peerCtx(ctx, req.Session), f.scope, req.Params))
		},
		SupportedProtocolVersions: ProtocolVersions,
		SetCacheable:              f.cacheable,
	})
	// sessionUse first: a session is busy for the whole of each request.
	f.server.AddReceivingMiddleware(sessionUse, f.routeMiddleware)
	if f.tracer != nil {
		// Added last, so outermost: the span covers the whole request.
		f.server.AddReceivingMiddleware(f.traceMiddleware)
	}
	if o.ToolExposure == ExposeSearch && o.Server == "" && o.Searcher != nil {
		f.addMetaTools(o.MetaToolPrefix, cat.Snapshot().Separator())
	}
	f.mu.Lock()
	f.unsubscribe = cat.Subscribe(func(_, next *catalog.Snapshot) { f.syncLocked(next) })
	f.syncLocked(cat.Snapshot())
	f.mu.Unlock()
	return f
}

// Server returns the underlying MCP server (for transports and tests).
func (f *Front) Server() *mcp.Server { return f.server }

// Scope returns the server a transparent front serves, "" for the aggregate.
func (f *Front) Scope() string { return f.scope }

// Close stops following the catalog. Sessions already connected are closed
// by their transports.
func (f *Front) Close() {
	f.mrtr.close()
	f.mu.Lock()
	if f.unsubscribe != nil {
		f.unsubscribe()
		f.unsubscribe = nil
	}
	f.mu.Unlock()
	// End the live client sessions: their SDK goroutines would otherwise
	// wait for a DELETE or the idle timeout.
	for ss := range f.server.Sessions() {
		_ = ss.Close()
	}
}

// RunStdio serves one client over stdin/stdout until ctx is done or the
// client goes away.
func (f *Front) RunStdio(ctx context.Context) error {
	return f.server.Run(ctx, &mcp.StdioTransport{})
}

// ResourceUpdated tells the sessions subscribed to the resource that server
// reported changed (original URI) that it changed. The SDK keeps the
// subscriptions, so only subscribed clients hear of it.
func (f *Front) ResourceUpdated(ctx context.Context, server string, p *mcp.ResourceUpdatedNotificationParams) {
	if f.scope != "" && f.scope != server {
		return
	}
	out := *p
	if f.scope == "" {
		out.URI = f.cat.Snapshot().NamespaceURI(server, p.URI)
	}
	if err := f.server.ResourceUpdated(ctx, &out); err != nil {
		f.logger.Debug("relaying resources/updated", "server", server, "error", err)
	}
}

// Announce tells this front's clients that server's lists changed when the
// server said so but the lists served here did not change (the server
// re-registered an item as it was): the SDK announces a change when an
// item is registered again, so one item of each such list is, unchanged.
func (f *Front) Announce(server string, tools, resources, prompts bool) {
	if !f.inScope(server) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	snap := f.cat.Snapshot()
	if tools {
		for _, t := range snap.ServerTools(server) {
			name := t.Name
			if f.scope != "" {
				name = t.OriginalName
			}
			if _, ok := f.tools[name]; !ok || !t.Available {
				continue
			}
			def := t.Def
			if f.scope != "" {
				cp := *t.Def
				cp.Name = t.OriginalName
				def = &cp
			}
			_ = guard(func() { f.server.AddTool(def, f.callTool) })
			break
		}
	}
	if resources {
		for _, r := range snap.Resources() {
			if r.Server != server || !r.Available {
				continue
			}
			def := r.Def
			if f.scope != "" {
				cp := *r.Def
				cp.URI, cp.Name = r.OriginalURI, r.OriginalName
				def = &cp
			}
			if _, ok := f.resources[def.URI]; ok {
				_ = guard(func() { f.server.AddResource(def, f.readResource) })
				break
			}
		}
	}
	if prompts {
		for _, p := range snap.Prompts() {
			if p.Server != server || !p.Available {
				continue
			}
			def := p.Def
			if f.scope != "" {
				cp := *p.Def
				cp.Name = p.OriginalName
				def = &cp
			}
			if _, ok := f.prompts[def.Name]; ok {
				_ = guard(func() { f.server.AddPrompt(def, f.getPrompt) })
				break
			}
		}
	}
}

// inScope reports whether an item of server is served by this front.
func (f *Front) inScope(server string) bool { return f.scope == "" || f.scope == server }

// syncLocked brings the server's registrations in line with snap: only items
// of available servers in scope are listed, under the names this front uses.
// Called with f.mu held (the catalog calls its subscribers one change at a
// time).
func (f *Front) syncLocked(snap *catalog.Snapshot) {
	defer f.synced.Store(snap)
	want := map[string]*mcp.Tool{}
	shadowed := map[string]bool{}
	defer func() { f.shadowed = shadowed }()
	hash := map[string]string{}
	for _, t := range snap.Tools() {
		if !t.Available || !f.inScope(t.Server) {
			continue
		}
		def := t.Def
		if f.scope != "" {
			cp := *t.Def
			cp.Name = t.OriginalName
			def = &cp
		}
		if f.isMeta(def.Name) {
			// The gateway's own meta-tool keeps its name; the upstream tool
			// is shadowed here and reachable through call_tool.
			shadowed[def.Name] = true
			if !f.shadowed[def.Name] {
				f.logger.Warn("upstream tool shadowed by a meta-tool of the same name; call it through call_tool",
					"tool", def.Name, "server", t.Server)
			}
			continue
		}
		want[def.Name] = def
		hash[def.Name] = t.Hash
	}
	var remove []string
	for name, h := range f.tools {
		if _, ok := want[name]; !ok || hash[name] != h {
			remove = append(remove, name)
		}
	}
	if len(remove) > 0 {
		f.server.RemoveTools(remove...)
		f.fastMu.Lock()
		for _, n := range remove {
			delete(f.tools, n)
			delete(f.headerTools, n)
		}
		f.fastMu.Unlock()
	}
	for name, def := range want {
		if _, ok := f.tools[name]; ok {
			continue
		}
		if err := guard(func() { f.server.AddTool(def, f.callTool) }); err != nil {
			f.logger.Warn("tool not served", "tool", name, "error", err)
			continue
		}
		f.tools[name] = hash[name]
		if hasHeaderParams(def) {
			f.fastMu.Lock()
			if f.headerTools == nil {
				f.headerTools = map[string]bool{}
			}
			f.headerTools[name] = true
			f.fastMu.Unlock()
		}
	}

	wantRes := wantedDefs(f, snap.Resources(),
		func(r catalog.Resource) (string, bool, *mcp.Resource) { return r.Server, r.Available, r.Def },
		func(r catalog.Resource, d *mcp.Resource) { d.URI, d.Name = r.OriginalURI, r.OriginalName },
		func(d *mcp.Resource) string { return d.URI })
	syncSet(f.resources, wantRes, f.server.RemoveResources, func(d *mcp.Resource) error {
		return guard(func() { f.server.AddResource(d, f.readResource) })
	}, f.logger)

	wantTpl := wantedDefs(f, snap.Templates(),
		func(t catalog.Template) (string, bool, *mcp.ResourceTemplate) { return t.Server, t.Available, t.Def },
		func(t catalog.Template, d *mcp.ResourceTemplate) {
			d.URITemplate, d.Name = t.OriginalURITemplate, t.OriginalName
		},
		func(d *mcp.ResourceTemplate) string { return d.URITemplate })
	syncSet(f.templates, wantTpl, f.server.RemoveResourceTemplates, func(d *mcp.ResourceTemplate) error {
		return guard(func() { f.server.AddResourceTemplate(d, f.readResource) })
	}, f.logger)

	wantPr := wantedDefs(f, snap.Prompts(),
		func(p catalog.Prompt) (string, bool, *mcp.Prompt) { return p.Server, p.Available, p.Def },
		func(p catalog.Prompt, d *mcp.Prompt) { d.Name = p.OriginalName },
		func(d *mcp.Prompt) string { return d.Name })
	syncSet(f.prompts, wantPr, f.server.RemovePrompts, func(d *mcp.Prompt) error {
		return guard(func() { f.server.AddPrompt(d, f.getPrompt) })
	}, f.logger)
}

// wantedDefs returns the definitions of the available items of one kind
// in this front's scope, keyed as the front serves them. item gives an
// item's server, availability and definition; a server-scoped front serves
// each item under its upstream's names, which original sets on a copy of
// the definition (the catalog's is shared between snapshots).
func wantedDefs[I, D any](f *Front, items []I, item func(I) (server string, available bool, def *D), original func(I, *D), key func(*D) string) map[string]*D {
	want := map[string]*D{}
	for _, it := range items {
		server, available, def := item(it)
		if !available || !f.inScope(server) {
			continue
		}
		if f.scope != "" {
			cp := *def
			original(it, &cp)
			def = &cp
		}
		want[key(def)] = def
	}
	return want
}

// syncSet reconciles the registered items (key -> JSON of the definition)
// with the wanted ones. Only additions and changed definitions are added, so
// an unrelated catalog change does not make clients re-list everything.
func syncSet[T any](have map[string]string, want map[string]T, remove func(...string), add func(T) error, logger *slog.Logger) {
	var gone []string
	for k := range have {
		if _, ok := want[k]; !ok {
			gone = append(gone, k)
		}
	}
	if len(gone) > 0 {
		remove(gone...)
		for _, k := range gone {
			delete(have, k)
		}
	}
	for k, v := range want {
		b, _ := json.Marshal(v)
		if have[k] == string(b) {
			continue
		}
		if err := add(v); err != nil {
			logger.Warn("item not served", "name", k, "error", err)
			continue
		}
		have[k] = string(b)
	}
}

// guard turns a panic of the SDK's registration (it panics on definitions it
// considers programmer errors) into an error: an upstream's odd item must not
// take the gateway down.
func guard(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rejected by the MCP server: %v", r)
		}
	}()
	fn()
	return nil
}

// lookup resolves a tool name as this front names tools.
func (f *Front) lookup(name string) (catalog.Tool, bool) {
	snap := f.synced.Load()
	if snap == nil {
		snap = f.cat.Snapshot()
	}
	if f.scope != "" {
		return snap.ToolByOriginal(f.scope, name)
	}
	return snap.Tool(name)
}

// held reports whether name is a tool the catalog holds back (quarantined),
// as this front names tools.
func (f *Front) held(name string) bool {
	snap := f.cat.Snapshot()
	if f.scope != "" {
		_, ok := snap.HeldByOriginal(f.scope, name)
		return ok
	}
	_, ok := snap.HeldTool(name)
	return ok
}

// routeMiddleware answers tools/call for names the SDK does not have
// registered: the other separator form, and tools whose server is not
// available (so the client learns which server is down and why, rather than
// "unknown tool"); and relays logging/setLevel upstream.
func (f *Front) routeMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "logging/setLevel":
			res, err := next(ctx, method, req) // the SDK filters this session's logs by it
			if err == nil {
				if r, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams]); ok && r.Params != nil {
					if err := f.levelSetter.SetLoggingLevel(f.peerCtx(ctx, r.Session), f.scope, r.Params); err != nil {
						f.logger.Debug("relaying logging/setLevel", "error", err)
					}
				}
			}
			return res, err
		case "tools/list":
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				switch {
				case f.metaSearch != "":
					res = f.onlyMeta(lr)
				case f.visible != nil:
					res = f.filterTools(callerIdentity(ctx, req), lr)
				}
			}
			return res, err
		case "resources/list", "resources/templates/list", "prompts/list":
			res, err := next(ctx, method, req)
			if err == nil && f.srvVis != nil {
				res = f.filterByServer(callerIdentity(ctx, req), res)
			}
			return res, err
		case "tools/call":
		default:
			return next(ctx, method, req)
		}
		ctr, ok := req.(*mcp.CallToolRequest)
		if !ok || ctr.Params == nil || f.isMeta(ctr.Params.Name) {
			return next(ctx, method, req)
		}
		// lookup reads the snapshot syncLocked last registered with the
		// SDK, so an available tool under its served name is one the SDK
		// knows: let it dispatch it.
		t, known := f.lookup(ctr.Params.Name)
		if !known && !f.held(ctr.Params.Name) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: fmt.Sprintf("unknown tool %q", ctr.Params.Name)}
		}
		// A quarantined tool goes to the pipeline, which refuses it with the
		// reason (tool_definition_changed), as on REST.
		if known && t.Available && (t.Name == ctr.Params.Name || f.scope != "") {
			return next(ctx, method, req)
		}
		res, err := f.callTool(ctx, ctr)
		if err == nil && res != nil && res.Content == nil {
			res.Content = []mcp.Content{}
		}
		return res, err
	}
}

// peerCtx attaches the calling session to ctx.
func (f *Front) peerCtx(ctx context.Context, ss *mcp.ServerSession) context.Context {
	if ss == nil {
		return ctx
	}
	return f.withPeer(ctx, f.peers.get(ss))
}

// callTool serves one tools/call: forwarded as it is for a caller with a
// session, through [Front.serveStateless] for a caller of the stateless
// revision.
func (f *Front) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if !statelessRequest(req) {
		return f.forwardCall(f.peerCtx(ctx, req.Session), req, "", nil)
	}
	res, err := f.serveStateless(ctx, req, "tools/call", req.Params.Name, req.Params.InputResponses, req.Params.RequestState,
		func(ctx context.Context, up string, answers mcp.InputResponseMap) (mcp.Result, error) {
			return f.forwardCall(ctx, req, up, answers)
		},
		func(asks mcp.InputRequestMap, state string) mcp.Result {
			return &mcp.CallToolResult{Content: []mcp.Content{}, InputRequests: asks, RequestState: state}
		})
	if err != nil {
		return nil, err
	}
	return res.(*mcp.CallToolResult), nil
}

// statelessRequest reports whether req comes from a caller of the stateless
// revision: its _meta names that revision and no legacy handshake made its
// session.
func statelessRequest(req mcp.Request) bool {
	pv, ok := req.(interface{ ProtocolVersion() string })
	if !ok || pv.ProtocolVersion() < statelessProtocol {
		return false
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip == nil || ip.ProtocolVersion >= statelessProtocol
}

// forwardCall forwards one tools/call through the pipeline; ctx carries
// the peer. up and answers continue a multi round-trip call of the
// upstream's. Failures of the gateway or of the upstream's availability are
// reported as isError results (the model can read them and react) carrying
// a stable code in _meta; protocol errors the upstream itself returned are
// relayed as they are.
func (f *Front) forwardCall(ctx context.Context, req *mcp.CallToolRequest, up string, answers mcp.InputResponseMap) (*mcp.CallToolResult, error) {
	call, err := invoke.NewCall(invoke.CallRequest{Name: req.Params.Name, Server: f.scope,
		Arguments: req.Params.Arguments, Meta: req.Params.Meta, Identity: callerIdentity(ctx, req)})
	var res *invoke.Result
	if err == nil {
		call.InputResponses, call.RequestState = answers, up
		res, err = f.toolCaller.CallTool(ctx, call)
	}
	if err == nil {
		if res.ServedBy == "" {
			return res.CallToolResult, nil
		}
		// A fallback served the call: say so, on a copy (results may be
		// shared by idempotent replays).
		out := *res.CallToolResult
		out.Meta = make(mcp.Meta, len(res.Meta)+1)
		maps.Copy(out.Meta, res.Meta)
		out.Meta[MetaServedBy] = res.ServedBy
		return &out, nil
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return nil, rpcErr
	}
	var ie *invoke.Error
	if !errors.As(err, &ie) {
		ie = &invoke.Error{Code: invoke.CodeUpstream, Message: err.Error()}
	}
	if ie.Code == invoke.CodeToolNotFound || ie.Code == invoke.CodeInvalidArgument {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: ie.Message}
	}
	detail := map[string]any{"code": string(ie.Code)}
	if ie.Server != "" {
		detail["server"] = ie.Server
	}
	if ie.Status != "" {
		detail["status"] = ie.Status
	}
	if ie.ApprovalID != "" {
		detail["approval_id"] = ie.ApprovalID
	}
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: ie.Message}},
		Meta:    mcp.Meta{ErrorMetaKey: detail},
	}, nil
}

// onlyMeta answers tools/list in search mode: the meta-tools, on one page
// whatever the catalog's size.
func (f *Front) onlyMeta(lr *mcp.ListToolsResult) *mcp.ListToolsResult {
	out := *lr
	out.Tools = f.metaTools
	out.NextCursor = ""
	return &out
}

// filterTools returns lr without the tools id may not see.
func (f *Front) filterTools(id authz.Identity, lr *mcp.ListToolsResult) *mcp.ListToolsResult {
	out := *lr
	out.Tools = make([]*mcp.Tool, 0, len(lr.Tools))
	for _, t := range lr.Tools {
		if ct, ok := f.lookup(t.Name); ok && f.visible(id, ct) {
			out.Tools = append(out.Tools, t)
		}
	}
	return &out
}

// filterByServer drops from a resources, templates or prompts list the
// items of servers id may not use.
func (f *Front) filterByServer(id authz.Identity, res mcp.Result) mcp.Result {
	allowed := map[string]bool{}
	ok := func(server string) bool {
		if server == "" {
			return false
		}
		v, seen := allowed[server]
		if !seen {
			v = f.srvVis(id, server)
			allowed[server] = v
		}
		return v
	}
	snap := f.cat.Snapshot()
	serverOfURI := func(uri string) string {
		if f.scope != "" {
			return f.scope
		}
		server, _, found := snap.ResolveURI(uri)
		if !found {
			return ""
		}
		return server
	}
	switch r := res.(type) {
	case *mcp.ListResourcesResult:
		out := *r
		out.Resources = keepItems(r.Resources, func(it *mcp.Resource) bool { return ok(serverOfURI(it.URI)) })
		return &out
	case *mcp.ListResourceTemplatesResult:
		out := *r
		out.ResourceTemplates = keepItems(r.ResourceTemplates, func(it *mcp.ResourceTemplate) bool { return ok(serverOfURI(it.URITemplate)) })
		return &out
	case *mcp.ListPromptsResult:
		out := *r
		out.Prompts = keepItems(r.Prompts, func(it *mcp.Prompt) bool {
			server := f.scope
			if server == "" {
				if p, found := snap.Prompt(it.Name); found {
					server = p.Server
				}
			}
			return ok(server)
		})
		return &out
	}
	return res
}

// keepItems returns the items keep accepts, in order. It never returns
// nil: an empty list must encode as [], not null.
func keepItems[T any](items []T, keep func(T) bool) []T {
	out := []T{}
	for _, it := range items {
		if keep(it) {
			out = append(out, it)
		}
	}
	return out
}

// callerIdentity is who sent req: the identity the HTTP front door
// verified for this very request if there is one, else the identity the
// session was created with (its ctx carries it), else none.
func callerIdentity(ctx context.Context, req mcp.Request) authz.Identity {
	if req != nil {
		if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
			if id, ok := ex.TokenInfo.Extra[IdentityExtraKey].(authz.Identity); ok {
				return id
			}
		}
	}
	id, _ := authz.IdentityFrom(ctx)
	return id
}

func (f *Front) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	if !statelessRequest(req) {
		res, err := f.resourceRelay.ReadResource(f.peerCtx(ctx, req.Session), f.scope, req.Params)
		return res, rpcError(err)
	}
	res, err := f.serveStateless(ctx, req, "resources/read", req.Params.URI, req.Params.InputResponses, req.Params.RequestState,
		func(ctx context.Context, up string, answers mcp.InputResponseMap) (mcp.Result, error) {
			p := *req.Params
			p.InputResponses, p.RequestState = answers, up
			res, err := f.resourceRelay.ReadResource(ctx, f.scope, &p)
			return res, rpcError(err)
		},
		func(asks mcp.InputRequestMap, state string) mcp.Result {
			return &mcp.ReadResourceResult{InputRequests: asks, RequestState: state}
		})
	if err != nil {
		return nil, err
	}
	return res.(*mcp.ReadResourceResult), nil
}

func (f *Front) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	if !statelessRequest(req) {
		res, err := f.promptGetter.GetPrompt(f.peerCtx(ctx, req.Session), f.scope, req.Params)
		return res, rpcError(err)
	}
	res, err := f.serveStateless(ctx, req, "prompts/get", req.Params.Name, req.Params.InputResponses, req.Params.RequestState,
		func(ctx context.Context, up string, answers mcp.InputResponseMap) (mcp.Result, error) {
			p := *req.Params
			p.InputResponses, p.RequestState = answers, up
			res, err := f.promptGetter.GetPrompt(ctx, f.scope, &p)
			return res, rpcError(err)
		},
		func(asks mcp.InputRequestMap, state string) mcp.Result {
			return &mcp.GetPromptResult{InputRequests: asks, RequestState: state}
		})
	if err != nil {
		return nil, err
	}
	return res.(*mcp.GetPromptResult), nil
}

// cacheable sets the caching hints of the stateless revision honestly:
// lists filtered per caller are private, and never cached for long (the
// catalog changes whenever an upstream's does; subscriptions/listen says
// when); a resource keeps its upstream's hint, made private when the
// gateway decides per caller who may read it, and never widened.
func (f *Front) cacheable(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
	switch req.(type) {
	case *mcp.ListToolsRequest:
		if f.visible != nil || f.metaSearch != "" {
			c.CacheScope = "private"
		}
	case *mcp.ListResourcesRequest, *mcp.ListResourceTemplatesRequest, *mcp.ListPromptsRequest, *mcp.ReadResourceRequest:
		if f.srvVis != nil {
			c.CacheScope = "private"
		}
	}
}

// rpcError turns a pipeline failure into the JSON-RPC error a client sees,
// relaying the upstream's own protocol errors unchanged. nil stays nil.
func rpcError(err error) error {
	if err == nil {
		return nil
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return rpcErr
	}
	var ie *invoke.Error
	if !errors.As(err, &ie) {
		// Not classified by the pipeline: a fault of the gateway itself.
		data, _ := json.Marshal(map[string]string{"code": string(invoke.CodeUpstream)})
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error(), Data: data}
	}
	detail := map[string]string{"code": string(ie.Code)}
	if ie.Server != "" {
		detail["server"] = ie.Server
	}
	if ie.Status != "" {
		detail["status"] = ie.Status
	}
	data, _ := json.Marshal(detail)
	return &jsonrpc.Error{Code: RPCCode(ie.Code), Message: ie.Message, Data: data}
}

// JSON-RPC error codes of the gateway's own failures on methods that have
// no isError result (resources/read, prompts/get, completion/complete,
// subscriptions): the same failure a tools/call reports, with the same
// message and the stable code in data.code. -32603 (internal error) is kept
// for faults of the gateway itself. The values avoid the codes SDKs give
// meanings of their own (-32000 to -32005: connection closed, request
// timeout, client or server closing; -32002 resource not found; -32020 to
// -32022 and -32042 of the protocol).
const (
	// RPCDenied: authentication or authorization refused the request.
	RPCDenied int64 = -32030
	// RPCGatewayError: the gateway could not serve the request (server
	// unavailable, circuit open, timeout, rate limited, ...).
	RPCGatewayError int64 = -32031
)

// RPCCode is the JSON-RPC error code the front answers a failure of code
// with.
func RPCCode(code invoke.Code) int64 {
	switch code {
	case invoke.CodeToolNotFound, invoke.CodeInvalidArgument:
		return jsonrpc.CodeInvalidParams
	case invoke.CodeDenied, invoke.CodeUnauthenticated, invoke.CodeApprovalRequired:
		return RPCDenied
	default:
		return RPCGatewayError
	}
}

// demoteHandler lowers the SDK's info records to debug, keeping warnings and
// errors as they are.
type demoteHandler struct{ h slog.Handler }

func (d *demoteHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return d.h.Enabled(ctx, demote(l))
}

func (d *demoteHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return d.h.Handle(ctx, r)
}

func (d *demoteHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &demoteHandler{d.h.WithAttrs(as)}
}

func (d *demoteHandler) WithGroup(name string) slog.Handler {
	return &demoteHandler{d.h.WithGroup(name)}
}

func demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}
