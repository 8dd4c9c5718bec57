// Package admin holds the administrative services the REST API exposes
// over the store and the policy engine: API keys, grants and approval
// tokens, the audit log and its statistics, the circuit breakers; and the
// adapters that let identity, authz and audit keep their state in the
// store. Every change is announced to the other replicas.
package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/identity"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
	"github.com/switchboard-mcp/switchboard/internal/servers"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
)

// Servers is what key and grant management needs of the server registry.
type Servers interface {
	Lookup(name string) (servers.Info, bool)
	ExposedTools(ctx context.Context, server string) ([]string, string)
	ServerForPrefix(prefix string) string
}

// Options are the collaborators of Keys and Policies.
type Options struct {
	DB      *store.DB
	Engine  *authz.Engine
	Authn   *identity.Authenticator
	Catalog *catalog.Catalog
	Servers Servers
	Events  *telemetry.Bus
	// Publish tells the other replicas that kind (and key) changed.
	Publish func(kind, key string)
}

func (o *Options) publish(kind, key string) {
	if o.Publish != nil {
		o.Publish(kind, key)
	}
}

// Keys manages API keys in the store.
type Keys struct{ o *Options }

// NewKeys manages API keys (api.Keys).
func NewKeys(o *Options) Keys { return Keys{o} }

func keyView(k identity.Key) api.KeyView {
	return api.KeyView{ID: k.ID, Prefix: k.Prefix, AgentID: k.AgentID, Roles: k.Roles, Workspace: k.Workspace,
		Admin: k.Admin, AllowServers: k.AllowServers, DenyServers: k.DenyServers, WorkspacePolicy: k.WorkspacePolicy,
		CreatedAt: k.CreatedAt, CreatedBy: k.CreatedBy, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt}
}

func (k Keys) Create(ctx context.Context, req api.KeyRequest, createdBy string) (api.KeyCreated, error) {
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
	err = k.o.DB.Transact(ctx, func(tx *store.DB) error {
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
		if err := k.o.Engine.Reload(ctx); err != nil {
			return api.KeyCreated{}, err
		}
		k.o.publish("policy", "")
		for _, g := range stored {
			k.o.Events.Publish("policy.changed", map[string]any{"revision": k.o.Engine.Revision(), "reason": "grant",
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
func (k Keys) declaredGrants(ctx context.Context, req api.KeyRequest, createdBy string) ([]authz.Grant, error) {
	var grants []authz.Grant
	var problems []string
	now := time.Now()
	seen := map[string]bool{}
	for i, d := range req.DeclaredTools {
		server, tool, ok := strings.Cut(strings.TrimSpace(d), ":")
		if !ok {
			server, tool = Policies{k.o}.target("", strings.TrimSpace(d))
		}
		_, known := k.o.Servers.Lookup(server)
		switch {
		case server == "" || tool == "":
			problems = append(problems, fmt.Sprintf("declared_tools[%d] %q: want server:tool (or server.tool)", i, d))
			continue
		case !known:
			problems = append(problems, fmt.Sprintf("declared_tools[%d] %q: no server %q is registered", i, d, server))
			continue
		}
		if !strings.ContainsAny(tool, "*?[") {
			if exposed, _ := k.o.Servers.ExposedTools(ctx, server); exposed != nil && !slices.Contains(exposed, tool) {
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

func (k Keys) List(ctx context.Context) ([]api.KeyView, error) {
	rows, err := k.o.DB.ListAPIKeys(ctx)
	out := make([]api.KeyView, len(rows))
	for i, r := range rows {
		out[i] = keyView(identity.Key(r))
	}
	return out, err
}

func (k Keys) Revoke(ctx context.Context, id string) error {
	row, err := k.o.DB.RevokeAPIKey(ctx, id, time.Now())
	if err != nil {
		return err
	}
	// A revoked key must stop working now, not when its cache entry expires,
	// on every replica.
	k.o.Authn.Forget(row.Hash)
	k.o.publish("key", row.Hash)
	return nil
}

// Policies manages grants and approval tokens through the engine
// (api.Policies).
type Policies struct{ o *Options }

// NewPolicies manages grants and approval tokens.
func NewPolicies(o *Options) Policies { return Policies{o} }

// target resolves a grant's tool: a namespaced name or pattern ("fs.read",
// "fs.*") when server is empty, else the server's own tool name.
func (p Policies) target(server, tool string) (string, string) {
	if server != "" {
		return server, tool
	}
	snap := p.o.Catalog.Snapshot()
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
	return p.o.Servers.ServerForPrefix(prefix), rest
}

func (p Policies) Grant(ctx context.Context, req api.GrantRequest, grantedBy string) (api.GrantResult, error) {
	server, tool := p.target(req.Server, req.Tool)
	g := authz.Grant{AgentID: req.AgentID, Workspace: req.Workspace, Server: server, Tool: tool, Actions: req.Actions,
		GrantedBy: grantedBy, ExpiresAt: req.ExpiresAt}
	o := authz.GrantOptions{IssueToken: req.IssueToken, TokenTTL: time.Duration(req.TokenTTLMinutes) * time.Minute,
		BindArguments: req.BindArguments, SingleUse: req.SingleUse}
	g, tok, err := p.o.Engine.Grant(ctx, g, o)
	if err != nil {
		return api.GrantResult{}, err
	}
	p.o.publish("policy", "")
	p.o.Events.Publish("policy.changed", map[string]any{"revision": p.o.Engine.Revision(), "reason": "grant",
		"agent_id": g.AgentID, "workspace": g.Workspace, "server": g.Server, "tool": g.Tool})
	res := api.GrantResult{Grant: g}
	if tok != nil {
		res.Token, res.TokenInfo = tok.Secret, &tok.Token
	}
	return res, nil
}

func (p Policies) Revoke(ctx context.Context, id string) error {
	if err := p.o.Engine.Revoke(ctx, id); err != nil {
		return err
	}
	p.o.publish("policy", "")
	p.o.Events.Publish("policy.changed", map[string]any{"revision": p.o.Engine.Revision(), "reason": "revoke", "grant_id": id})
	return nil
}

func (p Policies) Grants(_ context.Context, agentID string) ([]authz.Grant, error) {
	return p.o.Engine.Grants(agentID), nil
}

func (p Policies) IssueToken(ctx context.Context, req api.TokenRequest) (api.TokenResult, error) {
	server, tool := p.target(req.Server, req.Tool)
	tok, err := p.o.Engine.IssueToken(ctx, authz.TokenRequest{AgentID: req.AgentID, Server: server, Tool: tool,
		TTL: time.Duration(req.TTLMinutes) * time.Minute, BindArguments: req.BindArguments, SingleUse: req.SingleUse})
	if err != nil {
		return api.TokenResult{}, err
	}
	return api.TokenResult{Token: tok.Secret, TokenInfo: tok.Token}, nil
}

func (p Policies) RevokeToken(ctx context.Context, id string) error {
	if err := p.o.Engine.RevokeToken(ctx, id); err != nil {
		return err
	}
	p.o.publish("policy", "")
	return nil
}

// Audit reads the audit log (api.AuditLog).
type Audit struct{ DB *store.DB }

// Query reads the records f selects, a page at a time.
func (q Audit) Query(ctx context.Context, f audit.Filter) ([]audit.Record, string, error) {
	return queryAudit(ctx, q.DB, f)
}

// Breakers lists the circuit breakers.
type Breakers struct{ Set *resilience.Breakers }

// Breakers lists every breaker, sorted by key.
func (b Breakers) Breakers(context.Context) ([]api.BreakerView, error) {
	cooldown := b.Set.Settings().Cooldown
	var out []api.BreakerView
	for _, s := range b.Set.All() {
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

// Stats summarizes the audit log per tool (api.StatsSource).
type Stats struct{ DB *store.DB }

// Stats summarizes the calls f selects per tool.
func (s Stats) Stats(ctx context.Context, f audit.Filter) ([]api.ToolStats, error) {
	rows, err := s.DB.InvocationStatsByTool(ctx, store.InvocationFilter(f))
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
