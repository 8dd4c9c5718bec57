package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/api"
)

func newGrant(e *env) *cobra.Command {
	r := &remote{e: e}
	var (
		expires          time.Duration
		token, singleUse bool
		bindArgs         string
		tokenTTL         time.Duration
		workspace        string
	)
	cmd := &cobra.Command{
		Use:   "grant (<agent> | --workspace <name>) <server.tool|pattern>",
		Short: "Let an agent (or a workspace) call a tool or a pattern of tools (\"github.*\")",
		Example: `  switchboard grant ci-bot demo.echo --expires 24h
  switchboard grant ops demo.fail --token --single-use --bind-args '{"message": "x"}'
  switchboard grant --workspace team-a "demo.*"`,
		Args: func(cmd *cobra.Command, a []string) error {
			if workspace != "" {
				if len(a) != 1 {
					return usageError{errors.New("with --workspace, give only the tool: grant --workspace <name> <server.tool|pattern>")}
				}
				return nil
			}
			return cobra.ExactArgs(2)(cmd, a)
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			if !token && (singleUse || bindArgs != "" || cmd.Flags().Changed("token-ttl")) {
				return usageError{errors.New("--single-use, --bind-args and --token-ttl apply to the token: add --token")}
			}
			req := api.GrantRequest{IssueToken: token, SingleUse: singleUse}
			if workspace != "" {
				req.Workspace, req.Tool = workspace, a[0]
			} else {
				req.AgentID, req.Tool = a[0], a[1]
			}
			if expires > 0 {
				at := time.Now().Add(expires).UTC()
				req.ExpiresAt = &at
			}
			if tokenTTL > 0 {
				req.TokenTTLMinutes = int((tokenTTL + time.Minute - 1) / time.Minute)
			}
			if bindArgs != "" {
				var obj map[string]any
				if err := json.Unmarshal([]byte(bindArgs), &obj); err != nil || obj == nil {
					return usageError{errors.New("--bind-args: want a JSON object")}
				}
				req.BindArguments = json.RawMessage(bindArgs)
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			res, err := c.Grant(cmdContext(cmd), req)
			if err != nil {
				return explain(err, "policies")
			}
			if done, err := r.structured(res); done {
				if err == nil && res.Token != "" {
					fmt.Fprintln(e.stderr, "switchboard: the approval token is shown only once: store it now")
				}
				return err
			}
			g := res.Grant
			fmt.Fprintf(e.stdout, "granted %s to %s (grant %s", grantTarget(g.Server, g.Tool), grantee(g.AgentID, g.Workspace), g.ID)
			if g.ExpiresAt != nil {
				fmt.Fprintf(e.stdout, ", expires %s", stamp(*g.ExpiresAt))
			}
			fmt.Fprintln(e.stdout, ")")
			if res.Token != "" {
				fmt.Fprintf(e.stdout, "approval token: %s\n", res.Token)
				fmt.Fprintln(e.stderr, "switchboard: the approval token is shown only once: store it now")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&expires, "expires", 0, "the grant ends after this long (e.g. 24h; default never)")
	f.BoolVar(&token, "token", false, "also issue a high-risk approval token for the grant")
	f.BoolVar(&singleUse, "single-use", false, "the token works for one call only")
	f.StringVar(&bindArgs, "bind-args", "", "bind the token to these exact arguments (a JSON object)")
	f.DurationVar(&tokenTTL, "token-ttl", 0, "the token's lifetime (default the gateway's)")
	f.StringVar(&workspace, "workspace", "", "grant to every identity of this workspace instead of one agent")
	r.register(cmd)
	r.registerOutput(cmd)
	return cmd
}

// grantee names who a grant is made to: an agent, or "workspace:<name>".
func grantee(agent, workspace string) string {
	if workspace != "" {
		return "workspace:" + workspace
	}
	return agent
}

func grantTarget(server, tool string) string {
	if server == "" {
		return tool
	}
	return server + "." + tool
}

func newRevoke(e *env) *cobra.Command {
	r := &remote{e: e}
	cmd := &cobra.Command{
		Use:   "revoke <grant-id>",
		Short: "Remove a grant",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			if err := c.RevokeGrant(cmdContext(cmd), a[0]); err != nil {
				return explain(err, "policies")
			}
			fmt.Fprintf(e.stdout, "revoked grant %s\n", a[0])
			return nil
		},
	}
	r.register(cmd)
	return cmd
}

func newPolicies(e *env) *cobra.Command {
	r := &remote{e: e}
	cmd := &cobra.Command{
		Use:   "policies [agent]",
		Short: "List grants: everyone's, or one agent's",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			agent := ""
			if len(a) == 1 {
				agent = a[0]
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			list, err := c.Policies(cmdContext(cmd), agent)
			if err != nil {
				return explain(err, "policies")
			}
			if done, err := r.structured(list); done {
				return err
			}
			if len(list.Grants) == 0 {
				fmt.Fprintln(e.stdout, "no grants")
				return nil
			}
			t := &table{header: []string{"ID", "AGENT", "TOOL", "ACTIONS", "GRANTED", "BY", "EXPIRES"}}
			for _, g := range list.Grants {
				t.addText(g.ID, grantee(g.AgentID, g.Workspace), grantTarget(g.Server, g.Tool), strings.Join(g.Actions, ","),
					stamp(g.GrantedAt), orDash(g.GrantedBy), stampPtr(g.ExpiresAt))
			}
			return t.render(e.stdout, r.color())
		},
	}
	r.register(cmd)
	r.registerOutput(cmd)
	return cmd
}

func newKeys(e *env) *cobra.Command {
	r := &remote{e: e}
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke API keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	r.register(cmd)
	cmd.AddCommand(newKeysCreate(r), newKeysList(r), newKeysRevoke(r), newKeysGenerateSecret(e), newKeysRotateSecret(e))
	return cmd
}

func newKeysCreate(r *remote) *cobra.Command {
	var (
		roles       []string
		admin       bool
		workspace   string
		allow, deny []string
		expires     time.Duration
		policy      bool
	)
	cmd := &cobra.Command{
		Use:   "create <agent>",
		Short: "Create an API key for an agent; the key is printed once",
		Long: `Create an API key for an agent; the key is printed once.

By default the key needs grants to call anything (default deny), and
--allow-server/--deny-server only restrict. With --workspace-policy the key
carries a workspace policy, as a seed 003 JWT does: every server whose
default_access is allow, minus --deny-server, plus the default_access deny
servers named by --allow-server, with no grant needed (docs/access.md).`,
		Example: `  switchboard keys create ci-bot --role review
  switchboard keys create research-agent --workspace research --workspace-policy --allow-server research_fs`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			req := api.KeyRequest{AgentID: a[0], Roles: roles, Admin: admin, Workspace: workspace, AllowServers: allow, DenyServers: deny,
				WorkspacePolicy: policy}
			if expires > 0 {
				at := time.Now().Add(expires).UTC()
				req.ExpiresAt = &at
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			k, err := c.CreateKey(cmdContext(cmd), req)
			if err != nil {
				return explain(err, "API keys")
			}
			const warn = "switchboard: the key is shown only once: store it now (a password manager, a secret store)"
			if done, err := r.structured(k); done {
				if err == nil {
					fmt.Fprintln(r.e.stderr, warn)
				}
				return err
			}
			fmt.Fprintln(r.e.stdout, k.Key)
			fmt.Fprintf(r.e.stderr, "created key %s for %s\n%s\n", k.ID, k.AgentID, warn)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&roles, "role", nil, "role of the agent, repeatable")
	f.BoolVar(&admin, "admin", false, "the key administers the gateway")
	f.StringVar(&workspace, "workspace", "", "the agent's workspace")
	f.StringArrayVar(&allow, "allow-server", nil, "servers with default_access deny this key may use, repeatable")
	f.StringArrayVar(&deny, "deny-server", nil, "never these servers, repeatable")
	f.BoolVar(&policy, "workspace-policy", false, "the key's admin, allow and deny lists are its workspace policy: no grants needed (seed 003)")
	f.DurationVar(&expires, "expires", 0, "the key ends after this long (default never)")
	r.registerOutput(cmd)
	return cmd
}

func newKeysList(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List API keys (never their secrets)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			list, err := c.Keys(cmdContext(cmd))
			if err != nil {
				return explain(err, "API keys")
			}
			if done, err := r.structured(list); done {
				return err
			}
			if len(list.Keys) == 0 {
				fmt.Fprintln(r.e.stdout, "no keys")
				return nil
			}
			t := &table{header: []string{"ID", "PREFIX", "AGENT", "ROLES", "WORKSPACE", "ADMIN", "CREATED", "EXPIRES", "REVOKED"}}
			for _, k := range list.Keys {
				adm := "no"
				if k.Admin {
					adm = "yes"
				}
				revoked := cell{text: stampPtr(k.RevokedAt)}
				if k.RevokedAt != nil {
					revoked.color = colorRed
				}
				t.add(cell{text: k.ID}, cell{text: k.Prefix}, cell{text: k.AgentID}, cell{text: orDash(strings.Join(k.Roles, ","))},
					cell{text: orDash(k.Workspace)}, cell{text: adm}, cell{text: stamp(k.CreatedAt)}, cell{text: stampPtr(k.ExpiresAt)}, revoked)
			}
			return t.render(r.e.stdout, r.color())
		},
	}
	r.registerOutput(cmd)
	return cmd
}

func newKeysRevoke(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke <id>",
		Short: "Revoke an API key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			if err := c.RevokeKey(cmdContext(cmd), a[0]); err != nil {
				return explain(err, "API keys")
			}
			fmt.Fprintf(r.e.stdout, "revoked key %s\n", a[0])
			return nil
		},
	}
}
