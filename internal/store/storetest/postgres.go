package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, for the admin connection
)

// RequirePostgresEnv names the environment variable that, set to "1", turns
// the skip of the PostgreSQL tests on a machine without PostgreSQL into a
// failure, so that CI cannot pass without running them.
const RequirePostgresEnv = "SWITCHBOARD_REQUIRE_POSTGRES"

// errNoPostgres reports that no PostgreSQL server binaries were found.
var errNoPostgres = errors.New("PostgreSQL is not installed (initdb and pg_ctl not found)")

// pg is the one throwaway server of the test binary.
var pg struct {
	mu      sync.Mutex
	inMain  bool // PostgresMain runs the tests, and will stop the server
	started bool // a start was attempted: srv and err hold its outcome
	stopped bool
	srv     *pgServer
	err     error

	databases atomic.Int64 // names t_1, t_2, ...
}

// PostgresMain runs the tests of m, then stops the server [StartPostgres]
// started, if any, and returns the exit code for os.Exit. A test binary that
// calls StartPostgres must use it as its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(storetest.PostgresMain(m)) }
//
// One server then serves every test, which saves an initdb (a second or so)
// per test. Should the binary die before PostgresMain returns (a panic, a
// -timeout), a watchdog process stops the server within a second or two.
func PostgresMain(m *testing.M) int {
	pg.mu.Lock()
	pg.inMain = true
	pg.mu.Unlock()
	code := m.Run()
	if err := stopPostgres(); err != nil {
		fmt.Fprintf(os.Stderr, "storetest: stopping PostgreSQL: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// StartPostgres returns the DSN of a new, empty database, on a throwaway
// PostgreSQL server that the first call starts (initdb into a temporary
// directory, pg_ctl start on a free port of 127.0.0.1, fsync off) and
// [PostgresMain] stops. Each call creates its own database, so tests that
// share the server share nothing else. The server's default collation is
// ICU "en-US" where available, as on many production servers, so that the
// store's byte-order sorting is tested rather than assumed.
//
// The binaries are looked for in $SWITCHBOARD_POSTGRES_BIN ([PostgresBinEnv])
// if set, else in /usr/lib/postgresql/15/bin, pg_config --bindir, PATH and
// /usr/lib/postgresql/*/bin. Without PostgreSQL the test is skipped, unless
// SWITCHBOARD_REQUIRE_POSTGRES=1 ([RequirePostgresEnv]) makes it fail.
func StartPostgres(t testing.TB) (dsn string) {
	t.Helper()
	srv, err := sharedPostgres()
	switch {
	case errors.Is(err, errNoPostgres):
		if os.Getenv(RequirePostgresEnv) == "1" {
			t.Fatalf("%v (%s=1 requires it)", err, RequirePostgresEnv)
		}
		t.Skip(err)
	case err != nil:
		t.Fatalf("starting PostgreSQL: %v", err)
	}
	name := "t_" + strconv.FormatInt(pg.databases.Add(1), 10)
	if _, err := srv.admin.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	return srv.dsn(name)
}

// sharedPostgres returns the server, starting it on the first call.
func sharedPostgres() (*pgServer, error) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	switch {
	case !pg.inMain:
		return nil, errors.New("StartPostgres needs TestMain to call storetest.PostgresMain, which stops the server")
	case pg.stopped:
		return nil, errors.New("the PostgreSQL server was already stopped")
	case !pg.started:
		pg.started = true
		pg.srv, pg.err = startPostgres()
	}
	return pg.srv, pg.err
}

func stopPostgres() error {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	pg.stopped = true
	if pg.srv == nil {
		return nil
	}
	return pg.srv.stop()
}

// pgServer is a running throwaway server.
type pgServer struct {
	bin      string // directory of initdb and pg_ctl
	dir      string // temporary directory: data/, the socket, logs
	data     string
	runAs    string // OS user to run the binaries as, "" for ourselves
	port     int
	watchdog *exec.Cmd
	admin    *sql.DB // on database "postgres", to create the others
}

func (s *pgServer) dsn(database string) string {
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(s.port) + "/" + database + "?sslmode=disable"
}

// startPostgres starts a server, or returns an error having removed all
// trace of the attempt.
func startPostgres() (_ *pgServer, err error) {
	bin, err := findPostgres()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "switchboard-pg-")
	if err != nil {
		return nil, err
	}
	s := &pgServer{bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.stop())
		}
	}()
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		if err := s.chownToPostgres(); err != nil {
			return nil, err
		}
		s.runAs = "postgres"
	}
	if err := s.startWatchdog(); err != nil {
		return nil, err
	}
	if err := s.initdb(); err != nil {
		return nil, err
	}
	if err := s.start(); err != nil {
		return nil, err
	}
	s.admin, err = sql.Open("pgx", s.dsn("postgres"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.admin.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("connecting to the new server: %w", err)
	}
	return s, nil
}

// PostgresBinEnv names the environment variable that, when set, is the only
// directory where [StartPostgres] looks for initdb and pg_ctl, for
// installations outside the usual places.
const PostgresBinEnv = "SWITCHBOARD_POSTGRES_BIN"

// findPostgres returns the directory of the server binaries, preferring
// PostgreSQL 15.
func findPostgres() (string, error) {
	if dir := os.Getenv(PostgresBinEnv); dir != "" {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "pg_ctl")) {
			return dir, nil
		}
		return "", fmt.Errorf("%w in %s=%s", errNoPostgres, PostgresBinEnv, dir)
	}
	candidates := []string{"/usr/lib/postgresql/15/bin"}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	if path, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(path))
	}
	// Other versions of Debian's layout, newest first.
	others, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(others, func(a, b string) int { return versionOf(b) - versionOf(a) })
	candidates = append(candidates, others...)
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "pg_ctl")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w in /usr/lib/postgresql/*/bin, pg_config --bindir or PATH", errNoPostgres)
}

// versionOf returns the major version in /usr/lib/postgresql/VERSION/bin.
func versionOf(bin string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// chownToPostgres hands the temporary directory to the postgres OS user.
func (s *pgServer) chownToPostgres() error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root, the server must run as the postgres OS user: %w", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return fmt.Errorf("uid of user postgres: %w", err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return fmt.Errorf("gid of user postgres: %w", err)
	}
	return os.Chown(s.dir, uid, gid)
}

// watchdogScript waits for the test binary ($1) to exit, then shuts the
// server down as pg_ctl -m immediate does (SIGQUIT to the postmaster, read
// from $2/postmaster.pid) and removes the temporary directory $3.
const watchdogScript = `
while kill -0 "$1" 2>/dev/null; do sleep 1; done
pid=$(head -n 1 "$2/postmaster.pid" 2>/dev/null)
if [ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null; then
	i=0
	while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
fi
rm -rf "$3"
`

// startWatchdog starts the process that stops the server if the test binary
// dies without calling stop, which kills the watchdog. It runs in a process
// group of its own, so that the ^C that kills the tests does not kill it.
func (s *pgServer) startWatchdog() error {
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "switchboard-pg-watchdog",
		strconv.Itoa(os.Getpid()), s.data, s.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the watchdog: %w", err)
	}
	s.watchdog = cmd
	return nil
}

// initdb creates the cluster, with an ICU default collation if this build
// of PostgreSQL has ICU.
func (s *pgServer) initdb() error {
	common := []string{"-D", s.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"}
	var errs []error
	for _, locale := range [][]string{
		{"--locale=C.UTF-8", "--locale-provider=icu", "--icu-locale=en-US"},
		{"--locale=C"},
	} {
		err := s.run("initdb", append(common, locale...)...)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if err := os.RemoveAll(s.data); err != nil {
			errs = append(errs, err)
			break
		}
	}
	return errors.Join(errs...)
}

// start starts the server on a free port, trying another port when one is
// taken between choosing it and the server binding it.
func (s *pgServer) start() error {
	logFile := filepath.Join(s.dir, "server.log")
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", port, s.dir)
		err = s.run("pg_ctl", "-D", s.data, "-l", logFile, "-o", opts, "-w", "-t", "60", "start")
		if err == nil {
			s.port = port
			return nil
		}
		serverLog, _ := os.ReadFile(logFile)
		if attempt < 3 && strings.Contains(string(serverLog), "could not bind") {
			continue
		}
		return fmt.Errorf("%w\nserver log:\n%s", err, tail(string(serverLog), 20))
	}
}

// stop stops the server and the watchdog and removes the temporary
// directory. It undoes a partial start too.
func (s *pgServer) stop() error {
	var errs []error
	if s.admin != nil {
		errs = append(errs, s.admin.Close())
	}
	pidFile := filepath.Join(s.data, "postmaster.pid")
	if _, err := os.Stat(pidFile); err == nil {
		if err := s.run("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop"); err != nil {
			errs = append(errs, err)
			// Last resort: the backends exit when they see their postmaster die.
			if raw, err := os.ReadFile(pidFile); err == nil {
				first, _, _ := strings.Cut(string(raw), "\n")
				if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	if s.watchdog != nil {
		// The negative pid kills the group: the shell and its sleep.
		_ = syscall.Kill(-s.watchdog.Process.Pid, syscall.SIGKILL)
		_ = s.watchdog.Wait() // reports the kill
	}
	errs = append(errs, os.RemoveAll(s.dir))
	return errors.Join(errs...)
}

// run runs one of the server binaries, as the server's OS user.
func (s *pgServer) run(name string, args ...string) error {
	path := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if s.runAs != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.dir // the postgres user may not be able to enter ours
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	// The server pg_ctl starts writes to its log file, but should it keep
	// the output pipe open, do not wait for it forever.
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(string(out), 20))
	}
	return nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
