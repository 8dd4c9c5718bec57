package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstreamauth"
)

// probeServer is the name the probed server has in the connector.
const probeServer = "probe"

// probeFlags are the flags of `servers probe`.
type probeFlags struct {
	transport, protocol string
	headless, verbose   bool
	call, args          string
	timeout             time.Duration
	redirectURL         string
	spec                upstreamauth.Spec
	grant, secretEnv    string
}

func newServersProbe(e *env) *cobra.Command {
	var f probeFlags
	cmd := &cobra.Command{
		Use:   "probe [flags] <url>",
		Short: "Connect to an MCP server as the gateway would, authorizing with OAuth if it asks, and list its tools",
		Long: `Connect to an MCP server at <url> exactly as the gateway's upstream connector
does, without a gateway: the same transport, protocol negotiation and OAuth
client. It prints each step and exits 0 only if the server could be
connected, its tools listed and, with --call, the tool called without error.

When the server answers 401, the probe discovers its authorization server
(protected resource metadata, then authorization server metadata), registers
a client if none is given (dynamic registration, or the --client-metadata-url
document when the server supports those), and runs the authorization-code
flow with PKCE: it prints the authorization URL, opens it in a browser, and
waits for the redirect on a loopback callback (--redirect-url). --headless
follows the authorization server's redirects itself instead of a browser, for
test servers that approve without a person. --grant client_credentials
authorizes the client itself (--client-id and --client-secret-env).

Tokens are kept in memory only and never printed.`,
		Example: `  switchboard servers probe https://mcp.example.com/mcp
  switchboard servers probe --call echo --args '{"text":"hi"}' http://127.0.0.1:3000/mcp
  switchboard servers probe --client-id my-app --client-secret-env MY_APP_SECRET --scope repo https://mcp.example.com/mcp
  switchboard servers probe --grant client_credentials --client-id svc --client-secret-env SVC_SECRET https://mcp.internal/mcp`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			return runProbe(cmdContext(cmd), e, &f, a[0])
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.headless, "headless", false, "follow the authorization redirects without a browser (authorization servers that approve without a person)")
	fl.StringVar(&f.call, "call", "", "call this tool after listing the tools")
	fl.StringVar(&f.args, "args", "{}", "JSON object of arguments for --call")
	fl.StringVar(&f.transport, "transport", config.TransportHTTP, "transport: http (Streamable HTTP) or sse")
	fl.StringVar(&f.protocol, "protocol-version", config.ProtocolAuto, "MCP revision to ask for, or auto")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up after this long (the browser flow included)")
	fl.StringVar(&f.grant, "grant", string(upstreamauth.GrantAuthorizationCode), "OAuth grant: authorization_code or client_credentials")
	fl.StringVar(&f.spec.ClientID, "client-id", "", "a client registered with the authorization server (default: register one dynamically)")
	fl.StringVar(&f.secretEnv, "client-secret-env", "", "environment variable holding --client-id's secret")
	fl.StringVar(&f.spec.ClientMetadataURL, "client-metadata-url", "", "HTTPS URL of a client ID metadata document to use as the client id where supported")
	fl.StringVar(&f.spec.TokenEndpointAuthMethod, "token-endpoint-auth-method", "", "client_secret_basic, client_secret_post or none (default: what the authorization server supports)")
	fl.StringArrayVar(&f.spec.Scopes, "scope", nil, "scope to ask for instead of the server's scopes_supported, repeatable")
	fl.StringVar(&f.spec.Issuer, "issuer", "", "the only authorization server the client may be used with")
	fl.StringVar(&f.redirectURL, "redirect-url", "", "loopback callback URL registered for the client (default http://127.0.0.1:<free port>/oauth/upstream/callback)")
	fl.BoolVar(&f.verbose, "verbose", false, "also print the connector's debug log on stderr")
	return cmd
}

// runProbe connects, authorizes, lists and calls, printing each step.
func runProbe(ctx context.Context, e *env, f *probeFlags, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError{fmt.Errorf("%q is not an http(s) URL", rawURL)}
	}
	if f.transport != config.TransportHTTP && f.transport != config.TransportSSE {
		return usageError{fmt.Errorf("--transport %q: want http or sse", f.transport)}
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(f.args), &args); err != nil {
		return usageError{fmt.Errorf("--args: not a JSON object: %w", err)}
	}
	f.spec.Grant = upstreamauth.Grant(f.grant)
	if f.secretEnv != "" {
		if f.spec.ClientSecret = e.getenv(f.secretEnv); f.spec.ClientSecret == "" {
			return usageError{fmt.Errorf("--client-secret-env: %s is not set", f.secretEnv)}
		}
	}
	if err := f.spec.Validate(); err != nil {
		return usageError{err}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	out := &stepPrinter{w: e.stdout}

	// The callback the authorization server sends the browser back to.
	cb := upstreamauth.NewCallbacks()
	var redirect string
	if f.spec.Grant != upstreamauth.GrantClientCredentials {
		var stop func()
		redirect, stop, err = serveCallback(f.redirectURL, cb)
		if err != nil {
			return err
		}
		defer stop()
	}

	guard, err := netguard.New(netguard.Policy{}, nil)
	if err != nil {
		return err
	}
	client := guard.Client(30 * time.Second)
	var open func(context.Context, string) error
	if f.headless {
		follow := guard.Client(30 * time.Second)
		open = func(ctx context.Context, authURL string) error {
			out.step("auth", "following the authorization redirects (headless)")
			return upstreamauth.Headless(follow, redirect)(ctx, authURL)
		}
	} else {
		open = func(ctx context.Context, authURL string) error {
			out.step("auth", "open this URL to authorize: "+authURL)
			if err := openBrowser(ctx, authURL); err != nil {
				out.step("auth", "could not open a browser ("+err.Error()+"): open the URL yourself")
			}
			out.step("auth", "waiting for the redirect to "+redirect)
			return nil
		}
	}
	authz, err := upstreamauth.New(probeServer, rawURL, f.spec, &upstreamauth.Options{
		HTTPClient:  client,
		RedirectURL: redirect,
		Fetcher:     cb.Fetcher(open),
		Progress:    func(s string) { out.step("auth", s) },
	})
	if err != nil {
		return usageError{err}
	}
	defer authz.Close()

	level := slog.LevelError
	if f.verbose {
		level = slog.LevelDebug
	}
	m := upstream.NewManager(&upstream.Options{
		Logger:         slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level})),
		ConnectTimeout: f.timeout,
		Restart:        upstream.RestartPolicy{Disabled: true},
		Implementation: &mcp.Implementation{Name: "switchboard-probe", Version: Version},
		Guard:          guard,
		OAuth:          func(*config.Server) auth.OAuthHandler { return authz },
	})
	defer func() {
		if err := m.Close(context.WithoutCancel(ctx)); err != nil {
			out.step("probe", "closing: "+err.Error())
		}
	}()
	if err := m.Add(&config.Server{Name: probeServer, Transport: f.transport, URL: rawURL, ProtocolVersion: f.protocol}); err != nil {
		return usageError{err}
	}
	out.step("probe", fmt.Sprintf("connecting to %s (%s, protocol %s)", u.Redacted(), f.transport, f.protocol))
	if err := m.Connect(ctx, probeServer); err != nil {
		return probeFailed(out, err)
	}
	st, _ := m.Status(probeServer)
	name := "(unnamed)"
	if st.ServerInfo != nil {
		name = strings.TrimSpace(st.ServerInfo.Name + " " + st.ServerInfo.Version)
	}
	out.step("probe", fmt.Sprintf("connected: %s, protocol %s", name, st.ProtocolVersion))
	disc, err := m.Discovery(probeServer)
	if err != nil {
		return probeFailed(out, err)
	}
	names := make([]string, 0, len(disc.Tools))
	for _, t := range disc.Tools {
		names = append(names, t.Name)
	}
	out.step("probe", fmt.Sprintf("%d tools: %s", len(names), strings.Join(names, ", ")))
	if len(disc.Resources) > 0 || len(disc.Prompts) > 0 {
		out.step("probe", fmt.Sprintf("%d resources, %d resource templates, %d prompts", len(disc.Resources), len(disc.Templates), len(disc.Prompts)))
	}
	if f.call != "" {
		res, err := m.CallTool(ctx, probeServer, &mcp.CallToolParams{Name: f.call, Arguments: args})
		if err != nil {
			return probeFailed(out, err)
		}
		text := clip(strings.Join(strings.Fields(toolText(res)), " "), 200)
		if res.IsError {
			out.step("probe", fmt.Sprintf("called %s: the tool returned an error: %s", f.call, text))
			return exitError{ExitFailure}
		}
		out.step("probe", fmt.Sprintf("called %s: ok: %s", f.call, orDash(text)))
	}
	if s, err := authz.Status(ctx); err == nil && s.Authorized {
		out.step("auth", fmt.Sprintf("authorized by %s (%s), token expires %s", s.Issuer, s.Grant, expiresIn(s.ExpiresAt)))
	}
	out.step("probe", "ok")
	return nil
}

func probeFailed(out *stepPrinter, err error) error {
	out.step("probe", "failed: "+err.Error())
	return exitError{ExitFailure}
}

func expiresIn(t time.Time) string {
	if t.IsZero() {
		return "(not said)"
	}
	return "in " + time.Until(t).Round(time.Second).String()
}

// toolText is the text content of a tool result.
func toolText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}

// stepPrinter prints the probe's steps, one line each; progress may come
// from the connector's goroutines.
type stepPrinter struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *stepPrinter) step(who, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%-5s %s\n", who+":", msg)
}

// serveCallback serves cb on the loopback address of redirect (default a
// free port of 127.0.0.1) and returns the callback URL and how to stop it.
func serveCallback(redirect string, cb *upstreamauth.Callbacks) (string, func(), error) {
	addr := "127.0.0.1:0"
	path := upstreamauth.CallbackPath
	if redirect != "" {
		u, err := url.Parse(redirect)
		if err != nil || u.Scheme != "http" || u.Port() == "" || !isLoopback(u.Hostname()) {
			return "", nil, usageError{errors.New("--redirect-url: want http://127.0.0.1:PORT/PATH (or localhost, [::1])")}
		}
		addr, path = u.Host, u.Path
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("listening for the authorization callback: %w", err)
	}
	if redirect == "" {
		redirect = "http://" + l.Addr().String() + path
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+path, cb)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l) // returns http.ErrServerClosed after Shutdown
	}()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx) // the page was served; nothing left to say
		<-done
	}
	return redirect, stop, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// openBrowser asks the desktop to open u, bounded by a few seconds.
func openBrowser(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.CommandContext(ctx, "open", u)
	case "windows":
		cmd = exec.CommandContext(ctx, "rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.CommandContext(ctx, "xdg-open", u)
	}
	return cmd.Run()
}
