package app_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/fixture"
	"github.com/switchboard-mcp/switchboard/internal/testdeps"
)

// suiteScenario is one scenario line of run-conformance.sh.
type suiteScenario struct {
	passed, failed int
	scored         bool
}

var suiteScenarioLine = regexp.MustCompile(`(?m)^  [✓✗] (\S+): (\d+) passed, (\d+) failed(?:, \d+ warnings)?( \(not scored\))?`)

// runSuite runs the 0.2 conformance suite with the requirements of revision
// against url, scored scenarios only, and returns them by name.
func runSuite(t *testing.T, url, revision string) map[string]suiteScenario {
	t.Helper()
	npmModule(t, "conformance-next/dist/index.js")
	cmd := exec.Command("bash", filepath.Join(testdeps.RepoRoot(), "testdata", "conformance", "run-conformance.sh"), url)
	cmd.Env = append(os.Environ(),
		"CONF_HOME="+filepath.Join(testdeps.RepoRoot(), "testdata", "npm"),
		"OUT_DIR="+t.TempDir(), "REQUIREMENTS="+revision,
		"SCENARIO_TIMEOUT=60", "TOTAL_TIMEOUT=600")
	out, _ := cmd.CombinedOutput() // the exit status repeats the counts
	if conformanceLine.Find(out) == nil {
		t.Fatalf("no result line from the conformance suite:\n%s", out)
	}
	got := map[string]suiteScenario{}
	for _, l := range suiteScenarioLine.FindAllStringSubmatch(string(out), -1) {
		p, _ := strconv.Atoi(l[2])
		f, _ := strconv.Atoi(l[3])
		got[l[1]] = suiteScenario{passed: p, failed: f, scored: l[4] == ""}
	}
	if testing.Verbose() {
		t.Logf("conformance output (%s, %s):\n%s", url, revision, out)
	}
	return got
}

// TestConformanceErasThroughGateway runs the 0.2 suite with the
// requirements of 2026-07-28 and of 2025-11-25 through the gateway, via
// /servers/fx/mcp and via /mcp (prefix ""), with the fixture server as a
// stdio and as an HTTP upstream (and, for 2025-11-25, written the classic
// way over stdio), and compares scenario by scenario with the fixture
// alone: no check fails that passes alone, none is missing, no scenario is
// skipped. It prints both tables.
//
// The stdio fixture is configured with protocol_version 2026-07-28: its
// tools return their input requests in results, and only a session of the
// new revision passes them through as the server wrote them (under auto a
// stdio server gets a 2025-11-25 session, for the sake of classic servers;
// see docs/protocol.md).
func TestConformanceErasThroughGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance suite takes minutes")
	}
	npmModule(t, "conformance-next/dist/index.js")
	fx := httptest.NewServer(fixture.Handler(nil))
	t.Cleanup(fx.Close)
	revisions := []string{"2026-07-28", "2025-11-25"}
	alone := map[string]map[string]suiteScenario{}
	for _, rev := range revisions {
		alone[rev] = runSuite(t, fx.URL+fixture.Path, rev)
	}
	upstreams := []struct {
		name, def string
		revisions []string
	}{
		{"stdio", fmt.Sprintf("    transport: stdio\n    command: switchboard\n    env: {%s: \"1\"}\n    protocol_version: 2026-07-28\n", fixtureEnv), revisions},
		{"http", fmt.Sprintf("    transport: http\n    url: %s/mcp\n", fx.URL), revisions},
		{"stdio-classic", fmt.Sprintf("    transport: stdio\n    command: switchboard\n    env: {%s: classic}\n", fixtureEnv), []string{"2025-11-25"}},
	}
	var mu sync.Mutex
	through := map[string]map[string]map[string]suiteScenario{} // revision -> path -> scenario
	for _, rev := range revisions {
		through[rev] = map[string]map[string]suiteScenario{}
	}
	t.Run("paths", func(t *testing.T) {
		for _, up := range upstreams {
			for _, endpoint := range []string{"/servers/fx/mcp", "/mcp"} {
				for _, rev := range up.revisions {
					path := up.name + " " + endpoint
					t.Run(rev+" "+path, func(t *testing.T) {
						t.Parallel()
						// A gateway (and upstream) per run: a classic stdio
						// server's requests name no call, so two suites
						// sharing it at once would be refused as ambiguous.
						g := startGateway(t, "servers:\n  fx:\n"+up.def+"    auto_start: true\n    prefix: \"\"\n", nil)
						got := runSuite(t, g.url()+endpoint, rev)
						mu.Lock()
						through[rev][path] = got
						mu.Unlock()
						for name, a := range alone[rev] {
							b, ok := got[name]
							switch {
							case !ok:
								t.Errorf("%s: skipped through the gateway", name)
							case b.failed > a.failed:
								t.Errorf("%s: %d failed through the gateway; %d alone", name, b.failed, a.failed)
							case b.passed < a.passed-timingWarnings[name]:
								t.Errorf("%s: %d passed through the gateway; %d alone", name, b.passed, a.passed)
							}
						}
					})
				}
			}
		}
	})
	for _, rev := range revisions {
		t.Logf("conformance %s (scored scenarios; passed/failed):\n%s", rev, suiteTable(alone[rev], through[rev]))
	}
}

// timingWarnings are SHOULD checks that the suite reads within a fixed
// window (0.8 to 1.5 s) and marks as warnings, not failures, when late: a
// list change announced on a subscriptions/listen stream travels upstream
// notification → debounced re-listing → catalog → the SDK's debounced
// notification, which a loaded machine (CI, 2 cores, the whole suite at
// once) can stretch past the window. They pass when the machine is idle
// (see the tables in docs/protocol.md); a failure is never tolerated.
var timingWarnings = map[string]int{
	"server-stateless": 2, // sep-2575-server-sends-{tools,prompts}-list-changed-on-subscription
}

// suiteTable renders the scenarios of the fixture alone and through each
// path as a Markdown table.
func suiteTable(alone map[string]suiteScenario, through map[string]map[string]suiteScenario) string {
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range through {
			if !yield(p) {
				return
			}
		}
	})
	names := make([]string, 0, len(alone))
	for n := range alone {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("| scenario | fixture alone | " + strings.Join(paths, " | ") + " |\n|---|---|" + strings.Repeat("---|", len(paths)) + "\n")
	cell := func(s suiteScenario, ok bool) string {
		if !ok {
			return "skipped"
		}
		return fmt.Sprintf("%d/%d", s.passed, s.failed)
	}
	total := func(m map[string]suiteScenario) suiteScenario {
		var t suiteScenario
		for _, s := range m {
			t.passed += s.passed
			t.failed += s.failed
		}
		return t
	}
	for _, n := range names {
		a := alone[n]
		b.WriteString("| " + n + " | " + cell(a, true))
		for _, p := range paths {
			s, ok := through[p][n]
			b.WriteString(" | " + cell(s, ok))
		}
		b.WriteString(" |\n")
	}
	b.WriteString("| **total** | " + cell(total(alone), true))
	for _, p := range paths {
		b.WriteString(" | " + cell(total(through[p]), true))
	}
	b.WriteString(" |\n")
	return b.String()
}
