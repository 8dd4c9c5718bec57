// Package mcpserve runs a standalone MCP server over HTTP until its context
// ends, which the built-in servers (demo, conformance fixture) share.
package mcpserve

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

// ShutdownTimeout bounds how long in-flight requests may take to finish
// once the context is done.
const ShutdownTimeout = 5 * time.Second

// HTTP listens on addr and serves h (whose MCP sessions belong to s) until
// ctx is done, then shuts down gracefully and returns nil. what names the
// server in logs and errors. ready, if non-nil, is called with the bound
// address once listening, on HTTP's goroutine: it must not wait for HTTP to
// return.
//
// On shutdown the open MCP sessions of s are closed, since their long-lived
// streams would otherwise keep Shutdown waiting.
func HTTP(ctx context.Context, addr, what string, h http.Handler, s *mcp.Server, logger *slog.Logger, ready func(addr string)) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	bound := ln.Addr().String()
	logger.Info(what+" listening", "addr", bound)
	if ready != nil {
		ready(bound)
	}

	select {
	case err := <-served:
		return fmt.Errorf("serving %s on %s: %w", what, bound, err)
	case <-ctx.Done():
	}

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	shutdown := make(chan error, 1)
	go func() { shutdown <- srv.Shutdown(shutdownCtx) }()
	// Shutdown has stopped accepting connections; end the sessions so that
	// their long-lived GET streams return and Shutdown can complete.
	for ss := range s.Sessions() {
		if err := ss.Close(); err != nil {
			logger.Debug(what+": closing session", "session", ss.ID(), "error", err)
		}
	}
	err = <-shutdown
	if err != nil {
		err = errors.Join(fmt.Errorf("shutting down %s on %s: %w", what, bound, err), srv.Close())
	}
	<-served // Serve returns http.ErrServerClosed as soon as Shutdown starts.
	logger.Info(what+" stopped", "addr", bound)
	return err
}
