-- The built-in OAuth 2.1 authorization server (issue 17): every step of a
-- flow is kept here, not in a replica's memory, so that any replica serves
-- any step. Secrets are never stored in clear: client secrets, codes and
-- refresh tokens by their SHA-256, the signing keys' private halves sealed
-- with the secrets keyring, the upstream sign-in's PKCE verifier sealed.

-- A client: registered dynamically (RFC 7591), or known by its client ID
-- metadata document (client_id is the document's URL; the document is
-- cached until fresh_until).
CREATE TABLE oauth_clients (
    client_id     TEXT    PRIMARY KEY,
    kind          TEXT    NOT NULL,
    secret_hash   TEXT    NOT NULL DEFAULT '',
    auth_method   TEXT    NOT NULL,
    name          TEXT    NOT NULL DEFAULT '',
    redirect_uris TEXT    NOT NULL,
    grant_types   TEXT    NOT NULL,
    scope         TEXT    NOT NULL DEFAULT '',
    metadata      TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    fetched_at    INTEGER,
    fresh_until   INTEGER
);

-- An authorization request between /authorize and the consent: bound to
-- one browser by the hash of a cookie, signed in once subject is set.
CREATE TABLE oauth_requests (
    id             TEXT    PRIMARY KEY,
    browser_hash   TEXT    NOT NULL,
    client_id      TEXT    NOT NULL,
    params         TEXT    NOT NULL,
    idp_state_hash TEXT    NOT NULL DEFAULT '',
    idp_secret     TEXT    NOT NULL DEFAULT '',
    subject        TEXT,
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL
);
CREATE INDEX oauth_requests_idp_state ON oauth_requests (idp_state_hash);

-- An authorization code, by hash. used_at marks its one exchange, grant_id
-- the grant it created: a second exchange revokes that grant.
CREATE TABLE oauth_codes (
    code_hash      TEXT    PRIMARY KEY,
    client_id      TEXT    NOT NULL,
    redirect_uri   TEXT    NOT NULL,
    code_challenge TEXT    NOT NULL,
    scope          TEXT    NOT NULL DEFAULT '',
    resource       TEXT    NOT NULL DEFAULT '',
    subject        TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    used_at        INTEGER,
    grant_id       TEXT    NOT NULL DEFAULT ''
);

-- A grant: what one consent gave one client for one user, and the family
-- of refresh tokens that carries it. Revoking it ends the family and every
-- access token that names it.
CREATE TABLE oauth_grants (
    id             TEXT    PRIMARY KEY,
    client_id      TEXT    NOT NULL,
    subject        TEXT    NOT NULL,
    identity       TEXT    NOT NULL,
    scope          TEXT    NOT NULL DEFAULT '',
    resource       TEXT    NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    refreshed_at   INTEGER,
    expires_at     INTEGER NOT NULL,
    revoked_at     INTEGER,
    revoked_reason TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX oauth_grants_client ON oauth_grants (client_id);

-- A refresh token, by hash. used_at marks its rotation: presenting it
-- again is a reuse, which revokes its grant.
CREATE TABLE oauth_refresh_tokens (
    token_hash TEXT    PRIMARY KEY,
    grant_id   TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens (grant_id);

-- Signing keys. generation orders them and is unique, so that two replicas
-- rotating at once create one successor, not two. A key is published from
-- created_at, signs from active_from until retire_at, and is published
-- until expires_at, after its last token has expired.
CREATE TABLE oauth_signing_keys (
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
