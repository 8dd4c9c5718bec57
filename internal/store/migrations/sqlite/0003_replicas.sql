-- Gateway replicas sharing one database, each upserting its own row as a
-- heartbeat so the others (and GET /api/v1/cluster) can tell which are alive.
-- Same conventions as 0001: TEXT ids, timestamps as INTEGER unix nanoseconds.

CREATE TABLE replicas (
    id           TEXT    PRIMARY KEY,
    host         TEXT    NOT NULL DEFAULT '',
    pid          INTEGER NOT NULL DEFAULT 0,
    version      TEXT    NOT NULL DEFAULT '',
    address      TEXT    NOT NULL DEFAULT '',
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);

CREATE INDEX idx_replicas_heartbeat ON replicas (heartbeat_at);
