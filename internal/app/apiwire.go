package app

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/identity"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// apiHandler is the REST API wired to the gateway's parts.
func (a *App) apiHandler() http.Handler {
	return api.New(apiServers{a.reg, a}, a.cat, a.pipe, &api.Options{
		Logger: a.logger, Ready: a.Ready, Events: a.events,
		Keys:      apiKeys{a},
		Policies:  apiPolicies{a},
		Audit:     apiAudit{a.db},
		Breakers:  apiBreakers{a.sec.breakers},
		Stats:     apiStats{a.db},
		Registrar: apiRegistrar{a},
		Search:    a.disc,
		Cluster:   a.clusterView,
		// Disabled tools stay listed here (enabled: false, with the reason);
		// MCP clients do not see them.
		Visible:       a.sec.visible,
		ServerVisible: a.sec.engine.ServerAllowed,
		Operation:     a.operation,
		ToolStatus:    a.manifests.status,
		Pins:          apiPins{a},
		Escalations:   a.esc,
		Series:        a.series,
	})
}

// visible reports whether an MCP client of identity id sees t: an enabled
// tool it may call.
func (a *App) visible(id authz.Identity, t catalog.Tool) bool {
	if ok, _ := a.manifests.state(t); !ok {
		return false
	}
	return a.sec.visible(id, t)
}

// policyChanged recomputes the authorization policy after the servers (and
// so their default_access) or the config changed; the engine invalidates
// its decision cache.
func (a *App) policyChanged() {
	if a.sec == nil || a.sec.engine == nil {
		return
	}
	a.sec.engine.SetPolicy(policyFrom(a.cfg, a.reg.defaultAccess()))
	a.events.Publish("policy.changed", map[string]any{"revision": a.sec.engine.Revision(), "reason": "servers or config changed"})
}

// operation audits an administrative action.
func (a *App) operation(ctx context.Context, op, server, detail string, err error) {
	if a.sec == nil {
		return
	}
	id, _ := authz.IdentityFrom(ctx)
	rec := audit.Record{Kind: audit.KindOperation, Operation: op, AgentID: id.AgentID, Server: server,
		Success: err == nil, ResultSummary: detail, PolicyDecision: "ALLOW", PolicyRule: "admin"}
	if err != nil {
		rec.Error = err.Error()
	}
	a.sec.recorder.Record(rec)
}

// apiKeys manages API keys in the store.
type apiKeys struct{ a *App }

func keyView(k identity.Key) api.KeyView {
	return api.KeyView{ID: k.ID, Prefix: k.Prefix, AgentID: k.AgentID, Roles: k.Roles, Workspace: k.Workspace,
		Admin: k.Admin, AllowServers: k.AllowServers, DenyServers: k.DenyServers, WorkspacePolicy: k.WorkspacePolicy,
		CreatedAt: k.CreatedAt, CreatedBy: k.CreatedBy, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt}
}

func (k apiKeys) Create(ctx context.Context, req api.KeyRequest, createdBy string) (api.KeyCreated, error) {
	key, secret, err := identity.NewKey(req.AgentID, req.Roles, req.Workspace, req.Admin)
	if err != nil {
		return api.KeyCreated{}, fmt.Errorf("%w: %w", authz.ErrInvalid, err)
	}
	key.AllowServers, key.DenyServers, key.ExpiresAt, key.CreatedBy = req.AllowServers, req.DenyServers, req.ExpiresAt, createdBy
	key.WorkspacePolicy = req.WorkspacePolicy
	grants, err := k.declaredGrants(ctx, req, createdBy)
	if err != nil {
		return api.KeyCreated{}, err
	}
	var stored []authz.Grant
	err = k.a.db.Transact(ctx, func(tx *store.DB) error {
		if err := tx.CreateAPIKey(ctx, store.APIKey(key)); err != nil {
			return err
		}
		for _, g := range grants {
			row, err := tx.PutGrant(ctx, store.Grant(g))
			if err != nil {
				return err
			}
			stored = append(stored, authz.Grant(row))
		}
		return nil
	})
	if err != nil {
		return api.KeyCreated{}, err
	}
	if len(stored) > 0 {
		// The grants went to the store with the key, not through the
		// engine: it reads them back, as a replica does after a change
		// made elsewhere.
		if err := k.a.sec.engine.Reload(ctx); err != nil {
			return api.KeyCreated{}, err
		}
		k.a.cluster.publish("policy", "")
		for _, g := range stored {
			k.a.events.Publish("policy.changed", map[string]any{"revision": k.a.sec.engine.Revision(), "reason": "grant",
				"agent_id": g.AgentID, "server": g.Server, "tool": g.Tool})
		}
	}
	return api.KeyCreated{KeyView: keyView(key), Key: secret, Grants: stored}, nil
}

// declaredGrants turns a key request's declared tools into invoke grants to
// its agent, validating them all first: each names a registered server
// ("server:tool" as seed 000 writes them, or a namespaced "server.tool")
// and, unless it is a pattern, a tool the server exposes as last
// discovered. Every problem is reported at once, as ErrInvalid (400).
func (k apiKeys) declaredGrants(ctx context.Context, req api.KeyRequest, createdBy string) ([]authz.Grant, error) {
	var grants []authz.Grant
	var problems []string
	now := time.Now()
	seen := map[string]bool{}
	for i, d := range req.DeclaredTools {
		server, tool, ok := strings.Cut(strings.TrimSpace(d), ":")
		if !ok {
			server, tool = apiPolicies{k.a}.target("", strings.TrimSpace(d))
		}
		rec := k.a.reg.lookup(server)
		switch {
		case server == "" || tool == "":
			problems = append(problems, fmt.Sprintf("declared_tools[%d] %q: want server:tool (or server.tool)", i, d))
			continue
		case rec == nil:
			problems = append(problems, fmt.Sprintf("declared_tools[%d] %q: no server %q is registered", i, d, server))
			continue
		}
		if !strings.ContainsAny(tool, "*?[") {
			if exposed, _ := k.a.exposedTools(ctx, server); exposed != nil && !slices.Contains(exposed, tool) {
				problems = append(problems, fmt.Sprintf("declared_tools[%d] %q: server %q does not expose a tool %q", i, d, server, tool))
				continue
			}
		}
		if seen[server+":"+tool] {
			continue
		}
		seen[server+":"+tool] = true
		grants = append(grants, authz.Grant{AgentID: req.AgentID, Server: server, Tool: tool,
			Actions: []string{authz.ActionInvoke}, GrantedAt: now, GrantedBy: createdBy, ExpiresAt: req.ExpiresAt})
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w declared tools: %s", authz.ErrInvalid, strings.Join(problems, "; "))
	}
	return grants, nil
}

func (k apiKeys) List(ctx context.Context) ([]api.KeyView, error) {
	rows, err := k.a.db.ListAPIKeys(ctx)
	out := make([]api.KeyView, len(rows))
	for i, r := range rows {
		out[i] = keyView(identity.Key(r))
	}
	return out, err
}

func (k apiKeys) Revoke(ctx context.Context, id string) error {
	row, err := k.a.db.RevokeAPIKey(ctx, id, time.Now())
	if err != nil {
		return err
	}
	// A revoked key must stop working now, not when its cache entry expires,
	// on every replica.
	k.a.sec.authn.Forget(row.Hash)
	k.a.cluster.publish("key", row.Hash)
	return nil
}

// apiPolicies manages grants and approval tokens through the engine.
type apiPolicies struct{ a *App }

// target resolves a grant's tool: a namespaced name or pattern ("fs.read",
// "fs.*") when server is empty, else the server's own tool name.
func (p apiPolicies) target(server, tool string) (string, string) {
	if server != "" {
		return server, tool
	}
	snap := p.a.cat.Snapshot()
	if t, ok := snap.Tool(tool); ok {
		return t.Server, t.OriginalName
	}
	sep := snap.Separator()
	prefix, rest, ok := strings.Cut(tool, sep)
	if !ok && sep != "." {
		prefix, rest, ok = strings.Cut(tool, ".")
	}
	if !ok {
		return "", tool // validation reports the missing server
	}
	return p.a.reg.serverForPrefix(prefix), rest
}

func (p apiPolicies) Grant(ctx context.Context, req api.GrantRequest, grantedBy string) (api.GrantResult, error) {
	server, tool := p.target(req.Server, req.Tool)
	g := authz.Grant{AgentID: req.AgentID, Workspace: req.Workspace, Server: server, Tool: tool, Actions: req.Actions,
		GrantedBy: grantedBy, ExpiresAt: req.ExpiresAt}
	o := authz.GrantOptions{IssueToken: req.IssueToken, TokenTTL: time.Duration(req.TokenTTLMinutes) * time.Minute,
		BindArguments: req.BindArguments, SingleUse: req.SingleUse}
	g, tok, err := p.a.sec.engine.Grant(ctx, g, o)
	if err != nil {
		return api.GrantResult{}, err
	}
	p.a.cluster.publish("policy", "")
	p.a.events.Publish("policy.changed", map[string]any{"revision": p.a.sec.engine.Revision(), "reason": "grant",
		"agent_id": g.AgentID, "workspace": g.Workspace, "server": g.Server, "tool": g.Tool})
	res := api.GrantResult{Grant: g}
	if tok != nil {
		res.Token, res.TokenInfo = tok.Secret, &tok.Token
	}
	return res, nil
}

func (p apiPolicies) Revoke(ctx context.Context, id string) error {
	if err := p.a.sec.engine.Revoke(ctx, id); err != nil {
		return err
	}
	p.a.cluster.publish("policy", "")
	p.a.events.Publish("policy.changed", map[string]any{"revision": p.a.sec.engine.Revision(), "reason": "revoke", "grant_id": id})
	return nil
}

func (p apiPolicies) Grants(_ context.Context, agentID string) ([]authz.Grant, error) {
	return p.a.sec.engine.Grants(agentID), nil
}

func (p apiPolicies) IssueToken(ctx context.Context, req api.TokenRequest) (api.TokenResult, error) {
	server, tool := p.target(req.Server, req.Tool)
	tok, err := p.a.sec.engine.IssueToken(ctx, authz.TokenRequest{AgentID: req.AgentID, Server: server, Tool: tool,
		TTL: time.Duration(req.TTLMinutes) * time.Minute, BindArguments: req.BindArguments, SingleUse: req.SingleUse})
	if err != nil {
		return api.TokenResult{}, err
	}
	return api.TokenResult{Token: tok.Secret, TokenInfo: tok.Token}, nil
}

func (p apiPolicies) RevokeToken(ctx context.Context, id string) error {
	if err := p.a.sec.engine.RevokeToken(ctx, id); err != nil {
		return err
	}
	p.a.cluster.publish("policy", "")
	return nil
}

// apiAudit reads the audit log.
type apiAudit struct{ db *store.DB }

func (q apiAudit) Query(ctx context.Context, f audit.Filter) ([]audit.Record, string, error) {
	return queryAudit(ctx, q.db, f)
}

// apiBreakers lists the circuit breakers.
type apiBreakers struct{ bs *resilience.Breakers }

func (b apiBreakers) Breakers(context.Context) ([]api.BreakerView, error) {
	cooldown := b.bs.Settings().Cooldown
	var out []api.BreakerView
	for _, s := range b.bs.All() {
		server, tool, _ := strings.Cut(s.Key, ":")
		v := api.BreakerView{Key: s.Key, Server: server, Tool: tool, State: s.State.String(),
			Failures: s.Failures, Successes: s.Successes}
		if !s.LastFailureAt.IsZero() {
			t := s.LastFailureAt
			v.LastFailureAt = &t
		}
		if !s.OpenedAt.IsZero() {
			t := s.OpenedAt
			v.OpenedAt = &t
			if s.State == resilience.Open {
				next := t.Add(cooldown)
				v.NextAttemptAt = &next
			}
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(x, y api.BreakerView) int { return strings.Compare(x.Key, y.Key) })
	return out, nil
}

// apiStats summarizes the audit log per tool.
type apiStats struct{ db *store.DB }

func (s apiStats) Stats(ctx context.Context, f audit.Filter) ([]api.ToolStats, error) {
	rows, err := s.db.InvocationStatsByTool(ctx, store.InvocationFilter(f))
	out := make([]api.ToolStats, len(rows))
	for i, r := range rows {
		out[i] = api.ToolStats{Server: r.Server, Tool: r.Tool, Calls: r.Calls, Successes: r.Successes, Failures: r.Failures,
			Denied: r.Denied, Retries: r.Retries, AvgLatencyMS: r.AvgLatencyMS, MaxLatencyMS: r.MaxLatencyMS, First: r.First, Last: r.Last}
		if r.Calls > 0 {
			out[i].SuccessRate = float64(r.Successes) / float64(r.Calls)
		}
	}
	return out, err
}

// apiServers is the registry as the API sees it: changes made through the
// API are announced to the other replicas.
type apiServers struct {
	*registry
	a *App
}

func (s apiServers) Register(ctx context.Context, def *config.Server, autoConnect bool) (api.Server, error) {
	v, err := s.registry.Register(ctx, def, autoConnect)
	if err == nil {
		s.a.cluster.publish("servers", "")
	}
	return v, err
}

func (s apiServers) Remove(ctx context.Context, idOrName string) error {
	err := s.registry.Remove(ctx, idOrName)
	if err == nil {
		s.a.cluster.publish("servers", "")
	}
	return err
}

func (s apiServers) Rename(ctx context.Context, idOrName, newName string) (api.Server, error) {
	v, err := s.registry.Rename(ctx, idOrName, newName)
	if err == nil {
		s.a.cluster.publish("servers", "")
	}
	return v, err
}

func (s apiServers) SetDefaultAccess(ctx context.Context, idOrName, access string) (api.Server, error) {
	v, err := s.registry.SetDefaultAccess(ctx, idOrName, access)
	if err == nil {
		s.a.cluster.publish("servers", "")
	}
	return v, err
}

func (s apiServers) ResetDefaultAccess(ctx context.Context, idOrName string) (api.Server, error) {
	v, err := s.registry.ResetDefaultAccess(ctx, idOrName)
	if err == nil {
		s.a.cluster.publish("servers", "")
	}
	return v, err
}

// clusterView lists the live replicas for GET /api/v1/cluster.
func (a *App) clusterView(ctx context.Context) (api.ClusterView, error) {
	rows, err := a.db.Replicas(ctx, time.Now().Add(-replicaTimeout))
	if err != nil {
		return api.ClusterView{}, err
	}
	v := api.ClusterView{Self: a.sec.replica, Backend: "sqlite", Replicas: make([]api.ReplicaView, len(rows))}
	if a.db.IsPostgres() {
		v.Backend = "postgres"
	}
	for i, r := range rows {
		v.Replicas[i] = api.ReplicaView{ID: r.ID, Host: r.Host, PID: r.PID, Version: r.Version, Address: r.Address,
			StartedAt: r.StartedAt, HeartbeatAt: r.HeartbeatAt, Self: r.ID == a.sec.replica}
	}
	return v, nil
}
