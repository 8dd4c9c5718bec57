-- Keys the gateway signs identity assertions for upstream servers with
-- (servers.NAME.identity, package propagate). The shape and rules of
-- oauth_signing_keys, in a table of their own so that an assertion is
-- never verifiable as one of the built-in authorization server's tokens.
-- private_key is sealed with the secret keyring.
CREATE TABLE upstream_signing_keys (
    id          TEXT    PRIMARY KEY,
    generation  INTEGER NOT NULL UNIQUE,
    alg         TEXT    NOT NULL,
    private_key TEXT    NOT NULL,
    public_jwk  TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    active_from INTEGER NOT NULL,
    retire_at   INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
