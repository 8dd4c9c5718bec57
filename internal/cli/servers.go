package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/apiclient"
	"github.com/switchboard-mcp/switchboard/internal/config"
)

func newStatus(e *env) *cobra.Command {
	r := &remote{e: e}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every upstream server: state, health, pid, uptime, tools, restarts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			list, err := c.Servers(cmdContext(cmd))
			if err != nil {
				return explain(err, "server listing")
			}
			if done, err := r.structured(list); done {
				return err
			}
			t := &table{header: []string{"SERVER", "STATE", "HEALTH", "PID", "UPTIME", "TOOLS", "RESTARTS", "LAST ERROR"}}
			for _, s := range list.Servers {
				pid := "-"
				if s.PID > 0 {
					pid = strconv.Itoa(s.PID)
				}
				state := s.Status
				if s.StatusDetail != "" {
					state += " (" + s.StatusDetail + ")"
				}
				t.add(cell{text: s.Name}, cell{text: state, color: stateColor(s.Status)}, health(s.Health),
					cell{text: pid}, cell{text: humanDuration(time.Duration(s.UptimeSeconds * float64(time.Second)))},
					cell{text: strconv.Itoa(s.ToolCount)}, cell{text: strconv.Itoa(s.Restarts)}, cell{text: orDash(clip(lastError(s), 60))})
			}
			if len(list.Servers) == 0 {
				fmt.Fprintln(e.stdout, "no servers")
				return nil
			}
			return t.render(e.stdout, r.color())
		},
	}
	r.register(cmd)
	r.registerOutput(cmd)
	return cmd
}

// health summarizes a server's checks for the status table.
func health(h *api.Health) cell {
	switch {
	case h == nil || h.LastCheck == nil:
		return cell{text: "-"}
	case h.LastCheckOK:
		return cell{text: "ok", color: colorGreen}
	case h.ConsecutiveFailures > 0:
		return cell{text: fmt.Sprintf("failing (%d)", h.ConsecutiveFailures), color: colorRed}
	}
	return cell{text: "failing", color: colorRed}
}

// lastError is the most telling failure a server reports.
func lastError(s api.Server) string {
	switch {
	case s.ErrorMessage != "":
		return s.ErrorMessage
	case s.Health != nil && !s.Health.LastCheckOK && s.Health.LastCheckError != "":
		return s.Health.LastCheckError
	}
	return ""
}

func newServers(e *env) *cobra.Command {
	r := &remote{e: e}
	cmd := &cobra.Command{
		Use:   "servers",
		Short: "Add, remove, connect, disconnect upstream servers and read their logs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	r.register(cmd)
	cmd.AddCommand(newServersAdd(r), newServersRm(r), newServersConnect(r, "connect"), newServersConnect(r, "disconnect"), newServersLogs(r), newServersAuth(r),
		newServersProbe(e))
	return cmd
}

func newServersAdd(r *remote) *cobra.Command {
	var (
		transport, command, url, cwd, description, prefix, defaultAccess string
		args, envs, secretEnvs, headers                                  []string
		connect, pin                                                     bool
		auth                                                             config.ServerAuth
	)
	cmd := &cobra.Command{
		Use:   "add <name>",
		Short: "Register a server at runtime (stdio, http or sse)",
		Long: `Register a server at runtime (stdio, http or sse).

--env values are settings (a file path, a log level) and are stored as they
are. --secret-env values are secrets: the gateway stores them encrypted with
its secret key (local mode makes one on first use), or, given as '${VAR}',
reads them from its own environment when it starts the server. Header values
(--header) are secrets too.

--auth oauth makes the gateway the server's OAuth client (http, sse): the
--auth-* flags are the fields of a config file's auth section, and the
client secret is given by the NAME of a variable of the gateway's
environment (--auth-client-secret-env), never by value. A server that needs
a person's approval is then NEEDS_AUTH until "switchboard servers auth NAME".

The first start of an npx, uvx, bunx, pnpm dlx, or docker/podman run command
may download the server: until it first connects it is given 4 times
startup_timeout_seconds, and "switchboard status" shows
"CONNECTING (installing packages, N s)".`,
		Example: `  switchboard servers add fs --transport stdio --command npx --arg -y --arg @modelcontextprotocol/server-filesystem --arg /tmp --connect
  switchboard servers add memory --command npx --arg -y --arg @modelcontextprotocol/server-memory --env MEMORY_FILE_PATH=/tmp/memory.jsonl --connect
  switchboard servers add gh --command github-mcp-server --arg stdio --secret-env GITHUB_PERSONAL_ACCESS_TOKEN='${GITHUB_TOKEN}'
  switchboard servers add remote --transport http --url https://mcp.example.com/mcp
  switchboard servers add gh --transport http --url https://api.githubcopilot.com/mcp/ --auth oauth --auth-client-id Ov23liExample --auth-client-secret-env GITHUB_MCP_CLIENT_SECRET --auth-scope repo --connect`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			transport = strings.ToLower(transport)
			switch transport {
			case "stdio":
				if command == "" {
					return usageError{fmt.Errorf("--transport stdio needs --command")}
				}
			case "http", "sse":
				if url == "" {
					return usageError{fmt.Errorf("--transport %s needs --url", transport)}
				}
			default:
				return usageError{fmt.Errorf("--transport %q: want stdio, http or sse", transport)}
			}
			plainEnv, err := keyValues("--env", envs)
			if err != nil {
				return err
			}
			env, err := keyValues("--secret-env", secretEnvs)
			if err != nil {
				return err
			}
			for k := range env {
				if _, ok := plainEnv[k]; ok {
					return usageError{fmt.Errorf("%s is given both as --env and as --secret-env", k)}
				}
			}
			hdrs, err := keyValues("--header", headers)
			if err != nil {
				return err
			}
			authSet := false
			for _, name := range []string{"auth-grant", "auth-client-id", "auth-client-secret-env", "auth-client-metadata-url",
				"auth-token-endpoint-auth-method", "auth-scope", "auth-issuer", "auth-refresh-margin-seconds"} {
				authSet = authSet || cmd.Flags().Changed(name)
			}
			var authReq *config.ServerAuth
			switch {
			case auth.Type == "" && authSet:
				return usageError{fmt.Errorf("the --auth-* flags need --auth oauth")}
			case auth.Type != "" && auth.Type != config.AuthTypeOAuth:
				return usageError{fmt.Errorf("--auth %q: want oauth", auth.Type)}
			case auth.Type != "":
				authReq = &auth
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			req := apiclient.RegisterRequest{Auth: authReq, Name: a[0], Description: description, TransportType: transport,
				ConnectionConfig: apiclient.ConnectionConfig{Command: command, Args: args, Env: env, PlainEnv: plainEnv, Cwd: cwd, URL: url, Headers: hdrs},
				AutoConnect:      &connect, DefaultAccess: defaultAccess}
			if cmd.Flags().Changed("prefix") {
				req.Prefix = &prefix
			}
			if cmd.Flags().Changed("pin-definitions") {
				req.PinDefinitions = &pin
			}
			s, err := c.RegisterServer(cmdContext(cmd), req)
			if err != nil {
				return explain(err, "registering servers")
			}
			if done, err := r.structured(s); done {
				return err
			}
			fmt.Fprintf(r.e.stdout, "registered %s (%s, id %s)", s.Name, strings.ToLower(s.TransportType), s.ID)
			if connect {
				fmt.Fprintf(r.e.stdout, "; connecting: follow with \"switchboard status\"")
			}
			fmt.Fprintln(r.e.stdout)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&transport, "transport", "stdio", "transport: stdio, http or sse")
	f.StringVar(&command, "command", "", "command to run (stdio)")
	f.StringArrayVar(&args, "arg", nil, "argument of the command, repeatable, in order (stdio)")
	f.StringArrayVar(&envs, "env", nil, "environment variable K=V for the command, stored as it is: a setting such as a file path, repeatable (stdio)")
	f.StringArrayVar(&secretEnvs, "secret-env", nil, "environment variable K=V holding a secret, stored encrypted (or K='${VAR}' to read VAR from the gateway's environment), repeatable (stdio)")
	f.StringVar(&cwd, "cwd", "", "working directory of the command (stdio)")
	// --url is the server's endpoint here, as users of "servers add" expect;
	// the gateway's URL moves to --gateway-url on this command only.
	f.StringVar(&url, "url", "", "the server's endpoint URL (http, sse); the gateway's URL is --gateway-url here")
	f.StringVar(&r.url, "gateway-url", "", `gateway URL (default "`+defaultGatewayURL+`"; env `+envURL+`)`)
	f.StringArrayVar(&headers, "header", nil, "HTTP header K=V sent to the server, repeatable (http, sse)")
	f.StringVar(&description, "description", "", "what the server is for")
	f.StringVar(&prefix, "prefix", "", "namespace prefix of its tools (default the server's name; \"\" for none)")
	f.StringVar(&defaultAccess, "default-access", "", "who may call its tools without a grant: allow or deny")
	f.StringVar(&auth.Type, "auth", "", "oauth: the gateway is the server's OAuth client (http, sse)")
	f.StringVar(&auth.Grant, "auth-grant", "", "authorization_code (default) or client_credentials")
	f.StringVar(&auth.ClientID, "auth-client-id", "", "a client registered with the authorization server (default: dynamic registration)")
	f.StringVar(&auth.ClientSecretEnv, "auth-client-secret-env", "", "NAME of the gateway's environment variable holding the client secret")
	f.StringVar(&auth.ClientMetadataURL, "auth-client-metadata-url", "", "HTTPS URL of the gateway's client ID metadata document")
	f.StringVar(&auth.TokenEndpointAuthMethod, "auth-token-endpoint-auth-method", "", "client_secret_basic, client_secret_post or none")
	f.StringArrayVar(&auth.Scopes, "auth-scope", nil, "scope to ask for, repeatable (default: what the server asks for)")
	f.StringVar(&auth.Issuer, "auth-issuer", "", "the only authorization server the credentials may be used with")
	f.IntVar(&auth.RefreshMarginSeconds, "auth-refresh-margin-seconds", 0, "refresh this long before expiry (default 60)")
	f.BoolVar(&connect, "connect", false, "connect right away")
	f.BoolVar(&pin, "pin-definitions", true, "quarantine a tool whose definition changes until an admin approves it; =false applies changes as they come")
	r.registerOutput(cmd)
	return cmd
}

// keyValues parses repeated K=V flags.
func keyValues(flag string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("%s %q: want KEY=VALUE", flag, kv)}
		}
		out[k] = v
	}
	return out, nil
}

func newServersRm(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:     "rm <name>",
		Aliases: []string{"remove"},
		Short:   "Disconnect and forget a server registered at runtime",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			if err := c.RemoveServer(cmdContext(cmd), a[0]); err != nil {
				return explain(err, "removing servers")
			}
			fmt.Fprintf(r.e.stdout, "removed %s\n", a[0])
			return nil
		},
	}
}

// newServersConnect is "servers connect" or "servers disconnect": the
// plain API call, without the step tracker of start and stop.
func newServersConnect(r *remote, verb string) *cobra.Command {
	short := "Start connecting a server (returns at once; see also \"start\")"
	if verb == "disconnect" {
		short = "Drain and disconnect a server (see also \"stop\")"
	}
	cmd := &cobra.Command{
		Use:   verb + " <name>",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			ctx := cmdContext(cmd)
			if verb == "connect" {
				res, err := c.ConnectServer(ctx, a[0], false)
				if err != nil {
					return explain(err, "connecting servers")
				}
				if done, err := r.structured(res); done {
					return err
				}
				fmt.Fprintf(r.e.stdout, "%s: %s\n", res.Server.Name, res.Status)
				return nil
			}
			res, err := c.DisconnectServer(ctx, a[0])
			if err != nil {
				return explain(err, "disconnecting servers")
			}
			if done, err := r.structured(res); done {
				return err
			}
			fmt.Fprintf(r.e.stdout, "%s: %s (%d calls were in flight)\n", res.Server.Name, res.Status, res.PendingRequests)
			return nil
		},
	}
	r.registerOutput(cmd)
	return cmd
}

func newServersLogs(r *remote) *cobra.Command {
	var lines int
	cmd := &cobra.Command{
		Use:   "logs <name>",
		Short: "Print the last log lines of a server",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if lines < 1 {
				return usageError{fmt.Errorf("-n must be at least 1")}
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			logs, err := c.ServerLogs(cmdContext(cmd), a[0], lines)
			if err != nil {
				return explain(err, "server logs")
			}
			if done, err := r.structured(logs); done {
				return err
			}
			for _, l := range logs.Lines {
				fmt.Fprintln(r.e.stdout, l)
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&lines, "lines", "n", 50, "how many lines")
	r.registerOutput(cmd)
	return cmd
}
