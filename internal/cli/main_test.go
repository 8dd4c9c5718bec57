package cli

import (
	"context"
	"os"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/fixture"
)

// demoEnv makes this test binary act as the demo server when the gateway
// under test starts it as a stdio upstream (config.SelfCommand runs
// os.Args[0]).
const demoEnv = "SWITCHBOARD_TEST_RUN_DEMO"

// mutableFixtureEnv makes this test binary act as the conformance fixture
// with its mutable tool, whose first description is the variable's value.
const mutableFixtureEnv = "SWITCHBOARD_TEST_RUN_MUTABLE_FIXTURE"

func TestMain(m *testing.M) {
	if os.Getenv(probeDriverEnv) == "1" {
		os.Exit(runProbeDriver())
	}
	if desc := os.Getenv(mutableFixtureEnv); desc != "" {
		if err := fixture.RunStdio(context.Background(), &fixture.Options{Mutable: true, MutableDescription: desc}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(demoEnv) == "1" {
		if err := demo.RunStdio(context.Background(), nil); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(testLogDirectory(m.Run))
}

// testLogDirectory runs the tests with settings.log_directory in a
// temporary directory: its default (logs/mcp_servers) is relative to the
// working directory, which for tests is the source tree.
func testLogDirectory(run func() int) int {
	dir, err := os.MkdirTemp("", "switchboard-test-logs-")
	if err != nil {
		return run()
	}
	defer os.RemoveAll(dir)
	os.Setenv("SWITCHBOARD_LOG_DIRECTORY", dir)
	return run()
}
