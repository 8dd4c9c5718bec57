// Package gatewaytest runs a whole gateway (package app) in a test, served
// by an httptest server, as the tests of the gateway's doors do: the REST
// API and /mcp (package app), the CLI, the dashboard, and the end-to-end
// packages under internal/e2e.
//
// It is test support: only _test.go files import it, never the gateway.
package gatewaytest

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
)

// Options changes how [Start] runs a gateway. The zero value is a gateway
// on a new SQLite file, served on a new loopback listener once its servers
// have started.
type Options struct {
	// Env holds the variables the gateway reads (the config's ${VAR}s,
	// app.AdminKeyEnv, SWITCHBOARD_SECRET_KEY) ahead of the process's
	// environment.
	Env map[string]string
	// Store is the store: a SQLite path or a PostgreSQL DSN; "" is a new
	// SQLite file in the test's temporary directory.
	Store string
	// Listener, if not nil, is where the gateway is served: a listener
	// opened before the config was written, for a config that names the
	// gateway's own URL (settings.listen, an OAuth callback).
	Listener net.Listener
	// Wrap, if not nil, wraps the gateway's handler: the dashboard's mux in
	// front of it, or a watch on what it answers.
	Wrap func(http.Handler) http.Handler
	// ServeFirst serves before the servers start, as `switchboard serve`
	// does, for an upstream that calls the gateway back while it connects
	// (an authorization server fetching the gateway's keys); otherwise the
	// gateway is served once every auto_start server has been tried, so a
	// test sees them settled.
	ServeFirst bool
}

// Gateway is a running gateway. [Start] stops it when the test ends, and
// shows its log if the test failed.
type Gateway struct {
	App    *app.App
	Server *httptest.Server
	// Logs is the gateway's log, at debug level: what the no-secrets checks
	// search, and what a failed test shows.
	Logs *logtest.Buffer
}

// URL is the gateway's base URL.
func (g *Gateway) URL() string { return g.Server.URL }

// Start parses yaml (errors name "test.yaml"), builds the gateway with this
// test binary as config.SelfCommand (see package upstreamtest) and serves
// it for the test's lifetime. opts may be nil.
func Start(t testing.TB, yaml string, opts *Options) *Gateway {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	getenv := func(k string) string {
		if v, ok := o.Env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	cfg, err := config.Parse("test.yaml", []byte(yaml), getenv)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Settings.Store = o.Store
	if cfg.Settings.Store == "" {
		cfg.Settings.Store = filepath.Join(t.TempDir(), "switchboard.db")
	}
	logs := &logtest.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := app.New(t.Context(), cfg, &app.Options{Logger: logger, Getenv: getenv, SelfExecutable: os.Args[0]})
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	if !o.ServeFirst {
		a.StartAndWait()
	}
	h := a.Handler()
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	srv := httptest.NewUnstartedServer(h)
	if o.Listener != nil {
		srv.Listener.Close()
		srv.Listener = o.Listener
	}
	srv.Start()
	g := &Gateway{App: a, Server: srv, Logs: logs}
	t.Cleanup(func() {
		srv.Close()
		a.Close(context.Background())
		if t.Failed() {
			t.Logf("gateway %s logs:\n%s", srv.URL, logs.String())
		}
	})
	if o.ServeFirst {
		a.StartAndWait()
	}
	return g
}
