package app_test

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/cli"
	"github.com/switchboard-mcp/switchboard/internal/fixture"
	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
	"github.com/switchboard-mcp/switchboard/internal/upstreamtest"
)

// demoEnv makes this test binary act as the demo server when the gateway
// under test starts it as a stdio upstream (config.SelfCommand is mapped to
// os.Args[0]).
const demoEnv = upstreamtest.DemoEnv

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
	upstreamtest.ServeIfAsked()
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
	os.Exit(upstreamtest.WithLogDirectory(func() int { return storetest.PostgresMain(m) }))
}

// mutableFixtureEnv makes this test binary act as the conformance fixture
// with its mutable tool, whose first description is the variable's value.
const mutableFixtureEnv = upstreamtest.MutableFixtureEnv

// gatewayEnv makes this test binary act as `switchboard` itself.
const gatewayEnv = "SWITCHBOARD_TEST_RUN_GATEWAY"
