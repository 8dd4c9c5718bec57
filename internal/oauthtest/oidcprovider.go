package oauthtest

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/testdeps"
)

// StartOIDCProvider runs script, one of the oidc-provider fixtures in
// testdata/npm (oidc-provider-fixture.mjs, oidc-upstream-fixture.mjs, …),
// with the pinned Node.js and the test's environment plus env ("NAME=value"
// each: the script's settings), for the test's lifetime, and returns the
// issuer it prints on stdout ({"issuer": …}) once it listens. Its stderr
// is logged when the test fails. It skips as [testdeps.NPMModule] does
// without oidc-provider or Node.js, and fails if the provider has not
// started within 90 seconds (the first start compiles its modules).
func StartOIDCProvider(t testing.TB, script string, env ...string) (issuer string) {
	t.Helper()
	testdeps.NPMModule(t, "oidc-provider/package.json")
	cmd := exec.Command(testdeps.Node(t), filepath.Join(testdeps.RepoRoot(), "testdata", "npm", script))
	cmd.Env = append(os.Environ(), env...)
	stderr := &logtest.Buffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("oidc-provider stderr:\n%s", stderr.String())
		}
	})
	ready := make(chan string, 1)
	go func() { // drains stdout until the process ends (Cleanup kills it)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var line struct {
				Issuer string `json:"issuer"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Issuer != "" {
				ready <- line.Issuer
			}
		}
	}()
	select {
	case issuer = <-ready:
		return issuer
	case <-time.After(90 * time.Second):
		t.Fatalf("oidc-provider did not start:\n%s", stderr.String())
		return ""
	}
}
