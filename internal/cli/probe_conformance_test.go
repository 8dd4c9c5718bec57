package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/testdeps"
)

// probeDriverEnv makes this test binary the client under test of the
// official conformance suite (`conformance client --command BINARY`): it
// runs `switchboard servers probe --headless` against the URL the suite
// appends, with the flags an operator would give for the scenario's
// server (see probeDriverArgs).
const probeDriverEnv = "SWITCHBOARD_TEST_PROBE_DRIVER"

// probeSecretEnv is where the driver puts the pre-registered client
// secret the suite hands over, for --client-secret-env.
const probeSecretEnv = "PROBE_CLIENT_SECRET"

// conformanceClientMetadataURL is the client ID metadata document URL the
// suite's auth/basic-cimd expects as the client id.
const conformanceClientMetadataURL = "https://conformance-test.local/client-metadata.json"

// runProbeDriver is the test binary as the suite's client: what an
// operator types, from what the scenario says of its server.
func runProbeDriver() int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: the server URL is the last argument")
		return ExitUsage
	}
	args, secret, err := probeDriverArgs(os.Getenv("MCP_CONFORMANCE_SCENARIO"), os.Getenv("MCP_CONFORMANCE_CONTEXT"), os.Args[len(os.Args)-1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return ExitUsage
	}
	fmt.Fprintln(os.Stderr, "driver: switchboard "+strings.Join(args, " "))
	getenv := func(k string) string {
		if k == probeSecretEnv {
			return secret
		}
		return os.Getenv(k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return Run(ctx, args, os.Stdin, os.Stdout, os.Stderr, getenv)
}

// probeDriverArgs are the probe's arguments for a scenario: the client the
// suite pre-registered (MCP_CONFORMANCE_CONTEXT's client_id, client_secret
// and issuer), the client credentials grant for the scenarios of that
// extension, the metadata document URL the suite expects, and a call of
// the scenarios' tool (a step-up is asked for on tools/call).
func probeDriverArgs(scenario, rawContext, serverURL string) (args []string, secret string, err error) {
	var cc struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		Issuer       string `json:"issuer"`
	}
	if rawContext != "" {
		if err := json.Unmarshal([]byte(rawContext), &cc); err != nil {
			return nil, "", fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	args = []string{"servers", "probe", "--headless", "--call", "test-tool", "--timeout", "45s"}
	if cc.ClientID != "" {
		args = append(args, "--client-id", cc.ClientID)
	}
	if cc.ClientSecret != "" {
		args = append(args, "--client-secret-env", probeSecretEnv)
	}
	if cc.Issuer != "" {
		args = append(args, "--issuer", cc.Issuer)
	}
	if strings.HasPrefix(scenario, "auth/client-credentials-") {
		args = append(args, "--grant", "client_credentials")
	} else {
		args = append(args, "--client-metadata-url", conformanceClientMetadataURL)
	}
	return append(args, serverURL), cc.ClientSecret, nil
}

// probeLeftOut are the authorization scenarios of the suite the probe does
// not run, with the reason: extensions the gateway (and the go-sdk) do not
// implement.
var probeLeftOut = map[string]string{
	"auth/client-credentials-jwt":           "extension: client authentication by a signed JWT (private_key_jwt); the gateway authenticates clients with a secret",
	"auth/enterprise-managed-authorization": "extension SEP-990 (token exchange with an enterprise IdP, then JWT bearer grant): not implemented",
	"auth/dpop":                             "extension SEP-1932 (DPoP sender-constrained tokens): not implemented by the go-sdk nor the gateway",
	"auth/dpop-nonce":                       "extension SEP-1932 (DPoP with server nonces): not implemented by the go-sdk nor the gateway",
	"auth/wif-jwt-bearer":                   "extension SEP-1933 (workload identity federation, JWT bearer grant): not implemented",
}

// probeDeclines are the scenarios whose server must be refused: the probe
// must stop before it gives the authorization server a code or the server
// a token, and fail.
var probeDeclines = []string{
	"auth/resource-mismatch",        // the metadata names another resource
	"auth/metadata-issuer-mismatch", // the metadata names another issuer
	"auth/iss-supported-missing",    // RFC 9207: iss advertised, not sent
	"auth/iss-wrong-issuer",         // RFC 9207: iss of another server
	"auth/iss-unexpected",           // RFC 9207: iss not advertised, and wrong
	"auth/iss-normalized",           // RFC 9207: iss equal only after normalization
	"auth/scope-retry-limit",        // the server never accepts the scope it asks for
}

// probeLegacyScenarios are run at 2025-03-26, which no requirement set
// names any more: the gateway still meets such servers.
var probeLegacyScenarios = []string{"auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback"}

// authScenarios lists the authorization scenarios the suite's requirements
// of revision name, scored or not (extensions).
func authScenarios(t *testing.T, node, suite, revision string) (scored, unscored []string) {
	t.Helper()
	out, err := exec.Command(node, suite, "list", "--client", "--requirements", revision).CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Client scenarios"):
			section = "client"
		case line == "" || !strings.HasPrefix(line, " "):
			section = ""
		case section == "client" && strings.HasPrefix(line, "  - auth/"):
			scored = append(scored, strings.TrimPrefix(line, "  - "))
		case strings.HasPrefix(line, "    - auth/") && strings.HasSuffix(line, " [client]"):
			unscored = append(unscored, strings.TrimSuffix(strings.TrimPrefix(line, "    - "), " [client]"))
		}
	}
	if len(scored) == 0 {
		t.Fatalf("conformance list names no auth scenario for %s:\n%s", revision, out)
	}
	return scored, unscored
}

// scenarioResult is the outcome of one scenario: the suite's checks by
// status, the failed and warned ones, and the probe's output.
type scenarioResult struct {
	passed, failed, warned int
	bad                    []string
	stdout                 string
	err                    error
}

// runProbeScenario runs one scenario at revision with this binary as the
// probe driver, and reads its checks.json.
func runProbeScenario(ctx context.Context, node, suite, exe, dir, revision, scenario string) scenarioResult {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "client", "--command", exe, "--scenario", scenario,
		"--spec-version", revision, "--force", "--timeout", "60000", "-o", dir)
	cmd.Env = append(os.Environ(), probeDriverEnv+"=1", "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return scenarioResult{err: fmt.Errorf("timed out: %w\n%s", ctx.Err(), out)}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*", "checks.json"))
	if len(files) != 1 {
		return scenarioResult{err: fmt.Errorf("%d checks.json files (exit %v):\n%s", len(files), err, out)}
	}
	var checks []struct{ ID, Name, Status, Description, ErrorMessage string }
	b, rerr := os.ReadFile(files[0])
	if rerr == nil {
		rerr = json.Unmarshal(b, &checks)
	}
	if rerr != nil {
		return scenarioResult{err: rerr}
	}
	var r scenarioResult
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			r.passed++
		case "FAILURE":
			r.failed++
			r.bad = append(r.bad, fmt.Sprintf("FAILURE %s: %s %s", c.ID, c.Description, c.ErrorMessage))
		case "WARNING":
			r.warned++
			r.bad = append(r.bad, fmt.Sprintf("WARNING %s: %s %s", c.ID, c.Description, c.ErrorMessage))
		}
	}
	stdout, _ := os.ReadFile(filepath.Join(filepath.Dir(files[0]), "stdout.txt"))
	stderr, _ := os.ReadFile(filepath.Join(filepath.Dir(files[0]), "stderr.txt"))
	r.stdout = string(stdout) + string(stderr)
	// The driver is this binary, built with -race when the tests are.
	for _, bad := range []string{"WARNING: DATA RACE", "panic:"} {
		if strings.Contains(string(stderr), bad) {
			r.err = errors.Join(r.err, fmt.Errorf("the driver's stderr has %q:\n%s", bad, stderr))
		}
	}
	return r
}

// TestProbeConformance runs every authorization scenario (auth/*) that
// the official conformance suite (0.2.0-alpha.12) lists for clients in the
// requirements of 2025-11-25 and of 2026-07-28, scored or extension, with
// `switchboard servers probe --headless` as the client (this test binary,
// see runProbeDriver), and the two 2025-03-26 scenarios. No check may fail
// or warn, each scenario must pass a check, and the probe must exit 0
// except where the scenario wants the client to give up (the suite then
// judges the checks alone). The extensions in probeLeftOut are not run.
func TestProbeConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("the authorization scenarios take a minute")
	}
	node := testdeps.NPMModule(t, "node/bin/node")
	suite := testdeps.NPMModule(t, "conformance-next/dist/index.js")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(exe, " \t\"'$`\\") {
		t.Fatalf("the suite runs --command through a shell, split on spaces; this binary's path %q does not survive that", exe)
	}
	type job struct{ revision, scenario string }
	var jobs []job
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		scored, unscored := authScenarios(t, node, suite, rev)
		for _, s := range append(scored, unscored...) {
			if why, ok := probeLeftOut[s]; ok {
				t.Logf("%s %s: left out: %s", rev, s, why)
				continue
			}
			jobs = append(jobs, job{rev, s})
		}
	}
	for _, s := range probeLegacyScenarios {
		jobs = append(jobs, job{"2025-03-26", s})
	}

	results := make([]scenarioResult, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range 2 { // each run is a node process and a driver
		wg.Go(func() {
			for i := range next {
				dir := filepath.Join(t.TempDir(), "out")
				results[i] = runProbeScenario(t.Context(), node, suite, exe, dir, jobs[i].revision, jobs[i].scenario)
			}
		})
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()

	var table strings.Builder
	fmt.Fprintf(&table, "%-12s %-48s passed/failed/warned\n", "revision", "scenario")
	for i, j := range jobs {
		r := results[i]
		fmt.Fprintf(&table, "%-12s %-48s %d/%d/%d\n", j.revision, j.scenario, r.passed, r.failed, r.warned)
		switch {
		case r.err != nil:
			t.Errorf("%s %s: %v", j.revision, j.scenario, r.err)
		case r.passed == 0 || r.failed > 0 || r.warned > 0:
			t.Errorf("%s %s: %d passed, %d failed, %d warned:\n%s\nprobe output:\n%s", j.revision, j.scenario,
				r.passed, r.failed, r.warned, strings.Join(r.bad, "\n"), r.stdout)
		case slices.Contains(probeDeclines, j.scenario) != !strings.Contains(r.stdout, "probe: ok\n"):
			t.Errorf("%s %s: the probe should %s:\n%s", j.revision, j.scenario,
				map[bool]string{true: "have failed", false: "have succeeded"}[slices.Contains(probeDeclines, j.scenario)], r.stdout)
		}
	}
	t.Log(table.String())
	if !slices.ContainsFunc(jobs, func(j job) bool { return j.scenario == "auth/client-credentials-basic" }) {
		t.Error("the client credentials scenario was not run")
	}
}

func TestProbeUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"not a URL", []string{"servers", "probe", "mcp.example.com"}, "not an http(s) URL"},
		{"bad transport", []string{"servers", "probe", "--transport", "stdio", "http://127.0.0.1:1/mcp"}, "--transport"},
		{"bad arguments", []string{"servers", "probe", "--call", "x", "--args", "[1]", "http://127.0.0.1:1/mcp"}, "--args"},
		{"secret not set", []string{"servers", "probe", "--client-id", "a", "--client-secret-env", "NOPE", "http://127.0.0.1:1/mcp"}, "NOPE is not set"},
		{"client credentials without client", []string{"servers", "probe", "--grant", "client_credentials", "http://127.0.0.1:1/mcp"}, "client_id:"},
		{"redirect not loopback", []string{"servers", "probe", "--redirect-url", "https://gw.example.com/cb", "http://127.0.0.1:1/mcp"}, "--redirect-url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(t, tt.args...)
			if code != ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, ExitUsage, tt.want)
			}
		})
	}
}

// TestProbeUnreachable checks that a server that cannot be reached is a
// failure (exit 1) that says so, in steps.
func TestProbeUnreachable(t *testing.T) {
	code, stdout, _ := run(t, "servers", "probe", "--timeout", "10s", "http://127.0.0.1:1/mcp")
	if code != ExitFailure || !strings.Contains(stdout, "probe: failed:") || strings.Contains(stdout, "probe: ok") {
		t.Errorf("exit %d, stdout:\n%s", code, stdout)
	}
}
