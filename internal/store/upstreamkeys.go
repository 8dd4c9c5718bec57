package store

import "context"

// CreateUpstreamSigningKey stores a key the gateway signs identity
// assertions for upstream servers with (table upstream_signing_keys, the
// shape of oauth_signing_keys: kept apart so that an assertion can never
// pass for one of the built-in authorization server's tokens). A taken ID
// or generation is an error wrapping [ErrConflict]: another replica
// rotated first.
func (db *DB) CreateUpstreamSigningKey(ctx context.Context, k OAuthSigningKey) error {
	return db.createSigningKey(ctx, "upstream_signing_keys", "upstream signing key", k)
}

// UpstreamSigningKeys lists the assertion signing keys, oldest generation
// first.
func (db *DB) UpstreamSigningKeys(ctx context.Context) ([]OAuthSigningKey, error) {
	return db.signingKeys(ctx, "upstream_signing_keys", "upstream signing keys")
}
