package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/apiclient"
)

// newToolsQuarantined lists the tools held back by tool pinning.
func newToolsQuarantined(r *remote) *cobra.Command {
	var (
		server string
		diff   bool
	)
	cmd := &cobra.Command{
		Use:   "quarantined",
		Short: "List the tools quarantined because their definition changed since it was pinned",
		Long: `List the tools the gateway holds back because their upstream changed their
definition (name, description, schemas or annotations) since the gateway
pinned it: they are not listed to clients and their calls are refused with
tool_definition_changed until an admin approves the new definition with
"switchboard tools approve". --diff shows what changed. Admin only.`,
		Example: `  switchboard tools quarantined
  switchboard tools quarantined --diff --server github`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			list, err := c.QuarantinedTools(cmdContext(cmd))
			if err != nil {
				return explain(err, "tool pinning")
			}
			if server != "" {
				kept := list.Tools[:0]
				for _, q := range list.Tools {
					if q.ServerName == server {
						kept = append(kept, q)
					}
				}
				list = apiclient.QuarantinedList{Tools: kept, Total: len(kept)}
			}
			if done, err := r.structured(list); done {
				return err
			}
			if len(list.Tools) == 0 {
				fmt.Fprintln(r.e.stdout, "no quarantined tools")
				return nil
			}
			if diff {
				for i, q := range list.Tools {
					if i > 0 {
						fmt.Fprintln(r.e.stdout)
					}
					writeDiff(r.e.stdout, q)
				}
				return nil
			}
			t := &table{header: []string{"TOOL", "SERVER", "CHANGED", "SINCE", "PINNED", "CURRENT"}}
			for _, q := range list.Tools {
				t.add(cell{text: q.Name, color: colorYellow}, cell{text: q.ServerName}, cell{text: orDash(strings.Join(q.ChangedFields, ","))},
					cell{text: stampPtr(q.ChangedAt)}, cell{text: shortHash(q.Pinned.Hash)}, cell{text: shortHash(q.Current.Hash)})
			}
			if err := t.render(r.e.stdout, r.color()); err != nil {
				return err
			}
			fmt.Fprintln(r.e.stderr, `switchboard: review with "switchboard tools quarantined --diff", then "switchboard tools approve TOOL"`)
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "only this server's tools")
	cmd.Flags().BoolVar(&diff, "diff", false, "show the pinned and the current value of each changed field")
	r.registerOutput(cmd)
	return cmd
}

// newToolsApprove approves a quarantined tool's new definition.
func newToolsApprove(r *remote) *cobra.Command {
	var hash string
	cmd := &cobra.Command{
		Use:   "approve <server.tool>",
		Short: "Approve the new definition of a quarantined tool, which is then served again",
		Long: `Pin the definition a quarantined tool's upstream now presents, so that the
gateway serves the tool again; the approval, and who made it, is audited.
With --hash, the approval succeeds only if the definition is still the one
whose hash "switchboard tools quarantined" showed (a definition that changed
again since is refused). Admin only.`,
		Example: `  switchboard tools approve github.create_issue`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			res, err := c.ApproveTool(cmdContext(cmd), a[0], hash)
			if err != nil {
				return explain(err, "tool pinning")
			}
			if done, err := r.structured(res); done {
				return err
			}
			fmt.Fprintf(r.e.stdout, "approved %s: definition %s pinned by %s; the tool is served again\n",
				res.Name, shortHash(res.Hash), orDash(res.ApprovedBy))
			return nil
		},
	}
	cmd.Flags().StringVar(&hash, "hash", "", "approve only if the current definition has this hash (as listed)")
	r.registerOutput(cmd)
	return cmd
}

// writeDiff prints, per changed field, its pinned and current values.
func writeDiff(w io.Writer, q api.QuarantinedTool) {
	fmt.Fprintf(w, "%s (server %s): definition changed %s\n", q.Name, q.ServerName, stampPtr(q.ChangedAt))
	fmt.Fprintf(w, "  pinned  %s  %s\n", shortHash(q.Pinned.Hash), pinOrigin(q.Pinned))
	fmt.Fprintf(w, "  current %s\n", shortHash(q.Current.Hash))
	var pinned, current map[string]json.RawMessage
	_ = json.Unmarshal(q.Pinned.Definition, &pinned) // a broken one shows as absent fields
	_ = json.Unmarshal(q.Current.Definition, &current)
	for _, f := range q.ChangedFields {
		fmt.Fprintf(w, "  %s:\n", f)
		fmt.Fprintf(w, "  - %s\n", fieldText(pinned[f]))
		fmt.Fprintf(w, "  + %s\n", fieldText(current[f]))
	}
}

func pinOrigin(d api.Definition) string {
	at := stampPtr(d.PinnedAt)
	if d.ApprovedBy == "" {
		return "first seen " + at
	}
	return "approved by " + d.ApprovedBy + " " + at
}

// fieldText shows a string field as its text and anything else as JSON.
func fieldText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "(none)"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return orDash(h)
}
