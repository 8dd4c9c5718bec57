package app_test

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/cli"
	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/fixture"
	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

// demoEnv makes this test binary act as the demo server when the gateway
// under test starts it as a stdio upstream (config.SelfCommand is mapped to
// os.Args[0]).
const demoEnv = "SWITCHBOARD_TEST_RUN_DEMO"

func TestMain(m *testing.M) {
	if os.Getenv(fixtureEnv) == "1" {
		if err := fixture.RunStdio(context.Background(), nil); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if v := os.Getenv(fixtureEnv); v == "classic" || v == "mutable" || v == "classic-mutable" {
		// classic: the sampling, elicitation and roots tools send requests
		// of their own; mutable: test_mutate changes a tool (list_changed).
		opts := &fixture.Options{Classic: strings.HasPrefix(v, "classic"), Mutable: strings.HasSuffix(v, "mutable")}
		if err := fixture.RunStdio(context.Background(), opts); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
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
	if os.Getenv(gatewayEnv) == "1" {
		// A gateway replica for the cluster tests: `switchboard <args>`.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
		stop()
		os.Exit(code)
	}
	if len(os.Args) > 1 && os.Args[1] == "demo-server" {
		// `switchboard demo-server` as the real binary runs it, for
		// configurations that start the demo server by its command line
		// alone (seed 002's file).
		os.Exit(cli.Run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(testLogDirectory(func() int { return storetest.PostgresMain(m) }))
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

// mutableFixtureEnv makes this test binary act as the conformance fixture
// with its mutable tool, whose first description is the variable's value.
const mutableFixtureEnv = "SWITCHBOARD_TEST_RUN_MUTABLE_FIXTURE"

// gatewayEnv makes this test binary act as `switchboard` itself.
const gatewayEnv = "SWITCHBOARD_TEST_RUN_GATEWAY"
