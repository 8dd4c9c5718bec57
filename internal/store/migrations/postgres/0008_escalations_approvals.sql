-- Escalations and human approvals (issue 16): the PostgreSQL twin of
-- migrations/sqlite/0008. An escalation is a call that failed after its
-- retries and fallbacks, or a high-risk call waiting for a human: it is
-- kept until an operator acknowledges it, and delivered_at stays NULL until
-- the webhook took it, so a webhook that is down loses nothing.

CREATE TABLE escalations (
    id                TEXT COLLATE "C" PRIMARY KEY,
    event             TEXT COLLATE "C" NOT NULL,
    correlation_id    TEXT COLLATE "C" NOT NULL DEFAULT '',
    agent_id          TEXT COLLATE "C" NOT NULL DEFAULT '',
    server            TEXT COLLATE "C" NOT NULL DEFAULT '',
    tool              TEXT COLLATE "C" NOT NULL DEFAULT '',
    error_code        TEXT COLLATE "C" NOT NULL DEFAULT '',
    error             TEXT NOT NULL DEFAULT '',
    attempts          BIGINT NOT NULL DEFAULT 0,
    approval_id       TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at        BIGINT NOT NULL,
    delivered_at      BIGINT,
    delivery_attempts BIGINT NOT NULL DEFAULT 0,
    delivery_error    TEXT NOT NULL DEFAULT '',
    acked_at          BIGINT,
    acked_by          TEXT COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX escalations_undelivered ON escalations (created_at) WHERE delivered_at IS NULL;

-- An approval request: a high-risk call an admin approves or denies; see
-- the SQLite twin for why token_secret may be kept until the retry.
CREATE TABLE approvals (
    id             TEXT COLLATE "C" PRIMARY KEY,
    agent_id       TEXT COLLATE "C" NOT NULL,
    server         TEXT COLLATE "C" NOT NULL,
    tool           TEXT COLLATE "C" NOT NULL,
    name           TEXT COLLATE "C" NOT NULL DEFAULT '',
    args_digest    TEXT COLLATE "C" NOT NULL,
    correlation_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    status         TEXT COLLATE "C" NOT NULL,
    requested_at   BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL,
    decided_at     BIGINT,
    decided_by     TEXT COLLATE "C" NOT NULL DEFAULT '',
    reason         TEXT NOT NULL DEFAULT '',
    token_secret   TEXT COLLATE "C" NOT NULL DEFAULT '',
    used_at        BIGINT
);
CREATE INDEX approvals_call ON approvals (agent_id, server, tool, args_digest, requested_at);
