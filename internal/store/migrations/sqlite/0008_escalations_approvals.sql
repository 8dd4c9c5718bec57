-- Escalations and human approvals (issue 16, seed 000's error strategy).
-- An escalation is a call that failed after its retries and fallbacks, or a
-- high-risk call waiting for a human: it is kept here until an operator
-- acknowledges it, and delivered_at stays NULL until the webhook took it, so
-- a webhook that is down loses nothing.

CREATE TABLE escalations (
    id                TEXT    PRIMARY KEY,
    event             TEXT    NOT NULL,
    correlation_id    TEXT    NOT NULL DEFAULT '',
    agent_id          TEXT    NOT NULL DEFAULT '',
    server            TEXT    NOT NULL DEFAULT '',
    tool              TEXT    NOT NULL DEFAULT '',
    error_code        TEXT    NOT NULL DEFAULT '',
    error             TEXT    NOT NULL DEFAULT '',
    attempts          INTEGER NOT NULL DEFAULT 0,
    approval_id       TEXT    NOT NULL DEFAULT '',
    created_at        INTEGER NOT NULL,
    delivered_at      INTEGER,
    delivery_attempts INTEGER NOT NULL DEFAULT 0,
    delivery_error    TEXT    NOT NULL DEFAULT '',
    acked_at          INTEGER,
    acked_by          TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX escalations_undelivered ON escalations (created_at) WHERE delivered_at IS NULL;

-- An approval request: a high-risk call (tool, digest of its arguments,
-- caller) an admin approves or denies. Approving issues a single-use token
-- bound to the agent, the tool and the arguments; token_secret holds it
-- until the caller's retry takes it (then it is cleared). It is no more
-- than the retry itself could obtain: it only works for that agent, tool
-- and argument object, once, before expires_at.
CREATE TABLE approvals (
    id             TEXT    PRIMARY KEY,
    agent_id       TEXT    NOT NULL,
    server         TEXT    NOT NULL,
    tool           TEXT    NOT NULL,
    name           TEXT    NOT NULL DEFAULT '',
    args_digest    TEXT    NOT NULL,
    correlation_id TEXT    NOT NULL DEFAULT '',
    status         TEXT    NOT NULL,
    requested_at   INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    decided_at     INTEGER,
    decided_by     TEXT    NOT NULL DEFAULT '',
    reason         TEXT    NOT NULL DEFAULT '',
    token_secret   TEXT    NOT NULL DEFAULT '',
    used_at        INTEGER
);
CREATE INDEX approvals_call ON approvals (agent_id, server, tool, args_digest, requested_at);
