package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/admin"
	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/cluster"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/identity"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
)

// AdminKeyEnv names the environment variable whose value, when set, is an
// admin API key from the start: how an operator bootstraps the first keys.
const AdminKeyEnv = identity.AdminKeyEnv

// security holds the pipeline's stateful parts: who callers are, what they
// may do, and the resilience state shared by all calls.
type security struct {
	authn    *identity.Authenticator
	engine   *authz.Engine
	redactor *audit.Redactor
	recorder *audit.Recorder
	breakers *resilience.Breakers
	persist  *resilience.BreakerPersister
	bulk     *resilience.Bulkheads
	limiter  *resilience.RateLimiter
	idem     invoke.Idempotency
	logger   *slog.Logger

	budgetMu    sync.Mutex
	budgets     map[string]*resilience.RetryBudget
	budgetRatio float64
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
		Jitter:      resilience.Spread(0.2), // the issue's ±20 %: callers failing together do not retry together
	}
}

// securityDeps are what the security parts are built on.
type securityDeps struct {
	db      *store.DB
	cat     *catalog.Catalog
	cluster *cluster.Cluster
	metrics *telemetry.Metrics
	events  *telemetry.Bus
	guard   *netguard.Guard
	logger  *slog.Logger
}

// newSecurity builds the identity, authorization, audit and resilience
// parts from the config and ic (see authMode). Stateful parts load their
// state from the store.
func newSecurity(ctx context.Context, cfg *config.Config, ic identity.Config, d securityDeps) (*security, error) {
	s := cfg.Settings
	sec := &security{logger: d.logger, budgets: map[string]*resilience.RetryBudget{}, budgetRatio: s.RetryBudgetRatio}
	if ic.AdminKey != "" {
		d.logger.Info("admin key from the environment is active", "env", AdminKeyEnv)
	}
	if ic.JWT != nil && ic.JWT.JWKSURL != "" {
		if err := d.guard.CheckConfigured("auth.jwt.jwks_url", ic.JWT.JWKSURL); err != nil {
			return nil, err
		}
		ic.JWT.HTTPClient = d.guard.Client(identity.DefaultJWKSTimeout)
	}
	if oc := ic.OAuth; oc != nil {
		// Outbound like any configured URL: through the SSRF guard.
		if err := d.guard.CheckConfigured("auth.oauth.jwks_url", oc.Token.JWKSURL); err != nil {
			return nil, err
		}
		oc.Token.HTTPClient = d.guard.Client(identity.DefaultJWKSTimeout)
		if in := oc.Introspection; in != nil {
			if err := d.guard.CheckConfigured("auth.oauth.introspection.url", in.URL); err != nil {
				return nil, err
			}
			in.HTTPClient = oc.Token.HTTPClient
		}
		d.logger.Info("OAuth resource server", "issuer", oc.Token.Issuer, "resource", oc.Resource,
			"jwks", oc.Token.JWKSURL != "", "introspection", oc.Introspection != nil)
	}
	var err error
	if sec.authn, err = identity.New(ic, admin.KeyStore{DB: d.db}, &identity.Options{Logger: d.logger}); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if sec.engine, err = authz.New(ctx, admin.GrantStore{DB: d.db}, policyFrom(cfg, nil), &authz.Options{Logger: d.logger}); err != nil {
		sec.authn.Close()
		return nil, fmt.Errorf("loading grants: %w", err)
	}
	if sec.redactor, err = audit.NewRedactor([]string{s.AuditRedactPattern}); err != nil {
		sec.authn.Close()
		return nil, fmt.Errorf("audit_redact_pattern: %w", err)
	}
	sec.recorder = audit.NewRecorder(admin.AuditSink{DB: d.db}, &audit.Options{
		QueueSize:  s.AuditQueueSize,
		Retention:  time.Duration(s.AuditRetentionDays) * 24 * time.Hour,
		Replica:    d.cluster.ID(),
		Logger:     d.logger,
		OnDepth:    d.metrics.AuditDepth,
		OnOverflow: d.metrics.AuditDropped,
	})

	sec.persist = resilience.NewBreakerPersister(d.db, func(key string) { d.cluster.Publish(cluster.KindBreaker, key) }, d.logger)
	bs := breakerSettings(s)
	bs.OnChange = sec.persist.Save
	bs.OnStateChange = func(key string, from, to resilience.State) {
		d.metrics.CircuitState(key, int(to))
		typ := map[resilience.State]string{resilience.Open: "circuit.opened", resilience.Closed: "circuit.closed", resilience.HalfOpen: "circuit.half_open"}[to]
		d.events.Publish(typ, map[string]any{"circuit_key": key, "from": from.String(), "to": to.String()})
		lvl := slog.LevelInfo
		if to == resilience.Open {
			lvl = slog.LevelWarn
		}
		d.logger.Log(context.Background(), lvl, "circuit breaker", "key", key, "from", from.String(), "to", to.String())
	}
	sec.breakers = resilience.NewBreakers(bs)
	rows, err := d.db.ListBreakers(ctx)
	if err != nil {
		d.logger.Warn("restoring circuit breakers", "error", err)
	}
	for _, row := range rows {
		if st, ok := resilience.RestoreBreaker(sec.breakers, row); ok && st != resilience.Closed {
			d.metrics.CircuitState(row.Key, int(st))
			d.logger.Info("circuit breaker restored", "key", row.Key, "state", st.String())
		}
	}

	queue := s.BulkheadMaxQueue
	if queue == 0 {
		queue = -1 // the setting's 0 means no queue; the bulkhead's 0 means its default
	}
	sec.bulk = resilience.NewBulkheads(resilience.BulkheadSettings{MaxConcurrent: s.BulkheadMaxConcurrent, MaxQueue: queue})
	sec.limiter = resilience.NewRateLimiter(resilience.RateLimit{Rate: s.RateLimitPerSecond, Burst: s.RateLimitBurst}, nil)
	local := resilience.NewIdempotency[*invoke.Result](s.IdempotencyTTL, s.IdempotencyMaxEntries, nil)
	sec.idem = local
	if d.db.IsPostgres() {
		// Replicas share results through the store, so a retry on another
		// replica gets the first result.
		sec.idem = resilience.NewSharedIdempotency(local, d.db, resultCodec(d.cat), s.IdempotencyTTL, d.logger)
	}
	return sec, nil
}

// storedResult is the stored form of an idempotent call's result.
type storedResult struct {
	Result   *mcp.CallToolResult `json:"result"`
	Tool     string              `json:"tool"`
	ServedBy string              `json:"served_by,omitempty"`
}

// resultCodec stores a call's result for the other replicas.
func resultCodec(cat *catalog.Catalog) resilience.Codec[*invoke.Result] {
	return resilience.Codec[*invoke.Result]{
		Encode: func(r *invoke.Result) ([]byte, error) {
			return json.Marshal(storedResult{Result: r.CallToolResult, Tool: r.Tool.Name, ServedBy: r.ServedBy})
		},
		Decode: func(b []byte) (*invoke.Result, bool) {
			var sr storedResult
			if err := json.Unmarshal(b, &sr); err != nil || sr.Result == nil {
				return nil, false
			}
			t, ok := cat.Snapshot().Tool(sr.Tool)
			if !ok {
				t = catalog.Tool{Name: sr.Tool}
			}
			return &invoke.Result{CallToolResult: sr.Result, Tool: t, ServedBy: sr.ServedBy, Replayed: true}, true
		},
	}
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
		sec.persist.Flush(cctx)
	}
	if sec.authn != nil {
		sec.authn.Close()
	}
}

// authenticate is the front door of every MCP and API route: it
// authenticates the request and puts the caller in its context. A bearer
// credential also binds MCP sessions to their creator (the SDK refuses a
// session's requests from another user).
func (sec *security) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := sec.authn.Authenticate(r)
		if err != nil && errors.Is(err, identity.ErrUnavailable) {
			// The store or the identity provider failed: not the caller's
			// fault, and its text is not for the caller.
			sec.logger.Warn("authentication unavailable", "path", r.URL.Path, "error", err)
			api.WriteError(w, &api.Error{Status: http.StatusServiceUnavailable, Code: "auth_unavailable", Message: "credentials cannot be checked right now; try again"})
			return
		}
		if err != nil {
			ie := &identity.Error{Code: "unauthenticated", Reason: err.Error()}
			errors.As(err, &ie)
			// In oauth mode the challenge points MCP clients at the
			// resource's metadata, from which they start authorization.
			w.Header().Set("WWW-Authenticate", sec.authn.Challenge(r, ie))
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
