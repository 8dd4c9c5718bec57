package app_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/fixture"
	"github.com/switchboard-mcp/switchboard/internal/testdeps"
)

// fixtureEnv makes this test binary act as the conformance fixture server
// when the gateway under test starts it as a stdio upstream.
const fixtureEnv = "SWITCHBOARD_TEST_RUN_FIXTURE"

// conformanceLine is the last line of run-conformance.sh.
var conformanceLine = regexp.MustCompile(`conformance: (\d+) passed, (\d+) failed`)

// runConformance runs the official MCP conformance suite against url and
// returns its counts of passed and failed checks.
func runConformance(t *testing.T, url string, env ...string) (passed, failed int) {
	t.Helper()
	npmModule(t, "@modelcontextprotocol/conformance/dist/index.js")
	script := filepath.Join(testdeps.RepoRoot(), "testdata", "conformance", "run-conformance.sh")
	cmd := exec.Command("bash", script, url)
	cmd.Env = append(os.Environ(),
		"CONF_HOME="+filepath.Join(testdeps.RepoRoot(), "testdata", "npm"),
		"OUT_DIR="+t.TempDir(),
		"SCENARIO_TIMEOUT=60", "TOTAL_TIMEOUT=600")
	cmd.Env = append(cmd.Env, env...)
	out, _ := cmd.CombinedOutput() // the exit status repeats the counts
	m := conformanceLine.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no result line from the conformance suite:\n%s", out)
	}
	passed, _ = strconv.Atoi(string(m[1]))
	failed, _ = strconv.Atoi(string(m[2]))
	if failed > 0 || testing.Verbose() {
		t.Logf("conformance output:\n%s", out)
	}
	return passed, failed
}

// TestConformanceThroughGateway is G1: the conformance suite scores the same
// through the gateway as against the fixture server alone — through the
// transparent endpoint /servers/{name}/mcp and through /mcp with prefix "",
// with the fixture server as a stdio upstream (in both styles: input
// requests in results, and classic server-initiated requests) and as an
// HTTP upstream.
func TestConformanceThroughGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance suite takes minutes")
	}
	fx := httptest.NewServer(fixture.Handler(nil))
	t.Cleanup(fx.Close)

	direct, directFailed := runConformance(t, fx.URL+"/mcp")
	if directFailed != 0 || direct < 40 {
		t.Fatalf("fixture server alone: %d passed, %d failed; want ≥ 40 passed, 0 failed", direct, directFailed)
	}
	upstreams := map[string]string{
		"stdio": fmt.Sprintf("    transport: stdio\n    command: switchboard\n    env: {%s: \"1\"}\n", fixtureEnv),
		// The same fixtures written the classic way: sampling and
		// elicitation as requests of the server's own during the call.
		"stdio-classic": fmt.Sprintf("    transport: stdio\n    command: switchboard\n    env: {%s: classic}\n", fixtureEnv),
		"http":          fmt.Sprintf("    transport: http\n    url: %s/mcp\n", fx.URL),
	}
	for kind, def := range upstreams {
		yaml := "servers:\n  fx:\n" + def + "    auto_start: true\n    prefix: \"\"\n"
		g := startGateway(t, yaml, nil)
		for _, endpoint := range []string{"/servers/fx/mcp", "/mcp"} {
			t.Run(kind+endpoint, func(t *testing.T) {
				passed, failed := runConformance(t, g.url()+endpoint)
				t.Logf("%s upstream via %s: %d passed, %d failed (fixture alone: %d)", kind, endpoint, passed, failed, direct)
				if failed != 0 || passed != direct {
					t.Errorf("through the gateway: %d passed, %d failed; fixture alone: %d passed", passed, failed, direct)
				}
			})
		}
	}
}
