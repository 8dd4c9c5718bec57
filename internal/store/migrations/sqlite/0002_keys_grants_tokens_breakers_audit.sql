-- API keys, grants, approval tokens, circuit breaker state and the audit log.
--
-- Same conventions as 0001: TEXT ids, timestamps as INTEGER unix nanoseconds
-- (UTC, NULL when absent), JSON documents as TEXT, booleans as 0/1.
-- Grants, tokens and audit rows name servers and tools by NAME, with no
-- foreign key: grants may hold glob patterns, and all of them outlive the
-- servers they mention.

CREATE TABLE api_keys (
    id            TEXT    PRIMARY KEY,
    hash          TEXT    NOT NULL,
    prefix        TEXT    NOT NULL DEFAULT '',
    agent_id      TEXT    NOT NULL,
    roles         TEXT    NOT NULL DEFAULT '[]',
    workspace     TEXT    NOT NULL DEFAULT '',
    admin         INTEGER NOT NULL DEFAULT 0,
    allow_servers TEXT    NOT NULL DEFAULT '[]',
    deny_servers  TEXT    NOT NULL DEFAULT '[]',
    created_at    INTEGER NOT NULL,
    created_by    TEXT    NOT NULL DEFAULT '',
    expires_at    INTEGER,
    revoked_at    INTEGER
);

CREATE UNIQUE INDEX idx_api_keys_hash ON api_keys (hash);

CREATE TABLE mcp_policies (
    id         TEXT    PRIMARY KEY,
    agent_id   TEXT    NOT NULL,
    server_id  TEXT    NOT NULL,
    tool_name  TEXT    NOT NULL,
    actions    TEXT    NOT NULL DEFAULT '[]',
    granted_at INTEGER NOT NULL,
    granted_by TEXT    NOT NULL DEFAULT '',
    expires_at INTEGER
);

CREATE UNIQUE INDEX idx_mcp_policies_agent_server_tool ON mcp_policies (agent_id, server_id, tool_name);
CREATE INDEX idx_mcp_policies_agent ON mcp_policies (agent_id);

CREATE TABLE mcp_tokens (
    token_id    TEXT    PRIMARY KEY,
    agent_id    TEXT    NOT NULL,
    server_id   TEXT    NOT NULL,
    tool_name   TEXT    NOT NULL,
    args_digest TEXT    NOT NULL DEFAULT '',
    single_use  INTEGER NOT NULL DEFAULT 0,
    grant_id    TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER,
    revoked     INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX idx_mcp_tokens_agent ON mcp_tokens (agent_id);
CREATE INDEX idx_mcp_tokens_expires ON mcp_tokens (expires_at);
CREATE INDEX idx_mcp_tokens_grant ON mcp_tokens (grant_id);

CREATE TABLE circuit_breakers (
    circuit_key        TEXT    PRIMARY KEY,
    state              TEXT    NOT NULL,
    failure_count      INTEGER NOT NULL DEFAULT 0,
    success_count      INTEGER NOT NULL DEFAULT 0,
    half_open_requests INTEGER NOT NULL DEFAULT 0,
    last_failure_time  INTEGER,
    opened_at          INTEGER,
    generation         INTEGER NOT NULL DEFAULT 0,
    updated_at         INTEGER NOT NULL
);

CREATE TABLE mcp_invocations (
    id              TEXT    PRIMARY KEY,
    kind            TEXT    NOT NULL,
    correlation_id  TEXT    NOT NULL DEFAULT '',
    agent_id        TEXT    NOT NULL DEFAULT '',
    server_id       TEXT    NOT NULL DEFAULT '',
    tool_name       TEXT    NOT NULL DEFAULT '',
    params_hash     TEXT    NOT NULL DEFAULT '',
    success         INTEGER NOT NULL DEFAULT 0,
    result_summary  TEXT    NOT NULL DEFAULT '',
    error_message   TEXT    NOT NULL DEFAULT '',
    error_code      TEXT    NOT NULL DEFAULT '',
    attempts        INTEGER NOT NULL DEFAULT 0,
    latency_ms      REAL    NOT NULL DEFAULT 0,
    policy_decision TEXT    NOT NULL DEFAULT '',
    policy_rule     TEXT    NOT NULL DEFAULT '',
    policy_revision INTEGER NOT NULL DEFAULT 0,
    cached_decision INTEGER NOT NULL DEFAULT 0,
    idempotency_key TEXT    NOT NULL DEFAULT '',
    ticket_id       TEXT    NOT NULL DEFAULT '',
    task_id         TEXT    NOT NULL DEFAULT '',
    served_by       TEXT    NOT NULL DEFAULT '',
    operation       TEXT    NOT NULL DEFAULT '',
    replica         TEXT    NOT NULL DEFAULT '',
    invoked_at      INTEGER NOT NULL
);

CREATE INDEX idx_mcp_invocations_time ON mcp_invocations (invoked_at, id);
CREATE INDEX idx_mcp_invocations_agent ON mcp_invocations (agent_id);
CREATE INDEX idx_mcp_invocations_tool ON mcp_invocations (server_id, tool_name);
CREATE INDEX idx_mcp_invocations_correlation ON mcp_invocations (correlation_id);
