-- OAuth grants the gateway holds for upstream servers (package
-- upstreamauth). sealed is the grant (access and refresh tokens, and the
-- client registration needed to refresh them) sealed with the secret
-- keyring: the store never sees it in clear. subject is '' for the
-- server's own credential. version grows with every write of the grant,
-- so a replica that refreshed can compare-and-swap; lease_owner and
-- lease_until let one replica at a time refresh a grant near its expiry.
-- problem says why the grant cannot be used any more (a refused refresh).

CREATE TABLE upstream_tokens (
    server      TEXT    NOT NULL,
    subject     TEXT    NOT NULL DEFAULT '',
    sealed      TEXT    NOT NULL,
    expires_at  INTEGER NOT NULL DEFAULT 0,
    problem     TEXT    NOT NULL DEFAULT '',
    version     INTEGER NOT NULL,
    lease_owner TEXT    NOT NULL DEFAULT '',
    lease_until INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (server, subject)
);
