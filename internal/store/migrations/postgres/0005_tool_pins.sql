-- The PostgreSQL twin of migrations/sqlite/0005: tool-definition pins,
-- shared by the replicas so that a tool pinned by one is pinned for all.

CREATE TABLE tool_pins (
    server_id          TEXT COLLATE "C" NOT NULL REFERENCES mcp_servers(id) ON DELETE CASCADE,
    original_name      TEXT COLLATE "C" NOT NULL,
    hash               TEXT COLLATE "C" NOT NULL,
    definition         TEXT COLLATE "C" NOT NULL,
    pinned_at          BIGINT NOT NULL,
    approved_by        TEXT COLLATE "C" NOT NULL DEFAULT '',
    changed_hash       TEXT COLLATE "C" NOT NULL DEFAULT '',
    changed_definition TEXT COLLATE "C" NOT NULL DEFAULT '',
    changed_at         BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (server_id, original_name)
);
