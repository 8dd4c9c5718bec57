package demo

import (
	"context"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/mcpserve"
)

// HTTP paths served by [Handler].
const (
	StreamablePath = "/mcp" // Streamable HTTP (MCP 2025-03-26 and later)
	SSEPath        = "/sse" // legacy HTTP+SSE (MCP 2024-11-05)
)

// RunStdio serves one session over stdin/stdout until ctx is done or the client disconnects.
//
// Both endings are normal and return nil; so does a CrashAfter exit, which
// never returns. Invalid options are reported before anything is served.
// Nothing else may use stdout meanwhile: it carries the protocol.
func RunStdio(ctx context.Context, opts *Options) error {
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("demo server options: %w", err)
	}
	err := NewServer(opts).Run(ctx, &mcp.StdioTransport{})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("serving demo over stdio: %w", err)
	}
	return nil
}

// Handler returns an http.Handler serving Streamable HTTP at /mcp and legacy SSE at /sse.
//
// Both paths share one [NewServer], so the fault-injection state (for example
// the CrashAfter count) spans all sessions. Cross-origin browser requests are
// rejected. Sessions end when their client leaves; [ServeHTTP] also ends them
// on shutdown, which a caller mounting Handler elsewhere must arrange itself.
func Handler(opts *Options) http.Handler {
	h, _ := newHandler(opts)
	return h
}

func newHandler(opts *Options) (http.Handler, *mcp.Server) {
	o := normalize(opts)
	s := NewServer(opts)
	getServer := func(*http.Request) *mcp.Server { return s }
	mux := http.NewServeMux()
	mux.Handle(StreamablePath, mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Logger: o.Logger}))
	mux.Handle(SSEPath, mcp.NewSSEHandler(getServer, nil))
	return http.NewCrossOriginProtection().Handler(mux), s
}

// ServeHTTP listens on addr (e.g. "127.0.0.1:0") and serves Handler until ctx is done (graceful
// Shutdown). If ready is non-nil it receives the bound address once listening.
//
// ready is called on ServeHTTP's goroutine before it starts waiting, so it
// must not block on ServeHTTP returning. On shutdown, open MCP sessions are
// closed (their streams would otherwise keep Shutdown waiting), in-flight
// requests get up to 5s to finish, and ServeHTTP returns nil.
func ServeHTTP(ctx context.Context, addr string, opts *Options, ready func(addr string)) error {
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("demo server options: %w", err)
	}
	o := normalize(opts)
	h, s := newHandler(opts)
	return mcpserve.HTTP(ctx, addr, "demo server", h, s, o.Logger, ready)
}
