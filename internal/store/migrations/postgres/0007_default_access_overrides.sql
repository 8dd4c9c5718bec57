-- Runtime overrides of a server's default_access (issue 16): the PostgreSQL
-- twin of migrations/sqlite/0007. An operator may change default_access of a
-- server defined in the config file (the dashboard's toggle) without editing
-- the file. The override is kept here, shown as overriding the file, and
-- stays until it is reset explicitly; it goes with the server (removed from
-- the file, the row cascades away).

CREATE TABLE default_access_overrides (
    server_id      TEXT COLLATE "C" PRIMARY KEY REFERENCES mcp_servers(id) ON DELETE CASCADE,
    default_access TEXT COLLATE "C" NOT NULL,
    set_at         BIGINT NOT NULL,
    set_by         TEXT COLLATE "C" NOT NULL DEFAULT ''
);
