-- Upstream servers, their discovered tools, and their connection history.
--
-- Conventions shared with the PostgreSQL dialect: TEXT ids, timestamps as
-- INTEGER unix nanoseconds (UTC), JSON documents as TEXT, booleans as 0/1.

CREATE TABLE mcp_servers (
    id          TEXT    PRIMARY KEY,
    name        TEXT    NOT NULL UNIQUE,
    source      TEXT    NOT NULL,
    transport   TEXT    NOT NULL,
    description TEXT    NOT NULL DEFAULT '',
    config      TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE mcp_tools (
    server_id     TEXT    NOT NULL REFERENCES mcp_servers(id) ON DELETE CASCADE,
    name          TEXT    NOT NULL,
    original_name TEXT    NOT NULL,
    description   TEXT    NOT NULL DEFAULT '',
    definition    TEXT,
    is_external   INTEGER NOT NULL DEFAULT 1,
    valid         INTEGER NOT NULL DEFAULT 1,
    reject_reason TEXT    NOT NULL DEFAULT '',
    discovered_at INTEGER NOT NULL,
    PRIMARY KEY (server_id, name)
);

CREATE TABLE server_connection_history (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    server_id   TEXT    NOT NULL REFERENCES mcp_servers(id) ON DELETE CASCADE,
    server_name TEXT    NOT NULL,
    from_status TEXT    NOT NULL,
    to_status   TEXT    NOT NULL,
    error       TEXT    NOT NULL DEFAULT '',
    at          INTEGER NOT NULL
);

CREATE INDEX idx_server_connection_history_server_at
    ON server_connection_history (server_id, at DESC, id DESC);

CREATE INDEX idx_server_connection_history_at
    ON server_connection_history (at DESC, id DESC);
