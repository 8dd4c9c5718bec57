// Command dumptools writes the tools/list answer of a stdio MCP server as a
// JSON array, the format of internal/search/testdata/relevance/*.json. The
// relevance sets are measured on real servers' tool lists; dumping them
// through the go-sdk client keeps the files exactly what a gateway sees.
//
//	go run ./internal/search/dumptools -o internal/search/testdata/relevance/github.json \
//	    -- node /tmp/npm/node_modules/@modelcontextprotocol/server-github/dist/index.js
//
// Everything after -- is the server's command line. The server inherits the
// environment, so a server that insists on a token at start can be given a
// dummy one: listing tools never calls its API.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	out := flag.String("o", "", "output file (default: standard output)")
	timeout := flag.Duration("timeout", 60*time.Second, "bound on starting the server and listing its tools")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: dumptools [-o file] -- command [args...]")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, flag.Args(), *out); err != nil {
		fmt.Fprintln(os.Stderr, "dumptools:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, argv []string, out string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-dumptools", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", argv[0], err)
	}
	// Some servers ignore the closed stdin and are stopped by a signal: the
	// tools are listed by then, so that is a note, not a failure.
	defer func() {
		if cerr := cs.Close(); cerr != nil {
			fmt.Fprintln(os.Stderr, "dumptools: closing the server:", cerr)
		}
	}()
	tools := []*mcp.Tool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing tools: %w", err)
		}
		tools = append(tools, t)
	}
	b, err := json.MarshalIndent(tools, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding tools: %w", err)
	}
	b = append(b, '\n')
	if out == "" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(out, b, 0o644)
}
