package store

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Pool limits of a PostgreSQL store, explained on [Open].
const (
	pgMaxOpenConns = 20
	pgMaxIdleConns = 5
)

// isPostgresDSN reports whether dsn names a PostgreSQL database.
func isPostgresDSN(dsn string) bool {
	lower := strings.ToLower(dsn)
	return strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://")
}

// openPostgres connects to the database dsn names, migrates it and returns a
// store whose reads and writes share one pool: unlike SQLite, PostgreSQL
// runs concurrent writers itself, row by row, so the store does not
// serialize them. Every error it returns has the password scrubbed.
func openPostgres(ctx context.Context, dsn string, logger *slog.Logger) (_ *DB, err error) {
	// pgx tells a URI from "key=value" pairs by a lower-case scheme.
	scheme, rest, _ := strings.Cut(dsn, "://")
	dsn = strings.ToLower(scheme) + "://" + rest
	secrets := dsnSecrets(dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, redact(fmt.Errorf("opening store: parsing PostgreSQL DSN: %w", err), secrets)
	}
	// The password may also come from PGPASSWORD or a passfile.
	secrets = append(secrets, cfg.Password)
	where := pgLabel(cfg)
	fail := func(err error) error {
		return redact(fmt.Errorf("opening store %s: %w", where, err), secrets)
	}
	listenCfg := cfg.Copy()
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		// Lets operators tell the gateway's sessions apart in pg_stat_activity.
		cfg.RuntimeParams["application_name"] = "switchboard"
		listenCfg.RuntimeParams["application_name"] = "switchboard-listen"
	}

	pool := stdlib.OpenDB(*cfg)
	pool.SetMaxOpenConns(pgMaxOpenConns)
	pool.SetMaxIdleConns(pgMaxIdleConns)
	defer func() {
		if err != nil {
			// The open error is the one to report.
			_ = pool.Close()
		}
	}()
	if err := pool.PingContext(ctx); err != nil {
		return nil, fail(fmt.Errorf("connecting: %w", err))
	}
	d := postgresDialect()
	if err := migrate(ctx, pool, d, logger); err != nil {
		return nil, fail(err)
	}
	logger.Debug("store opened", "dialect", d.name, "database", where)
	return &DB{dialect: d, logger: logger, write: pool, read: pool,
		note: newPostgresNotifier(logger, pool, listenCfg, secrets)}, nil
}

// pgLabel names the database cfg points at for messages, without the
// password or any parameter.
func pgLabel(cfg *pgx.ConnConfig) string {
	return "postgres://" + cfg.User + "@" + net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))) + "/" + cfg.Database
}

var (
	userinfoPassword = regexp.MustCompile(`^[^:/?#]*://[^:@/?#]*:([^@/?#]*)@`)
	paramPassword    = regexp.MustCompile(`[?&]password=([^&#]*)`)
)

// dsnSecrets returns the passwords written in dsn, as written and decoded.
// They are found with patterns rather than url.Parse so that a DSN too
// malformed to parse still has its password scrubbed.
func dsnSecrets(dsn string) []string {
	var raw []string
	if m := userinfoPassword.FindStringSubmatch(dsn); m != nil {
		raw = append(raw, m[1])
	}
	for _, m := range paramPassword.FindAllStringSubmatch(dsn, -1) {
		raw = append(raw, m[1])
	}
	out := slices.Clone(raw)
	for _, s := range raw {
		if dec, err := url.PathUnescape(s); err == nil && dec != s {
			out = append(out, dec)
		}
		if dec, err := url.QueryUnescape(s); err == nil && dec != s {
			out = append(out, dec)
		}
	}
	return out
}

// minSecretLen is the length below which a password is not scrubbed:
// replacing every "a" in a message would hide more than the password, and
// pgx's own messages never contain it.
const minSecretLen = 3

// redactedError hides secrets in the message of err, which stays visible to
// [errors.Is] and [errors.As].
type redactedError struct {
	err     error
	secrets []string
}

func redact(err error, secrets []string) error {
	return &redactedError{err: err, secrets: secrets}
}

func (e *redactedError) Error() string {
	msg := e.err.Error()
	for _, s := range e.secrets {
		if len(s) >= minSecretLen {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return msg
}

func (e *redactedError) Unwrap() error { return e.err }

// RedactDSN returns dsn with any password in it replaced by "***", for
// logs and messages. A SQLite path is returned as is.
func RedactDSN(dsn string) string {
	out := dsn
	for _, s := range dsnSecrets(dsn) {
		if len(s) >= minSecretLen {
			out = strings.ReplaceAll(out, s, "***")
		}
	}
	return out
}
