package app

import (
	"context"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/admin"
	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/cluster"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
)

// apiHandler is the REST API wired to the gateway's parts.
func (a *App) apiHandler() http.Handler {
	ao := &admin.Options{DB: a.db, Engine: a.sec.engine, Authn: a.sec.authn, Catalog: a.cat, Servers: a.reg,
		Events: a.events, Publish: a.cluster.Publish}
	// A nil *authserver.Server in the interface would not read as nil.
	var oauthAdmin api.OAuthAdmin
	if a.authSrv != nil {
		oauthAdmin = a.authSrv
	}
	return api.New(a.reg, a.cat, a.pipe, &api.Options{
		OAuth: oauthAdmin, UpstreamAuth: a.upAuth,
		Logger: a.logger, Ready: a.Ready, Events: a.events,
		Keys:      admin.NewKeys(ao),
		Policies:  admin.NewPolicies(ao),
		Audit:     admin.Audit{DB: a.db},
		Breakers:  admin.Breakers{Set: a.sec.breakers},
		Stats:     admin.Stats{DB: a.db},
		Registrar: a.reg,
		Search:    a.search,
		Cluster:   a.cluster.View,
		// Disabled tools stay listed here (enabled: false, with the reason);
		// MCP clients do not see them.
		Visible:       a.sec.visible,
		ServerVisible: a.sec.engine.ServerAllowed,
		Operation:     a.operation,
		ToolStatus:    a.reg.ToolStatus,
		Pins:          a.reg,
		Escalations:   a.esc,
		Series:        a.series,
	})
}

// visible reports whether an MCP client of identity id sees t: an enabled
// tool it may call.
func (a *App) visible(id authz.Identity, t catalog.Tool) bool {
	if ok, _ := a.reg.ToolState(t); !ok {
		return false
	}
	return a.sec.visible(id, t)
}

// policyChanged recomputes the authorization policy after the servers (and
// so their default_access) or the config changed; the engine invalidates
// its decision cache.
func (a *App) policyChanged() {
	a.sec.engine.SetPolicy(policyFrom(a.cfg.Load(), a.reg.DefaultAccess()))
	a.events.Publish("policy.changed", map[string]any{"revision": a.sec.engine.Revision(), "reason": "servers or config changed"})
}

// operation audits an administrative action.
func (a *App) operation(ctx context.Context, op, server, detail string, err error) {
	id, _ := authz.IdentityFrom(ctx)
	rec := audit.Record{Kind: audit.KindOperation, Operation: op, AgentID: id.AgentID, Server: server,
		Success: err == nil, ResultSummary: detail, PolicyDecision: "ALLOW", PolicyRule: "admin"}
	if err != nil {
		rec.Error = err.Error()
	}
	a.sec.recorder.Record(rec)
}

// clusterHandlers apply what another replica changed in the shared store.
func (a *App) clusterHandlers() cluster.Handlers {
	sec := a.sec
	return cluster.Handlers{
		Apply: map[string]func(context.Context, string) error{
			cluster.KindServers: func(ctx context.Context, _ string) error { return a.reg.SyncFromStore(ctx) },
			cluster.KindPolicy: func(ctx context.Context, _ string) error {
				if err := sec.engine.Reload(ctx); err != nil {
					return err
				}
				a.events.Publish("policy.changed", map[string]any{"revision": sec.engine.Revision(), "reason": "another replica"})
				return nil
			},
			cluster.KindKey: func(_ context.Context, hash string) error { sec.authn.Forget(hash); return nil },
			// A tool definition approved: serve it here too.
			cluster.KindPins: func(_ context.Context, server string) error { a.reg.Reapply(server); return nil },
			cluster.KindBreaker: func(ctx context.Context, key string) error {
				row, err := a.db.GetBreaker(ctx, key)
				if err == nil {
					resilience.RestoreBreaker(sec.breakers, row)
				}
				return err
			},
			cluster.KindBreakers: func(ctx context.Context, _ string) error {
				rows, err := a.db.ListBreakers(ctx)
				for _, row := range rows {
					resilience.RestoreBreaker(sec.breakers, row)
				}
				return err
			},
		},
		// A key revoked meanwhile must not stay cached.
		Resync: func(context.Context) { sec.authn.ForgetAll() },
	}
}
