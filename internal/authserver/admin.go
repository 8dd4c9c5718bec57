package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// The admin operations behind `switchboard oauth clients|grants [revoke]`,
// the REST API and the dashboard. They return no secret: a client's secret
// is shown once, at registration, and only its hash is kept.

// ErrNotFound is wrapped by the admin operations' errors for an unknown
// client or grant.
var ErrNotFound = errors.New("not found")

// Client is a registered client as an operator sees it.
type Client struct {
	ID   string `json:"client_id"`
	Name string `json:"client_name,omitempty"`
	// Kind is "dynamic" (RFC 7591) or "metadata_document".
	Kind         string    `json:"kind"`
	AuthMethod   string    `json:"token_endpoint_auth_method"`
	Confidential bool      `json:"confidential"`
	RedirectURIs []string  `json:"redirect_uris"`
	GrantTypes   []string  `json:"grant_types"`
	Scope        string    `json:"scope,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	// FetchedAt is when a metadata document was last fetched.
	FetchedAt *time.Time `json:"fetched_at,omitempty"`
	// ActiveGrants counts the grants neither revoked nor expired.
	ActiveGrants int `json:"active_grants"`
}

// Grant is one consent as an operator sees it.
type Grant struct {
	ID       string `json:"id"`
	ClientID string `json:"client_id"`
	// ClientName is the client's name when it is still registered.
	ClientName string `json:"client_name,omitempty"`
	Subject    string `json:"subject"`
	// IdentityID is the signed-in credential: "key:<id>", "oidc:<issuer>|<sub>", ...
	IdentityID    string     `json:"identity_id"`
	Scope         string     `json:"scope"`
	Resource      string     `json:"resource"`
	CreatedAt     time.Time  `json:"created_at"`
	RefreshedAt   *time.Time `json:"refreshed_at,omitempty"`
	ExpiresAt     time.Time  `json:"expires_at"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	RevokedReason string     `json:"revoked_reason,omitempty"`
	// Active: neither revoked nor expired.
	Active bool `json:"active"`
}

// GrantFilter selects grants; zero fields select all (up to 1000).
type GrantFilter struct {
	ClientID   string
	Subject    string
	ActiveOnly bool
	Limit      int
}

// Clients lists the known clients, oldest first, with their active
// grants counted.
func (s *Server) Clients(ctx context.Context) ([]Client, error) {
	rows, err := s.db.OAuthClients(ctx)
	if err != nil {
		return nil, err
	}
	active, err := s.db.OAuthGrants(ctx, store.OAuthGrantFilter{ActiveAt: s.clock(), Limit: 100000})
	if err != nil {
		return nil, err
	}
	count := map[string]int{}
	for _, g := range active {
		count[g.ClientID]++
	}
	out := make([]Client, 0, len(rows))
	for _, c := range rows {
		v := Client{
			ID: c.ID, Name: c.Name, Kind: c.Kind, AuthMethod: c.AuthMethod, Confidential: c.SecretHash != "",
			RedirectURIs: c.RedirectURIs, GrantTypes: c.GrantTypes, Scope: c.Scope, CreatedAt: c.CreatedAt,
			ActiveGrants: count[c.ID],
		}
		if !c.FetchedAt.IsZero() {
			at := c.FetchedAt
			v.FetchedAt = &at
		}
		out = append(out, v)
	}
	return out, nil
}

// DeleteClient removes a client and revokes its grants: its users must
// authorize it again (a metadata-document client is fetched anew then).
func (s *Server) DeleteClient(ctx context.Context, id, by string) error {
	grants, err := s.db.OAuthGrants(ctx, store.OAuthGrantFilter{ClientID: id, ActiveAt: s.clock(), Limit: 100000})
	if err != nil {
		return err
	}
	if err := s.db.DeleteOAuthClient(ctx, id, "client deleted by "+by, s.clock()); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("OAuth client %q: %w", id, ErrNotFound)
		}
		return err
	}
	for _, g := range grants {
		s.grants.set(g.ID, false, time.Time{})
		if err := s.db.Notify(ctx, notifyGrants, g.ID); err != nil {
			s.log.Warn("OAuth grant revocation not announced to other replicas", "grant", g.ID, "err", err)
		}
	}
	s.log.Info("OAuth client deleted", "client_id", id, "by", by, "grants_revoked", len(grants))
	return nil
}

// Grants lists grants, newest first.
func (s *Server) Grants(ctx context.Context, f GrantFilter) ([]Grant, error) {
	sf := store.OAuthGrantFilter{ClientID: f.ClientID, Subject: f.Subject, Limit: f.Limit}
	now := s.clock()
	if f.ActiveOnly {
		sf.ActiveAt = now
	}
	rows, err := s.db.OAuthGrants(ctx, sf)
	if err != nil {
		return nil, err
	}
	clients, err := s.db.OAuthClients(ctx)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, c := range clients {
		names[c.ID] = c.Name
	}
	out := make([]Grant, 0, len(rows))
	for _, g := range rows {
		var id authz.Identity
		_ = json.Unmarshal(g.Identity, &id) // written by this package; a bad row shows an empty ID
		out = append(out, Grant{
			ID: g.ID, ClientID: g.ClientID, ClientName: names[g.ClientID], Subject: g.Subject, IdentityID: id.ID,
			Scope: g.Scope, Resource: g.Resource, CreatedAt: g.CreatedAt, RefreshedAt: g.RefreshedAt,
			ExpiresAt: g.ExpiresAt, RevokedAt: g.RevokedAt, RevokedReason: g.RevokedReason,
			Active: g.RevokedAt == nil && now.Before(g.ExpiresAt),
		})
	}
	return out, nil
}

// RevokeGrant revokes a grant: its refresh tokens stop working at once,
// and its access tokens on the next request (on every replica: the others
// are told through the store). Revoking a revoked grant is not an error.
func (s *Server) RevokeGrant(ctx context.Context, id, by string) error {
	if _, err := s.db.OAuthGrant(ctx, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("OAuth grant %q: %w", id, ErrNotFound)
		}
		return err
	}
	s.revoke(ctx, id, "revoked by "+by)
	return nil
}

// RevokeSubjectGrants revokes every active grant of one user (an agent
// ID), e.g. when the user leaves; it returns how many it revoked.
func (s *Server) RevokeSubjectGrants(ctx context.Context, subject, by string) (int, error) {
	grants, err := s.db.OAuthGrants(ctx, store.OAuthGrantFilter{Subject: subject, ActiveAt: s.clock(), Limit: 100000})
	if err != nil {
		return 0, err
	}
	for _, g := range grants {
		s.revoke(ctx, g.ID, "revoked by "+by)
	}
	return len(grants), nil
}
