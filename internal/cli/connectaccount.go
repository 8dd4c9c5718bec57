package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/api"
)

// newConnectAccount is "connect-account SERVER": link the caller's own
// account (OAuth) or personal credential to a per_user server.
func newConnectAccount(e *env) *cobra.Command {
	r := &remote{e: e}
	var (
		noWait, unlink                     bool
		timeout                            time.Duration
		bearerEnv, basicUser, basicPassEnv string
		header, headerValueEnv             string
	)
	cmd := &cobra.Command{
		Use:   "connect-account <server>",
		Short: "Link your own account or credential to a per-user server (prints the URL, waits)",
		Long: `Link your own account to a server with credentials: per_user (see
docs/auth.md "Per-user credentials"): your calls to its tools then go with
your account, nobody else's.

Without credential flags it starts the OAuth authorization of your account:
it prints the URL where you sign in, then waits until the authorization
server has sent the browser back to the gateway and your grant is stored.
With --bearer-env, --basic-user/--basic-password-env or --header/--value-env
it stores a personal static credential instead, read from an environment
variable (never from the command line), sealed on the gateway and shown to
nobody, administrators included. --unlink forgets what you linked.

You act as the identity of your API key (SWITCHBOARD_API_KEY).`,
		Example: `  switchboard connect-account crm
  switchboard connect-account crm --bearer-env CRM_TOKEN
  switchboard connect-account crm --header X-API-Key --value-env CRM_KEY
  switchboard connect-account crm --unlink`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			ctx := cmdContext(cmd)
			out := r.e.stdout
			server := a[0]
			secret := func(flag, name string) (string, error) {
				v := r.e.getenv(name)
				if v == "" {
					return "", usageError{fmt.Errorf("%s: environment variable %s is not set", flag, name)}
				}
				return v, nil
			}
			var cred *api.PersonalCredential
			switch {
			case bearerEnv != "":
				tok, err := secret("--bearer-env", bearerEnv)
				if err != nil {
					return err
				}
				cred = &api.PersonalCredential{Type: api.CredentialBearer, Token: tok}
			case basicUser != "":
				pw, err := secret("--basic-password-env", basicPassEnv)
				if err != nil {
					return err
				}
				cred = &api.PersonalCredential{Type: api.CredentialBasic, Username: basicUser, Password: pw}
			case header != "":
				v, err := secret("--value-env", headerValueEnv)
				if err != nil {
					return err
				}
				cred = &api.PersonalCredential{Type: api.CredentialHeader, Header: header, Value: v}
			}
			switch {
			case unlink:
				if err := c.UnlinkAccount(ctx, server); err != nil {
					return explain(err, "linking accounts")
				}
				fmt.Fprintf(out, "%s: your account is unlinked\n", server)
				return nil
			case cred != nil:
				if err := c.PutPersonalCredential(ctx, server, *cred); err != nil {
					return explain(err, "linking accounts")
				}
				fmt.Fprintf(out, "%s: your %s credential is stored (sealed; nobody can read it back)\n", server, cred.Type)
				return nil
			}
			f, err := c.StartAccountLink(ctx, server)
			if err != nil {
				return explain(err, "linking accounts")
			}
			if f.AuthorizationURL != "" {
				fmt.Fprintf(out, "Open this URL in a browser to link your account on %s:\n\n  %s\n\n", f.Server, f.AuthorizationURL)
			}
			if noWait {
				return nil
			}
			f, err = waitFlow(ctx, out, f, timeout, func(ctx context.Context) (api.UpstreamAuthFlow, error) {
				f, err := c.AccountLink(ctx, server)
				return f, explain(err, "linking accounts")
			})
			if err != nil {
				return err
			}
			if f.State == api.FlowFailed {
				return fmt.Errorf("%s: linking failed: %s", f.Server, f.Error)
			}
			if !f.Grant.Authorized {
				return errors.New(f.Server + ": nothing linked" + orEmpty(": ", f.Grant.Problem))
			}
			fmt.Fprintf(out, "%s: your account is linked (issued by %s)\n", f.Server, f.Grant.Issuer)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&noWait, "no-wait", false, "print the URL and return without waiting for the result")
	fl.DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the result")
	fl.BoolVar(&unlink, "unlink", false, "forget the account or credential you linked")
	fl.StringVar(&bearerEnv, "bearer-env", "", "store a personal bearer token read from this environment variable")
	fl.StringVar(&basicUser, "basic-user", "", "store personal basic credentials with this user name (password from --basic-password-env)")
	fl.StringVar(&basicPassEnv, "basic-password-env", "", "environment variable holding the basic password")
	fl.StringVar(&header, "header", "", "store a personal API key sent in this header (value from --value-env)")
	fl.StringVar(&headerValueEnv, "value-env", "", "environment variable holding the header's value")
	cmd.MarkFlagsMutuallyExclusive("unlink", "bearer-env", "basic-user", "header")
	r.register(cmd)
	return cmd
}
