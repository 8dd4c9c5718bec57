// Package invoke is the call pipeline every tool call passes through, whether
// it arrives on the MCP front or the REST API: resolve, authorize, rate
// limit, idempotency, bulkhead, circuit breaker, retry with timeout,
// fallback, then audit, metrics and events — in the order documented on
// [Pipeline.CallTool].
package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Upstreams routes requests to upstream servers by server name and original
// item name. *upstream.Manager implements it.
type Upstreams interface {
	CallTool(ctx context.Context, server string, params *mcp.CallToolParams) (*mcp.CallToolResult, error)
	ReadResource(ctx context.Context, server string, params *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error)
	GetPrompt(ctx context.Context, server string, params *mcp.GetPromptParams) (*mcp.GetPromptResult, error)
	Complete(ctx context.Context, server string, params *mcp.CompleteParams) (*mcp.CompleteResult, error)
	Subscribe(ctx context.Context, server string, params *mcp.SubscribeParams) error
	Unsubscribe(ctx context.Context, server string, params *mcp.UnsubscribeParams) error
	SetLoggingLevel(ctx context.Context, server string, params *mcp.SetLoggingLevelParams) error
}

// Options configure a Pipeline. nil means defaults; a nil collaborator
// disables its stage.
type Options struct {
	// Timeout bounds one call end to end, retries included
	// (MCP_INVOCATION_TIMEOUT_MS); default 30s.
	Timeout time.Duration
	// Retry is how transient failures are retried; the zero value means
	// the seed's defaults (3 attempts, 500ms base, factor 2, 30s cap).
	Retry resilience.RetryPolicy
	// Fallbacks maps a namespaced tool to the tools that may serve it
	// instead, in order.
	Fallbacks map[string][]string
	Logger    *slog.Logger

	Authorizer  Authorizer
	Recorder    Recorder
	Redactor    Redactor
	Limiter     Limiter
	Bulkhead    Bulkhead
	Breakers    *resilience.Breakers
	Idempotency Idempotency
	// RetryBudget returns the retry budget of a server.
	RetryBudget func(server string) RetryBudget

	// ServerAccess, if set, says whether the caller (the identity in the
	// request's ctx) may use a server's resources and prompts.
	ServerAccess func(id authz.Identity, server string) bool
	// DurableAudit makes a call wait until its audit record is written
	// (the Recorder must implement RecordSync) instead of queueing it.
	DurableAudit bool
	// ToolState, if set, says whether a tool is enabled; a disabled tool's
	// calls fail with CodeToolDisabled and the reason.
	ToolState func(t catalog.Tool) (enabled bool, reason string)

	// Escalator, if set, is told of calls that failed after their retries
	// and fallbacks (docs/escalation.md).
	Escalator Escalator
	// Approver, if set, turns a high-risk call without a token into an
	// approval request instead of a plain denial (authz.approval: request).
	Approver Approver

	// OnCall, if set, is told of every tools/call the pipeline handled
	// (metrics, events). It runs on the caller's goroutine: keep it cheap.
	OnCall func(Outcome)

	// Tracer, if set, traces every tools/call: a span for the call and
	// one per stage that takes time (docs/telemetry.md). nil: tracing is
	// off and costs nothing.
	Tracer trace.Tracer
}

// Tuning is the part of Options a config reload may change on a running
// pipeline.
type Tuning struct {
	Timeout   time.Duration
	Retry     resilience.RetryPolicy
	Fallbacks map[string][]string
}

// tuning is Tuning with defaults applied, swapped atomically.
type tuning struct {
	timeout   time.Duration
	retry     resilience.RetryPolicy
	fallbacks map[string][]string
}

func newTuning(t Tuning) *tuning {
	if t.Timeout <= 0 {
		t.Timeout = 30 * time.Second
	}
	if t.Retry.MaxAttempts <= 0 {
		t.Retry.MaxAttempts = resilience.DefaultMaxAttempts
	}
	if t.Retry.Jitter == nil {
		t.Retry.Jitter = resilience.DefaultJitter
	}
	return &tuning{timeout: t.Timeout, retry: t.Retry, fallbacks: t.Fallbacks}
}

// Pipeline executes calls against the current catalog. Safe for concurrent use.
type Pipeline struct {
	cat    *catalog.Catalog
	up     Upstreams
	logger *slog.Logger
	tuning atomic.Pointer[tuning]

	authz    Authorizer
	recorder Recorder
	redactor Redactor
	limiter  Limiter
	bulkhead Bulkhead
	breakers *resilience.Breakers
	idem     Idempotency
	budget   func(server string) RetryBudget
	state    func(catalog.Tool) (bool, string)
	access   func(authz.Identity, string) bool
	durable  bool
	onCall   func(Outcome)

	escalator Escalator
	approver  Approver
	tracer    trace.Tracer // nil: off
}

// New returns a Pipeline resolving names in cat and routing to up.
func New(cat *catalog.Catalog, up Upstreams, opts *Options) *Pipeline {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OnCall == nil {
		o.OnCall = func(Outcome) {}
	}
	p := &Pipeline{cat: cat, up: up, logger: o.Logger,
		authz: o.Authorizer, recorder: o.Recorder, redactor: o.Redactor, limiter: o.Limiter,
		bulkhead: o.Bulkhead, breakers: o.Breakers, idem: o.Idempotency, budget: o.RetryBudget, state: o.ToolState, access: o.ServerAccess, durable: o.DurableAudit, onCall: o.OnCall,
		escalator: o.Escalator, approver: o.Approver, tracer: o.Tracer}
	p.tuning.Store(newTuning(Tuning{Timeout: o.Timeout, Retry: o.Retry, Fallbacks: o.Fallbacks}))
	return p
}

// Retune applies reloaded settings to calls that start from now on.
func (p *Pipeline) Retune(t Tuning) { p.tuning.Store(newTuning(t)) }

// timeout is the current invocation timeout.
func (p *Pipeline) timeout() time.Duration { return p.tuning.Load().timeout }

// Call is one tool invocation request.
type Call struct {
	// Name is the namespaced tool name (either separator form), or the
	// original name when Server is set.
	Name string
	// Server, if set, selects the server by name and makes Name an
	// original tool name (AG-US4 AC2).
	Server string
	// Arguments are passed to the upstream byte for byte.
	Arguments json.RawMessage
	// Meta is the caller's _meta (progress token and the like), forwarded.
	Meta mcp.Meta

	// Identity is the authenticated caller; authorization, rate limits and
	// the audit record use it.
	Identity authz.Identity
	// CorrelationID ties the call to the caller's request; one is generated
	// when empty.
	CorrelationID string
	// IdempotencyKey makes a retried request return the first result
	// instead of running the tool again.
	IdempotencyKey string
	// ApprovalToken is the high-risk approval the caller presents.
	ApprovalToken string
	// TicketID and TaskID are the caller's references, kept in the audit
	// record (seed 000).
	TicketID string
	TaskID   string

	// InputResponses and RequestState continue a multi round-trip call
	// (SEP-2322): the caller's answers to the input requests of the
	// previous round and the upstream's own state from it, forwarded as
	// they are. A call that carries them bypasses the idempotency cache:
	// each round is a request of its own.
	InputResponses mcp.InputResponseMap
	RequestState   string
}

// Result is a successful round trip: the upstream's result, unchanged, and
// how it was routed. A tool-level failure (IsError) is still a Result.
type Result struct {
	*mcp.CallToolResult
	Tool          catalog.Tool
	RoutingTime   time.Duration
	ExecutionTime time.Duration

	// CorrelationID is the call's (possibly generated) correlation id.
	CorrelationID string
	// Attempts is how many times the upstream was called (1 without retries).
	Attempts int
	// ServedBy is the namespaced tool that served the call when a fallback
	// did; "" when the tool itself did.
	ServedBy string
	// Decision is the authorization decision that let the call through.
	Decision authz.Decision
	// Replayed reports that the result came from the idempotency cache.
	Replayed bool
}

// Resolve finds the catalog tool a call names. A tool the catalog holds
// back (quarantined: its definition changed since it was pinned) is refused
// with CodeToolDefinitionChanged rather than reported unknown, so that the
// caller learns why it vanished.
func (p *Pipeline) Resolve(c Call) (catalog.Tool, error) {
	snap := p.cat.Snapshot()
	if c.Server != "" {
		if t, ok := snap.ToolByOriginal(c.Server, c.Name); ok {
			return t, nil
		}
		if t, ok := snap.HeldByOriginal(c.Server, c.Name); ok {
			return catalog.Tool{}, DefinitionChanged(t)
		}
		return catalog.Tool{}, &Error{Code: CodeToolNotFound, Server: c.Server,
			Message: "unknown tool " + strconv.Quote(c.Name) + " on server " + strconv.Quote(c.Server)}
	}
	if t, ok := snap.Tool(c.Name); ok {
		return t, nil
	}
	if t, ok := snap.HeldTool(c.Name); ok {
		return catalog.Tool{}, DefinitionChanged(t)
	}
	return catalog.Tool{}, &Error{Code: CodeToolNotFound, Message: "unknown tool " + strconv.Quote(c.Name)}
}

// DefinitionChanged is the error of a call to a quarantined tool, the same
// on every front.
func DefinitionChanged(t catalog.Tool) *Error {
	return &Error{Code: CodeToolDefinitionChanged, Server: t.Server,
		Message: fmt.Sprintf("tool %q is quarantined: server %q changed its definition since it was pinned; "+
			"an admin must approve the new definition (switchboard tools approve %s)", t.Name, t.Server, t.Name)}
}

// resolveURI maps a resource URI to its server and original URI. scope ""
// means the URI is namespaced; otherwise it is scope's own URI.
func (p *Pipeline) resolveURI(snap *catalog.Snapshot, scope, uri string) (server, original string, err error) {
	if scope != "" {
		return scope, uri, nil
	}
	server, original, ok := snap.ResolveURI(uri)
	if !ok {
		return "", "", &Error{Code: CodeToolNotFound, Message: "unknown resource " + strconv.Quote(uri)}
	}
	return server, original, nil
}

// ReadResource reads a resource by its URI (namespaced, or scope's own).
func (p *Pipeline) ReadResource(ctx context.Context, scope string, params *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	snap := p.cat.Snapshot()
	server, original, err := p.resolveURI(snap, scope, params.URI)
	if err == nil {
		err = p.checkServer(ctx, server, "resources")
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	fwd := *params
	fwd.URI = original
	fwd.Meta = upstreamMeta(fwd.Meta)
	res, err := p.up.ReadResource(ctx, server, &fwd)
	if err != nil {
		return nil, p.classify(ctx, server, "reading resource "+strconv.Quote(params.URI), err)
	}
	if scope != "" {
		return res, nil
	}
	// Contents name the URI they came from; clients must see the namespaced
	// form so that what they read can be read again.
	out := *res
	out.Contents = make([]*mcp.ResourceContents, len(res.Contents))
	for i, c := range res.Contents {
		if c == nil {
			continue
		}
		cc := *c
		cc.URI = snap.NamespaceURI(server, c.URI)
		out.Contents[i] = &cc
	}
	return &out, nil
}

// resolvePrompt maps a prompt name (namespaced, or scope's own) to its
// server and original name.
func (p *Pipeline) resolvePrompt(scope, name string) (server, original string, err error) {
	if scope != "" {
		return scope, name, nil
	}
	pr, ok := p.cat.Snapshot().Prompt(name)
	if !ok {
		return "", "", &Error{Code: CodeToolNotFound, Message: "unknown prompt " + strconv.Quote(name)}
	}
	return pr.Server, pr.OriginalName, nil
}

// GetPrompt renders a prompt by its name (namespaced, or scope's own).
func (p *Pipeline) GetPrompt(ctx context.Context, scope string, params *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	server, original, err := p.resolvePrompt(scope, params.Name)
	if err == nil {
		err = p.checkServer(ctx, server, "prompts")
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	fwd := *params
	fwd.Name = original
	fwd.Meta = upstreamMeta(fwd.Meta)
	res, err := p.up.GetPrompt(ctx, server, &fwd)
	if err != nil {
		return nil, p.classify(ctx, server, "getting prompt "+strconv.Quote(params.Name), err)
	}
	return res, nil
}

// Complete relays completion/complete to the server owning the referenced
// prompt or resource template.
func (p *Pipeline) Complete(ctx context.Context, scope string, params *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	if params == nil || params.Ref == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "completion/complete needs a ref"}
	}
	fwd := *params
	fwd.Meta = upstreamMeta(fwd.Meta)
	ref := *params.Ref
	fwd.Ref = &ref
	var server string
	var err error
	switch ref.Type {
	case "ref/prompt":
		server, ref.Name, err = p.resolvePrompt(scope, ref.Name)
	case "ref/resource":
		server, ref.URI, err = p.resolveURI(p.cat.Snapshot(), scope, ref.URI)
	default:
		err = &Error{Code: CodeInvalidArgument, Message: "unknown completion ref type " + strconv.Quote(ref.Type)}
	}
	if err == nil {
		err = p.checkServer(ctx, server, "completions")
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	res, err := p.up.Complete(ctx, server, &fwd)
	if err != nil {
		return nil, p.classify(ctx, server, "completing", err)
	}
	return res, nil
}

// Subscribe relays resources/subscribe to the resource's server.
func (p *Pipeline) Subscribe(ctx context.Context, scope string, params *mcp.SubscribeParams) error {
	return p.onResource(ctx, scope, params.URI, "subscribing to", func(ctx context.Context, server, uri string) error {
		fwd := *params
		fwd.URI = uri
		fwd.Meta = upstreamMeta(fwd.Meta)
		return p.up.Subscribe(ctx, server, &fwd)
	})
}

// Unsubscribe relays resources/unsubscribe to the resource's server.
func (p *Pipeline) Unsubscribe(ctx context.Context, scope string, params *mcp.UnsubscribeParams) error {
	return p.onResource(ctx, scope, params.URI, "unsubscribing from", func(ctx context.Context, server, uri string) error {
		fwd := *params
		fwd.URI = uri
		fwd.Meta = upstreamMeta(fwd.Meta)
		return p.up.Unsubscribe(ctx, server, &fwd)
	})
}

// onResource resolves uri and runs do on its server with the original URI,
// bounded by the invocation timeout.
func (p *Pipeline) onResource(ctx context.Context, scope, uri, op string, do func(ctx context.Context, server, uri string) error) error {
	server, original, err := p.resolveURI(p.cat.Snapshot(), scope, uri)
	if err == nil {
		err = p.checkServer(ctx, server, "resources")
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	if err := do(ctx, server, original); err != nil {
		return p.classify(ctx, server, op+" "+strconv.Quote(uri), err)
	}
	return nil
}

// SetLoggingLevel relays logging/setLevel to scope's server, or to every
// available server of the catalog. Servers without logging answer with an
// error that does not concern the client: the first other failure is
// returned.
func (p *Pipeline) SetLoggingLevel(ctx context.Context, scope string, params *mcp.SetLoggingLevelParams) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	servers := []string{scope}
	if scope == "" {
		servers = p.cat.Snapshot().AvailableServers()
	}
	fwd := *params
	fwd.Meta = upstreamMeta(fwd.Meta)
	var first error
	for _, s := range servers {
		if err := p.up.SetLoggingLevel(ctx, s, &fwd); err != nil && first == nil {
			first = p.classify(ctx, s, "setting the log level", err)
		}
	}
	return first
}

// checkServer refuses a caller who may not use what server offers.
func (p *Pipeline) checkServer(ctx context.Context, server, what string) error {
	if p.access == nil {
		return nil
	}
	id, _ := authz.IdentityFrom(ctx)
	if p.access(id, server) {
		return nil
	}
	return &Error{Code: CodeDenied, Server: server,
		Message: fmt.Sprintf("agent %q may not use the %s of server %q (it needs a grant on one of its tools)", id.AgentID, what, server)}
}

// classify maps a routing failure into the shared vocabulary, keeping the
// cause reachable with errors.As.
func (p *Pipeline) classify(ctx context.Context, server, op string, err error) error {
	var unavail *upstream.UnavailableError
	var rpcErr *jsonrpc.Error
	var tooLarge *upstream.ResultTooLargeError
	var userAuth *upstream.UserAuthRequiredError
	switch {
	case errors.As(err, &userAuth):
		return &Error{Code: CodeUpstreamAuthRequired, Server: server, Message: userAuth.Error(), Err: err}
	case errors.As(err, &unavail):
		return &Error{Code: CodeServerUnavailable, Server: unavail.Server, Status: string(unavail.State),
			Message: unavail.Error(), Err: err}
	case errors.As(err, &tooLarge):
		return &Error{Code: CodeResultTooLarge, Server: server, Err: err,
			Message: fmt.Sprintf("%s on server %q: %s", op, server, tooLarge.Error())}
	case errors.As(err, &rpcErr):
		// The upstream answered with a protocol error: relay it as it is.
		return &Error{Code: CodeUpstream, Server: server, Message: rpcErr.Message, Err: err}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &Error{Code: CodeTimeout, Server: server, Err: err,
			Message: op + ": timed out after " + p.timeout().String()}
	case ctx.Err() != nil:
		return &Error{Code: CodeCanceled, Server: server, Err: err, Message: op + ": canceled"}
	default:
		p.logger.Warn("upstream call failed", "server", server, "error", err)
		return &Error{Code: CodeUpstream, Server: server, Err: err, Message: op + ": " + err.Error()}
	}
}
