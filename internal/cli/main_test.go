package cli

import (
	"context"
	"os"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/demo"
)

// demoEnv makes this test binary act as the demo server when the gateway
// under test starts it as a stdio upstream (config.SelfCommand runs
// os.Args[0]).
const demoEnv = "SWITCHBOARD_TEST_RUN_DEMO"

func TestMain(m *testing.M) {
	if os.Getenv(demoEnv) == "1" {
		if err := demo.RunStdio(context.Background(), nil); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
