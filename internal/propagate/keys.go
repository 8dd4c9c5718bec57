package propagate

import (
	"context"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/signkeys"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// The key schedule (package signkeys): a key signs for KeyRotation, its
// successor is published KeyLead before it signs, and a retired key stays
// published past the expiry of the last assertion it signed.
const (
	KeyRotation = 7 * 24 * time.Hour
	KeyLead     = 24 * time.Hour
	keyLeeway   = 5 * time.Minute
	// maxAssertionTTL bounds what a published key must outlive.
	maxAssertionTTL = 5 * time.Minute
)

// Store keeps the signing keys; *store.DB is one. Every replica reads and
// writes the same rows, so that they sign with, and publish, the same keys.
type Store interface {
	UpstreamSigningKeys(ctx context.Context) ([]store.OAuthSigningKey, error)
	CreateUpstreamSigningKey(ctx context.Context, k store.OAuthSigningKey) error
}

// Sealer seals the private keys at rest; *secrets.Keyring is one.
type Sealer = signkeys.Sealer
