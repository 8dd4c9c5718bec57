// Package app is the composition root: it builds every component from the
// config and owns their lifetimes.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authserver"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/cluster"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/escalation"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/httpguard"
	"github.com/switchboard-mcp/switchboard/internal/identity"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/pinning"
	"github.com/switchboard-mcp/switchboard/internal/propagate"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/servers"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
	"github.com/switchboard-mcp/switchboard/internal/tlsserve"
	"github.com/switchboard-mcp/switchboard/internal/toolsearch"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstreamauth"
	"github.com/switchboard-mcp/switchboard/internal/web"
)

// Options are what the command line adds to a config.
type Options struct {
	Logger *slog.Logger
	// Getenv is the gateway's environment (for ${VAR} in servers registered
	// at runtime and for env_passthrough); default os.Getenv.
	Getenv func(string) string
	// Version is announced to clients and upstreams.
	Version string
	// SelfExecutable runs config.SelfCommand; default os.Executable().
	SelfExecutable string
	// NoListener says the gateway serves no network listener (stdio), so
	// the listen address does not decide the authentication mode.
	NoListener bool
	// CertPollInterval is how often the certificate files of
	// settings.listen_tls are checked for a change; 0 = every 5s.
	CertPollInterval time.Duration
}

// App is a running gateway. Build it with [New]; [App.Start] connects the
// upstreams and starts the background loops; [App.Close] stops everything
// it started.
type App struct {
	cfg      atomic.Pointer[config.Config] // replaced by a reload
	file     string                        // the config file; "" on the built-in config
	getenv   func(string) string
	logger   *slog.Logger
	db       *store.DB
	cat      *catalog.Catalog
	reg      *servers.Registry
	ups      *upstream.Manager // reg's
	pipe     *invoke.Pipeline
	front    *front.Front
	fronts   *frontSet // transparent per-server fronts
	metrics  *telemetry.Metrics
	events   *telemetry.Bus
	series   *telemetry.TimeSeries // the last hour of calls, for the dashboard
	sec      *security
	search   *toolsearch.Service
	cluster  *cluster.Cluster
	browser  *httpguard.Guard // Host, Origin and body checks of every route
	esc      *escalation.Service
	authSrv  *authserver.Server // auth.mode oauth without an issuer; nil otherwise
	upAuth   *upstreamauth.Set  // OAuth clients of the servers with auth
	tls      *tlsserve.Source   // settings.listen_tls; nil: plain HTTP
	tracing  *telemetry.Tracing
	start    []string // the servers to start
	ready    atomic.Bool
	reloadMu sync.Mutex // one reload at a time

	// group owns every goroutine the App starts (serve, config watch,
	// connect-all, cluster, index, certificate watch, breaker writes);
	// cancel stops them. Components own their own inner goroutines (an
	// upstream's supervisor, the audit writer).
	group     *errgroup.Group
	ctx       context.Context
	cancel    context.CancelFunc
	startOnce sync.Once

	// propagate signs the identity assertions of servers with identity.
	propagate *propagate.Signer
}

// New opens the store and builds the components, leaves first: each is
// given what it needs when it is built. Nothing connects or runs until
// Start.
func New(ctx context.Context, cfg *config.Config, opts *Options) (*App, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s, log := cfg.Settings, o.Logger
	// Refuse an unauthenticated public listener before touching anything.
	listen := s.Listen
	if o.NoListener {
		listen = ""
	}
	ic, warning, err := identity.FromConfig(cfg, listen, o.Getenv)
	if err != nil {
		return nil, err
	}
	if err := checkPlainHTTP(cfg, listen); err != nil {
		return nil, err
	}
	if warning != "" {
		log.Warn(warning)
	}
	if w := plainHTTPWarning(cfg, listen); w != "" {
		log.Warn(w, "listen", listen)
	}
	var certs *tlsserve.Source
	if t := s.ListenTLS; t != nil && listen != "" {
		if certs, err = newCertSource(cfg, o); err != nil {
			return nil, err
		}
	}
	// Mutual TLS: a client certificate verified by the listener is a
	// credential, in every auth mode.
	ic.ClientCerts = certs != nil && s.ListenTLS.ClientCAFile != ""
	browser, err := httpguard.New(httpguard.Options{AllowedHosts: cfg.Front.AllowedHosts, AllowedOrigins: cfg.Front.AllowedOrigins, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("front: %w", err)
	}
	guard, err := outboundGuard(s)
	if err != nil {
		return nil, err
	}
	tracing, err := telemetry.NewTracing(ctx, o.Getenv, &telemetry.TracingOptions{ServiceVersion: o.Version})
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if tracing.Enabled() {
		log.Info("tracing on", "export", tracing.Describe())
	}
	tracer := tracing.Tracer() // nil when off: no spans, no cost
	durable := s.AuditDurability != config.AuditAsync
	db, err := store.Open(ctx, s.Store, &store.Options{Logger: log, Durable: durable})
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", store.RedactDSN(s.Store), err)
	}
	keys, err := secrets.Load(o.Getenv)
	if err == nil && keys == nil && ic.Mode == identity.ModeLocal && !db.IsPostgres() {
		keys, err = secrets.LocalKey(filepath.Dir(store.RedactDSN(s.Store)), log)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("secret key: %w", err)
	}

	// Background work (connects started by the API, the loops of Start)
	// lives as long as the App, not as long as the request that started it.
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	group, gctx := errgroup.WithContext(bg)
	a := &App{file: cfg.File, getenv: o.Getenv, logger: log, db: db, browser: browser, tls: certs, tracing: tracing,
		metrics: telemetry.New(), series: telemetry.NewTimeSeries(nil), events: telemetry.NewBus(),
		cat: catalog.New(&catalog.Options{Separator: s.ToolNameSeparator}), group: group, ctx: gctx, cancel: cancel}
	a.cfg.Store(cfg)
	a.cluster = cluster.New(db, cluster.ReplicaName(), &cluster.Options{Logger: log, Version: o.Version, Addr: s.Listen, Scheme: a.scheme()})
	// Users sign in to the built-in authorization server with an API key,
	// checked by the authenticator built just below.
	signIn := func(ctx context.Context, key string) (authz.Identity, error) {
		return a.sec.authn.AuthenticateToken(ctx, key)
	}
	if a.authSrv, err = newAuthServer(cfg, listen, a.scheme(), ic.OAuth, keys, db, guard, o.Getenv, log, signIn); err != nil {
		a.Close(ctx)
		return nil, err
	}
	if a.sec, err = newSecurity(ctx, cfg, ic, securityDeps{db: db, cat: a.cat, cluster: a.cluster, metrics: a.metrics,
		events: a.events, guard: guard, logger: log}); err != nil {
		a.Close(ctx)
		return nil, err
	}
	var pins *pinning.Keeper
	if recorder := a.sec.recorder; recorder != nil {
		pins = pinning.New(db, &pinning.Options{Logger: log, Events: a.events, Audit: func(r audit.Record) { recorder.Record(r) }})
	}
	a.upAuth = upstreamauth.NewSet(upstreamauth.SetOptions{PublicURL: upstreamauth.PublicURL(cfg, a.scheme(), listen), Definition: func(n string) (*config.Server, error) { return a.ups.Config(n) },
		Authorizer: upstreamauth.Options{Store: db, Keyring: keys, HTTPClient: guard.Client(30 * time.Second), Logger: log}, OnAuthorized: func(n string) { _, _ = a.reg.Connect(bg, n, false) },
		OnUserLinked: a.userLinked})
	a.propagate = newPropagate(db, keys, upstreamauth.PublicURL(cfg, a.scheme(), listen), guard.Client(30*time.Second), log)
	uo := &upstream.Options{
		Logger: log, OAuth: a.upAuth.For, Identity: a.identityHeader,
		UserCredential: a.userCredential, DiscoveryCredential: a.discoveryCredential,
		SelfExecutable: o.SelfExecutable,
		Getenv:         o.Getenv,
		Implementation: &mcp.Implementation{Name: "switchboard", Version: o.Version},
		Guard:          guard,
		Tracer:         tracer,
		// The fronts are built below, before any server is loaded.
		OnResourceUpdated: func(server string, p *mcp.ResourceUpdatedNotificationParams) {
			a.front.ResourceUpdated(bg, server, p)
			a.fronts.resourceUpdated(bg, server, p)
		},
		OnHealth: func(h upstream.HealthReport) {
			a.metrics.HealthCheck(h.Server, h.OK, h.ResponseTime, h.Health.ConsecutiveFailures, h.Health.ErrorRate)
		},
	}
	uo.ApplySettings(s)
	a.reg = servers.New(bg, db, a.cat, uo, &servers.Options{
		Logger: log, Getenv: o.Getenv, Keys: keys, Guard: guard, RequireTLS: s.RequireTLSUpstreams,
		Metrics: a.metrics, Series: a.series, Events: a.events, Pins: pins, ToolVersions: cfg.ToolVersions,
		OnChange: a.policyChanged,
		OnRemove: func(name string) { a.fronts.drop(name) },
		OnAnnounced: func(server string, c upstream.ListChanges) {
			a.front.Announce(server, c.Tools, c.Resources, c.Prompts)
			if f := a.fronts.existing(server); f != nil {
				f.Announce(server, c.Tools, c.Resources, c.Prompts)
			}
		},
		OnRename: func(ctx context.Context, from, to string) {
			a.sec.persist.MoveServer(ctx, a.sec.breakers, from, to)
		},
		Publish:   a.cluster.Publish,
		Operation: a.operation,
	})
	a.ups = a.reg.Upstreams()
	if a.esc, err = newEscalation(s, o.Getenv, guard, db, a.sec.engine, a.events, log); err != nil {
		a.Close(ctx)
		return nil, err
	}
	// A high-risk call without a token files an approval request only when
	// the config asks for it; otherwise it is refused as before.
	var approver invoke.Approver
	if cfg.Authz.Approval == config.ApprovalRequest {
		approver = a.esc
	}
	a.pipe = invoke.New(a.cat, a.ups, &invoke.Options{
		Timeout:     time.Duration(s.InvocationTimeoutMS) * time.Millisecond,
		Retry:       retryPolicy(s),
		Fallbacks:   cfg.Fallbacks,
		Logger:      log,
		Authorizer:  a.sec.engine,
		Recorder:    a.sec.recorder,
		Redactor:    a.sec.redactor,
		Limiter:     a.sec.limiter,
		Bulkhead:    a.sec.bulk,
		Breakers:    a.sec.breakers,
		Idempotency: a.sec.idem,
		RetryBudget: a.sec.budget,
		ToolState:   a.reg.ToolState,
		// A call returns only once its audit record is written (group
		// commit): a gateway killed right after answering loses no row.
		DurableAudit: durable,
		ServerAccess: a.sec.engine.ServerAllowed,
		OnCall:       invoke.TelemetryObserver(a.metrics, a.series, a.events),
		Escalator:    a.esc,
		Approver:     approver,
		Tracer:       tracer,
	})
	if a.search, err = toolsearch.New(a.cat, &toolsearch.Options{Logger: log, Search: cfg.Search, Skills: cfg.Skills,
		Guard: guard, Getenv: o.Getenv, Servers: a.reg, Status: a.serverState, Visible: a.visible}); err != nil {
		a.Close(ctx)
		return nil, err
	}
	a.front, a.fronts = newFronts(cfg, frontDeps{cat: a.cat, pipe: a.pipe, keys: keys, cluster: a.cluster, search: a.search,
		visible: a.visible, serverVisible: a.sec.engine.ServerAllowed, tracer: tracer, logger: log, version: o.Version})
	if a.start, err = a.reg.Load(ctx, cfg); err != nil {
		a.Close(ctx)
		return nil, err
	}
	return a, nil
}

// serverState is a server's state, "" for one the manager does not know.
func (a *App) serverState(server string) string {
	st, _ := a.ups.Status(server) // zero when unknown
	return string(st.State)
}

// startLoops starts the background loops, once.
func (a *App) startLoops() {
	a.startOnce.Do(func() {
		ctx := a.ctx
		a.group.Go(func() error { return a.search.Run(ctx) })
		a.group.Go(func() error { return a.sec.persist.Run(ctx) })
		a.group.Go(func() error { return a.cluster.Run(ctx, a.clusterHandlers()) })
		if a.tls != nil {
			a.group.Go(func() error { a.tls.Run(ctx); return nil })
		}
		if a.authSrv != nil {
			a.group.Go(func() error {
				if err := a.authSrv.Run(ctx); err != nil && ctx.Err() == nil {
					a.logger.Error("authorization server stopped", "error", err)
				}
				return nil
			})
		}
	})
}

// Start connects every server marked for auto start, concurrently. It
// returns at once; the gateway reports ready (GET /readyz) once every
// attempt has finished, successful or not.
func (a *App) Start() {
	a.startLoops()
	a.group.Go(func() error {
		a.reg.ConnectAll(a.ctx, a.start)
		a.awaitCluster()
		a.ready.Store(true)
		a.logger.Info("ready", "servers", len(a.start))
		return nil
	})
}

// StartAndWait is Start, returning once every auto-start attempt finished.
func (a *App) StartAndWait() {
	a.startLoops()
	a.reg.ConnectAll(a.ctx, a.start)
	a.awaitCluster()
	a.ready.Store(true)
}

// awaitCluster waits until the other replicas' changes are heard.
func (a *App) awaitCluster() {
	select {
	case <-a.cluster.Listening():
	case <-a.ctx.Done():
	}
}

// Ready reports whether startup has finished.
func (a *App) Ready() bool { return a.ready.Load() }

// Handler serves the MCP front (/mcp, /sse) and the REST API behind the
// browser guard (Host, Origin, JSON bodies): in local mode the port trusts
// whoever reaches it, and every web page does. OAuth endpoints: see below.
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	authn := a.sec.authenticate
	fc := a.cfg.Load().Front
	// The browser guard below covers the MCP endpoints too.
	httpOpts := &front.HTTPOptions{Stateless: fc.Stateless, Guarded: true,
		Sessions: front.NewSessions(&front.SessionOptions{
			MaxSessions: fc.MaxSessions, MaxSessionsPerIdentity: fc.MaxSessionsPerIdentity,
			Logger: a.logger, OnLive: a.metrics.Sessions, OnEvict: a.metrics.SessionEvicted, OnRefuse: a.metrics.SessionRefused,
		})}
	mux.Handle("/mcp", authn(a.front.StreamableHandler(httpOpts)))
	mux.Handle("/sse", authn(a.front.SSEHandler(httpOpts)))
	mux.Handle("/servers/{name}/mcp", authn(a.fronts.handler(a.reg, httpOpts, (*front.Front).StreamableHandler)))
	mux.Handle("/servers/{name}/sse", authn(a.fronts.handler(a.reg, httpOpts, (*front.Front).SSEHandler)))
	mux.Handle("GET /metrics", authn(a.metrics.Handler()))
	// The dashboard's assets hold no data: its API calls carry the key.
	mux.Handle(web.Prefix, web.Handler())
	apiHandler := a.apiHandler()
	// Probes stay open: load balancers and kubelets carry no credentials.
	mux.Handle("GET /healthz", apiHandler)
	mux.Handle("GET /readyz", apiHandler)
	mux.Handle("/", authn(apiHandler))
	// The protected resource metadata (RFC 9728), the authorization server's
	// endpoints and the upstream OAuth callback (its state is its credential)
	// are reached from other origins: they stay outside the browser guard
	// (the authorization server's pages protect themselves: a cookie bound
	// to the request, a CSRF token, an Origin check).
	outer := http.NewServeMux()
	a.upAuth.Register(outer)
	outer.Handle(propagate.JWKSPath, a.propagate)
	if md := a.sec.authn.MetadataHandler(); md != nil {
		outer.Handle(identity.MetadataPath, md)
		outer.Handle(identity.MetadataPath+"/", md)
	}
	if a.authSrv != nil {
		a.authSrv.Register(outer)
	}
	outer.Handle("/", a.browser.Handler(mux))
	return outer
}

// Catalog exposes the catalog (tests, benchmarks).
func (a *App) Catalog() *catalog.Catalog { return a.cat }

// Upstreams exposes the upstream manager (tests).
func (a *App) Upstreams() *upstream.Manager { return a.ups }

// Serve serves HTTP on ln until ctx is done, then shuts down gracefully.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           a.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// No WriteTimeout: SSE and streamable GET streams are long-lived.
		IdleTimeout: 120 * time.Second,
		ErrorLog:    slog.NewLogLogger(a.logger.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	serve := srv.Serve
	if a.tls != nil {
		// The certificate comes from the source on each handshake;
		// ServeTLS adds HTTP/2 to the config's protocols.
		srv.TLSConfig = a.tls.TLSConfig()
		serve = func(ln net.Listener) error { return srv.ServeTLS(ln, "", "") }
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return g.Wait()
}

// RunStdio serves one MCP client over stdin/stdout until ctx is done or the
// client disconnects.
func (a *App) RunStdio(ctx context.Context) error {
	// Whoever can start the stdio gateway can read its config: the session
	// acts as the local admin.
	return a.front.RunStdio(authz.WithIdentity(ctx, authz.LocalAdmin()))
}

// Close stops the loops, the upstreams (and their processes), then the
// store. Idempotent.
func (a *App) Close(ctx context.Context) {
	if a.cancel != nil {
		a.cancel()
		_ = a.group.Wait() // the loops return nil; they stop with the cancel above
	}
	if a.search != nil {
		a.search.Close()
	}
	if a.front != nil {
		a.front.Close()
	}
	if a.fronts != nil {
		a.fronts.close()
	}
	a.upAuth.Close() // its flows reconnect servers: before the upstreams
	if a.ups != nil {
		if err := a.ups.Close(context.WithoutCancel(ctx)); err != nil {
			a.logger.Warn("closing upstreams", "error", err)
		}
		a.ups = nil
	}
	// After the upstreams, whose last failures it may still record;
	// undelivered escalations stay stored for the next start.
	if a.esc != nil {
		a.esc.Close()
		a.esc = nil
	}
	// After the upstreams: calls finishing during their shutdown are still
	// audited, and the breakers' last states written.
	a.sec.close(ctx)
	a.sec = nil
	// Last of the call path: the spans of calls that ended above are
	// exported before the process goes.
	if a.tracing != nil {
		tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer tcancel()
		if err := a.tracing.Shutdown(tctx); err != nil {
			a.logger.Warn("exporting the last spans", "error", err)
		}
		a.tracing = nil
	}
	if a.reg != nil {
		a.reg.Close()
	}
	if a.db != nil {
		if err := a.db.Close(); err != nil {
			a.logger.Warn("closing store", "error", err)
		}
		a.db = nil
	}
}

// Run is `switchboard serve`: build, listen on the configured address,
// start, serve until ctx is done, then stop everything.
func Run(ctx context.Context, cfg *config.Config, opts *Options) error {
	a, err := New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	defer a.Close(ctx)
	ln, err := net.Listen("tcp", cfg.Settings.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Settings.Listen, err)
	}
	a.logger.Info("switchboard listening", "addr", ln.Addr().String(),
		"mcp", a.scheme()+"://"+ln.Addr().String()+"/mcp", "config", configName(cfg), "store", store.RedactDSN(cfg.Settings.Store))
	a.Start()
	a.group.Go(func() error { a.WatchConfig(a.ctx, 2*time.Second); return nil })
	// Serving ends when ctx does (or the listener fails): then every loop
	// stops.
	a.group.Go(func() error { defer a.cancel(); return a.Serve(ctx, ln) })
	return a.group.Wait()
}

// RunStdio is `switchboard stdio`: the gateway serving one client over
// stdin/stdout, with its upstreams started before the client is served so
// its first tools/list is complete.
func RunStdio(ctx context.Context, cfg *config.Config, opts *Options) error {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.NoListener = true
	a, err := New(ctx, cfg, &o)
	if err != nil {
		return err
	}
	defer a.Close(ctx)
	a.StartAndWait()
	err = a.RunStdio(ctx)
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

func configName(cfg *config.Config) string {
	if cfg.File == "" {
		return "(built-in default)"
	}
	return cfg.File
}
