package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/api"
)

// authPollInterval is how often `servers auth` asks how the flow is going.
var authPollInterval = time.Second

// newServersAuth is "servers auth NAME": start the OAuth authorization of
// an upstream server with `auth`, print the URL, wait for the result.
func newServersAuth(r *remote) *cobra.Command {
	var (
		noWait  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "auth <name>",
		Short: "Authorize the gateway at an OAuth-protected server (prints the URL, waits)",
		Long: `Authorize the gateway at an OAuth-protected server (one with
auth: {type: oauth, ...}, see docs/auth.md "Upstream servers").

For the authorization_code grant it prints the URL where a person approves
the gateway's access, then waits until the authorization server has
redirected the browser back to the gateway (GATEWAY/oauth/upstream/callback)
and the grant is stored; the server then connects. For client_credentials
it fetches a token at once. It exits 0 once the grant is stored, non-zero if
the authorization fails or --timeout passes (the flow itself stays open on
the gateway for 10 minutes).`,
		Example: `  switchboard servers auth github
  switchboard servers auth github --no-wait   # print the URL and return`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			ctx := cmdContext(cmd)
			f, err := c.StartServerAuth(ctx, a[0])
			if err != nil {
				return explain(err, "authorizing servers")
			}
			out := r.e.stdout
			if f.AuthorizationURL != "" {
				fmt.Fprintf(out, "Open this URL in a browser to authorize %s:\n\n  %s\n\n", f.Server, f.AuthorizationURL)
			}
			if noWait {
				return nil
			}
			f, err = waitFlow(ctx, out, f, timeout, func(ctx context.Context) (api.UpstreamAuthFlow, error) {
				f, err := c.ServerAuth(ctx, a[0])
				return f, explain(err, "authorizing servers")
			})
			if err != nil {
				return err
			}
			if f.State == api.FlowFailed {
				return fmt.Errorf("%s: authorization failed: %s", f.Server, f.Error)
			}
			if !f.Grant.Authorized {
				return errors.New(f.Server + ": no grant stored" + orEmpty(": ", f.Grant.Problem))
			}
			fmt.Fprintln(out, describeGrant(f))
			return nil
		},
	}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "print the URL and return without waiting for the result")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the result")
	return cmd
}

// waitFlow waits until the OAuth flow f is no longer pending, asking poll
// how it is going every authPollInterval, for at most timeout. It says
// once that it waits; an error of poll, ctx or the timeout ends it.
func waitFlow(ctx context.Context, out io.Writer, f api.UpstreamAuthFlow, timeout time.Duration,
	poll func(context.Context) (api.UpstreamAuthFlow, error)) (api.UpstreamAuthFlow, error) {
	if f.State == api.FlowPending {
		fmt.Fprintln(out, "waiting for the authorization...")
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(authPollInterval)
	defer tick.Stop()
	for f.State == api.FlowPending {
		select {
		case <-ctx.Done():
			return f, ctx.Err()
		case <-deadline.C:
			return f, fmt.Errorf("%s: no answer from the authorization server after %s (run the command again to start over)", f.Server, timeout)
		case <-tick.C:
		}
		var err error
		if f, err = poll(ctx); err != nil {
			return f, err
		}
	}
	return f, nil
}

// describeGrant is the line `servers auth` ends with: who issued what,
// never a token.
func describeGrant(f api.UpstreamAuthFlow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: authorized (%s) by %s", f.Server, f.Grant.Type, f.Grant.Issuer)
	if len(f.Grant.Scopes) > 0 {
		fmt.Fprintf(&b, ", scopes %s", strings.Join(f.Grant.Scopes, " "))
	}
	if f.Grant.ExpiresAt != nil {
		fmt.Fprintf(&b, ", access token valid until %s", f.Grant.ExpiresAt.Local().Format(time.RFC3339))
	}
	if f.Grant.Refreshable {
		b.WriteString(", renewed before it expires")
	}
	return b.String()
}

func orEmpty(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}
