-- API keys, grants, approval tokens, circuit breaker state and the audit log.
--
-- The PostgreSQL twin of migrations/sqlite/0002, with the conventions of
-- 0001: TEXT COLLATE "C" ids, timestamps as BIGINT unix nanoseconds (UTC,
-- NULL when absent), JSON documents as TEXT, booleans as INTEGER 0/1, other
-- integers as BIGINT, floats as DOUBLE PRECISION. Grants, tokens and audit
-- rows name servers and tools by NAME, with no foreign key: grants may hold
-- glob patterns, and all of them outlive the servers they mention.

CREATE TABLE api_keys (
    id            TEXT COLLATE "C" PRIMARY KEY,
    hash          TEXT COLLATE "C" NOT NULL,
    prefix        TEXT COLLATE "C" NOT NULL DEFAULT '',
    agent_id      TEXT COLLATE "C" NOT NULL,
    roles         TEXT COLLATE "C" NOT NULL DEFAULT '[]',
    workspace     TEXT COLLATE "C" NOT NULL DEFAULT '',
    admin         INTEGER NOT NULL DEFAULT 0,
    allow_servers TEXT COLLATE "C" NOT NULL DEFAULT '[]',
    deny_servers  TEXT COLLATE "C" NOT NULL DEFAULT '[]',
    created_at    BIGINT NOT NULL,
    created_by    TEXT COLLATE "C" NOT NULL DEFAULT '',
    expires_at    BIGINT,
    revoked_at    BIGINT
);

CREATE UNIQUE INDEX idx_api_keys_hash ON api_keys (hash);

CREATE TABLE mcp_policies (
    id         TEXT COLLATE "C" PRIMARY KEY,
    agent_id   TEXT COLLATE "C" NOT NULL,
    server_id  TEXT COLLATE "C" NOT NULL,
    tool_name  TEXT COLLATE "C" NOT NULL,
    actions    TEXT COLLATE "C" NOT NULL DEFAULT '[]',
    granted_at BIGINT NOT NULL,
    granted_by TEXT COLLATE "C" NOT NULL DEFAULT '',
    expires_at BIGINT
);

CREATE UNIQUE INDEX idx_mcp_policies_agent_server_tool ON mcp_policies (agent_id, server_id, tool_name);
CREATE INDEX idx_mcp_policies_agent ON mcp_policies (agent_id);

CREATE TABLE mcp_tokens (
    token_id    TEXT COLLATE "C" PRIMARY KEY,
    agent_id    TEXT COLLATE "C" NOT NULL,
    server_id   TEXT COLLATE "C" NOT NULL,
    tool_name   TEXT COLLATE "C" NOT NULL,
    args_digest TEXT COLLATE "C" NOT NULL DEFAULT '',
    single_use  INTEGER NOT NULL DEFAULT 0,
    grant_id    TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT,
    revoked     INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX idx_mcp_tokens_agent ON mcp_tokens (agent_id);
CREATE INDEX idx_mcp_tokens_expires ON mcp_tokens (expires_at);
CREATE INDEX idx_mcp_tokens_grant ON mcp_tokens (grant_id);

CREATE TABLE circuit_breakers (
    circuit_key        TEXT COLLATE "C" PRIMARY KEY,
    state              TEXT COLLATE "C" NOT NULL,
    failure_count      BIGINT NOT NULL DEFAULT 0,
    success_count      BIGINT NOT NULL DEFAULT 0,
    half_open_requests BIGINT NOT NULL DEFAULT 0,
    last_failure_time  BIGINT,
    opened_at          BIGINT,
    generation         BIGINT NOT NULL DEFAULT 0,
    updated_at         BIGINT NOT NULL
);

CREATE TABLE mcp_invocations (
    id              TEXT COLLATE "C" PRIMARY KEY,
    kind            TEXT COLLATE "C" NOT NULL,
    correlation_id  TEXT COLLATE "C" NOT NULL DEFAULT '',
    agent_id        TEXT COLLATE "C" NOT NULL DEFAULT '',
    server_id       TEXT COLLATE "C" NOT NULL DEFAULT '',
    tool_name       TEXT COLLATE "C" NOT NULL DEFAULT '',
    params_hash     TEXT COLLATE "C" NOT NULL DEFAULT '',
    success         INTEGER NOT NULL DEFAULT 0,
    result_summary  TEXT COLLATE "C" NOT NULL DEFAULT '',
    error_message   TEXT COLLATE "C" NOT NULL DEFAULT '',
    error_code      TEXT COLLATE "C" NOT NULL DEFAULT '',
    attempts        BIGINT NOT NULL DEFAULT 0,
    latency_ms      DOUBLE PRECISION NOT NULL DEFAULT 0,
    policy_decision TEXT COLLATE "C" NOT NULL DEFAULT '',
    policy_rule     TEXT COLLATE "C" NOT NULL DEFAULT '',
    policy_revision BIGINT NOT NULL DEFAULT 0,
    cached_decision INTEGER NOT NULL DEFAULT 0,
    idempotency_key TEXT COLLATE "C" NOT NULL DEFAULT '',
    ticket_id       TEXT COLLATE "C" NOT NULL DEFAULT '',
    task_id         TEXT COLLATE "C" NOT NULL DEFAULT '',
    served_by       TEXT COLLATE "C" NOT NULL DEFAULT '',
    operation       TEXT COLLATE "C" NOT NULL DEFAULT '',
    replica         TEXT COLLATE "C" NOT NULL DEFAULT '',
    invoked_at      BIGINT NOT NULL
);

CREATE INDEX idx_mcp_invocations_time ON mcp_invocations (invoked_at, id);
CREATE INDEX idx_mcp_invocations_agent ON mcp_invocations (agent_id);
CREATE INDEX idx_mcp_invocations_tool ON mcp_invocations (server_id, tool_name);
CREATE INDEX idx_mcp_invocations_correlation ON mcp_invocations (correlation_id);
