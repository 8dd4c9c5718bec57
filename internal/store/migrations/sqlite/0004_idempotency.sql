-- Results of calls made with an idempotency key, shared by the replicas of
-- a gateway so that a client retrying on another replica gets the first
-- result instead of a second execution. key is the agent and the client's
-- key (hashed by the caller); fingerprint identifies the call (tool and
-- arguments); result is the gateway's JSON of it.

CREATE TABLE idempotency_results (
    key         TEXT    PRIMARY KEY,
    fingerprint TEXT    NOT NULL,
    result      TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);

CREATE INDEX idx_idempotency_expires ON idempotency_results (expires_at);
