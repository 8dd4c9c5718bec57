// Package invoke is the call pipeline every tool call passes through, whether
// it arrives on the MCP front or the REST API: resolve the namespaced name,
// apply the invocation timeout, route to the upstream, classify failures.
//
// Later stages (authorization, circuit breaker, retry, fallback, audit,
// metrics) slot into [Pipeline.CallTool] in the order documented there.
package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Upstreams routes requests to upstream servers by server name and original
// item name. *upstream.Manager implements it.
type Upstreams interface {
	CallTool(ctx context.Context, server string, params *mcp.CallToolParams) (*mcp.CallToolResult, error)
	ReadResource(ctx context.Context, server string, params *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error)
	GetPrompt(ctx context.Context, server string, params *mcp.GetPromptParams) (*mcp.GetPromptResult, error)
}

// Options configure a Pipeline. nil means defaults.
type Options struct {
	// Timeout bounds one call end to end (MCP_INVOCATION_TIMEOUT_MS);
	// default 30s.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Pipeline executes calls against the current catalog. Safe for concurrent use.
type Pipeline struct {
	cat     *catalog.Catalog
	up      Upstreams
	timeout time.Duration
	logger  *slog.Logger
}

// New returns a Pipeline resolving names in cat and routing to up.
func New(cat *catalog.Catalog, up Upstreams, opts *Options) *Pipeline {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{cat: cat, up: up, timeout: o.Timeout, logger: o.Logger}
}

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
}

// Result is a successful round trip: the upstream's result, unchanged, and
// how it was routed. A tool-level failure (IsError) is still a Result.
type Result struct {
	*mcp.CallToolResult
	Tool          catalog.Tool
	RoutingTime   time.Duration
	ExecutionTime time.Duration
}

// Resolve finds the catalog tool a call names.
func (p *Pipeline) Resolve(c Call) (catalog.Tool, error) {
	snap := p.cat.Snapshot()
	if c.Server != "" {
		if t, ok := snap.ToolByOriginal(c.Server, c.Name); ok {
			return t, nil
		}
		return catalog.Tool{}, &Error{Code: CodeToolNotFound, Server: c.Server,
			Message: "unknown tool " + quote(c.Name) + " on server " + quote(c.Server)}
	}
	if t, ok := snap.Tool(c.Name); ok {
		return t, nil
	}
	return catalog.Tool{}, &Error{Code: CodeToolNotFound, Message: "unknown tool " + quote(c.Name)}
}

// CallTool runs one call through the pipeline. Stages, in order:
//
//  1. resolve the name against the catalog snapshot (404 when unknown);
//  2. bound the call by the invocation timeout;
//  3. route to the upstream with the original tool name and untouched
//     arguments;
//  4. classify failures into the shared error vocabulary.
func (p *Pipeline) CallTool(ctx context.Context, c Call) (*Result, error) {
	start := time.Now()
	if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
		return nil, &Error{Code: CodeInvalidArgument, Message: "arguments are not valid JSON"}
	}
	tool, err := p.Resolve(c)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()

	params := &mcp.CallToolParams{Meta: c.Meta, Name: tool.OriginalName}
	if len(c.Arguments) > 0 {
		params.Arguments = c.Arguments
	}
	routed := time.Now()
	res, err := p.up.CallTool(ctx, tool.Server, params)
	done := time.Now()
	if err != nil {
		return nil, p.classify(ctx, tool.Server, "calling tool "+quote(tool.Name), err)
	}
	return &Result{
		CallToolResult: res,
		Tool:           tool,
		RoutingTime:    routed.Sub(start),
		ExecutionTime:  done.Sub(routed),
	}, nil
}

// ReadResource reads a resource by its namespaced URI.
func (p *Pipeline) ReadResource(ctx context.Context, params *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	snap := p.cat.Snapshot()
	server, original, ok := snap.ResolveURI(params.URI)
	if !ok {
		return nil, &Error{Code: CodeToolNotFound, Message: "unknown resource " + quote(params.URI)}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	fwd := *params
	fwd.URI = original
	res, err := p.up.ReadResource(ctx, server, &fwd)
	if err != nil {
		return nil, p.classify(ctx, server, "reading resource "+quote(params.URI), err)
	}
	// Contents name the URI they came from; clients must see the namespaced form
	// so that what they read can be read again.
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

// GetPrompt renders a prompt by its namespaced name.
func (p *Pipeline) GetPrompt(ctx context.Context, params *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	pr, ok := p.cat.Snapshot().Prompt(params.Name)
	if !ok {
		return nil, &Error{Code: CodeToolNotFound, Message: "unknown prompt " + quote(params.Name)}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	fwd := *params
	fwd.Name = pr.OriginalName
	res, err := p.up.GetPrompt(ctx, pr.Server, &fwd)
	if err != nil {
		return nil, p.classify(ctx, pr.Server, "getting prompt "+quote(params.Name), err)
	}
	return res, nil
}

// classify maps a routing failure into the shared vocabulary, keeping the
// cause reachable with errors.As.
func (p *Pipeline) classify(ctx context.Context, server, op string, err error) error {
	var unavail *upstream.UnavailableError
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &unavail):
		return &Error{Code: CodeServerUnavailable, Server: unavail.Server, Status: string(unavail.State),
			Message: unavail.Error(), Err: err}
	case errors.As(err, &rpcErr):
		// The upstream answered with a protocol error: relay it as it is.
		return &Error{Code: CodeUpstream, Server: server, Message: rpcErr.Message, Err: err}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &Error{Code: CodeTimeout, Server: server, Err: err,
			Message: op + ": timed out after " + p.timeout.String()}
	case ctx.Err() != nil:
		return &Error{Code: CodeCanceled, Server: server, Err: err, Message: op + ": canceled"}
	default:
		p.logger.Warn("upstream call failed", "server", server, "error", err)
		return &Error{Code: CodeUpstream, Server: server, Err: err, Message: op + ": " + err.Error()}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
