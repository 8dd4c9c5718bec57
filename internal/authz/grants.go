package authz

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// GrantOptions asks Grant to issue an approval token along with the grant,
// the seed's grant_permission(token_ttl=...) for high-risk tools.
type GrantOptions struct {
	IssueToken bool
	// TokenTTL zero means Policy.TokenTTL. The token never outlives the grant.
	TokenTTL time.Duration
	// BindArguments, if set, binds the token to this argument object.
	BindArguments json.RawMessage
	SingleUse     bool
}

// TokenRequest describes an approval token to issue. Server and Tool may be
// patterns, like a grant's.
type TokenRequest struct {
	AgentID, Server, Tool string
	// TTL zero means Policy.TokenTTL.
	TTL           time.Duration
	BindArguments json.RawMessage
	// ArgsDigest, if set (and BindArguments is not), binds the token to the
	// argument object of this digest (ArgsDigest), for issuers that kept
	// only the digest, such as an approval request.
	ArgsDigest string
	SingleUse  bool
	// GrantID, if set, ties the token to a grant: revoking the grant revokes
	// the token, and the token never outlives it.
	GrantID string
}

// IssuedToken is a freshly issued token. Secret is shown once: only its hash
// (Token.ID) is stored.
type IssuedToken struct {
	Secret string `json:"token"`
	Token  Token  `json:"info"`
}

// secretPrefix marks token secrets so secret scanners and log redaction can
// recognize them.
const secretPrefix = "sbt_"

// Grant stores g and makes it effective at once. It validates g (agent,
// server and tool non-empty, ExpiresAt in the future), defaults Actions to
// ["invoke"], stamps GrantedAt and a new ID (the store keeps the old ID when
// (agent, server, tool) already had a grant) and, if o.IssueToken, issues a
// token tied to the grant. Validation errors wrap ErrInvalid. If the grant is
// stored but its token is not, Grant returns the grant and the error.
func (e *Engine) Grant(ctx context.Context, g Grant, o GrantOptions) (Grant, *IssuedToken, error) {
	now := e.now()
	var problems []string
	switch agent, ws := strings.TrimSpace(g.AgentID), strings.TrimSpace(g.Workspace); {
	case agent == "" && ws == "":
		problems = append(problems, "agent_id (or workspace) is empty")
	case agent != "" && ws != "":
		problems = append(problems, "agent_id and workspace are both set: a grant is to an agent or to a workspace")
	case ws != "" && o.IssueToken:
		problems = append(problems, "a token is issued to an agent, not to a workspace: issue it to each agent")
	}
	if strings.TrimSpace(g.Server) == "" {
		problems = append(problems, "server_id is empty")
	}
	if strings.TrimSpace(g.Tool) == "" {
		problems = append(problems, "tool_name is empty")
	}
	if g.ExpiresAt != nil && !g.ExpiresAt.After(now) {
		problems = append(problems, "expires_at is not in the future")
	}
	if slices.Contains(g.Actions, "") {
		problems = append(problems, "an action is empty")
	}
	if o.IssueToken {
		if o.TokenTTL < 0 {
			problems = append(problems, "token ttl is negative")
		}
		if len(o.BindArguments) > 0 {
			if _, err := ArgsDigest(o.BindArguments); err != nil {
				problems = append(problems, "bind_arguments: "+err.Error())
			}
		}
	}
	if len(problems) > 0 {
		return Grant{}, nil, fmt.Errorf("%w grant: %s", ErrInvalid, strings.Join(problems, "; "))
	}

	g = cloneGrant(g)
	g.ID = uuid.NewString()
	g.GrantedAt = now
	if len(g.Actions) == 0 {
		g.Actions = []string{ActionInvoke}
	}
	stored, err := e.st.PutGrant(ctx, g)
	if err != nil {
		return Grant{}, nil, fmt.Errorf("storing grant of %s on %s.%s: %w", g.grantee(), g.Server, g.Tool, err)
	}
	e.mu.Lock()
	e.putGrantLocked(stored)
	e.bumpLocked()
	e.mu.Unlock()
	e.log.Info("grant stored", "grant_id", stored.ID, "agent_id", stored.AgentID, "workspace", stored.Workspace,
		"server", stored.Server, "tool", stored.Tool, "actions", stored.Actions, "expires_at", stored.ExpiresAt)

	if !o.IssueToken {
		return cloneGrant(stored), nil, nil
	}
	it, err := e.IssueToken(ctx, TokenRequest{
		AgentID: stored.AgentID, Server: stored.Server, Tool: stored.Tool,
		TTL: o.TokenTTL, BindArguments: o.BindArguments, SingleUse: o.SingleUse, GrantID: stored.ID,
	})
	if err != nil {
		return cloneGrant(stored), nil, fmt.Errorf("grant %s stored, but its token was not: %w", stored.ID, err)
	}
	return cloneGrant(stored), &it, nil
}

// Revoke deletes a grant and revokes the tokens issued with it. It wraps
// ErrNotFound when neither the store nor this engine knows grantID.
func (e *Engine) Revoke(ctx context.Context, grantID string) error {
	if grantID == "" {
		return fmt.Errorf("%w: empty grant id", ErrInvalid)
	}
	err := e.st.DeleteGrant(ctx, grantID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("deleting grant %s: %w", grantID, err)
	}
	e.mu.Lock()
	had := e.deleteGrantLocked(grantID)
	tokens := e.issued[grantID]
	delete(e.issued, grantID)
	if err == nil || had {
		e.bumpLocked()
	}
	e.mu.Unlock()
	if err != nil && !had {
		return fmt.Errorf("revoking grant %s: %w", grantID, err)
	}
	e.log.Info("grant revoked", "grant_id", grantID, "tokens", len(tokens))

	// The token layer already refuses tokens of a missing grant; marking them
	// revoked keeps the store truthful for listings and other replicas.
	var errs []error
	for _, t := range tokens {
		if err := e.st.RevokeToken(ctx, t.id); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("revoking token %s of grant %s: %w", short(t.id), grantID, err))
		}
	}
	return errors.Join(errs...)
}

// grantee names who g is made to, for messages.
func (g Grant) grantee() string {
	if g.Workspace != "" {
		return "workspace " + g.Workspace
	}
	return g.AgentID
}

// Grants returns the grants made to agentID ("" = every grant, to agents
// and to workspaces), sorted by (agent, workspace, server, tool).
func (e *Engine) Grants(agentID string) []Grant {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var out []Grant
	if agentID != "" {
		for _, g := range e.byGrantee[grantee{agent: agentID}] {
			out = append(out, cloneGrant(g))
		}
		return out
	}
	for _, g := range e.byID {
		out = append(out, cloneGrant(g))
	}
	slices.SortFunc(out, compareGrants)
	return out
}

// IssueToken issues an approval token. The secret is returned once; the
// store keeps its hash. Validation errors wrap ErrInvalid.
func (e *Engine) IssueToken(ctx context.Context, r TokenRequest) (IssuedToken, error) {
	now := e.now()
	var problems []string
	if strings.TrimSpace(r.AgentID) == "" {
		problems = append(problems, "agent_id is empty")
	}
	if strings.TrimSpace(r.Server) == "" {
		problems = append(problems, "server_id is empty")
	}
	if strings.TrimSpace(r.Tool) == "" {
		problems = append(problems, "tool_name is empty")
	}
	if r.TTL < 0 {
		problems = append(problems, "ttl is negative")
	}
	digest := r.ArgsDigest
	if len(r.BindArguments) > 0 {
		d, err := ArgsDigest(r.BindArguments)
		if err != nil {
			problems = append(problems, "bind_arguments: "+err.Error())
		}
		digest = d
	}

	e.mu.RLock()
	ttl := e.pol.TokenTTL
	grant, hasGrant := e.byID[r.GrantID]
	e.mu.RUnlock()
	if r.GrantID != "" {
		switch {
		case !hasGrant:
			problems = append(problems, fmt.Sprintf("grant %q does not exist", r.GrantID))
		case grant.AgentID != r.AgentID:
			problems = append(problems, fmt.Sprintf("grant %q belongs to another agent", r.GrantID))
		}
	}
	if len(problems) > 0 {
		return IssuedToken{}, fmt.Errorf("%w token: %s", ErrInvalid, strings.Join(problems, "; "))
	}

	if r.TTL > 0 {
		ttl = r.TTL
	}
	expires := now.Add(ttl)
	if hasGrant && grant.ExpiresAt != nil && grant.ExpiresAt.Before(expires) {
		expires = *grant.ExpiresAt
	}
	secret := secretPrefix + rand.Text()
	tok := Token{
		ID: HashSecret(secret), AgentID: r.AgentID, Server: r.Server, Tool: r.Tool,
		ArgsDigest: digest, SingleUse: r.SingleUse, GrantID: r.GrantID,
		CreatedAt: now, ExpiresAt: expires,
	}
	if err := e.st.PutToken(ctx, tok); err != nil {
		return IssuedToken{}, fmt.Errorf("storing token for %s on %s.%s: %w", r.AgentID, r.Server, r.Tool, err)
	}
	if r.GrantID != "" {
		e.mu.Lock()
		refs := slices.DeleteFunc(e.issued[r.GrantID], func(t issuedRef) bool { return !now.Before(t.expires) })
		e.issued[r.GrantID] = append(refs, issuedRef{id: tok.ID, expires: expires})
		e.mu.Unlock()
	}
	e.log.Info("token issued", "token", short(tok.ID), "agent_id", tok.AgentID, "server", tok.Server,
		"tool", tok.Tool, "grant_id", tok.GrantID, "single_use", tok.SingleUse, "expires_at", tok.ExpiresAt)
	return IssuedToken{Secret: secret, Token: tok}, nil
}

// RevokeToken revokes a token by its ID or by its secret, whichever the
// operator has at hand. It wraps ErrNotFound when neither is known.
func (e *Engine) RevokeToken(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty token id", ErrInvalid)
	}
	hashed := id
	err := e.st.RevokeToken(ctx, id)
	if errors.Is(err, ErrNotFound) {
		hashed = HashSecret(id)
		err = e.st.RevokeToken(ctx, hashed)
	}
	if err != nil {
		// Never put id in the error: it may be the secret.
		return fmt.Errorf("revoking token: %w", err)
	}
	e.log.Info("token revoked", "token", short(hashed))
	return nil
}
