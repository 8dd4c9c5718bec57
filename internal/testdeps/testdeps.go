// Package testdeps finds what the tests need from outside Go: the module's
// root (for testdata/ and scripts) and the pinned npm packages of
// testdata/npm (upstream MCP servers, the conformance suites, an OpenID
// provider, Node.js itself), which `make npm` installs.
//
// A test that needs a package that is not installed skips, so that `go
// test` works on a machine without them; CI sets SWITCHBOARD_REQUIRE_NPM=1,
// which turns the skip into a failure.
//
// It is test support: only _test.go files import it, never the gateway.
package testdeps

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// RequireNPMEnv, set to 1, makes a missing npm package fail the test
// instead of skipping it.
const RequireNPMEnv = "SWITCHBOARD_REQUIRE_NPM"

// RepoRoot is the module root: tests run in their package's directory,
// which is at a different depth for each package.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// NPMModule returns the path of rel (a file or directory under
// testdata/npm/node_modules), or skips the test when it is not installed
// (fails it with SWITCHBOARD_REQUIRE_NPM=1).
func NPMModule(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(RepoRoot(), "testdata", "npm", "node_modules", rel)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv(RequireNPMEnv) == "1" {
			t.Fatalf("%s is not installed (run `make npm`)", rel)
		}
		t.Skipf("%s not installed; run `make npm`", rel)
	}
	return p
}

// Node returns the pinned Node.js binary (the npm package "node"), or skips
// as [NPMModule] does when it is not installed, and skips when it cannot
// run here.
func Node(t testing.TB) string {
	t.Helper()
	p := filepath.Join(NPMModule(t, "node"), "bin", "node")
	if _, err := exec.LookPath(p); err != nil {
		t.Skipf("node: %v", err)
	}
	return p
}
