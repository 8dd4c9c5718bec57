package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/identity"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// The store keeps rows shaped exactly like the types of authz, audit and
// identity (same fields, same order), so these adapters convert with plain
// struct conversions and translate the store's sentinel errors.

// KeyStore serves API keys to the authenticator.
type KeyStore struct{ DB *store.DB }

func (k KeyStore) KeyByHash(ctx context.Context, hash string) (identity.Key, error) {
	row, err := k.DB.APIKeyByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return identity.Key{}, fmt.Errorf("%w: %w", identity.ErrNotFound, err)
	}
	return identity.Key(row), err
}

// GrantStore persists grants and tokens for the policy engine.
type GrantStore struct{ DB *store.DB }

func notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %w", authz.ErrNotFound, err)
	}
	return err
}

func (g GrantStore) ListGrants(ctx context.Context) ([]authz.Grant, error) {
	rows, err := g.DB.ListGrants(ctx, "")
	out := make([]authz.Grant, len(rows))
	for i, r := range rows {
		out[i] = authz.Grant(r)
	}
	return out, err
}

func (g GrantStore) PutGrant(ctx context.Context, gr authz.Grant) (authz.Grant, error) {
	row, err := g.DB.PutGrant(ctx, store.Grant(gr))
	return authz.Grant(row), err
}

func (g GrantStore) DeleteGrant(ctx context.Context, id string) error {
	_, err := g.DB.DeleteGrant(ctx, id)
	if err == nil {
		_, err = g.DB.RevokeGrantTokens(ctx, id)
	}
	return notFound(err)
}

func (g GrantStore) PutToken(ctx context.Context, t authz.Token) error {
	return g.DB.PutToken(ctx, store.Token(t))
}

func (g GrantStore) GetToken(ctx context.Context, id string) (authz.Token, error) {
	row, err := g.DB.GetToken(ctx, id)
	return authz.Token(row), notFound(err)
}

func (g GrantStore) UseToken(ctx context.Context, id string, at time.Time) error {
	err := g.DB.UseToken(ctx, id, at)
	if errors.Is(err, store.ErrTokenUsed) {
		return fmt.Errorf("%w: %w", authz.ErrTokenUsed, err)
	}
	return notFound(err)
}

func (g GrantStore) RevokeToken(ctx context.Context, id string) error {
	return notFound(g.DB.RevokeToken(ctx, id))
}

// AuditSink writes audit records to the store.
type AuditSink struct{ DB *store.DB }

func (s AuditSink) WriteAudit(ctx context.Context, recs []audit.Record) error {
	rows := make([]store.Invocation, len(recs))
	for i, r := range recs {
		rows[i] = store.Invocation(r)
	}
	return s.DB.InsertInvocations(ctx, rows)
}

func (s AuditSink) PurgeAudit(ctx context.Context, before time.Time) (int64, error) {
	return s.DB.PurgeInvocations(ctx, before)
}

// queryAudit reads the audit log.
func queryAudit(ctx context.Context, db *store.DB, f audit.Filter) ([]audit.Record, string, error) {
	rows, next, err := db.QueryInvocations(ctx, store.InvocationFilter(f))
	out := make([]audit.Record, len(rows))
	for i, r := range rows {
		out[i] = audit.Record(r)
	}
	return out, next, err
}
