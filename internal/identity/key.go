package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

// Key is a stored API key. Only the SHA-256 of the secret is kept, so a
// leaked database does not leak usable credentials; Prefix lets an operator
// tell keys apart in a list without revealing them.
type Key struct {
	ID           string   `json:"id"`     // "k_" + 12 random base32 chars
	Hash         string   `json:"-"`      // hex SHA-256 of the full secret
	Prefix       string   `json:"prefix"` // first 10 chars of the secret, to recognise it in lists
	AgentID      string   `json:"agent_id"`
	Roles        []string `json:"roles"`
	Workspace    string   `json:"workspace,omitempty"`
	Admin        bool     `json:"admin"`
	AllowServers []string `json:"allow_servers,omitempty"`
	DenyServers  []string `json:"deny_servers,omitempty"`
	// WorkspacePolicy: the key carries a workspace policy (seed 003), so
	// Admin, AllowServers, DenyServers and the servers' default_access
	// decide what it may use, with no grant needed.
	WorkspacePolicy bool       `json:"workspace_policy"`
	CreatedAt       time.Time  `json:"created_at"`
	CreatedBy       string     `json:"created_by,omitempty"`
	ExpiresAt       *time.Time `json:"expires_at,omitempty"`
	RevokedAt       *time.Time `json:"revoked_at,omitempty"`
}

// SecretPrefix starts every API key secret, so that secret scanners and
// humans can recognise one, and so that a key is never mistaken for a JWT.
const SecretPrefix = "sbk_"

// secretChars is the number of random characters after SecretPrefix: 40
// base32 characters carry 200 bits.
const secretChars = 40

// prefixLen is how much of the secret Key.Prefix keeps: SecretPrefix plus 6
// random characters (30 bits), enough to tell keys apart, far too few to
// help guess one.
const prefixLen = 10

// lowerBase32 is RFC 4648 base32 in lower case without padding: unambiguous
// in URLs, headers and shells.
var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// randomBase32 returns n random base32 characters from crypto/rand.
func randomBase32(n int) string {
	b := make([]byte, (n*5+7)/8)
	rand.Read(b) // never returns an error (crypto/rand, Go ≥ 1.24)
	return lowerBase32.EncodeToString(b)[:n]
}

// NewKey makes a key with a fresh secret. The secret is returned once and is
// not recoverable from the Key: show it to the operator and drop it.
func NewKey(agentID string, roles []string, workspace string, admin bool) (Key, string, error) {
	if strings.TrimSpace(agentID) == "" {
		return Key{}, "", errors.New("new API key: agent id is empty")
	}
	secret := SecretPrefix + randomBase32(secretChars)
	k := Key{
		ID:        "k_" + randomBase32(12),
		Hash:      HashSecret(secret),
		Prefix:    secret[:prefixLen],
		AgentID:   agentID,
		Roles:     slices.Clone(roles),
		Workspace: workspace,
		Admin:     admin,
		CreatedAt: time.Now().UTC(),
	}
	if k.Roles == nil {
		k.Roles = []string{}
	}
	return k, secret, nil
}

// HashSecret is how secrets are stored and looked up: hex SHA-256. A plain
// hash is enough because the secrets carry 200 random bits; nothing to
// stretch.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Identity is the caller a key authenticates, so the rest of the gateway
// never needs to know keys exist.
func (k Key) Identity() authz.Identity {
	return authz.Identity{
		ID:           "key:" + k.ID,
		AgentID:      k.AgentID,
		Roles:        slices.Clone(k.Roles),
		Workspace:    k.Workspace,
		Admin:        k.Admin,
		AllowServers: slices.Clone(k.AllowServers),
		DenyServers:  slices.Clone(k.DenyServers),
		Method:       "key",
		// The key's own fields are its workspace policy when it has one.
		WorkspacePolicy: k.WorkspacePolicy,
	}
}

// KeyStore is where keys live; the app adapts internal/store, so this
// package needs no SQL.
type KeyStore interface {
	// KeyByHash returns the key whose Hash is hash, or an error wrapping
	// ErrNotFound.
	KeyByHash(ctx context.Context, hash string) (Key, error)
}

// ErrNotFound is what a KeyStore wraps when no key has the hash, so that an
// unknown key (401) can be told from a broken store (5xx).
var ErrNotFound = errors.New("identity: key not found")

// ErrUnavailable is wrapped by errors that are not the caller's fault: the
// key store failed, or no JWKS could be fetched. Such errors mean 503, not
// 401, so that clients retry instead of discarding good credentials.
var ErrUnavailable = errors.New("identity: credential backend unavailable")

// lookupKey is the ErrNotFound-aware wrapper around the store.
func lookupKey(ctx context.Context, ks KeyStore, hash string) (Key, bool, error) {
	if ks == nil {
		return Key{}, false, nil
	}
	k, err := ks.KeyByHash(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		return Key{}, false, nil
	}
	if err != nil {
		return Key{}, false, fmt.Errorf("%w: look up API key: %w", ErrUnavailable, err)
	}
	return k, true, nil
}
