-- Tool-definition pins (the "rug pull" defence): per tool of a server, the
-- definition the gateway saw first, or the one an admin approved last
-- (hash and canonical JSON), and the other definition the upstream has
-- presented since, if any, which holds the tool back until it is approved.
-- approved_by is empty for a pin taken on first sight; changed_hash is
-- empty while the upstream presents the pinned definition.

CREATE TABLE tool_pins (
    server_id          TEXT    NOT NULL REFERENCES mcp_servers(id) ON DELETE CASCADE,
    original_name      TEXT    NOT NULL,
    hash               TEXT    NOT NULL,
    definition         TEXT    NOT NULL,
    pinned_at          INTEGER NOT NULL,
    approved_by        TEXT    NOT NULL DEFAULT '',
    changed_hash       TEXT    NOT NULL DEFAULT '',
    changed_definition TEXT    NOT NULL DEFAULT '',
    changed_at         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (server_id, original_name)
);
