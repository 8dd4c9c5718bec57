package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/identity"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// AdminKeyEnv names the environment variable whose value, when set, is an
// admin API key from the start: how an operator bootstraps the first keys.
const AdminKeyEnv = "SWITCHBOARD_ADMIN_KEY"

// security holds the pipeline's stateful parts: who callers are, what they
// may do, and the resilience state shared by all calls.
type security struct {
	authn    *identity.Authenticator
	engine   *authz.Engine
	redactor *audit.Redactor
	recorder *audit.Recorder
	breakers *resilience.Breakers
	bulk     *resilience.Bulkheads
	limiter  *resilience.RateLimiter
	idem     *resilience.Idempotency[*invoke.Result]
	persist  *breakerPersister
	replica  string

	budgetMu    sync.Mutex
	budgets     map[string]*resilience.RetryBudget
	budgetRatio float64
}

// authMode decides how callers authenticate, from the config and the
// listener: with no auth section, credential-less loopback callers are the
// local admin (a warning says so), and any other listener is refused,
// because it would hand every tool to the network.
func authMode(cfg *config.Config, listen string, getenv func(string) string) (identity.Config, string, error) {
	ic := identity.Config{AdminKey: getenv(AdminKeyEnv)}
	if cfg.Auth == nil {
		if listen != "" && !loopbackListen(listen) {
			where := "the config file"
			if cfg.File != "" {
				where = cfg.File
			}
			return ic, "", config.Errors{{File: cfg.File, Field: "settings.listen", Msg: fmt.Sprintf(
				"refusing to listen on %s without authentication: anyone who can reach it could call every tool. "+
					"Add an auth: section to %s (mode: keys, then create keys with %s set; or mode: jwt), or listen on 127.0.0.1",
				listen, where, AdminKeyEnv)}}
		}
		ic.Mode = identity.ModeLocal
		return ic, "no auth section: local mode, requests without credentials from this machine (loopback) act as the local admin; " +
			"add an auth: section before exposing the gateway", nil
	}
	ic.Mode = cfg.Auth.Mode
	if j := cfg.Auth.JWT; j != nil {
		var secret string
		if j.Secret != "" { // else jwks_url: there is no key to expand
			var err error
			if secret, err = j.ExpandSecret(getenv); err != nil {
				return ic, "", err // names auth.jwt.secret and the variable
			}
		}
		ic.JWT = &identity.JWTConfig{
			Secret: secret, JWKSURL: j.JWKSURL, Issuer: j.Issuer, Audience: j.Audience, Leeway: j.Leeway,
			AgentClaim: j.Claims.AgentID, RolesClaim: j.Claims.Roles, WorkspaceClaim: j.Claims.Workspace,
			AllowClaim: j.Claims.AllowServers, DenyClaim: j.Claims.DenyServers, AdminClaim: j.Claims.Admin,
		}
	}
	if o := cfg.Auth.OAuth; o != nil {
		if o.Resource == "" && listen != "" && !loopbackListen(listen) {
			// Behind a proxy or on a public name, the Host header is whatever
			// the client (or the proxy) says: audiences must come from config.
			return ic, "", config.Errors{{File: cfg.File, Line: cfg.Auth.Pos.Line, Column: cfg.Auth.Pos.Column, Field: "auth.oauth.resource",
				Msg: fmt.Sprintf("is required when listening on %s: set it to the gateway's URL as clients reach it (e.g. https://gateway.example.com); "+
					"tokens must be issued for it", listen)}}
		}
		oc := &identity.OAuthConfig{
			Resource: o.Resource, Scopes: o.Scopes, ScopeRoles: o.ScopeRoles,
			Token: identity.JWTConfig{Issuer: o.Issuer, JWKSURL: o.JWKSURL, Leeway: o.Leeway,
				AgentClaim: o.Claims.AgentID, RolesClaim: o.Claims.Roles, WorkspaceClaim: o.Claims.Workspace,
				AllowClaim: o.Claims.AllowServers, DenyClaim: o.Claims.DenyServers, AdminClaim: o.Claims.Admin},
		}
		if in := o.Introspection; in != nil {
			secret, err := in.ExpandSecret(getenv)
			if err != nil {
				return ic, "", err // names the field and the variable
			}
			oc.Introspection = &identity.IntrospectionConfig{URL: in.URL, ClientID: in.ClientID, ClientSecret: secret, CacheTTL: in.Cache}
			if in.Cache == 0 {
				oc.Introspection.CacheTTL = -1 // the setting's 0 means no cache
			}
		}
		ic.OAuth = oc
	}
	return ic, "", nil
}

// loopbackListen reports whether a listen address only accepts local
// connections.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// policyFrom builds the authorization policy of a config and the servers'
// default_access.
func policyFrom(cfg *config.Config, access map[string]string) authz.Policy {
	s := cfg.Settings
	return authz.Policy{
		ServerAccess:     access,
		RoleRestrictions: cfg.Authz.RoleRestrictions,
		HighRisk:         cfg.Authz.HighRiskTools,
		AdminNeedsToken:  cfg.Authz.AdminNeedsToken,
		TokenTTL:         time.Duration(s.TokenTTLMinutes) * time.Minute,
		CacheTTL:         time.Duration(s.AuthCacheTTLMinutes) * time.Minute,
	}
}

// breakerSettings are the seed's MCP_CIRCUIT_* settings.
func breakerSettings(s config.Settings) resilience.BreakerSettings {
	return resilience.BreakerSettings{
		FailureThreshold: s.CircuitFailureThreshold,
		Cooldown:         time.Duration(s.CircuitCooldownSeconds) * time.Second,
		HalfOpenMax:      s.CircuitHalfOpenMax,
	}
}

// retryPolicy is the seed's MCP_RETRY_* settings, with ±20% jitter.
func retryPolicy(s config.Settings) resilience.RetryPolicy {
	return resilience.RetryPolicy{
		MaxAttempts: s.RetryMaxAttempts,
		Base:        time.Duration(s.RetryBaseMS) * time.Millisecond,
		Factor:      s.RetryFactor,
		MaxDelay:    time.Duration(s.RetryMaxDelayMS) * time.Millisecond,
		Jitter:      jitter20,
	}
}

// jitter20 spreads a delay uniformly over ±20% (the figure), so
// callers failing together do not retry together.
func jitter20(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	f := 0.8 + 0.4*rand.Float64()
	return time.Duration(math.Round(float64(d) * f))
}

// newSecurity builds the identity, authorization, audit and resilience
// parts from the config. Stateful parts load their state from db.
func newSecurity(ctx context.Context, a *App, cfg *config.Config, o Options) (*security, error) {
	s := cfg.Settings
	sec := &security{replica: replicaName(), budgets: map[string]*resilience.RetryBudget{}, budgetRatio: s.RetryBudgetRatio}
	listen := cfg.Settings.Listen
	if o.NoListener {
		listen = ""
	}
	ic, warning, err := authMode(cfg, listen, o.Getenv)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		a.logger.Warn(warning)
	}
	if w := plainHTTPWarning(cfg, listen); w != "" {
		a.logger.Warn(w, "listen", listen)
	}
	// Mutual TLS: a client certificate verified by the listener is a
	// credential, in every auth mode.
	ic.ClientCerts = a.tls != nil && cfg.Settings.ListenTLS.ClientCAFile != ""
	if ic.AdminKey != "" {
		a.logger.Info("admin key from the environment is active", "env", AdminKeyEnv)
	}
	if ic.JWT != nil && ic.JWT.JWKSURL != "" {
		if err := checkConfiguredURL(a.guard, "auth.jwt.jwks_url", ic.JWT.JWKSURL); err != nil {
			return nil, err
		}
		ic.JWT.HTTPClient = a.guard.Client(identity.DefaultJWKSTimeout)
	}
	if oc := ic.OAuth; oc != nil {
		// Outbound like any configured URL: through the SSRF guard.
		if err := checkConfiguredURL(a.guard, "auth.oauth.jwks_url", oc.Token.JWKSURL); err != nil {
			return nil, err
		}
		oc.Token.HTTPClient = a.guard.Client(identity.DefaultJWKSTimeout)
		if in := oc.Introspection; in != nil {
			if err := checkConfiguredURL(a.guard, "auth.oauth.introspection.url", in.URL); err != nil {
				return nil, err
			}
			in.HTTPClient = oc.Token.HTTPClient
		}
		a.logger.Info("OAuth resource server", "issuer", oc.Token.Issuer, "resource", oc.Resource,
			"jwks", oc.Token.JWKSURL != "", "introspection", oc.Introspection != nil)
	}
	if sec.authn, err = identity.New(ic, keyStore{a.db}, &identity.Options{Logger: a.logger}); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if sec.engine, err = authz.New(ctx, grantStore{a.db}, policyFrom(cfg, nil), &authz.Options{Logger: a.logger}); err != nil {
		sec.authn.Close()
		return nil, fmt.Errorf("loading grants: %w", err)
	}
	if sec.redactor, err = audit.NewRedactor([]string{s.AuditRedactPattern}); err != nil {
		sec.authn.Close()
		return nil, fmt.Errorf("audit_redact_pattern: %w", err)
	}
	sec.recorder = audit.NewRecorder(auditSink{a.db}, &audit.Options{
		QueueSize:  s.AuditQueueSize,
		Retention:  time.Duration(s.AuditRetentionDays) * 24 * time.Hour,
		Replica:    sec.replica,
		Logger:     a.logger,
		OnDepth:    a.metrics.AuditDepth,
		OnOverflow: a.metrics.AuditDropped,
	})

	sec.persist = newBreakerPersister(a.db, a.logger)
	bs := breakerSettings(s)
	bs.OnChange = sec.persist.save
	bs.OnStateChange = func(key string, from, to resilience.State) {
		a.metrics.CircuitState(key, int(to))
		typ := map[resilience.State]string{resilience.Open: "circuit.opened", resilience.Closed: "circuit.closed", resilience.HalfOpen: "circuit.half_open"}[to]
		a.events.Publish(typ, map[string]any{"circuit_key": key, "from": from.String(), "to": to.String()})
		lvl := slog.LevelInfo
		if to == resilience.Open {
			lvl = slog.LevelWarn
		}
		a.logger.Log(context.Background(), lvl, "circuit breaker", "key", key, "from", from.String(), "to", to.String())
	}
	sec.breakers = resilience.NewBreakers(bs)
	rows, err := a.db.ListBreakers(ctx)
	if err != nil {
		a.logger.Warn("restoring circuit breakers", "error", err)
	}
	for _, row := range rows {
		if st, ok := sec.restoreBreaker(row); ok && st != resilience.Closed {
			a.metrics.CircuitState(row.Key, int(st))
			a.logger.Info("circuit breaker restored", "key", row.Key, "state", st.String())
		}
	}

	queue := s.BulkheadMaxQueue
	if queue == 0 {
		queue = -1 // the setting's 0 means no queue; the bulkhead's 0 means its default
	}
	sec.bulk = resilience.NewBulkheads(resilience.BulkheadSettings{MaxConcurrent: s.BulkheadMaxConcurrent, MaxQueue: queue})
	sec.limiter = resilience.NewRateLimiter(resilience.RateLimit{Rate: s.RateLimitPerSecond, Burst: s.RateLimitBurst}, nil)
	sec.idem = resilience.NewIdempotency[*invoke.Result](s.IdempotencyTTL, s.IdempotencyMaxEntries, nil)
	return sec, nil
}

// budget returns the retry budget of a server, creating it on first use.
func (sec *security) budget(server string) invoke.RetryBudget {
	sec.budgetMu.Lock()
	defer sec.budgetMu.Unlock()
	b, ok := sec.budgets[server]
	if !ok {
		ratio := sec.budgetRatio
		if ratio == 0 {
			ratio = -1 // the setting's 0 means no ratio share; the budget's 0 means its default
		}
		b = resilience.NewRetryBudget(resilience.RetryBudgetSettings{Ratio: ratio}, nil)
		sec.budgets[server] = b
	}
	return b
}

// visible reports whether id may see t (tools/list, GET /api/v1/tools).
func (sec *security) visible(id authz.Identity, t catalog.Tool) bool {
	return sec.engine.Visible(id, t.Server, t.OriginalName, t.Name, t.Destructive())
}

// close flushes the audit log and the breaker state.
func (sec *security) close(ctx context.Context) {
	if sec == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if sec.recorder != nil {
		_ = sec.recorder.Close(cctx)
	}
	if sec.persist != nil {
		sec.persist.close(cctx)
	}
	if sec.authn != nil {
		sec.authn.Close()
	}
}

// authenticate is the front door of every MCP and API route: it
// authenticates the request and puts the caller in its context. A bearer
// credential also binds MCP sessions to their creator (the SDK refuses a
// session's requests from another user).
func (a *App) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := a.sec.authn.Authenticate(r)
		if err != nil && errors.Is(err, identity.ErrUnavailable) {
			// The store or the identity provider failed: not the caller's
			// fault, and its text is not for the caller.
			a.logger.Warn("authentication unavailable", "path", r.URL.Path, "error", err)
			api.WriteError(w, &api.Error{Status: http.StatusServiceUnavailable, Code: "auth_unavailable", Message: "credentials cannot be checked right now; try again"})
			return
		}
		if err != nil {
			ie := &identity.Error{Code: "unauthenticated", Reason: err.Error()}
			errors.As(err, &ie)
			// In oauth mode the challenge points MCP clients at the
			// resource's metadata, from which they start authorization.
			w.Header().Set("WWW-Authenticate", a.sec.authn.Challenge(r, ie))
			api.WriteError(w, &api.Error{Status: identity.Status(ie), Code: ie.Code, Message: ie.Reason})
			return
		}
		r = r.WithContext(authz.WithIdentity(r.Context(), id))
		bearer := hasBearer(r)
		if !bearer && id.Method != "mtls" {
			next.ServeHTTP(w, r)
			return
		}
		ti := &auth.TokenInfo{UserID: id.ID, Extra: map[string]any{front.IdentityExtraKey: id}}
		bind := auth.RequireBearerToken(func(context.Context, string, *http.Request) (*auth.TokenInfo, error) { return ti, nil },
			&auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
		if bearer {
			bind(next).ServeHTTP(w, r)
			return
		}
		// A client certificate binds sessions too, but the SDK only takes
		// the session's owner from a bearer: hand it a placeholder, removed
		// before the request goes on, so nothing downstream sees one.
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+certPlaceholder)
		bind(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Del("Authorization")
			next.ServeHTTP(w, r)
		})).ServeHTTP(w, r)
	})
}

// certPlaceholder is the bearer under which a client-certificate identity
// passes the SDK's session binding; see authenticate.
const certPlaceholder = "mtls-client-certificate"

func hasBearer(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	return len(h) > 7 && strings.EqualFold(h[:7], "bearer ")
}

// replicaName identifies this gateway process in audit rows.
func replicaName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "switchboard"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// onCall turns a pipeline outcome into metrics and an event.
func (a *App) onCall(o invoke.Outcome) {
	server := o.Server
	if server == "" {
		server = "unknown"
	}
	a.metrics.Call(server, outcomeLabel(o), o.Took)
	a.metrics.Invocation(server, o.Tool, o.AgentID, o.Status, errorType(o), o.Attempts, o.Took)
	a.series.Record(o.Server, o.Tool, o.Status != "success", o.Took)
	a.events.Publish("invocation.completed", map[string]any{
		"correlation_id": o.CorrelationID, "agent_id": o.AgentID, "server": o.Server, "tool": o.Tool,
		"status": o.Status, "code": string(o.Code), "attempts": o.Attempts, "served_by": o.ServedBy,
		"latency_ms": float64(o.Took.Microseconds()) / 1e3,
	})
}

func outcomeLabel(o invoke.Outcome) string {
	switch o.Status {
	case "success":
		return "ok"
	case "tool_error":
		return "tool_error"
	}
	return string(o.Code)
}

func errorType(o invoke.Outcome) string {
	switch o.Status {
	case "success":
		return ""
	case "tool_error":
		return "tool_error"
	}
	return string(o.Code)
}

// breakerPersister writes breaker snapshots to the store in the
// background, newest per key, so a breaker's state survives a restart
// without a database write on the call path.
type breakerPersister struct {
	db     *store.DB
	logger *slog.Logger

	// announce, if set, is told of every persisted state change (the other
	// replicas then load it).
	announce atomic.Pointer[func(key string)]
	states   map[string]resilience.State // last persisted state per key; run goroutine only

	mu      sync.Mutex
	pending map[string]resilience.BreakerSnapshot
	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}
}

// moveBreakers carries a renamed server's circuit breakers over to its new
// name, in the store (rows this replica may never have loaded) and in
// memory; the in-memory state, the freshest here, is then saved over the
// moved rows and announced to the other replicas. A store failure is
// logged: the rename has happened, and the breakers only start closed.
func (a *App) moveBreakers(ctx context.Context, from, to string) {
	sec := a.sec
	if _, err := a.db.MoveBreakers(context.WithoutCancel(ctx), from, to); err != nil {
		a.logger.Warn("moving circuit breakers of a renamed server", "from", from, "to", to, "error", err)
	}
	for _, s := range sec.breakers.MoveServer(from, to) {
		sec.persist.save(s)
	}
}

func newBreakerPersister(db *store.DB, logger *slog.Logger) *breakerPersister {
	p := &breakerPersister{db: db, logger: logger, pending: map[string]resilience.BreakerSnapshot{}, states: map[string]resilience.State{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	go p.run()
	return p
}

// save queues s; it never blocks.
func (p *breakerPersister) save(s resilience.BreakerSnapshot) {
	p.mu.Lock()
	if cur, ok := p.pending[s.Key]; !ok || s.Generation >= cur.Generation {
		p.pending[s.Key] = s
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *breakerPersister) run() {
	defer close(p.stopped)
	for {
		select {
		case <-p.wake:
			p.flush(context.Background())
		case <-p.done:
			return
		}
	}
}

func (p *breakerPersister) flush(ctx context.Context) {
	p.mu.Lock()
	batch := p.pending
	p.pending = map[string]resilience.BreakerSnapshot{}
	p.mu.Unlock()
	for _, s := range batch {
		err := p.db.SaveBreaker(ctx, store.BreakerState{Key: s.Key, State: s.State.String(), Failures: s.Failures,
			Successes: s.Successes, HalfOpenRequests: s.HalfOpenRequests, LastFailureAt: s.LastFailureAt,
			OpenedAt: s.OpenedAt, Generation: s.Generation})
		if err != nil {
			p.logger.Warn("saving circuit breaker state", "key", s.Key, "error", err)
			continue
		}
		if prev, seen := p.states[s.Key]; seen && prev == s.State {
			continue
		}
		p.states[s.Key] = s.State
		if f := p.announce.Load(); f != nil {
			(*f)(s.Key)
		}
	}
}

// close stops the writer and writes what is pending.
func (p *breakerPersister) close(ctx context.Context) {
	select {
	case <-p.done:
		return
	default:
	}
	close(p.done)
	<-p.stopped
	p.flush(ctx)
}
