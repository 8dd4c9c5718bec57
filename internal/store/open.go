package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Open opens the store named by dsn: a file path ("./switchboard.db"), "sqlite:PATH" or
// "file:PATH?..." → SQLite; "postgres://USER:PASSWORD@HOST:PORT/DB?PARAMS" or "postgresql://..." →
// PostgreSQL. Migrations run before Open returns. Parent dir must exist (error names it otherwise).
//
// A plain path or "sqlite:PATH" may carry driver parameters after a '?', as
// with modernc.org/sqlite ("./x.db?_pragma=cache_size(-20000)"); a "file:" DSN
// is an SQLite URI and keeps its own parameters (mode, cache, vfs, ...).
// ":memory:" opens a private in-memory database, mostly useful in tests.
//
// On SQLite the store always sets journal_mode=WAL, busy_timeout=5000, foreign_keys=ON
// and synchronous=NORMAL (FULL with [Options.Durable]), writes through a single connection (BEGIN IMMEDIATE,
// so writers in other processes queue on the busy timeout instead of failing
// mid-transaction) and reads through a separate read-only pool that WAL lets
// run alongside the writer.
//
// A PostgreSQL DSN is a libpq connection URI, read by pgx: its parameters
// (sslmode, connect_timeout, application_name, ...) and the PG* environment
// variables apply as they would to psql. The database must exist; Open
// creates the tables. Reads and writes share one pool of at most 20
// connections, 5 of them kept idle: enough for a gateway's concurrent calls
// without exhausting the server's max_connections (100 by default) when a
// few replicas share it. Several gateways may open one database at once:
// migrations run under an advisory lock. Error messages never repeat the
// password.
func Open(ctx context.Context, dsn string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if isPostgresDSN(dsn) {
		return openPostgres(ctx, dsn, o.Logger)
	}
	t, err := parseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	return openSQLite(ctx, t, o.Logger, o.Durable)
}

// sqliteTarget is a parsed SQLite DSN.
type sqliteTarget struct {
	path   string     // filesystem path, for messages and the directory check; ":memory:" when memory
	base   string     // "file:" URI without its query, as handed to the driver
	query  url.Values // parameters given by the user
	memory bool       // an in-memory database: one connection, nothing on disk
}

// dsn is the driver DSN for t with extra parameters added to the user's.
func (t sqliteTarget) dsn(extra url.Values) string {
	q := url.Values{}
	for k, vs := range t.query {
		q[k] = append([]string(nil), vs...)
	}
	for k, vs := range extra {
		q[k] = append(q[k], vs...)
	}
	return t.base + "?" + q.Encode()
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// parseDSN recognizes the SQLite DSN forms documented on [Open]. Its errors never
// repeat a DSN that has a scheme, since those may embed credentials.
func parseDSN(dsn string) (sqliteTarget, error) {
	lower := strings.ToLower(dsn)
	switch {
	case dsn == "":
		return sqliteTarget{}, errors.New("empty store DSN")
	case isPostgresDSN(dsn):
		return sqliteTarget{}, errors.New("store DSN is a PostgreSQL one, not SQLite")
	case strings.HasPrefix(lower, "sqlite:"):
		rest := dsn[len("sqlite:"):]
		// "sqlite:///abs/path" and "sqlite://rel/path" are common spellings.
		rest = strings.TrimPrefix(rest, "//")
		if rest == "" {
			return sqliteTarget{}, errors.New(`store DSN "sqlite:" names no file`)
		}
		if strings.HasPrefix(strings.ToLower(rest), "file:") {
			return parseFileURI(rest)
		}
		return parsePath(rest)
	case strings.HasPrefix(lower, "file:"):
		return parseFileURI(dsn)
	case schemeRE.MatchString(dsn):
		scheme, _, _ := strings.Cut(dsn, ":")
		return sqliteTarget{}, fmt.Errorf("store DSN scheme %q is not supported (want a file path, sqlite:, file: or postgres://)", scheme)
	}
	return parsePath(dsn)
}

// parsePath parses "PATH" or "PATH?params".
func parsePath(s string) (sqliteTarget, error) {
	path, rawQuery, _ := strings.Cut(s, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return sqliteTarget{}, fmt.Errorf("parsing parameters of store DSN %q: %w", path, err)
	}
	if path == "" {
		return sqliteTarget{}, errors.New("store DSN names no file")
	}
	if path == ":memory:" {
		return sqliteTarget{path: path, base: "file::memory:", query: q, memory: true}, nil
	}
	path = filepath.Clean(path)
	u := url.URL{Path: path}
	return sqliteTarget{path: path, base: "file:" + u.EscapedPath(), query: q}, nil
}

// parseFileURI parses an SQLite URI ("file:PATH?params",
// "file:///abs/path", "file://localhost/abs/path").
func parseFileURI(s string) (sqliteTarget, error) {
	base, rawQuery, _ := strings.Cut(s, "?")
	rawQuery, _, _ = strings.Cut(rawQuery, "#")
	base, _, _ = strings.Cut(base, "#")
	rawPath := base[len("file:"):]
	if rest, ok := strings.CutPrefix(rawPath, "//"); ok {
		authority, p, _ := strings.Cut(rest, "/")
		if authority != "" && authority != "localhost" {
			return sqliteTarget{}, fmt.Errorf("store DSN %q: SQLite URIs cannot name host %q", s, authority)
		}
		rawPath = "/" + p
	}
	path, err := url.PathUnescape(rawPath)
	if err != nil {
		return sqliteTarget{}, fmt.Errorf("store DSN %q: %w", s, err)
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return sqliteTarget{}, fmt.Errorf("parsing parameters of store DSN %q: %w", s, err)
	}
	t := sqliteTarget{path: path, base: base, query: q}
	if path == "" || path == ":memory:" || q.Get("mode") == "memory" {
		t.path, t.memory = ":memory:", true
	}
	return t, nil
}

// busyTimeout is how long a connection waits for another's lock before
// reporting "database is locked".
const busyTimeout = 5 * time.Second

var busyPragma = "busy_timeout(" + strconv.FormatInt(busyTimeout.Milliseconds(), 10) + ")"

// Pragmas applied by the driver to every new connection. busy_timeout comes
// first (the driver orders it so) because the others may need a lock.
var (
	writeParams = url.Values{
		// journal_mode is set by setWAL, which can retry.
		"_pragma": {busyPragma, "foreign_keys(1)", "synchronous(NORMAL)"},
		"_txlock": {"immediate"},
	}
	readParams = url.Values{
		// journal_mode is a property of the file, set by the write pool.
		"_pragma": {busyPragma, "foreign_keys(1)", "synchronous(NORMAL)", "query_only(1)"},
	}
)

// openSQLite opens the write pool, migrates, then opens the read pool.
func openSQLite(ctx context.Context, t sqliteTarget, logger *slog.Logger, durable bool) (_ *DB, err error) {
	if !t.memory {
		dir := filepath.Dir(t.path)
		fi, statErr := os.Stat(dir)
		switch {
		case errors.Is(statErr, fs.ErrNotExist):
			return nil, fmt.Errorf("opening store %q: directory %q does not exist", t.path, dir)
		case statErr != nil:
			return nil, fmt.Errorf("opening store %q: %w", t.path, statErr)
		case !fi.IsDir():
			return nil, fmt.Errorf("opening store %q: %q is not a directory", t.path, dir)
		}
	}

	d := sqliteDialect()
	db := &DB{dialect: d, logger: logger}
	defer func() {
		if err != nil {
			// The open error is the one to report; closing a half-opened
			// pool has nothing to flush.
			if db.read != nil && db.read != db.write {
				_ = db.read.Close()
			}
			if db.write != nil {
				_ = db.write.Close()
			}
		}
	}()

	wp := writeParams
	if durable {
		wp = url.Values{"_pragma": {busyPragma, "foreign_keys(1)", "synchronous(FULL)"}, "_txlock": wp["_txlock"]}
	}
	if db.write, err = sql.Open(d.driver, t.dsn(wp)); err != nil {
		return nil, fmt.Errorf("opening store %q: %w", t.path, err)
	}
	// One connection: the writer lock is taken in the pool queue, which
	// honours ctx, rather than in SQLite, which would report "database is
	// locked" after busy_timeout. It never expires, so an in-memory database
	// lives as long as the DB.
	db.write.SetMaxOpenConns(1)
	db.write.SetMaxIdleConns(1)
	db.write.SetConnMaxLifetime(0)
	db.write.SetConnMaxIdleTime(0)

	if !t.memory {
		mode, err := setWAL(ctx, db.write)
		if err != nil {
			return nil, fmt.Errorf("opening store %q: setting WAL mode: %w", t.path, err)
		}
		if !strings.EqualFold(mode, "wal") {
			logger.Warn("store is not in WAL mode; readers will block the writer", "path", t.path, "journal_mode", mode)
		}
	}

	if err := migrate(ctx, db.write, d, logger); err != nil {
		return nil, fmt.Errorf("opening store %q: %w", t.path, err)
	}

	if t.memory {
		// Every connection to ":memory:" is a different database.
		db.read = db.write
	} else {
		if db.read, err = sql.Open(d.driver, t.dsn(readParams)); err != nil {
			return nil, fmt.Errorf("opening store %q: %w", t.path, err)
		}
		n := max(4, runtime.GOMAXPROCS(0))
		db.read.SetMaxOpenConns(n)
		db.read.SetMaxIdleConns(n)
		if err := db.read.PingContext(ctx); err != nil {
			return nil, fmt.Errorf("opening store %q: %w", t.path, err)
		}
	}
	db.note = newSQLiteNotifier(logger, t)
	logger.Debug("store opened", "dialect", d.name, "path", t.path)
	return db, nil
}

// setWAL switches the database file to WAL mode and returns the mode SQLite
// reports. Converting a new file needs an exclusive lock that SQLite does not
// wait for (busy_timeout does not apply), so when several processes open a
// new file at once all but one get SQLITE_BUSY: retry those for as long as
// busy_timeout would have waited, or until ctx ends. Once the file is in WAL
// mode (it stays so), the statement takes no lock.
func setWAL(ctx context.Context, w *sql.DB) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, busyTimeout)
	defer cancel()
	delay := 5 * time.Millisecond
	for {
		var mode string
		err := w.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		if err == nil || !isBusy(err) {
			return mode, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", err
		case <-t.C:
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}
