// Package front is the downstream MCP server: the whole catalog served as ONE
// MCP server over Streamable HTTP, SSE and stdio.
//
// Proxied tools, resources and prompts are registered raw on a go-sdk
// mcp.Server and kept in step with the catalog, so the SDK does what it does
// best (pagination, list_changed notifications for every protocol version);
// calls are forwarded through a Caller (the invoke pipeline) with the
// arguments as the client sent them.
package front

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

// Caller executes requests for the front. *invoke.Pipeline implements it.
type Caller interface {
	CallTool(ctx context.Context, c invoke.Call) (*invoke.Result, error)
	ReadResource(ctx context.Context, params *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error)
	GetPrompt(ctx context.Context, params *mcp.GetPromptParams) (*mcp.GetPromptResult, error)
}

// Options configure a Front. nil means defaults.
type Options struct {
	Logger *slog.Logger
	// Implementation is announced to clients; default {Name: "switchboard"}.
	Implementation *mcp.Implementation
	// Instructions, if set, are sent to clients in initialize.
	Instructions string
}

// ErrorMetaKey is the _meta key under which an isError result produced by
// the gateway itself (not by the upstream tool) carries its stable code.
const ErrorMetaKey = "switchboard/error"

// Front serves the catalog as one MCP server. Create it with [New], stop
// following the catalog with [Front.Close].
type Front struct {
	cat    *catalog.Catalog
	caller Caller
	logger *slog.Logger
	server *mcp.Server

	mu          sync.Mutex        // serializes sync; held while the catalog calls us
	tools       map[string]string // registered tool name -> definition hash
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
	f := &Front{
		cat:       cat,
		caller:    caller,
		logger:    o.Logger,
		tools:     map[string]string{},
		resources: map[string]string{},
		templates: map[string]string{},
		prompts:   map[string]string{},
	}
	f.server = mcp.NewServer(o.Implementation, &mcp.ServerOptions{
		Instructions: o.Instructions,
		// The SDK logs every session start and end at info; that is debug
		// detail for a gateway serving many clients.
		Logger: slog.New(&demoteHandler{o.Logger.Handler()}),
		// Declared up front: the catalog may be empty at initialize time and
		// fill up later, and clients only listen for list_changed on
		// capabilities they were told about.
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
		},
	})
	f.server.AddReceivingMiddleware(f.routeMiddleware)
	f.mu.Lock()
	f.unsubscribe = cat.Subscribe(func(_, next *catalog.Snapshot) { f.syncLocked(next) })
	f.syncLocked(cat.Snapshot())
	f.mu.Unlock()
	return f
}

// Server returns the underlying MCP server (for transports and tests).
func (f *Front) Server() *mcp.Server { return f.server }

// Close stops following the catalog. Sessions already connected are closed
// by their transports.
func (f *Front) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unsubscribe != nil {
		f.unsubscribe()
		f.unsubscribe = nil
	}
}

// RunStdio serves one client over stdin/stdout until ctx is done or the
// client goes away.
func (f *Front) RunStdio(ctx context.Context) error {
	return f.server.Run(ctx, &mcp.StdioTransport{})
}

// syncLocked brings the server's registrations in line with snap: only items
// of available servers are listed. Called with f.mu held (the catalog calls
// its subscribers one change at a time).
func (f *Front) syncLocked(snap *catalog.Snapshot) {
	want := map[string]catalog.Tool{}
	for _, t := range snap.Tools() {
		if t.Available {
			want[t.Name] = t
		}
	}
	var remove []string
	for name, hash := range f.tools {
		if t, ok := want[name]; !ok || t.Hash != hash {
			remove = append(remove, name)
		}
	}
	if len(remove) > 0 {
		f.server.RemoveTools(remove...)
		for _, n := range remove {
			delete(f.tools, n)
		}
	}
	for name, t := range want {
		if _, ok := f.tools[name]; ok {
			continue
		}
		if err := f.addTool(t); err != nil {
			f.logger.Warn("tool not served", "tool", name, "server", t.Server, "error", err)
			continue
		}
		f.tools[name] = t.Hash
	}

	wantRes := map[string]catalog.Resource{}
	for _, r := range snap.Resources() {
		if r.Available {
			wantRes[r.URI] = r
		}
	}
	syncSet(f.resources, wantRes, func(r catalog.Resource) any { return r.Def }, f.server.RemoveResources,
		func(r catalog.Resource) error {
			return guard(func() { f.server.AddResource(r.Def, f.readResource) })
		}, f.logger)

	wantTpl := map[string]catalog.Template{}
	for _, t := range snap.Templates() {
		if t.Available {
			wantTpl[t.URITemplate] = t
		}
	}
	syncSet(f.templates, wantTpl, func(t catalog.Template) any { return t.Def }, f.server.RemoveResourceTemplates,
		func(t catalog.Template) error {
			return guard(func() { f.server.AddResourceTemplate(t.Def, f.readResource) })
		}, f.logger)

	wantPr := map[string]catalog.Prompt{}
	for _, p := range snap.Prompts() {
		if p.Available {
			wantPr[p.Name] = p
		}
	}
	syncSet(f.prompts, wantPr, func(p catalog.Prompt) any { return p.Def }, f.server.RemovePrompts,
		func(p catalog.Prompt) error {
			return guard(func() { f.server.AddPrompt(p.Def, f.getPrompt) })
		}, f.logger)
}

// syncSet reconciles the registered items (key -> JSON of the definition)
// with the wanted ones. Only additions and changed definitions are added, so
// an unrelated catalog change does not make clients re-list everything.
func syncSet[T any](have map[string]string, want map[string]T, def func(T) any, remove func(...string), add func(T) error, logger *slog.Logger) {
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
		b, _ := json.Marshal(def(v))
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

// addTool registers one catalog tool. The SDK panics on definitions it
// considers programmer errors; an upstream's odd tool must not take the
// gateway down, so the panic becomes an error.
func (f *Front) addTool(t catalog.Tool) error {
	return guard(func() { f.server.AddTool(t.Def, f.callTool) })
}

func guard(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rejected by the MCP server: %v", r)
		}
	}()
	fn()
	return nil
}

// routeMiddleware answers tools/call for names the SDK does not have
// registered: the other separator form, and tools whose server is not
// available (so the client learns which server is down and why, rather than
// "unknown tool").
func (f *Front) routeMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		ctr, ok := req.(*mcp.CallToolRequest)
		if !ok || ctr.Params == nil {
			return next(ctx, method, req)
		}
		// The catalog calls syncLocked before a new snapshot is visible to
		// anyone else, so an available tool under its canonical name is
		// registered with the SDK: let the SDK dispatch it.
		t, known := f.cat.Snapshot().Tool(ctr.Params.Name)
		if !known {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: fmt.Sprintf("unknown tool %q", ctr.Params.Name)}
		}
		if t.Available && t.Name == ctr.Params.Name {
			return next(ctx, method, req)
		}
		res, err := f.callTool(ctx, ctr)
		if err == nil && res != nil && res.Content == nil {
			res.Content = []mcp.Content{}
		}
		return res, err
	}
}

// callTool forwards one tools/call. Failures of the gateway or of the
// upstream's availability are reported as isError results (the model can
// read them and react) carrying a stable code in _meta; protocol errors the
// upstream itself returned are relayed as they are.
func (f *Front) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	res, err := f.caller.CallTool(ctx, invoke.Call{
		Name:      req.Params.Name,
		Arguments: req.Params.Arguments,
		Meta:      req.Params.Meta,
	})
	if err == nil {
		return res.CallToolResult, nil
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
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: ie.Message}},
		Meta:    mcp.Meta{ErrorMetaKey: detail},
	}, nil
}

func (f *Front) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	res, err := f.caller.ReadResource(ctx, req.Params)
	if err != nil {
		return nil, rpcError(err)
	}
	return res, nil
}

func (f *Front) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	res, err := f.caller.GetPrompt(ctx, req.Params)
	if err != nil {
		return nil, rpcError(err)
	}
	return res, nil
}

// rpcError turns a pipeline failure into the JSON-RPC error a client sees,
// relaying the upstream's own protocol errors unchanged.
func rpcError(err error) error {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return rpcErr
	}
	code := int64(jsonrpc.CodeInternalError)
	if c := invoke.CodeOf(err); c == invoke.CodeToolNotFound || c == invoke.CodeInvalidArgument {
		code = jsonrpc.CodeInvalidParams
	}
	data, _ := json.Marshal(map[string]string{"code": string(invoke.CodeOf(err))})
	return &jsonrpc.Error{Code: code, Message: err.Error(), Data: data}
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
