package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/apiclient"
	"github.com/switchboard-mcp/switchboard/internal/clientcfg"
	"github.com/switchboard-mcp/switchboard/internal/config"
)

// clientNames is the --from / CLIENT list for help texts.
func clientNames() string {
	var names []string
	for _, c := range clientcfg.Clients() {
		names = append(names, string(c))
	}
	return strings.Join(names, ", ")
}

// clientFile resolves a client name or a file path to the file to read and
// its format.
func clientFile(e *env, from, file string) (clientcfg.Client, string, error) {
	c, known := clientcfg.ParseClient(from)
	switch {
	case from == "" && file == "":
		return "", "", usageError{fmt.Errorf("say where to import from: --from %s, or --file PATH", clientNames())}
	case from != "" && !known && file != "":
		return "", "", usageError{fmt.Errorf("--from %q: want one of %s (or a file path, without --file)", from, clientNames())}
	case from != "" && !known:
		file = from // --from FILE
	}
	if file == "" {
		home, _ := os.UserHomeDir()
		wd, _ := os.Getwd()
		p, err := clientcfg.Find(c, clientcfg.Env{GOOS: runtime.GOOS, Home: home, Workdir: wd, Getenv: e.getenv})
		if err != nil {
			return "", "", err
		}
		return c, p, nil
	}
	if !known {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", "", fmt.Errorf("reading %s: %w", file, err)
		}
		c = clientcfg.Detect(file, data)
	}
	return c, file, nil
}

func newImport(e *env) *cobra.Command {
	r := &remote{e: e}
	var from, file, write string
	var apply, dryRun bool
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Import the MCP servers configured in Claude Desktop, Cursor, VS Code, Claude Code or Windsurf",
		Long: `Import the MCP servers a client already has: --from names the client (` + clientNames() + `)
and its file is found where the client keeps it on this system, or --file
gives the path (--from FILE alone guesses the format).

Without --write or --apply the servers are only shown. --write CONFIG adds them
to a switchboard config file (created if missing); --apply registers them on
the running gateway through its REST API, which encrypts literal env and
header values with its secret key. --dry-run shows what either would do.

Literal secrets (tokens, API keys, passwords, Authorization headers) are never
written to the config file: they become ${VAR} references, and the variables
to set are listed with where their values are. Entries that cannot be
converted (unknown fields, a secret in args, a name taken) are reported with
file:line:column and skipped; the exit status is then 1.`,
		Example: `  switchboard import --from claude-desktop
  switchboard import --from cursor --write switchboard.yaml
  switchboard import --from ./.vscode/mcp.json --apply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if apply && write != "" {
				return usageError{errors.New("give --write or --apply, not both")}
			}
			c, path, err := clientFile(e, from, file)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("reading the %s config: %w", c, err)
			}
			home, _ := os.UserHomeDir()
			f, err := clientcfg.Read(path, data, c, &clientcfg.Options{Home: home})
			if err != nil {
				return err
			}
			im := &importer{e: e, f: f}
			switch {
			case write != "":
				err = im.write(write, dryRun)
			case apply:
				err = im.apply(cmd, r, dryRun)
			default:
				err = im.preview()
			}
			if err != nil {
				return err
			}
			if len(f.Problems) > 0 {
				fmt.Fprintln(e.stderr, "not imported:")
				for _, p := range f.Problems {
					fmt.Fprintln(e.stderr, "  "+p.Error())
				}
				return exitError{ExitFailure}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "the client to import from ("+clientNames()+") or a file path")
	fl.StringVar(&file, "file", "", "the client's config file, when it is not in the usual place")
	fl.StringVar(&write, "write", "", "add the servers to this switchboard config file")
	fl.BoolVar(&apply, "apply", false, "register the servers on the running gateway (--url, --api-key)")
	fl.BoolVar(&dryRun, "dry-run", false, "show what --write or --apply would do, change nothing")
	r.register(cmd)
	return cmd
}

// importer prints and carries out one import.
type importer struct {
	e *env
	f *clientcfg.File
}

// summary is one line per server, then its secrets and notes.
func (im *importer) summary(skip map[string]string) {
	fmt.Fprintf(im.e.stdout, "%s in %s (%s)\n", plural(len(im.f.Entries), "server"), im.f.Path, im.f.Client)
	for _, en := range im.f.Entries {
		s := en.Server
		target := s.URL
		if s.Transport == "stdio" {
			target = strings.Join(append([]string{s.Command}, s.Args...), " ")
		}
		if why, ok := skip[s.Name]; ok {
			fmt.Fprintf(im.e.stdout, "  = %-20s %s\n", s.Name, why)
			continue
		}
		fmt.Fprintf(im.e.stdout, "  + %-20s %-5s  %s\n", s.Name, s.Transport, clip(target, 70))
		for _, sec := range en.Secrets {
			fmt.Fprintf(im.e.stdout, "      secret %s becomes ${%s}\n", sec.Field, sec.Var)
		}
		for _, n := range en.Notes {
			fmt.Fprintf(im.e.stdout, "      note: %s\n", n)
		}
	}
}

// secretsToSet tells where each variable's value is, never the value.
func (im *importer) secretsToSet(skip map[string]string) {
	var lines []string
	for _, en := range im.f.Entries {
		if _, skipped := skip[en.Server.Name]; skipped {
			continue
		}
		for _, sec := range en.Secrets {
			lines = append(lines, fmt.Sprintf("  %s  (value: %s:%d:%d)", sec.Var, im.f.Path, sec.Line, sec.Column))
		}
	}
	if len(lines) > 0 {
		fmt.Fprintln(im.e.stdout, "set these in the gateway's environment before it starts:")
		fmt.Fprintln(im.e.stdout, strings.Join(slices.Compact(lines), "\n"))
	}
}

func (im *importer) servers(skip map[string]string) []*config.Server {
	var out []*config.Server
	for _, en := range im.f.Entries {
		if _, skipped := skip[en.Server.Name]; !skipped {
			out = append(out, en.Server)
		}
	}
	return out
}

func (im *importer) preview() error {
	im.summary(nil)
	y, err := clientcfg.YAML(im.servers(nil), "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(im.e.stdout, "\nas switchboard config (add with --write FILE, or register with --apply):\nservers:\n%s", y)
	im.secretsToSet(nil)
	return nil
}

// serversKeyRE finds the top-level servers: mapping of a config file.
var serversKeyRE = regexp.MustCompile(`(?m)^(servers|mcp_servers):[ \t]*(#.*)?$`)

// write adds the servers to the config file at path as text, so the
// user's comments and layout stay, then validates the result before
// replacing the file.
func (im *importer) write(path string, dryRun bool) error {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	placeholders := func(text []byte) func(string) string {
		return func(k string) string {
			if v := im.e.getenv(k); v != "" {
				return v
			}
			if strings.Contains(string(text), "${"+k+"}") {
				return "set-at-runtime" // a reference the user sets later
			}
			return ""
		}
	}
	skip := map[string]string{}
	if len(data) > 0 {
		cfg, err := config.Parse(path, data, placeholders(data))
		if err != nil {
			return fmt.Errorf("%s does not load as it is, fix it first: %w", path, err)
		}
		for _, s := range cfg.Servers {
			skip[s.Name] = "already in " + path + ": skipped"
		}
	}
	im.summary(skip)
	add := im.servers(skip)
	if len(add) == 0 {
		fmt.Fprintln(im.e.stdout, "nothing to add")
		return nil
	}
	indent := "  "
	out := string(data)
	loc := serversKeyRE.FindStringIndex(out)
	var y []byte
	if loc == nil {
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		if y, err = clientcfg.YAML(add, indent); err != nil {
			return err
		}
		out += "servers:\n" + string(y)
	} else {
		// The mapping ends before the next line that starts a top-level key.
		end := len(out)
		rest := out[loc[1]:]
		lines := strings.SplitAfter(rest, "\n")
		off := loc[1]
		first, found := true, false
		for _, l := range lines {
			if !first && l != "" && l[0] != ' ' && l[0] != '\t' && l[0] != '#' && l[0] != '\n' {
				end = off
				break
			}
			if !first && !found && indentOf(l) != "" && strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				indent, found = indentOf(l), true // the entries' own indentation
			}
			first = false
			off += len(l)
		}
		if y, err = clientcfg.YAML(add, indent); err != nil {
			return err
		}
		// New entries go after the last one, before the blank lines that
		// separate the mapping from the next key.
		head := strings.TrimRight(out[:end], "\n")
		blank := strings.TrimPrefix(out[len(head):end], "\n")
		out = head + "\n" + string(y) + blank + out[end:]
	}
	if _, err := config.Parse(path, []byte(out), placeholders([]byte(out))); err != nil {
		return fmt.Errorf("the imported servers do not validate, %s is unchanged: %w", path, err)
	}
	fmt.Fprintf(im.e.stdout, "\n%s %s:\n", map[bool]string{true: "would add to", false: "adding to"}[dryRun], path)
	for _, l := range strings.SplitAfter(string(y), "\n") {
		if l != "" {
			fmt.Fprint(im.e.stdout, "+"+l)
		}
	}
	im.secretsToSet(skip)
	if dryRun {
		return nil
	}
	perm := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		perm = st.Mode().Perm()
	}
	if err := os.WriteFile(path, []byte(out), perm); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func indentOf(line string) string {
	return line[:len(line)-len(strings.TrimLeft(line, " \t"))]
}

// apply registers the servers on the running gateway. The definitions
// carry their literal secrets: the gateway seals them with its key (or
// refuses them, saying how to configure one) before they are stored.
func (im *importer) apply(cmd *cobra.Command, r *remote, dryRun bool) error {
	c, err := r.client()
	if err != nil {
		return err
	}
	ctx := cmdContext(cmd)
	skip := map[string]string{}
	list, err := c.Servers(ctx)
	if err != nil {
		return explain(err, "server listing")
	}
	for _, s := range list.Servers {
		skip[s.Name] = "already on the gateway: skipped"
	}
	im.summary(skip)
	if dryRun {
		return nil
	}
	failed := false
	for _, en := range im.f.Entries {
		if _, skipped := skip[en.Server.Name]; skipped {
			continue
		}
		s := en.WithSecrets()
		connect := s.AutoStart == nil || *s.AutoStart
		req := apiclient.RegisterRequest{Name: s.Name, Description: s.Description, TransportType: s.Transport,
			ConnectionConfig: apiclient.ConnectionConfig{Command: s.Command, Args: s.Args, Env: s.Env, Cwd: s.Cwd, URL: s.URL, Headers: s.Headers},
			AutoConnect:      &connect}
		if _, err := c.RegisterServer(ctx, req); err != nil {
			fmt.Fprintf(im.e.stdout, "  ✗ %s: %v\n", s.Name, explain(err, "registering servers"))
			failed = true
			continue
		}
		fmt.Fprintf(im.e.stdout, "  ✓ %s registered\n", s.Name)
	}
	if failed {
		return exitError{ExitFailure}
	}
	return nil
}
