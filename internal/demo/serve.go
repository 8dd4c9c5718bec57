package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTP paths served by [Handler].
const (
	StreamablePath = "/mcp" // Streamable HTTP (MCP 2025-03-26 and later)
	SSEPath        = "/sse" // legacy HTTP+SSE (MCP 2024-11-05)
)

// shutdownTimeout bounds how long ServeHTTP waits for in-flight requests
// once ctx is done, before it closes the remaining connections.
const shutdownTimeout = 5 * time.Second

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

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	bound := ln.Addr().String()
	o.Logger.Info("demo server listening", "addr", bound)
	if ready != nil {
		ready(bound)
	}

	select {
	case err := <-served:
		return fmt.Errorf("serving demo on %s: %w", bound, err)
	case <-ctx.Done():
	}

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	shutdown := make(chan error, 1)
	go func() { shutdown <- srv.Shutdown(shutdownCtx) }()
	// Shutdown has stopped accepting connections; end the sessions so that
	// their long-lived GET streams return and Shutdown can complete.
	for ss := range s.Sessions() {
		if err := ss.Close(); err != nil {
			o.Logger.Debug("demo: closing session", "session", ss.ID(), "error", err)
		}
	}
	err = <-shutdown
	if err != nil {
		err = errors.Join(fmt.Errorf("shutting down demo on %s: %w", bound, err), srv.Close())
	}
	<-served // Serve returns http.ErrServerClosed as soon as Shutdown starts.
	o.Logger.Info("demo server stopped", "addr", bound)
	return err
}
