-- The PostgreSQL twin of migrations/sqlite/0004: results of calls made with
-- an idempotency key, shared by the replicas.

CREATE TABLE idempotency_results (
    key         TEXT COLLATE "C" PRIMARY KEY,
    fingerprint TEXT COLLATE "C" NOT NULL,
    result      TEXT COLLATE "C" NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);

CREATE INDEX idx_idempotency_expires ON idempotency_results (expires_at);
