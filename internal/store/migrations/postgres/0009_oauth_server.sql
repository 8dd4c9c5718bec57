-- The built-in OAuth 2.1 authorization server (issue 17): the PostgreSQL
-- twin of migrations/sqlite/0009. Every step of a flow is kept here, so
-- that any replica serves any step; secrets only as hashes or sealed.

-- A client: registered dynamically (RFC 7591), or known by its client ID
-- metadata document (client_id is the document's URL; the document is
-- cached until fresh_until).
CREATE TABLE oauth_clients (
    client_id     TEXT COLLATE "C" PRIMARY KEY,
    kind          TEXT COLLATE "C" NOT NULL,
    secret_hash   TEXT COLLATE "C" NOT NULL DEFAULT '',
    auth_method   TEXT COLLATE "C" NOT NULL,
    name          TEXT COLLATE "C" NOT NULL DEFAULT '',
    redirect_uris TEXT COLLATE "C" NOT NULL,
    grant_types   TEXT COLLATE "C" NOT NULL,
    scope         TEXT COLLATE "C" NOT NULL DEFAULT '',
    metadata      TEXT COLLATE "C" NOT NULL,
    created_at    BIGINT NOT NULL,
    fetched_at    BIGINT,
    fresh_until   BIGINT
);

-- An authorization request between /authorize and the consent: bound to
-- one browser by the hash of a cookie, signed in once subject is set.
CREATE TABLE oauth_requests (
    id             TEXT COLLATE "C" PRIMARY KEY,
    browser_hash   TEXT COLLATE "C" NOT NULL,
    client_id      TEXT COLLATE "C" NOT NULL,
    params         TEXT COLLATE "C" NOT NULL,
    idp_state_hash TEXT COLLATE "C" NOT NULL DEFAULT '',
    idp_secret     TEXT COLLATE "C" NOT NULL DEFAULT '',
    subject        TEXT COLLATE "C",
    created_at     BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL
);
CREATE INDEX oauth_requests_idp_state ON oauth_requests (idp_state_hash);

-- An authorization code, by hash. used_at marks its one exchange, grant_id
-- the grant it created: a second exchange revokes that grant.
CREATE TABLE oauth_codes (
    code_hash      TEXT COLLATE "C" PRIMARY KEY,
    client_id      TEXT COLLATE "C" NOT NULL,
    redirect_uri   TEXT COLLATE "C" NOT NULL,
    code_challenge TEXT COLLATE "C" NOT NULL,
    scope          TEXT COLLATE "C" NOT NULL DEFAULT '',
    resource       TEXT COLLATE "C" NOT NULL DEFAULT '',
    subject        TEXT COLLATE "C" NOT NULL,
    created_at     BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL,
    used_at        BIGINT,
    grant_id       TEXT COLLATE "C" NOT NULL DEFAULT ''
);

-- A grant: what one consent gave one client for one user, and the family
-- of refresh tokens that carries it. Revoking it ends the family and every
-- access token that names it.
CREATE TABLE oauth_grants (
    id             TEXT COLLATE "C" PRIMARY KEY,
    client_id      TEXT COLLATE "C" NOT NULL,
    subject        TEXT COLLATE "C" NOT NULL,
    identity       TEXT COLLATE "C" NOT NULL,
    scope          TEXT COLLATE "C" NOT NULL DEFAULT '',
    resource       TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at     BIGINT NOT NULL,
    refreshed_at   BIGINT,
    expires_at     BIGINT NOT NULL,
    revoked_at     BIGINT,
    revoked_reason TEXT COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX oauth_grants_client ON oauth_grants (client_id);

-- A refresh token, by hash. used_at marks its rotation: presenting it
-- again is a reuse, which revokes its grant.
CREATE TABLE oauth_refresh_tokens (
    token_hash TEXT COLLATE "C" PRIMARY KEY,
    grant_id   TEXT COLLATE "C" NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens (grant_id);

-- Signing keys. generation orders them and is unique, so that two replicas
-- rotating at once create one successor, not two. A key is published from
-- created_at, signs from active_from until retire_at, and is published
-- until expires_at, after its last token has expired.
CREATE TABLE oauth_signing_keys (
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
