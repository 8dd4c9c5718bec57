-- Gateway replicas sharing one database, each upserting its own row as a
-- heartbeat so the others (and GET /api/v1/cluster) can tell which are alive.
--
-- The PostgreSQL twin of migrations/sqlite/0003, with the conventions of
-- 0001: TEXT COLLATE "C" ids, timestamps and other integers as BIGINT.

CREATE TABLE replicas (
    id           TEXT COLLATE "C" PRIMARY KEY,
    host         TEXT COLLATE "C" NOT NULL DEFAULT '',
    pid          BIGINT NOT NULL DEFAULT 0,
    version      TEXT COLLATE "C" NOT NULL DEFAULT '',
    address      TEXT COLLATE "C" NOT NULL DEFAULT '',
    started_at   BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL
);

CREATE INDEX idx_replicas_heartbeat ON replicas (heartbeat_at);
