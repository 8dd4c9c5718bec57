package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/apiclient"
	"github.com/switchboard-mcp/switchboard/internal/config"
)

// probeTimeout bounds the look for a gateway at the default URL when none
// was named: validating a file must not hang on a firewall.
const probeTimeout = 3 * time.Second

// maxOffered is how many of a server's tools an "unknown tool" message lists.
const maxOffered = 12

// loadConfig resolves the config the way serve does: -c, else
// ./switchboard.yaml, else the built-in default.
func loadConfig(e *env, file string) (*config.Config, error) {
	f := gatewayFlags{config: file}
	return f.load(e)
}

// configName is the config's name for messages.
func configName(cfg *config.Config) string {
	if cfg.File == "" {
		return "the built-in default config"
	}
	return cfg.File
}

// gatewayView is what validate and check learn from a running gateway.
type gatewayView struct {
	url     string
	servers map[string]api.Server // by name
	tools   map[string][]string   // server name -> original tool names, sorted
}

// fetchGateway reads the servers (and, with tools, the tool listing) of the
// gateway r points at.
func fetchGateway(ctx context.Context, c *apiclient.Client, tools bool) (*gatewayView, error) {
	list, err := c.Servers(ctx)
	if err != nil {
		return nil, explain(err, "server listing")
	}
	g := &gatewayView{url: c.URL(), servers: map[string]api.Server{}, tools: map[string][]string{}}
	for _, s := range list.Servers {
		g.servers[s.Name] = s
	}
	if !tools {
		return g, nil
	}
	tl, err := c.Tools(ctx, "")
	if err != nil {
		return nil, explain(err, "tool listing")
	}
	for _, t := range tl.Tools {
		g.tools[t.ServerName] = append(g.tools[t.ServerName], t.OriginalName)
	}
	for name := range g.tools {
		slices.Sort(g.tools[name])
	}
	return g, nil
}

// healthy reports whether a server counts as up for the pre-flight:
// CONNECTED, and its last health check (if any yet) passed. A server not
// probed yet counts: it answered initialize and tools/list to connect.
func healthy(s api.Server) bool {
	if s.Status != "CONNECTED" {
		return false
	}
	return s.Health == nil || s.Health.LastCheck == nil || s.Health.LastCheckOK
}

// healthText describes a server's health checks for the pre-flight.
func healthText(s api.Server) string {
	h := s.Health
	switch {
	case h == nil || h.LastCheck == nil:
		return "not probed yet"
	case h.LastCheckOK:
		return "ok"
	case h.LastCheckError != "":
		return fmt.Sprintf("failing (%d): %s", h.ConsecutiveFailures, clip(h.LastCheckError, 60))
	}
	return fmt.Sprintf("failing (%d)", h.ConsecutiveFailures)
}

func newConfigCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check a config file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newConfigValidate(e))
	return cmd
}

func newConfigValidate(e *env) *cobra.Command {
	r := &remote{e: e}
	var (
		file string
		show bool
	)
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check a config file, and its clients' declarations against a running gateway",
		Long: `Check a config file (-c, else ./switchboard.yaml, else the built-in default)
and print every problem as FILE:LINE:COL: FIELD: message. The file may use
seed 002's spelling (mcp_servers:, mcp_settings:). The command of every stdio
server is looked up as the gateway would start it (PATH, or the path given):
one that is missing is a problem.

When a gateway answers (--url or SWITCHBOARD_URL, else the default URL if a
gateway listens there), the tool names in the clients' role_restrictions are
also checked against the tools it has discovered. A server it has not
connected yet only gets a warning: its tools are unknown.

--show-mcp-requirements prints, per client, each declared server: whether
servers: defines it, its status on the gateway, and a hint to get it running.

Exit status: 0 valid, 1 the gateway named by --url cannot be asked,
2 the config, a command or a tool name is wrong.`,
		Example: `  switchboard config validate -c switchboard.yaml
  switchboard config validate --show-mcp-requirements --url http://gateway:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return r.validate(cmdContext(cmd), file, show)
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "config file (default ./switchboard.yaml if it exists, else the built-in demo config)")
	cmd.Flags().BoolVar(&show, "show-mcp-requirements", false, "print each client's required, recommended and optional servers and their status")
	r.register(cmd)
	return cmd
}

// validate is `config validate`.
func (r *remote) validate(ctx context.Context, file string, show bool) error {
	e := r.e
	cfg, err := loadConfig(e, file)
	if err != nil {
		var cerrs config.Errors
		if !errors.As(err, &cerrs) {
			return err
		}
		for _, ce := range cerrs {
			fmt.Fprintln(e.stderr, ce.Error())
		}
		fmt.Fprintf(e.stderr, "config invalid: %s\n", plural(len(cerrs), "problem"))
		return exitError{ExitUsage}
	}

	// A command that is not there passes parsing and fails at start: say so
	// now, on the machine that runs the check.
	missing := cfg.CheckCommands(exec.LookPath)
	for _, ce := range missing {
		fmt.Fprintln(e.stderr, ce.Error())
	}
	problems := len(missing)

	g, err := r.probe(ctx)
	if err != nil {
		return err
	}
	if g != nil {
		// Warnings and problems in file order, as an editor lists them.
		diags := checkTools(cfg, g)
		slices.SortStableFunc(diags, func(a, b diagnostic) int {
			return cmp.Or(cmp.Compare(a.err.Line, b.err.Line), cmp.Compare(a.err.Column, b.err.Column))
		})
		for _, d := range diags {
			if !d.warning {
				problems++
			}
			fmt.Fprintln(e.stderr, d.err.Error())
		}
	}
	if show {
		if err := r.requirements(cfg, g); err != nil {
			return err
		}
	}
	if problems > 0 {
		fmt.Fprintf(e.stderr, "config invalid: %s\n", plural(problems, "problem"))
		return exitError{ExitUsage}
	}
	against := "not checked against a gateway"
	if g != nil {
		against = "tool names checked against " + g.url
	}
	fmt.Fprintf(e.stdout, "config OK: %s, %s (%s)\n", plural(len(cfg.Servers), "server"), plural(len(cfg.Clients), "client"), against)
	return nil
}

// probe asks the gateway for its servers and tools. A gateway named with
// --url or SWITCHBOARD_URL must answer; at the default URL, no answer means
// no gateway (nil), and a refusal is a warning, since the operator did not
// ask for one.
func (r *remote) probe(ctx context.Context) (*gatewayView, error) {
	c, err := r.client()
	if err != nil {
		return nil, err
	}
	if r.url != "" || r.e.getenv(envURL) != "" {
		return fetchGateway(ctx, c, true)
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	g, err := fetchGateway(pctx, c, true)
	switch {
	case err == nil:
		return g, nil
	case errors.Is(err, apiclient.ErrUnreachable), errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(r.e.stderr, "note: no gateway at %s: tool names not checked (set --url or %s)\n", c.URL(), envURL)
	default:
		fmt.Fprintf(r.e.stderr, "warning: the gateway at %s refused: %v: tool names not checked\n", c.URL(), err)
	}
	return nil, nil
}

// diagnostic is a problem, or a warning that does not fail validation.
type diagnostic struct {
	err     *config.Error
	warning bool
}

// checkTools checks every role_restrictions entry with a server part against
// the tools the gateway has discovered: an unknown tool is a problem; a
// server whose tools the gateway does not know (not registered, not
// connected) gets a warning, once.
func checkTools(cfg *config.Config, g *gatewayView) []diagnostic {
	sep := cfg.Settings.ToolNameSeparator
	byPrefix := map[string][]*config.Server{}
	for _, s := range cfg.Servers {
		byPrefix[s.EffectivePrefix()] = append(byPrefix[s.EffectivePrefix()], s)
	}
	var diags []diagnostic
	warned := map[string]bool{}
	add := func(field string, warning bool, format string, args ...any) {
		p := cfg.Pos[field]
		diags = append(diags, diagnostic{&config.Error{File: cfg.File, Line: p.Line, Column: p.Column, Field: field,
			Msg: fmt.Sprintf(format, args...)}, warning})
	}
	for _, name := range cfg.ClientNames() {
		cl := cfg.Clients[name]
		for _, role := range slices.Sorted(maps.Keys(cl.RoleRestrictions)) {
			for i, entry := range cl.RoleRestrictions[role] {
				prefix, tool, found := strings.Cut(entry, sep)
				servers := byPrefix[prefix]
				if !found || len(servers) == 0 || tool == "*" {
					continue // the client's own tool, or every tool of a server
				}
				field := fmt.Sprintf("clients.%s.role_restrictions.%s.allowed_tools[%d]", name, role, i)
				var offered []string
				unknown := false
				for _, s := range servers {
					tools, listed := g.tools[s.Name]
					st, registered := g.servers[s.Name]
					if listed || (registered && st.Status == "CONNECTED") {
						offered = append(offered, tools...)
						continue
					}
					unknown = true
					if warned[s.Name] {
						continue
					}
					warned[s.Name] = true
					state := "not registered on the gateway"
					if registered {
						state = st.Status + " on the gateway"
					}
					add(field, true, "warning: server %s is %s: its tools are unknown, so %q is not checked (nor other %s tools)", s.Name, state, entry, s.Name)
				}
				switch {
				case unknown || matchesAny(tool, offered):
				case strings.Contains(tool, "*"):
					add(field, false, "pattern %q matches no tool (server %s offers: %s)", entry, serverNames(servers), offeredList(offered))
				default:
					add(field, false, "unknown tool %q (server %s offers: %s)", entry, serverNames(servers), offeredList(offered))
				}
			}
		}
	}
	return diags
}

// matchesAny reports whether tool (a name, or a pattern with * wildcards)
// names one of the offered tools.
func matchesAny(tool string, offered []string) bool {
	for _, o := range offered {
		if o == tool {
			return true
		}
		if strings.Contains(tool, "*") {
			if ok, err := path.Match(tool, o); err == nil && ok {
				return true
			}
		}
	}
	return false
}

func serverNames(servers []*config.Server) string {
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// offeredList lists a server's tools for a message, the first maxOffered.
func offeredList(tools []string) string {
	if len(tools) == 0 {
		return "no tools"
	}
	tools = slices.Compact(slices.Sorted(slices.Values(tools)))
	if len(tools) > maxOffered {
		return strings.Join(tools[:maxOffered], ", ") + fmt.Sprintf(", … (%d in all)", len(tools))
	}
	return strings.Join(tools, ", ")
}

// requirements prints --show-mcp-requirements: one table per client.
func (r *remote) requirements(cfg *config.Config, g *gatewayView) error {
	w := r.e.stdout
	if len(cfg.Clients) == 0 {
		fmt.Fprintf(w, "no clients are declared in %s\n", configName(cfg))
		return nil
	}
	for i, name := range cfg.ClientNames() {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s\n", name)
		reqs := cfg.Clients[name].MCPTools.Requirements()
		if len(reqs) == 0 {
			fmt.Fprintln(w, "  no servers declared (mcp_tools)")
			continue
		}
		t := &table{header: []string{"LEVEL", "SERVER", "CONFIGURED", "STATUS", "HINT"}}
		for _, req := range reqs {
			s := cfg.Server(req.Server)
			configured := cell{text: "yes"}
			if s == nil {
				configured = cell{text: "no", color: colorRed}
			}
			status := cell{text: "unknown"}
			var gs api.Server
			registered := false
			if g != nil {
				if gs, registered = g.servers[req.Server]; registered {
					status = cell{text: gs.Status, color: stateColor(gs.Status)}
					if gs.Status == "CONNECTED" && !healthy(gs) {
						status.text += " (health failing)"
						status.color = colorYellow
					}
				} else {
					status = cell{text: "not registered", color: colorRed}
				}
			}
			t.add(cell{text: req.Level}, cell{text: req.Server}, configured, status,
				cell{text: hint(req.Server, s, g != nil, registered && healthy(gs))})
		}
		if err := t.render(w, r.color()); err != nil {
			return err
		}
	}
	return nil
}

// hint is the operator's next step for a declared server that is not
// configured or not running: install its package, or start it.
func hint(name string, s *config.Server, asked, up bool) string {
	if s != nil && up {
		return "-"
	}
	install := ""
	if s != nil && s.Package != "" {
		install = "npx -y " + s.Package
	}
	switch {
	case s == nil:
		return "add " + name + " to servers:"
	case install != "":
		return install
	case asked:
		return "switchboard start " + name
	}
	return "-"
}

func newCheck(e *env) *cobra.Command {
	r := &remote{e: e}
	var file string
	cmd := &cobra.Command{
		Use:   "check <client>",
		Short: "Pre-flight a client: are its required servers connected and healthy?",
		Long: `Pre-flight one client declared under clients: in the config (-c, else
./switchboard.yaml, else the built-in default): ask the gateway for the
status of each server the client declares and print it, ✓ when the server is
CONNECTED and its last health check passed (or none has run yet), ✗ when a
required server is not, – when a recommended or optional one is not.

Exit status: 0 every required server is up, 1 one is not or the gateway
cannot be reached, 2 the client is not declared or the config is wrong.`,
		Example: `  switchboard check claude-code && claude`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			return r.check(cmdContext(cmd), file, a[0])
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "config file (default ./switchboard.yaml if it exists, else the built-in demo config)")
	r.register(cmd)
	return cmd
}

// check is `check <client>`.
func (r *remote) check(ctx context.Context, file, name string) error {
	cfg, err := loadConfig(r.e, file)
	if err != nil {
		return err
	}
	cl := cfg.Clients[name]
	if cl == nil {
		if len(cfg.Clients) == 0 {
			return usageError{fmt.Errorf("unknown client %q: %s declares no clients", name, configName(cfg))}
		}
		return usageError{fmt.Errorf("unknown client %q (clients: %s)", name, strings.Join(cfg.ClientNames(), ", "))}
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	g, err := fetchGateway(ctx, c, false)
	if err != nil {
		return err
	}
	reqs := cl.MCPTools.Requirements()
	if len(reqs) == 0 {
		fmt.Fprintf(r.e.stdout, "%s declares no servers (mcp_tools): nothing to check\n", name)
		return nil
	}
	t := &table{header: []string{"", "LEVEL", "SERVER", "STATUS", "HEALTH"}}
	var down []string
	required := 0
	for _, req := range reqs {
		s, registered := g.servers[req.Server]
		up := registered && healthy(s)
		mark := cell{text: "✓", color: colorGreen}
		switch {
		case up:
		case req.Level == config.LevelRequired:
			mark = cell{text: "✗", color: colorRed}
		default:
			mark = cell{text: "–", color: colorYellow}
		}
		if req.Level == config.LevelRequired {
			required++
			if !up {
				down = append(down, req.Server)
			}
		}
		status, health := cell{text: "not registered", color: colorRed}, cell{text: "-"}
		if registered {
			status = cell{text: s.Status, color: stateColor(s.Status)}
			health = cell{text: healthText(s)}
			if s.Status != "CONNECTED" {
				health = cell{text: orDash(clip(lastError(s), 60))}
			}
		}
		t.add(mark, cell{text: req.Level}, cell{text: req.Server}, status, health)
	}
	w := r.e.stdout
	fmt.Fprintf(w, "%s: pre-flight against %s\n", name, g.url)
	if err := t.render(w, r.color()); err != nil {
		return err
	}
	return r.verdict(w, name, required, down)
}

// verdict prints the pre-flight's last line and sets the exit status.
func (r *remote) verdict(w io.Writer, name string, required int, down []string) error {
	switch {
	case len(down) > 0:
		fmt.Fprintf(w, "not ready: %d of %s not connected and healthy: %s\n", len(down), plural(required, "required server"), strings.Join(down, ", "))
		return exitError{ExitFailure}
	case required == 0:
		fmt.Fprintf(w, "ready: %s requires no server\n", name)
	default:
		fmt.Fprintf(w, "ready: %s connected and healthy\n", allRequired(required))
	}
	return nil
}

func allRequired(n int) string {
	if n == 1 {
		return "the required server is"
	}
	return fmt.Sprintf("all %d required servers are", n)
}
