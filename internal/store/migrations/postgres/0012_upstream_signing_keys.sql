-- Keys the gateway signs identity assertions for upstream servers with
-- (servers.NAME.identity, package propagate). The shape and rules of
-- oauth_signing_keys, in a table of their own so that an assertion is
-- never verifiable as one of the built-in authorization server's tokens.
-- private_key is sealed with the secret keyring.
CREATE TABLE upstream_signing_keys (
    id          TEXT COLLATE "C" PRIMARY KEY,
    generation  BIGINT NOT NULL UNIQUE,
    alg         TEXT COLLATE "C" NOT NULL,
    private_key TEXT COLLATE "C" NOT NULL,
    public_jwk  TEXT COLLATE "C" NOT NULL,
    created_at  BIGINT NOT NULL,
    active_from BIGINT NOT NULL,
    retire_at   BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
