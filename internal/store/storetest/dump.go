package storetest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Dump returns the database of dsn as plain SQL, from the pg_dump of the
// binaries [StartPostgres] runs the server with ($SWITCHBOARD_POSTGRES_BIN,
// else PostgreSQL 15's, else the one on PATH), or fails the test. The
// no-secrets checks search it: a secret in clear in any table shows there.
func Dump(t testing.TB, dsn string) string {
	t.Helper()
	var candidates []string
	if dir := os.Getenv(PostgresBinEnv); dir != "" {
		candidates = append(candidates, filepath.Join(dir, "pg_dump"))
	}
	candidates = append(candidates, "/usr/lib/postgresql/15/bin/pg_dump")
	if p, err := exec.LookPath("pg_dump"); err == nil {
		candidates = append(candidates, p)
	}
	for _, bin := range candidates {
		if _, err := os.Stat(bin); err != nil {
			continue
		}
		out, err := exec.CommandContext(t.Context(), bin, "--dbname="+dsn, "--no-owner").Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("%s: %v\n%s", bin, err, ee.Stderr)
			}
			t.Fatalf("%s: %v", bin, err)
		}
		return string(out)
	}
	t.Fatalf("pg_dump not found (looked in %v)", candidates)
	return ""
}
