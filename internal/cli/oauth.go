package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/apiclient"
)

// newOAuth groups the admin view of the built-in OAuth authorization
// server: the clients that registered and the grants users gave them.
func newOAuth(e *env) *cobra.Command {
	r := &remote{e: e}
	cmd := &cobra.Command{
		Use:   "oauth",
		Short: "List and revoke the clients and grants of the built-in OAuth authorization server",
		Long: `List and revoke what the built-in OAuth authorization server knows: the
clients (MCP clients such as Claude, VS Code or mcp-remote that registered,
or presented a client ID metadata document) and the grants (a user's
consent to a client, which its access and refresh tokens come from).

The gateway runs that server with auth.mode: oauth and no external issuer
(docs/auth.md); elsewhere these commands say it is not running. Secrets are
never shown: a client secret is shown once, to the client, at registration.
Admin only.`,
		Example: `  switchboard oauth clients
  switchboard oauth grants --subject alice
  switchboard oauth grants revoke g_4kT...`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	r.register(cmd)
	cmd.AddCommand(newOAuthClients(r), newOAuthGrants(r))
	return cmd
}

func newOAuthClients(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "clients",
		Short: "List the OAuth clients, oldest first, with their active grants",
		Long: `List the clients of the built-in OAuth authorization server, oldest first:
how each is identified (dynamic: registered through /oauth/register;
document: its client ID is the URL of its metadata document), how it
authenticates at the token endpoint (none for a public client), its
redirect URIs, and how many active grants users gave it. Admin only.`,
		Example: `  switchboard oauth clients
  switchboard oauth clients -o json
  switchboard oauth clients delete sbclient_Xy...`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			list, err := c.OAuthClients(cmdContext(cmd))
			if err != nil {
				return explain(err, "OAuth clients")
			}
			if done, err := r.structured(list); done {
				return err
			}
			if len(list.Clients) == 0 {
				fmt.Fprintln(r.e.stdout, "no OAuth clients")
				return nil
			}
			t := &table{header: []string{"CLIENT ID", "NAME", "KIND", "AUTH", "GRANTS", "REDIRECT URIS", "CREATED"}}
			for _, x := range list.Clients {
				t.add(cell{text: x.ID}, cell{text: orDash(x.Name)}, cell{text: clientKind(x.Kind)}, cell{text: x.AuthMethod},
					cell{text: strconv.Itoa(x.ActiveGrants)}, cell{text: orDash(clip(strings.Join(x.RedirectURIs, " "), 60))},
					cell{text: stamp(x.CreatedAt)})
			}
			return t.render(r.e.stdout, r.color())
		},
	}
	r.registerOutput(cmd)
	cmd.AddCommand(newOAuthClientsDelete(r))
	return cmd
}

// clientKind shortens the API's kinds for the table.
func clientKind(kind string) string {
	if kind == "metadata_document" {
		return "document"
	}
	return kind
}

func newOAuthClientsDelete(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:     "delete <client-id>",
		Aliases: []string{"rm", "revoke"},
		Short:   "Delete an OAuth client and revoke every grant it has",
		Long: `Delete a client of the built-in OAuth authorization server and revoke its
grants: its refresh tokens fail at once, its access tokens on their next
request, and its users must authorize it again (a dynamically registered
client must register again; a metadata-document client is fetched anew).
Audited. Admin only.`,
		Example: `  switchboard oauth clients delete sbclient_Xy...`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			if err := c.DeleteOAuthClient(cmdContext(cmd), a[0]); err != nil {
				return explain(err, "OAuth clients")
			}
			fmt.Fprintf(r.e.stdout, "deleted OAuth client %s and revoked its grants\n", a[0])
			return nil
		},
	}
}

func newOAuthGrants(r *remote) *cobra.Command {
	var (
		q   apiclient.OAuthGrantQuery
		all bool
	)
	cmd := &cobra.Command{
		Use:   "grants",
		Short: "List the OAuth grants: who allowed which client what, and when",
		Long: `List the grants of the built-in OAuth authorization server, newest first:
each is one user's consent to one client (the subject is the user's agent
ID, which the access tokens carry), with its scope, when it was given and
last refreshed, and when it ends unless the client refreshes again. Only
the active grants by default; --all adds the revoked and expired ones
(kept 30 days by default) with why they ended. Admin only.`,
		Example: `  switchboard oauth grants
  switchboard oauth grants --subject alice --all
  switchboard oauth grants --client sbclient_Xy... -o json
  switchboard oauth grants revoke g_4kT...`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			q.ActiveOnly = !all
			list, err := c.OAuthGrants(cmdContext(cmd), q)
			if err != nil {
				return explain(err, "OAuth grants")
			}
			if done, err := r.structured(list); done {
				return err
			}
			if len(list.Grants) == 0 {
				if all {
					fmt.Fprintln(r.e.stdout, "no OAuth grants")
				} else {
					fmt.Fprintln(r.e.stdout, "no active OAuth grants")
				}
				return nil
			}
			header := []string{"GRANT ID", "CLIENT", "SUBJECT", "SCOPE", "STATUS", "CREATED", "REFRESHED", "EXPIRES"}
			if all {
				header = append(header, "REASON")
			}
			t := &table{header: header}
			for _, g := range list.Grants {
				status, color := grantStatus(g)
				row := []cell{{text: g.ID}, {text: grantClient(g)}, {text: orDash(g.Subject)}, {text: orDash(g.Scope)},
					{text: status, color: color}, {text: stamp(g.CreatedAt)}, {text: stampPtr(g.RefreshedAt)}, {text: stamp(g.ExpiresAt)}}
				if all {
					row = append(row, cell{text: orDash(clip(g.RevokedReason, 40))})
				}
				t.add(row...)
			}
			return t.render(r.e.stdout, r.color())
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.Subject, "subject", "", "only the grants of this user (agent ID)")
	f.StringVar(&q.ClientID, "client", "", "only the grants to this client ID")
	f.BoolVar(&all, "all", false, "also the revoked and expired grants")
	r.registerOutput(cmd)
	cmd.AddCommand(newOAuthGrantsRevoke(r))
	return cmd
}

// grantStatus is a grant's state as the table shows it.
func grantStatus(g api.OAuthGrant) (string, string) {
	switch {
	case g.Active:
		return "active", colorGreen
	case g.RevokedAt != nil:
		return "revoked", colorRed
	}
	return "expired", colorDim
}

// grantClient names a grant's client: its name when it has one, which is
// what the user saw on the consent page, else its ID.
func grantClient(g api.OAuthGrant) string {
	if g.ClientName != "" {
		return g.ClientName
	}
	return g.ClientID
}

func newOAuthGrantsRevoke(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke <grant-id>",
		Short: "Revoke an OAuth grant: its tokens stop working",
		Long: `Revoke a grant of the built-in OAuth authorization server: its refresh
tokens fail at once and its access tokens on their next request, on every
replica; the client then starts a new authorization. Revoking a revoked
grant is not an error. Audited. Admin only.`,
		Example: `  switchboard oauth grants revoke g_4kT...`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			if err := c.RevokeOAuthGrant(cmdContext(cmd), a[0]); err != nil {
				return explain(err, "OAuth grants")
			}
			fmt.Fprintf(r.e.stdout, "revoked OAuth grant %s\n", a[0])
			return nil
		},
	}
}

// usageArgs makes a wrong number of arguments a usage error (exit 2), as
// the root command's help promises.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}
