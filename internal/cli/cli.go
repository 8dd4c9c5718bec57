// Package cli holds the switchboard command line: serve, stdio, demo-server
// and version, which hand over to internal/app, and the operator commands
// (status, servers, start/stop, tools, call, grant, keys, audit, ...),
// which talk to a running gateway through internal/apiclient.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/fixture"
	"github.com/switchboard-mcp/switchboard/internal/gctune"
)

// Version is set at build time with -ldflags "-X .../internal/cli.Version=v1.2.3".
var Version = "dev"

// Exit codes, documented in docs/cli.md.
const (
	ExitOK      = 0
	ExitFailure = 1 // runtime failure
	ExitUsage   = 2 // bad flags or config
)

// usageError marks an error as the user's (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// env carries the process environment to the commands.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// Run executes the command line args and returns the process exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code // the command has said why
	}
	fmt.Fprintln(stderr, "switchboard:", err)
	var ue usageError
	var cerrs config.Errors
	// cobra reports an unknown command as a plain error.
	if errors.As(err, &ue) || errors.As(err, &cerrs) || strings.HasPrefix(err.Error(), "unknown command") {
		return ExitUsage
	}
	return ExitFailure
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "switchboard",
		Short: "An MCP gateway: one endpoint in front of many MCP servers",
		Long: `switchboard connects to many MCP servers (stdio, SSE, Streamable HTTP), namespaces
their tools as server.tool, and serves them as ONE MCP server (/mcp, /sse, stdio)
and a REST API (/api/v1).

Run "switchboard serve" to start the gateway on its defaults: the built-in demo
server, SQLite in ./switchboard.db, http://127.0.0.1:8080/mcp.

The operator commands (status, servers, start, tools, call, audit, ...) talk to
a running gateway: --url or SWITCHBOARD_URL (default http://127.0.0.1:8080),
--api-key or SWITCHBOARD_API_KEY. Listings take -o table|json|yaml; colour
only on a terminal, never with --no-color or NO_COLOR.

Exit status:
  0  success
  1  failure: a call or step failed, a server is down, the gateway refused
     or cannot be reached
  2  usage or configuration error: bad flags, arguments or config file`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServe(e), newStdio(e), newDemoServer(e), newVersion(e),
		newStatus(e), newServers(e), newLifecycle(e, "start"), newLifecycle(e, "stop"), newLifecycle(e, "restart"),
		newLifecycle(e, "discover"), newTools(e), newSearch(e), newCall(e), newGrant(e), newRevoke(e), newPolicies(e),
		newKeys(e), newOAuth(e), newAudit(e), newBreakers(e), newEscalations(e), newApprovals(e), newConfigCmd(e), newCheck(e),
		newImport(e), newConnect(e), newConnectAccount(e))
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	return root
}

// tuneGC paces the gateway's garbage collector (see package gctune): GOGC
// 400 unless the operator set GOGC, and, unless GOMEMLIMIT is set, a soft
// memory limit that follows the live heap for as long as ctx lasts.
func tuneGC(ctx context.Context, getenv func(string) string) {
	if gctune.Apply(getenv, gctune.Options{}) {
		go gctune.Run(ctx, gctune.Options{}) // ends with the command's context
	}
}

// gatewayFlags are the flags shared by serve and stdio.
type gatewayFlags struct {
	config, listen, store, logLevel, logFormat string
	tlsCert, tlsKey                            string // serve only
}

func (f *gatewayFlags) register(cmd *cobra.Command, withListen bool) {
	cmd.Flags().StringVarP(&f.config, "config", "c", "", "config file (default ./switchboard.yaml if it exists, else the built-in demo config)")
	if withListen {
		cmd.Flags().StringVar(&f.listen, "listen", "", `listen address (default "127.0.0.1:8080"; env SWITCHBOARD_LISTEN)`)
		cmd.Flags().StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate chain (settings.listen_tls.cert_file; needs --tls-key)")
		cmd.Flags().StringVar(&f.tlsKey, "tls-key", "", "the PEM private key of --tls-cert (settings.listen_tls.key_file)")
	}
	cmd.Flags().StringVar(&f.store, "store", "", `store DSN: a SQLite file path or a postgres:// URL (default "./switchboard.db"; env SWITCHBOARD_STORE)`)
	cmd.Flags().StringVar(&f.logLevel, "log-level", "", "log level: debug, info, warn, error (default info; env SWITCHBOARD_LOG_LEVEL)")
	cmd.Flags().StringVar(&f.logFormat, "log-format", "", "log format: text or json (default text; env SWITCHBOARD_LOG_FORMAT)")
}

// load resolves the config with precedence flags > env > file > defaults
// (config.Load applies env over file over defaults).
func (f *gatewayFlags) load(e *env) (*config.Config, error) {
	var cfg *config.Config
	path := f.config
	if path == "" {
		if _, err := os.Stat("switchboard.yaml"); err == nil {
			path = "switchboard.yaml"
		}
	}
	if path != "" {
		c, err := config.Load(path, e.getenv)
		if err != nil {
			return nil, usageError{err}
		}
		cfg = c
	} else {
		c, err := config.LoadDefault(e.getenv)
		if err != nil {
			return nil, usageError{err}
		}
		cfg = c
	}
	if f.listen != "" {
		cfg.Settings.Listen = f.listen
	}
	if f.tlsCert != "" || f.tlsKey != "" {
		if f.tlsCert == "" || f.tlsKey == "" {
			return nil, usageError{fmt.Errorf("--tls-cert and --tls-key go together")}
		}
		// The flags replace the files and keep the rest of listen_tls
		// (client CA, minimum version) from the config.
		t := config.ListenTLS{MinVersion: config.TLS12}
		if cur := cfg.Settings.ListenTLS; cur != nil {
			t = *cur
			t.Pos = config.Pos{}
		}
		t.CertFile, t.KeyFile = f.tlsCert, f.tlsKey
		cfg.Settings.ListenTLS = &t
	}
	if f.store != "" {
		cfg.Settings.Store = f.store
	}
	if f.logLevel != "" {
		cfg.Settings.LogLevel = f.logLevel
	}
	if f.logFormat != "" {
		cfg.Settings.LogFormat = f.logFormat
	}
	return cfg, nil
}

// run is the RunE of a gateway command: resolve the config, set up logging
// and the GC target, then hand over to serve.
func (f *gatewayFlags) run(e *env, serve func(context.Context, *config.Config, *app.Options) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		cfg, err := f.load(e)
		if err != nil {
			return err
		}
		logger, err := newLogger(e.stderr, cfg.Settings)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(cmd.Context())
		defer cancel()
		tuneGC(ctx, e.getenv)
		return serve(ctx, cfg, &app.Options{Logger: logger, Getenv: e.getenv, Version: Version})
	}
}

func newLogger(w io.Writer, s config.Settings) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.LogLevel)); err != nil {
		return nil, usageError{fmt.Errorf("log level %q: want debug, info, warn or error", s.LogLevel)}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch s.LogFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, usageError{fmt.Errorf("log format %q: want text or json", s.LogFormat)}
	}
}

func newServe(e *env) *cobra.Command {
	var f gatewayFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the gateway over HTTP (MCP at /mcp and /sse, REST at /api/v1)",
		Long: `Run the gateway over HTTP: Streamable HTTP MCP at /mcp, legacy SSE at /sse,
the REST API at /api/v1, /healthz and /readyz.

Every route but the probes needs credentials (Authorization: Bearer <API key
or JWT>), as the config's auth: section says. With no auth: section the
gateway runs in local mode: requests without credentials from this machine
act as the local admin, and it refuses to listen on a non-loopback address.
A non-loopback listener serves HTTPS (settings.listen_tls, or --tls-cert and
--tls-key; the files are re-read when they change) or, behind a
TLS-terminating proxy, plain HTTP when settings.allow_plain_http is true.
SWITCHBOARD_ADMIN_KEY, if set, is an admin API key from the start: use it to
create the first keys (POST /api/v1/keys).

Configuration precedence: flags > environment > config file > defaults.

OpenTelemetry tracing is off unless the standard environment asks for it:
OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER=otlp) exports a span per
MCP request and pipeline stage over OTLP (OTEL_EXPORTER_OTLP_PROTOCOL
http/protobuf or grpc; OTEL_TRACES_SAMPLER); see docs/telemetry.md.`,
		Args: cobra.NoArgs,
		RunE: f.run(e, app.Run),
	}
	f.register(cmd, true)
	return cmd
}

func newStdio(e *env) *cobra.Command {
	var f gatewayFlags
	cmd := &cobra.Command{
		Use:   "stdio",
		Short: "Serve the gateway to one MCP client over stdin/stdout",
		Long: `Serve the gateway to one MCP client over stdin/stdout, so a desktop client
(Claude Desktop, Cursor, VS Code) can launch it as a command. Upstreams marked
auto_start are connected before the client is served. Logs go to stderr.`,
		Args: cobra.NoArgs,
		RunE: f.run(e, app.RunStdio),
	}
	f.register(cmd, false)
	return cmd
}

func newDemoServer(e *env) *cobra.Command {
	var (
		httpAddr   string
		o          demo.Options
		latency    time.Duration
		errorRate  float64
		crashAfter int
		extraTools int
		conform    bool
	)
	cmd := &cobra.Command{
		Use:   "demo-server",
		Short: "Run the built-in demo MCP server (stdio by default, or --http ADDR)",
		Long: `Run the built-in demo MCP server: tools echo, add, now, sleep and fail, the
resource demo://readme, the template demo://echo/{text} and the prompt greet.
It speaks stdio unless --http is given (Streamable HTTP at /mcp, SSE at /sse).
Fault-injection flags make it misbehave for tests and benchmarks.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if errorRate < 0 || errorRate > 1 {
				return usageError{fmt.Errorf("--error-rate must be between 0 and 1")}
			}
			o.ErrorRate, o.Latency, o.CrashAfter, o.ExtraTools = errorRate, latency, crashAfter, extraTools
			o.Logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			if conform {
				fo := &fixture.Options{Logger: o.Logger}
				if httpAddr == "" {
					return fixture.RunStdio(cmd.Context(), fo)
				}
				return fixture.ServeHTTP(cmd.Context(), httpAddr, fo, func(addr string) {
					fmt.Fprintf(e.stderr, "conformance fixture server listening on http://%s/mcp\n", addr)
				})
			}
			if httpAddr == "" {
				return demo.RunStdio(cmd.Context(), &o)
			}
			return demo.ServeHTTP(cmd.Context(), httpAddr, &o, func(addr string) {
				fmt.Fprintf(e.stderr, "demo server listening on http://%s/mcp (SSE: http://%s/sse)\n", addr, addr)
			})
		},
	}
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve Streamable HTTP (/mcp) and SSE (/sse) on this address instead of stdio")
	cmd.Flags().Float64Var(&errorRate, "error-rate", 0, "probability (0..1) that a tools/call fails with a protocol error")
	cmd.Flags().DurationVar(&latency, "latency", 0, "latency added to every tools/call (e.g. 5ms)")
	cmd.Flags().IntVar(&crashAfter, "crash-after", 0, "exit with status 3 after answering this many tools/call requests (0 = never)")
	cmd.Flags().IntVar(&extraTools, "extra-tools", 0, "register this many extra tools tool_0001..tool_N")
	cmd.Flags().BoolVar(&conform, "conformance", false, "serve the MCP conformance suite's fixtures (test_* tools, resources, prompts) instead of the demo tools")
	return cmd
}

func newVersion(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sdk := "unknown"
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, d := range bi.Deps {
					if d.Path == "github.com/modelcontextprotocol/go-sdk" {
						sdk = d.Version
					}
				}
			}
			fmt.Fprintf(e.stdout, "switchboard %s (%s, %s/%s, go-sdk %s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH, sdk)
			return nil
		},
	}
}
