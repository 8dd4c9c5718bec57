// Package upstreamtest lets a test binary be the stdio upstream of the
// gateway it tests: a test's configuration starts os.Args[0] (the test
// binary itself, through config.SelfCommand or by path) with one of the
// variables below set, and the binary's TestMain calls [ServeIfAsked]
// first, so that the child serves the demo server or the conformance
// fixture instead of running the tests. Real servers, without a separate
// build step.
//
// It is test support: only _test.go files import it, never the gateway.
package upstreamtest

import (
	"context"
	"os"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/fixture"
)

// DemoEnv, set to 1, makes the test binary serve the demo server.
const DemoEnv = "SWITCHBOARD_TEST_RUN_DEMO"

// MutableFixtureEnv makes the test binary serve the conformance fixture
// with its mutable tool (fixture.Options.Mutable), whose first description
// is the variable's value.
const MutableFixtureEnv = "SWITCHBOARD_TEST_RUN_MUTABLE_FIXTURE"

// ServeIfAsked serves the upstream that [DemoEnv] or [MutableFixtureEnv]
// asks for on stdin and stdout, then exits the process (1 if serving
// failed); without either it returns at once, and TestMain goes on to run
// the tests.
func ServeIfAsked() {
	if desc := os.Getenv(MutableFixtureEnv); desc != "" {
		if err := fixture.RunStdio(context.Background(), &fixture.Options{Mutable: true, MutableDescription: desc}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(DemoEnv) == "1" {
		if err := demo.RunStdio(context.Background(), nil); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// WithLogDirectory returns run() with settings.log_directory in a temporary
// directory, removed afterwards: its default (logs/mcp_servers) is relative
// to the working directory, which for tests is the source tree. Where no
// temporary directory can be made, run runs as it is.
func WithLogDirectory(run func() int) int {
	dir, err := os.MkdirTemp("", "switchboard-test-logs-")
	if err != nil {
		return run()
	}
	defer os.RemoveAll(dir)
	os.Setenv("SWITCHBOARD_LOG_DIRECTORY", dir)
	return run()
}
