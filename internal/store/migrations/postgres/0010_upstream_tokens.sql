-- The PostgreSQL twin of migrations/sqlite/0010: OAuth grants for upstream
-- servers, shared by the replicas, which take turns refreshing them.

CREATE TABLE upstream_tokens (
    server      TEXT COLLATE "C" NOT NULL,
    subject     TEXT COLLATE "C" NOT NULL DEFAULT '',
    sealed      TEXT COLLATE "C" NOT NULL,
    expires_at  BIGINT NOT NULL DEFAULT 0,
    problem     TEXT COLLATE "C" NOT NULL DEFAULT '',
    version     BIGINT NOT NULL,
    lease_owner TEXT COLLATE "C" NOT NULL DEFAULT '',
    lease_until BIGINT NOT NULL DEFAULT 0,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (server, subject)
);
