package authz

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults applied where a Policy or Options field is zero.
const (
	// DefaultTokenTTL is the seed's MCP_TOKEN_TTL_MINUTES (15).
	DefaultTokenTTL = 15 * time.Minute
	// DefaultCacheTTL is the seed's MCP_AUTH_CACHE_TTL (5 minutes).
	DefaultCacheTTL = 5 * time.Minute
	// DefaultCacheSize bounds the decision cache.
	DefaultCacheSize = 10000
	// ActionInvoke is the action of a tool call, the default of Request.Action
	// and Grant.Actions.
	ActionInvoke = "invoke"
)

// DefaultHighRisk returns the seed's high-risk words, used when
// Policy.HighRisk is nil. It is a function so nobody can edit the defaults.
func DefaultHighRisk() []string {
	return []string{"write", "delete", "modify", "update", "create"}
}

// Policy is the configured (non-grant) part of authorization. The zero value
// means the defaults.
type Policy struct {
	// ServerAccess is per-server default_access (seed 003): "allow" (the
	// default when absent) or "deny", which admits only identities whose
	// AllowServers name the server. Any other value fails closed, as "deny".
	ServerAccess map[string]string
	// RoleRestrictions maps a role to the tool patterns, on NAMESPACED names
	// ("fs.read_*", "github.*", "*"), that callers with that role may use.
	// Roles without an entry restrict nothing; a role with an empty list
	// allows nothing.
	RoleRestrictions map[string][]string
	// HighRisk decides which tools need an approval token. An entry with "*"
	// or "." is a glob on the namespaced name; any other entry is a word
	// found in the server's own tool name as a whole token, case-insensitive
	// ("write" matches "write_file" and "writeFile", not "overwrite"); a
	// multi-token entry such as "drop_table" is matched as a substring. Nil
	// means DefaultHighRisk; an empty non-nil slice disables name matching.
	// Destructive tools (destructiveHint) are always high-risk.
	HighRisk []string
	// AdminNeedsToken: when false (default), admins skip the high-risk token
	// check.
	AdminNeedsToken bool
	// TokenTTL is the lifetime of issued tokens; zero means DefaultTokenTTL.
	TokenTTL time.Duration
	// CacheTTL bounds how long a policy decision is reused; zero means
	// DefaultCacheTTL and a negative value disables the cache.
	CacheTTL time.Duration
}

// withDefaults returns a deep copy of p with the zero fields filled, so the
// engine never shares maps or slices with its caller.
func (p Policy) withDefaults() Policy {
	q := p
	q.ServerAccess = maps.Clone(p.ServerAccess)
	q.RoleRestrictions = make(map[string][]string, len(p.RoleRestrictions))
	for role, pats := range p.RoleRestrictions {
		q.RoleRestrictions[role] = slices.Clone(pats)
		if q.RoleRestrictions[role] == nil {
			q.RoleRestrictions[role] = []string{}
		}
	}
	if p.HighRisk == nil {
		q.HighRisk = DefaultHighRisk()
	} else {
		q.HighRisk = append([]string{}, p.HighRisk...)
	}
	if q.TokenTTL <= 0 {
		q.TokenTTL = DefaultTokenTTL
	}
	if q.CacheTTL == 0 {
		q.CacheTTL = DefaultCacheTTL
	}
	return q
}

// highRiskEntry is a compiled Policy.HighRisk entry.
type highRiskEntry struct {
	s      string
	glob   bool // on the namespaced name
	single bool // a one-token word
}

// Options configures an Engine. A nil *Options means the defaults.
type Options struct {
	// Clock returns the current time; nil means time.Now. Tests inject one to
	// expire grants and tokens without sleeping.
	Clock func() time.Time
	// Logger receives grant and token events (never secrets); nil discards.
	Logger *slog.Logger
	// CacheSize bounds the decision cache; zero means DefaultCacheSize and a
	// negative value disables the cache.
	CacheSize int
}

// Engine decides authorization requests. It keeps every grant in memory, so
// the policy layers never touch the store; only the high-risk token layer
// does. It is safe for concurrent use.
type Engine struct {
	st    Store
	now   func() time.Time
	log   *slog.Logger
	cache *decisionCache // nil when Options.CacheSize < 0

	mu        sync.RWMutex
	pol       Policy
	highRisk  []highRiskEntry
	byGrantee map[grantee][]Grant // sorted by (Server, Tool)
	byID      map[string]Grant
	rev       uint64
	// issued remembers the tokens this engine issued per grant ID so Revoke
	// can mark them revoked in the store. Tokens issued elsewhere die anyway:
	// a token whose grant is gone fails the token layer.
	issued map[string][]issuedRef
}

type issuedRef struct {
	id      string
	expires time.Time
}

// grantee is who a grant is made to: an agent, or every identity of a
// workspace.
type grantee struct{ agent, workspace string }

func granteeOf(g Grant) grantee { return grantee{agent: g.AgentID, workspace: g.Workspace} }

// New returns an Engine with the grants of st loaded. It fails only if st
// cannot list them.
func New(ctx context.Context, st Store, pol Policy, opts *Options) (*Engine, error) {
	if st == nil {
		return nil, fmt.Errorf("authz: nil store: %w", ErrInvalid)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	e := &Engine{st: st, now: o.Clock, log: o.Logger, issued: make(map[string][]issuedRef)}
	if e.now == nil {
		e.now = time.Now
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.CacheSize == 0:
		e.cache = newDecisionCache(DefaultCacheSize)
	case o.CacheSize > 0:
		e.cache = newDecisionCache(o.CacheSize)
	}
	e.setPolicyLocked(pol)
	grants, err := st.ListGrants(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading grants: %w", err)
	}
	e.setGrantsLocked(grants)
	e.rev = 1
	return e, nil
}

// Revision is the current policy revision. It grows on every change of
// grants or policy, and each Decision carries the one it was made under.
func (e *Engine) Revision() uint64 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.rev
}

// Policy returns the policy in force, with defaults filled in, as a copy.
func (e *Engine) Policy() Policy {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.pol.withDefaults()
}

// SetPolicy replaces the configured policy (a config reload). Decisions made
// after it returns use p: the revision moves and the cache is emptied.
func (e *Engine) SetPolicy(p Policy) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setPolicyLocked(p)
	e.bumpLocked()
}

func (e *Engine) setPolicyLocked(p Policy) {
	e.pol = p.withDefaults()
	for server, access := range e.pol.ServerAccess {
		if access != "" && !strings.EqualFold(access, "allow") && !strings.EqualFold(access, "deny") {
			e.log.Warn("unknown default_access; denying", "server", server, "default_access", access)
		}
	}
	e.highRisk = e.highRisk[:0:0]
	for _, s := range e.pol.HighRisk {
		if s == "" {
			continue
		}
		e.highRisk = append(e.highRisk, highRiskEntry{s: s, glob: isGlob(s), single: isSingleToken(s)})
	}
}

// Reload re-reads the grants from the store, for replicas that learn of a
// change made elsewhere. It bumps the revision even if nothing changed.
func (e *Engine) Reload(ctx context.Context) error {
	grants, err := e.st.ListGrants(ctx)
	if err != nil {
		return fmt.Errorf("reloading grants: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setGrantsLocked(grants)
	e.bumpLocked()
	return nil
}

func (e *Engine) setGrantsLocked(grants []Grant) {
	e.byGrantee = make(map[grantee][]Grant)
	e.byID = make(map[string]Grant, len(grants))
	for _, g := range grants {
		g = cloneGrant(g)
		k := granteeOf(g)
		e.byGrantee[k] = append(e.byGrantee[k], g)
		e.byID[g.ID] = g
	}
	for _, gs := range e.byGrantee {
		slices.SortFunc(gs, compareGrants)
	}
}

// putGrantLocked replaces any grant with g's ID or (grantee, server, tool).
func (e *Engine) putGrantLocked(g Grant) {
	g = cloneGrant(g)
	if old, ok := e.byID[g.ID]; ok {
		e.deleteGrantLocked(old.ID)
	}
	k := granteeOf(g)
	gs := slices.DeleteFunc(e.byGrantee[k], func(o Grant) bool {
		if o.Server == g.Server && o.Tool == g.Tool {
			delete(e.byID, o.ID)
			return true
		}
		return false
	})
	gs = append(gs, g)
	slices.SortFunc(gs, compareGrants)
	e.byGrantee[k] = gs
	e.byID[g.ID] = g
}

func (e *Engine) deleteGrantLocked(id string) bool {
	g, ok := e.byID[id]
	if !ok {
		return false
	}
	delete(e.byID, id)
	k := granteeOf(g)
	gs := slices.DeleteFunc(e.byGrantee[k], func(o Grant) bool { return o.ID == id })
	if len(gs) == 0 {
		delete(e.byGrantee, k)
	} else {
		e.byGrantee[k] = gs
	}
	return true
}

// grantsOfLocked returns the grant lists that apply to id: its agent's and
// its workspace's.
func (e *Engine) grantsOfLocked(id Identity) [2][]Grant {
	var out [2][]Grant
	out[0] = e.byGrantee[grantee{agent: id.AgentID}]
	if id.Workspace != "" {
		out[1] = e.byGrantee[grantee{workspace: id.Workspace}]
	}
	return out
}

func (e *Engine) bumpLocked() {
	e.rev++
	if e.cache != nil {
		e.cache.clear()
	}
}

func compareGrants(a, b Grant) int {
	return cmp.Or(
		cmp.Compare(a.AgentID, b.AgentID),
		cmp.Compare(a.Workspace, b.Workspace),
		cmp.Compare(a.Server, b.Server),
		cmp.Compare(a.Tool, b.Tool),
		cmp.Compare(a.ID, b.ID),
	)
}

func cloneGrant(g Grant) Grant {
	g.Actions = slices.Clone(g.Actions)
	if g.ExpiresAt != nil {
		t := *g.ExpiresAt
		g.ExpiresAt = &t
	}
	return g
}

// Decide answers r. The policy layers (admin, workspace/server access, role
// restrictions, grants) come from memory and the decision cache; a high-risk
// tool then needs a valid approval token, which is looked up in the store on
// every call. The error is non-nil only when the store fails, and the
// Decision then denies.
func (e *Engine) Decide(ctx context.Context, r Request) (Decision, error) {
	if r.Action == "" {
		r.Action = ActionInvoke
	}
	if r.Name == "" {
		r.Name = r.Server + "." + r.Tool
	}
	e.mu.RLock()
	res, rev, cached := e.policyLocked(r.Identity, r.Server, r.Tool, r.Name, r.Action)
	needToken := (!r.Identity.Admin || e.pol.AdminNeedsToken) && e.highRiskLocked(r.Tool, r.Name, r.Destructive)
	e.mu.RUnlock()

	d := Decision{
		Allow: res.allow, Rule: res.rule, Reason: res.reason,
		Revision: rev, Cached: cached, TokenRequired: needToken,
	}
	if !d.Allow || !needToken {
		return d, nil
	}
	return e.checkToken(ctx, r, d)
}

// Visible reports whether id may see the tool in a listing: the policy layers
// only, through the cache. High-risk tools stay visible, since the approval
// token comes with each call; destructive is accepted for symmetry with
// Request and does not hide a tool.
func (e *Engine) Visible(id Identity, server, tool, name string, destructive bool) bool {
	if name == "" {
		name = server + "." + tool
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	res, _, _ := e.policyLocked(id, server, tool, name, ActionInvoke)
	return res.allow
}

// policyLocked returns layers 1–4, from the cache when it can. Entries are
// put while e.mu is read-locked and the revision can only move under the
// write lock, so an entry can never outlive the state it was computed from.
func (e *Engine) policyLocked(id Identity, server, tool, name, action string) (policyResult, uint64, bool) {
	now := e.now()
	useCache := e.cache != nil && e.pol.CacheTTL > 0
	var k cacheKey
	if useCache {
		k = makeKey(id, server, tool, name, action)
		if res, ok := e.cache.get(k, id, e.rev, now); ok {
			return res, e.rev, true
		}
	}
	res, until := e.evaluateLocked(id, server, tool, name, action, now)
	if useCache {
		expires := now.Add(e.pol.CacheTTL)
		if !until.IsZero() && until.Before(expires) {
			expires = until
		}
		e.cache.put(k, id, res, e.rev, expires, now)
	}
	return res, e.rev, false
}

// evaluateLocked runs layers 1–4. until, if not zero, is when the result
// stops being true by itself (the expiry of the grant that allowed).
func (e *Engine) evaluateLocked(id Identity, server, tool, name, action string, now time.Time) (res policyResult, until time.Time) {
	// 1. Admins see and may call everything (seed 003 isAdmin).
	if id.Admin {
		return policyResult{allow: true, rule: "admin", reason: "caller is an administrator"}, time.Time{}
	}
	// 2. Workspace access (seed 003): an explicit deny wins over everything;
	// a server whose default_access is deny admits only its allow list.
	if res, denied := e.serverDeniedLocked(id, server); denied {
		return res, time.Time{}
	}
	// 3. Role restrictions: any restricted role of the caller must allow name.
	first, allowed := "", false
	for _, role := range id.Roles {
		pats, ok := e.pol.RoleRestrictions[role]
		if !ok {
			continue
		}
		if first == "" {
			first = role
		}
		if matchAny(pats, name) {
			allowed = true
			break
		}
	}
	if first != "" && !allowed {
		return policyResult{rule: "role:" + first, reason: fmt.Sprintf("role %q does not allow %q", first, name)}, time.Time{}
	}
	// 4a. A workspace policy (seed 003) allows what layer 2 let through: the
	// server-level rule is the whole rule, no grant needed.
	if id.WorkspacePolicy {
		return e.workspaceAllowLocked(id, server), time.Time{}
	}
	// 4b. Grants, to the agent or to its workspace: default deny. The most
	// specific live grant names the rule.
	var live, expired *Grant
	for _, gs := range e.grantsOfLocked(id) {
		for i := range gs {
			g := &gs[i]
			if !match(g.Server, server) || !match(g.Tool, tool) || !actionAllowed(g.Actions, action) {
				continue
			}
			if g.ExpiresAt != nil && !now.Before(*g.ExpiresAt) {
				if expired == nil || g.ExpiresAt.After(*expired.ExpiresAt) {
					expired = g
				}
				continue
			}
			if live == nil || literalLen(g.Server)+literalLen(g.Tool) > literalLen(live.Server)+literalLen(live.Tool) {
				live = g
			}
		}
	}
	switch {
	case live != nil:
		res = policyResult{allow: true, rule: "grant:" + live.ID, reason: fmt.Sprintf("granted %s on %s.%s", action, live.Server, live.Tool)}
		if live.Workspace != "" {
			res.reason += fmt.Sprintf(" to workspace %q", live.Workspace)
		}
		if live.ExpiresAt != nil {
			until = *live.ExpiresAt
		}
		return res, until
	case expired != nil:
		return policyResult{rule: "grant-expired:" + expired.ID, reason: fmt.Sprintf("the grant expired at %s", expired.ExpiresAt.UTC().Format(time.RFC3339))}, time.Time{}
	default:
		who := fmt.Sprintf("agent %q", id.AgentID)
		if id.Workspace != "" {
			who += fmt.Sprintf(" (workspace %q)", id.Workspace)
		}
		return policyResult{rule: "default-deny", reason: who + " has no grant for " + action + " on " + name +
			" and its credential carries no workspace policy"}, time.Time{}
	}
}

// serverDeniedLocked is layer 2, seed 003's two denials: a deny id, and a
// server with default_access deny that the caller's allow list does not
// name.
func (e *Engine) serverDeniedLocked(id Identity, server string) (policyResult, bool) {
	if matchAny(id.DenyServers, server) {
		return policyResult{rule: "workspace:deny-id", reason: fmt.Sprintf("server %q is in the caller's deny list", server)}, true
	}
	if e.defaultDenyLocked(server) && !matchAny(id.AllowServers, server) {
		return policyResult{rule: "server:default-deny", reason: fmt.Sprintf("server %q has default_access deny and the caller is not in its allow list", server)}, true
	}
	return policyResult{}, false
}

// defaultDenyLocked reports whether server's default_access is deny (or an
// unknown value, which fails closed).
func (e *Engine) defaultDenyLocked(server string) bool {
	access, ok := e.pol.ServerAccess[server]
	return ok && access != "" && !strings.EqualFold(access, "allow")
}

// workspaceAllowLocked is the allow of a workspace-policy identity that
// layer 2 let through, named for what admitted it.
func (e *Engine) workspaceAllowLocked(id Identity, server string) policyResult {
	if matchAny(id.AllowServers, server) {
		return policyResult{allow: true, rule: "workspace:allow-id", reason: fmt.Sprintf("server %q is in the caller's allow list", server)}
	}
	return policyResult{allow: true, rule: "workspace:default-allow", reason: fmt.Sprintf("server %q has default_access allow and the caller's workspace policy does not deny it", server)}
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if match(p, name) {
			return true
		}
	}
	return false
}

func actionAllowed(actions []string, action string) bool {
	if len(actions) == 0 {
		return action == ActionInvoke
	}
	return matchAny(actions, action)
}

// highRiskLocked reports whether a tool needs an approval token.
func (e *Engine) highRiskLocked(tool, name string, destructive bool) bool {
	if destructive {
		return true
	}
	words := false
	for _, h := range e.highRisk {
		switch {
		case h.glob:
			if match(h.s, name) {
				return true
			}
		case !h.single:
			if containsFold(tool, h.s) {
				return true
			}
		default:
			words = true
		}
	}
	if !words {
		return false
	}
	// Split the name once and compare each token with every word.
	for i := 0; i < len(tool); {
		var tok string
		tok, i = nextToken(tool, i)
		for _, h := range e.highRisk {
			if h.single && !h.glob && strings.EqualFold(tok, h.s) {
				return true
			}
		}
	}
	return false
}

// checkToken is layer 5: d allowed a high-risk tool; the caller's token must
// approve this very call.
func (e *Engine) checkToken(ctx context.Context, r Request, d Decision) (Decision, error) {
	deny := func(rule, reason string) Decision {
		d.Allow, d.Rule, d.Reason = false, rule, reason
		return d
	}
	if r.Token == "" {
		return deny("high-risk:token-missing", "the tool is high-risk and needs an approval token"), nil
	}
	id := HashSecret(r.Token)
	tok, err := e.st.GetToken(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return deny("high-risk:token-invalid", "the approval token is unknown"), nil
	case err != nil:
		return deny("high-risk:token-error", "the approval token could not be checked"), fmt.Errorf("reading token %s: %w", short(id), err)
	}
	if tok.Revoked || (tok.GrantID != "" && !e.hasGrant(tok.GrantID)) {
		return deny("high-risk:token-revoked", "the approval token, or the grant it came with, was revoked"), nil
	}
	now := e.now()
	if !now.Before(tok.ExpiresAt) {
		return deny("high-risk:token-expired", "the approval token expired at "+tok.ExpiresAt.UTC().Format(time.RFC3339)), nil
	}
	if tok.AgentID != r.Identity.AgentID {
		return deny("high-risk:token-invalid", "the approval token was issued to another agent"), nil
	}
	if !match(tok.Server, r.Server) || !match(tok.Tool, r.Tool) {
		return deny("high-risk:token-other-tool", fmt.Sprintf("the approval token is for %s.%s", tok.Server, tok.Tool)), nil
	}
	if tok.ArgsDigest != "" {
		if dg, err := ArgsDigest(r.Arguments); err != nil || dg != tok.ArgsDigest {
			return deny("high-risk:token-args", "the approval token is bound to other arguments"), nil
		}
	}
	if tok.SingleUse {
		if tok.UsedAt != nil {
			return deny("high-risk:token-used", "the single-use approval token was already used"), nil
		}
		switch err := e.st.UseToken(ctx, id, now); {
		case errors.Is(err, ErrTokenUsed):
			return deny("high-risk:token-used", "the single-use approval token was already used"), nil
		case errors.Is(err, ErrNotFound):
			return deny("high-risk:token-invalid", "the approval token is unknown"), nil
		case err != nil:
			return deny("high-risk:token-error", "the approval token could not be spent"), fmt.Errorf("using token %s: %w", short(id), err)
		}
	}
	d.Rule += "+token:" + short(id)
	d.Reason += "; approved by token " + short(id)
	return d, nil
}

func (e *Engine) hasGrant(id string) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	_, ok := e.byID[id]
	return ok
}

// short is the first 8 characters of a token ID: enough to find it in the
// audit log, and safe to log since the ID is a hash.
func short(id string) string {
	return id[:min(8, len(id))]
}

// ServerAllowed reports whether id may use the resources and prompts of
// server: admins may; others when the workspace layer lets them reach the
// server and either their credential carries a workspace policy or they
// hold at least one live grant on it (to their agent or their workspace).
// Resources and prompts carry no per-item grants, so reaching a server's
// tools is what opens them.
func (e *Engine) ServerAllowed(id Identity, server string) bool {
	if id.Admin {
		return true
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if _, denied := e.serverDeniedLocked(id, server); denied {
		return false
	}
	if id.WorkspacePolicy {
		return true
	}
	now := e.now()
	for _, gs := range e.grantsOfLocked(id) {
		for _, g := range gs {
			if match(g.Server, server) && (g.ExpiresAt == nil || now.Before(*g.ExpiresAt)) {
				return true
			}
		}
	}
	return false
}
