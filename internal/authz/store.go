package authz

import (
	"context"
	"errors"
	"time"
)

// Sentinels of the Store contract and of the Engine's own validation. The
// app's store adapter wraps ErrNotFound and ErrTokenUsed so the engine can
// tell "no such row" from a broken database; the API maps ErrNotFound to 404
// and ErrInvalid to 400 in its one error table.
var (
	// ErrNotFound means the grant or token does not exist.
	ErrNotFound = errors.New("not found")
	// ErrTokenUsed means a single-use token was already spent.
	ErrTokenUsed = errors.New("token already used")
	// ErrInvalid wraps every validation error of Grant, IssueToken and
	// ArgsDigest: the request, not the system, is at fault.
	ErrInvalid = errors.New("invalid")
)

// Store persists grants and tokens. It is declared here, where it is
// consumed, so the engine stays free of SQL; the app adapts internal/store to
// it. Implementations must be safe for concurrent use.
type Store interface {
	// ListGrants returns every grant of every agent.
	ListGrants(ctx context.Context) ([]Grant, error)
	// PutGrant upserts on (AgentID, Workspace, Server, Tool) and returns the stored
	// grant; the ID of an existing row is kept, so re-granting does not
	// orphan the tokens issued with it.
	PutGrant(ctx context.Context, g Grant) (Grant, error)
	// DeleteGrant wraps ErrNotFound when id is missing.
	DeleteGrant(ctx context.Context, id string) error
	// PutToken inserts a token.
	PutToken(ctx context.Context, t Token) error
	// GetToken wraps ErrNotFound when id is missing.
	GetToken(ctx context.Context, id string) (Token, error)
	// UseToken atomically sets UsedAt to at if it is nil and otherwise wraps
	// ErrTokenUsed: this is what makes a single-use token single-use across
	// replicas.
	UseToken(ctx context.Context, id string, at time.Time) error
	// RevokeToken wraps ErrNotFound when id is missing.
	RevokeToken(ctx context.Context, id string) error
}
