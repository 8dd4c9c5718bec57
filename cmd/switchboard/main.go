// Command switchboard is an MCP gateway: one endpoint in front of many MCP
// servers. See the README for a quick start.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchboard-mcp/switchboard/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
