package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/clientcfg"
)

func newConnect(e *env) *cobra.Command {
	var (
		file, gatewayURL, key, configPath, command string
		useHTTP, useStdio, undo, dryRun            bool
	)
	cmd := &cobra.Command{
		Use:   "connect <client>",
		Short: "Point a client (Claude Desktop, Cursor, VS Code, Claude Code, Windsurf) at the gateway",
		Long: `Rewrite a client's MCP config so that switchboard is its only server: the
servers it listed (import them first with "switchboard import") are replaced
by one entry named "switchboard". Clients: ` + clientNames() + `.

--http (the default where the client's file takes a URL) points it at the
running gateway's /mcp with the API key as a bearer header; --stdio has it
start "switchboard stdio" itself (Claude Desktop's file takes commands only).
Everything else in the file is kept byte for byte, and the original is saved
next to it as FILE` + clientcfg.BackupSuffix + `; --undo puts it back.`,
		Example: `  switchboard import --from cursor --apply && switchboard connect cursor --key sbk_...
  switchboard connect claude-desktop --config ~/switchboard.yaml
  switchboard connect claude-desktop --undo`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, ok := clientcfg.ParseClient(a[0])
			if !ok {
				return usageError{fmt.Errorf("unknown client %q: want one of %s", a[0], clientNames())}
			}
			if useHTTP && useStdio {
				return usageError{errors.New("give --http or --stdio, not both")}
			}
			path := file
			if path == "" {
				_, p, err := clientFile(e, string(c), "")
				if err != nil {
					return err
				}
				path = p
			}
			if undo {
				if err := clientcfg.Undo(path); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "restored %s from its backup\n", path)
				return nil
			}
			var g clientcfg.Gateway
			if useHTTP || (!useStdio && c.HTTP()) {
				u := gatewayURL
				if u == "" {
					u = e.getenv(envURL)
				}
				if u == "" {
					u = defaultGatewayURL
				}
				g.URL = strings.TrimSuffix(u, "/") + "/mcp"
				g.Key = key
				if g.Key == "" {
					g.Key = e.getenv(envAPIKey)
				}
			} else {
				g.Command = command
				if g.Command == "" {
					exe, err := os.Executable()
					if err != nil {
						return fmt.Errorf("finding the switchboard binary (give --command): %w", err)
					}
					g.Command = exe
				}
				g.Args = []string{"stdio"}
				if configPath != "" {
					abs, err := filepath.Abs(configPath)
					if err != nil {
						return err
					}
					// Clients start servers in a directory of their own choosing.
					g.Args = append(g.Args, "--config", abs)
				}
			}
			if dryRun {
				data, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				out, err := clientcfg.Rewrite(path, data, c, g)
				if err != nil {
					return err
				}
				_, err = e.stdout.Write(out)
				return err
			}
			backup, err := clientcfg.Connect(path, c, g)
			if err != nil {
				if errors.Is(err, clientcfg.ErrConnected) {
					return usageError{err}
				}
				return err
			}
			how := g.URL
			if how == "" {
				how = strings.Join(append([]string{g.Command}, g.Args...), " ")
			}
			fmt.Fprintf(e.stdout, "%s now reaches its MCP servers through switchboard: %s\n", c, how)
			fmt.Fprintf(e.stdout, "changed %s (restart the client to pick it up)\n", path)
			fmt.Fprintf(e.stdout, "backup  %s\n", backup)
			fmt.Fprintf(e.stdout, "undo    switchboard connect %s --undo%s\n", c, fileFlag(file))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "file", "", "the client's config file, when it is not in the usual place")
	f.BoolVar(&useHTTP, "http", false, "connect over HTTP to the running gateway's /mcp (default where the client supports it)")
	f.BoolVar(&useStdio, "stdio", false, `have the client start "switchboard stdio" itself`)
	f.StringVar(&gatewayURL, "url", "", `gateway URL for --http (default "`+defaultGatewayURL+`"; env `+envURL+`)`)
	f.StringVar(&key, "key", "", "API key the client sends as a bearer token with --http (env "+envAPIKey+")")
	f.StringVar(&configPath, "config", "", "switchboard config file for --stdio")
	f.StringVar(&command, "command", "", "path of the switchboard binary for --stdio (default this binary)")
	f.BoolVar(&undo, "undo", false, "restore the client's file from the backup connect made")
	f.BoolVar(&dryRun, "dry-run", false, "print the rewritten file instead of writing it")
	return cmd
}

func fileFlag(file string) string {
	if file == "" {
		return ""
	}
	return " --file " + file
}
