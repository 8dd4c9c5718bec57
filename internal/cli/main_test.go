package cli

import (
	"os"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/upstreamtest"
)

// demoEnv makes this test binary act as the demo server when the gateway
// under test starts it as a stdio upstream (config.SelfCommand runs
// os.Args[0]).
const demoEnv = upstreamtest.DemoEnv

// mutableFixtureEnv makes this test binary act as the conformance fixture
// with its mutable tool, whose first description is the variable's value.
const mutableFixtureEnv = upstreamtest.MutableFixtureEnv

func TestMain(m *testing.M) {
	if os.Getenv(probeDriverEnv) == "1" {
		os.Exit(runProbeDriver())
	}
	upstreamtest.ServeIfAsked()
	os.Exit(upstreamtest.WithLogDirectory(m.Run))
}
