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
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/escalation"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/httpguard"
	"github.com/switchboard-mcp/switchboard/internal/identity"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
	"github.com/switchboard-mcp/switchboard/internal/tlsserve"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
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
// upstreams; [App.Close] stops everything it started.
type App struct {
	cfg     *config.Config
	logger  *slog.Logger
	db      *store.DB
	cat     *catalog.Catalog
	ups     *upstream.Manager
	pipe    *invoke.Pipeline
	front   *front.Front
	fronts  *frontSet // transparent per-server fronts
	metrics *telemetry.Metrics
	events  *telemetry.Bus
	// series is the last hour of calls in memory, for the dashboard.
	series  *telemetry.TimeSeries
	guard   *netguard.Guard // the SSRF policy of every outbound fetch
	reg     *registry
	sec     *security
	disc    *discovery
	cluster *cluster
	browser *httpguard.Guard // Host, Origin and body checks of every route
	esc     *escalation.Service
	// tls serves settings.listen_tls (nil: plain HTTP); its watcher runs
	// until Close.
	tls      *tlsserve.Source
	tlsWatch sync.WaitGroup
	// manifests are the tool manifests registered through the API.
	manifests manifests
	cancel    context.CancelFunc
	ready     atomic.Bool
	start     []string
	getenv    func(string) string
	tracing   *telemetry.Tracing // OTEL_* environment; off by default

	reloadMu sync.Mutex // one reload at a time
}

// New opens the store and builds the components. Nothing connects until
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
	s := cfg.Settings
	// Refuse an unauthenticated public listener before touching anything.
	listen := s.Listen
	if o.NoListener {
		listen = ""
	}
	ic, _, err := authMode(cfg, listen, o.Getenv)
	if err != nil {
		return nil, err
	}
	if err := checkPlainHTTP(cfg, listen); err != nil {
		return nil, err
	}
	var certs *tlsserve.Source
	if t := s.ListenTLS; t != nil && listen != "" {
		var err error
		if certs, err = newCertSource(cfg, o); err != nil {
			return nil, err
		}
	}
	browser, err := httpguard.New(httpguard.Options{AllowedHosts: cfg.Front.AllowedHosts, AllowedOrigins: cfg.Front.AllowedOrigins, Logger: o.Logger})
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
		o.Logger.Info("tracing on", "export", tracing.Describe())
	}
	tracer := tracing.Tracer() // nil when off: no spans, no cost
	durable := s.AuditDurability != config.AuditAsync
	db, err := store.Open(ctx, s.Store, &store.Options{Logger: o.Logger, Durable: durable})
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", store.RedactDSN(s.Store), err)
	}
	// Background work of the gateway (connects started by the API) lives
	// as long as the App, not as long as the request that started it.
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a := &App{cfg: cfg, logger: o.Logger, db: db, cancel: cancel, getenv: o.Getenv, metrics: telemetry.New(), series: telemetry.NewTimeSeries(nil), guard: guard, browser: browser, tls: certs, tracing: tracing}
	if certs != nil {
		a.tlsWatch.Go(func() { certs.Run(bg) })
	}
	a.cat = catalog.New(&catalog.Options{Separator: s.ToolNameSeparator})
	a.reg = newRegistry(bg, db, a.cat, o.Logger, o.Getenv)
	a.reg.guard = guard
	a.reg.requireTLS = s.RequireTLSUpstreams
	if a.reg.keys, err = secrets.Load(o.Getenv); err == nil && a.reg.keys == nil && ic.Mode == identity.ModeLocal && !db.IsPostgres() {
		a.reg.keys, err = localSecretKey(s.Store, o.Logger)
	}
	if err != nil {
		db.Close()
		cancel()
		return nil, fmt.Errorf("secret key: %w", err)
	}
	a.reg.metrics = a.metrics
	a.reg.series = a.series
	a.events = telemetry.NewBus()
	a.reg.events = a.events
	uo := &upstream.Options{
		Logger:         o.Logger,
		OnTransition:   a.reg.onTransition,
		OnDiscovery:    a.reg.onDiscovery,
		SelfExecutable: o.SelfExecutable,
		Getenv:         o.Getenv,
		Implementation: &mcp.Implementation{Name: "switchboard", Version: o.Version},
		Guard:          guard,
		Tracer:         tracer,
		OnResourceUpdated: func(server string, p *mcp.ResourceUpdatedNotificationParams) {
			a.front.ResourceUpdated(bg, server, p)
			a.fronts.resourceUpdated(bg, server, p)
		},
		OnHealth: func(h upstream.HealthReport) {
			a.metrics.HealthCheck(h.Server, h.OK, h.ResponseTime, h.Health.ConsecutiveFailures, h.Health.ErrorRate)
		},
	}
	uo.ApplySettings(s)
	a.ups = upstream.NewManager(uo)
	a.reg.ups = a.ups
	if a.sec, err = newSecurity(ctx, a, cfg, o); err != nil {
		a.Close(ctx)
		return nil, err
	}
	a.reg.onChange = a.policyChanged
	a.reg.pins = newPinGate(a)
	if a.esc, err = a.newEscalation(s, o.Getenv); err != nil {
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
		Logger:      o.Logger,
		Authorizer:  a.sec.engine,
		Recorder:    a.sec.recorder,
		Redactor:    a.sec.redactor,
		Limiter:     a.sec.limiter,
		Bulkhead:    a.sec.bulk,
		Breakers:    a.sec.breakers,
		Idempotency: a.idempotency(),
		RetryBudget: a.sec.budget,
		ToolState:   a.manifests.state,
		// A call returns only once its audit record is written (group
		// commit): a gateway killed right after answering loses no row.
		DurableAudit: durable,
		ServerAccess: a.sec.engine.ServerAllowed,
		OnCall:       a.onCall,
		Escalator:    a.esc,
		Approver:     approver,
		Tracer:       tracer,
	})
	if a.disc, err = newDiscovery(a, cfg, o.Getenv); err != nil {
		a.Close(ctx)
		return nil, err
	}
	// requestState of stateless callers is sealed with the secret key when
	// there is one, so that replicas sharing it accept each other's.
	var sealer front.Sealer
	if a.reg.keys != nil {
		sealer = a.reg.keys
	}
	inputTimeout := time.Duration(cfg.Front.InputTimeoutSeconds) * time.Second
	a.front = front.New(a.cat, a.pipe, &front.Options{
		Sealer:         sealer,
		InputTimeout:   inputTimeout,
		Replica:        a.sec.replica,
		ReplicaAddr:    a.replicaAddr,
		Spend:          a.spendState,
		ToolExposure:   cfg.Front.ToolExposure,
		MetaToolPrefix: cfg.Front.MetaToolPrefix,
		Searcher:       a.disc,
		Logger:         o.Logger,
		Implementation: &mcp.Implementation{Name: "switchboard", Title: "switchboard MCP gateway", Version: o.Version},
		Instructions: "switchboard aggregates several MCP servers. Tool, prompt and resource names are " +
			"namespaced by server: <server>" + s.ToolNameSeparator + "<name>.",
		WithPeer:      withPeer,
		Visible:       a.visible,
		ServerVisible: a.sec.engine.ServerAllowed,
		Tracer:        tracer,
	})
	a.reg.onRemove = func(name string) { a.fronts.drop(name) }
	a.reg.onAnnounced = func(server string, c upstream.ListChanges) {
		a.front.Announce(server, c.Tools, c.Resources, c.Prompts)
		if f := a.fronts.existing(server); f != nil {
			f.Announce(server, c.Tools, c.Resources, c.Prompts)
		}
	}
	a.reg.onRename = a.moveBreakers
	a.fronts = newFrontSet(func(server string) *front.Front {
		return front.New(a.cat, a.pipe, &front.Options{
			Logger:         o.Logger.With("endpoint", server),
			Implementation: &mcp.Implementation{Name: "switchboard/" + server, Version: o.Version},
			Server:         server,
			Sealer:         sealer,
			InputTimeout:   inputTimeout,
			Replica:        a.sec.replica,
			ReplicaAddr:    a.replicaAddr,
			Spend:          a.spendState,
			WithPeer:       withPeer,
			Visible:        a.visible,
			ServerVisible:  a.sec.engine.ServerAllowed,
			Tracer:         tracer,
		})
	})
	start, err := a.reg.load(ctx, cfg)
	if err != nil {
		a.Close(ctx)
		return nil, err
	}
	a.start = start
	a.cluster = newCluster(a, o.Version)
	announce := func(key string) { a.cluster.publish("breaker", key) }
	a.sec.persist.announce.Store(&announce)
	return a, nil
}

// idempotency is the pipeline's idempotency cache: this process's, shared
// through the store when replicas share one (PostgreSQL).
func (a *App) idempotency() invoke.Idempotency {
	if !a.db.IsPostgres() {
		return a.sec.idem
	}
	ttl := a.cfg.Settings.IdempotencyTTL
	if ttl <= 0 {
		ttl = resilience.DefaultIdempotencyTTL
	}
	return &sharedIdempotency{local: a.sec.idem, db: a.db, cat: a.cat, ttl: ttl, logger: a.logger}
}

// Start connects every server marked for auto start, concurrently. It
// returns at once; the gateway reports ready (GET /readyz) once every
// attempt has finished, successful or not.
func (a *App) Start() {
	a.reg.wg.Go(func() {
		a.reg.connectAll(a.reg.ctx, a.start)
		a.ready.Store(true)
		a.logger.Info("ready", "servers", len(a.start))
	})
}

// StartAndWait is Start, returning once every auto-start attempt finished.
func (a *App) StartAndWait() {
	a.reg.connectAll(a.reg.ctx, a.start)
	a.ready.Store(true)
}

// Ready reports whether startup has finished.
func (a *App) Ready() bool { return a.ready.Load() }

// Handler serves the MCP front (/mcp, /sse) and the REST API. Every route
// is behind the browser guard (Host, Origin, JSON bodies): in local mode
// the port trusts whoever reaches it, and every web page does.
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	authn := a.authenticate
	fc := a.cfg.Front
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
	guarded := a.browser.Handler(mux)
	md := a.sec.authn.MetadataHandler()
	if md == nil {
		return guarded
	}
	// The protected resource metadata (RFC 9728) is public and fetched by
	// browser-based clients from their own origin: it stays outside the
	// browser guard, which refuses foreign origins.
	outer := http.NewServeMux()
	outer.Handle(identity.MetadataPath, md)
	outer.Handle(identity.MetadataPath+"/", md)
	outer.Handle("/", guarded)
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

// Close stops the upstreams (and their processes), then the store.
// Idempotent.
func (a *App) Close(ctx context.Context) {
	if a.cancel != nil {
		a.cancel()
	}
	a.tlsWatch.Wait() // the certificate watcher stops with the cancel above
	if a.front != nil {
		a.front.Close()
	}
	a.disc.close()
	a.disc = nil
	if a.fronts != nil {
		a.fronts.close()
	}
	if a.ups != nil {
		if err := a.ups.Close(context.WithoutCancel(ctx)); err != nil {
			a.logger.Warn("closing upstreams", "error", err)
		}
	}
	a.cluster.close()
	// After the upstreams, whose last failures it may still record;
	// undelivered escalations stay stored for the next start.
	if a.esc != nil {
		a.esc.Close()
	}
	// After the upstreams: calls finishing during their shutdown are still
	// audited.
	a.sec.close(ctx)
	a.sec = nil
	// Last of the call path: the spans of calls that ended above are
	// exported before the process goes.
	tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer tcancel()
	if err := a.tracing.Shutdown(tctx); err != nil {
		a.logger.Warn("exporting the last spans", "error", err)
	}
	a.tracing = nil
	if a.reg != nil {
		a.reg.close()
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
	wctx, stop := context.WithCancel(ctx)
	var watcher sync.WaitGroup
	watcher.Go(func() { a.WatchConfig(wctx, 2*time.Second) })
	defer func() { stop(); watcher.Wait() }()
	return a.Serve(ctx, ln)
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
