package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

// newEscalations lists escalations; its subcommand ack acknowledges one.
func newEscalations(e *env) *cobra.Command {
	r := &remote{e: e}
	var unacked bool
	cmd := &cobra.Command{
		Use:   "escalations",
		Short: "List what the gateway escalated to a human: failed calls and approval requests",
		Long: `List the escalations, newest first: calls that failed after their retries
and fallbacks (call_failed), and high-risk calls waiting for a human
approval (approval_requested). Each is stored, POSTed to
settings.escalation_webhook_url (retried until the webhook takes it), and
listed here until acknowledged with "switchboard escalations ack ID".
Admin only.`,
		Example: `  switchboard escalations
  switchboard escalations --unacked
  switchboard escalations ack esc_k3j5...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			list, err := c.Escalations(cmdContext(cmd), unacked)
			if err != nil {
				return explain(err, "escalations")
			}
			if done, err := r.structured(list); done {
				return err
			}
			if len(list.Escalations) == 0 {
				fmt.Fprintln(e.stdout, "no escalations")
				return nil
			}
			t := &table{header: []string{"ID", "EVENT", "TOOL", "AGENT", "CODE", "ATTEMPTS", "CREATED", "DELIVERED", "ACKED BY", "DETAIL"}}
			for _, x := range list.Escalations {
				delivered := stampPtr(x.DeliveredAt)
				if x.DeliveredAt == nil && x.DeliveryAttempts > 0 {
					delivered = "retrying (" + strconv.Itoa(x.DeliveryAttempts) + ")"
				}
				detail := x.Error
				if x.ApprovalID != "" {
					detail = "approval " + x.ApprovalID
				}
				t.add(cell{text: x.ID}, cell{text: x.Event, color: eventColor(x.Event)}, cell{text: orDash(x.Tool)}, cell{text: orDash(x.AgentID)},
					cell{text: orDash(x.ErrorCode)}, cell{text: strconv.Itoa(x.Attempts)}, cell{text: stamp(x.CreatedAt)},
					cell{text: delivered}, cell{text: orDash(x.AckedBy)}, cell{text: orDash(clip(detail, 60))})
			}
			return t.render(e.stdout, r.color())
		},
	}
	cmd.Flags().BoolVar(&unacked, "unacked", false, "only the escalations nobody acknowledged yet")
	r.register(cmd)
	r.registerOutput(cmd)
	cmd.AddCommand(newEscalationsAck(r))
	return cmd
}

func eventColor(event string) string {
	if event == "call_failed" {
		return colorRed
	}
	return colorYellow
}

func newEscalationsAck(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ack <id>",
		Short: "Acknowledge an escalation, so that it leaves the --unacked list",
		Long: `Record that you took charge of an escalation. The acknowledgement, and who
made it, is audited. Admin only.`,
		Example: `  switchboard escalations ack esc_k3j5...`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			x, err := c.AckEscalation(cmdContext(cmd), a[0])
			if err != nil {
				return explain(err, "escalations")
			}
			if done, err := r.structured(x); done {
				return err
			}
			fmt.Fprintf(r.e.stdout, "acknowledged %s (%s of %s) by %s\n", x.ID, x.Event, orDash(x.Tool), orDash(x.AckedBy))
			return nil
		},
	}
	r.registerOutput(cmd)
	return cmd
}

// newApprovals lists approval requests; approve and deny decide one.
func newApprovals(e *env) *cobra.Command {
	r := &remote{e: e}
	var status string
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List the approval requests of high-risk calls",
		Long: `List the approval requests, newest first. With authz.approval: request, a
call to a high-risk tool without an approval token files one (tool,
digest of the arguments, caller) and is refused with approval_required
naming it. "switchboard approvals approve ID" lets the caller's retry with
the same arguments pass once; "switchboard approvals deny ID" refuses it.
Admin only.`,
		Example: `  switchboard approvals --status pending
  switchboard approvals approve apr_x7...
  switchboard approvals deny apr_x7... --reason "not during the freeze"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			list, err := c.Approvals(cmdContext(cmd), status)
			if err != nil {
				return explain(err, "approvals")
			}
			if done, err := r.structured(list); done {
				return err
			}
			if len(list.Approvals) == 0 {
				fmt.Fprintln(e.stdout, "no approval requests")
				return nil
			}
			t := &table{header: []string{"ID", "STATUS", "TOOL", "AGENT", "ARGUMENTS", "REQUESTED", "DECIDED BY", "REASON"}}
			for _, a := range list.Approvals {
				t.add(cell{text: a.ID}, cell{text: a.Status, color: approvalColor(a.Status)}, cell{text: a.Name}, cell{text: a.AgentID},
					cell{text: shortHash(a.ArgsDigest)}, cell{text: stamp(a.RequestedAt)}, cell{text: orDash(a.DecidedBy)}, cell{text: orDash(clip(a.Reason, 40))})
			}
			return t.render(e.stdout, r.color())
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only requests in this state: pending, approved, denied or used")
	r.register(cmd)
	r.registerOutput(cmd)
	cmd.AddCommand(newApprovalsDecide(r, true), newApprovalsDecide(r, false))
	return cmd
}

func approvalColor(status string) string {
	switch status {
	case "pending":
		return colorYellow
	case "denied":
		return colorRed
	}
	return colorGreen
}

func newApprovalsDecide(r *remote, approve bool) *cobra.Command {
	var reason string
	verb, short, long := "deny", "Deny an approval request: the call stays refused",
		`Deny a pending approval request: the caller's retries of that call are
refused (naming the request) until it expires. Audited. Admin only.`
	if approve {
		verb, short, long = "approve", "Approve an approval request: the caller's retry passes once",
			`Approve a pending approval request: the caller's next retry of the same call
(same tool, same arguments) passes once, with a single-use approval token
bound to them; a further retry files a new request. Audited. Admin only.`
	}
	cmd := &cobra.Command{
		Use:     verb + " <id>",
		Short:   short,
		Long:    long,
		Example: "  switchboard approvals " + verb + ` apr_x7... --reason "ticket OPS-42"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			res, err := c.DecideApproval(cmdContext(cmd), a[0], approve, reason)
			if err != nil {
				return explain(err, "approvals")
			}
			if done, err := r.structured(res); done {
				return err
			}
			fmt.Fprintf(r.e.stdout, "%s %s: %s for %s, by %s\n", res.Status, res.ID, res.Name, res.AgentID, orDash(res.DecidedBy))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, kept with the decision and shown to the caller on a denial")
	r.registerOutput(cmd)
	return cmd
}
