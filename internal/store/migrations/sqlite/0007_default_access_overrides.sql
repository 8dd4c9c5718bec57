-- Runtime overrides of a server's default_access (issue 16): an operator may
-- change default_access of a server defined in the config file (the
-- dashboard's toggle) without editing the file. The override is kept here,
-- shown as overriding the file, and stays until it is reset explicitly; it
-- goes with the server (removed from the file, the row cascades away).

CREATE TABLE default_access_overrides (
    server_id      TEXT    PRIMARY KEY REFERENCES mcp_servers(id) ON DELETE CASCADE,
    default_access TEXT    NOT NULL,
    set_at         INTEGER NOT NULL,
    set_by         TEXT    NOT NULL DEFAULT ''
);
