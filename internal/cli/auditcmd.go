package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/apiclient"
	"github.com/switchboard-mcp/switchboard/internal/audit"
)

// auditPollInterval is how often audit --follow asks for new records.
var auditPollInterval = 2 * time.Second

func newAudit(e *env) *cobra.Command {
	r := &remote{e: e}
	var (
		q      apiclient.AuditQuery
		since  string
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Query the audit log (newest first), or follow it",
		Long: `Query the audit log, newest first. --since takes a duration back from now
(1h, 30m) or an RFC 3339 time. --follow prints records as they are written,
oldest first (one JSON object per line with -o json), until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return usageError{err}
				}
				q.Since = t
			}
			if q.Limit < 1 || q.Limit > 1000 {
				return usageError{errors.New("--limit must be in 1..1000")}
			}
			q.Decision = strings.ToUpper(q.Decision)
			c, err := r.client()
			if err != nil {
				return err
			}
			if follow {
				return followAudit(cmdContext(cmd), r, c, q)
			}
			page, err := c.Audit(cmdContext(cmd), q)
			if err != nil {
				return explain(err, "audit logs")
			}
			if done, err := r.structured(page); done {
				return err
			}
			if len(page.Records) == 0 {
				fmt.Fprintln(e.stdout, "no records")
				return nil
			}
			t := auditTable()
			for _, rec := range page.Records {
				t.add(auditRow(rec)...)
			}
			if err := t.render(e.stdout, r.color()); err != nil {
				return err
			}
			if page.NextCursor != "" {
				fmt.Fprintln(e.stderr, "switchboard: more records: narrow the filters or raise --limit")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.AgentID, "agent", "", "only this agent's records")
	f.StringVar(&q.Server, "server", "", "only this server's records")
	f.StringVar(&q.Tool, "tool", "", "only this tool's records (the server's own tool name)")
	f.StringVar(&q.Decision, "decision", "", "only ALLOW or DENY")
	f.StringVar(&q.Kind, "kind", "", "only invocation or operation records")
	f.StringVar(&since, "since", "", "only records after this (a duration like 1h, or an RFC 3339 time)")
	f.IntVar(&q.Limit, "limit", 50, "at most this many records (1..1000)")
	f.BoolVarP(&follow, "follow", "f", false, "print new records as they are written")
	r.register(cmd)
	r.registerOutput(cmd)
	return cmd
}

// parseSince reads --since: a duration back from now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--since %q: want a positive duration", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want a duration (1h) or an RFC 3339 time (2025-01-16T10:30:00Z)", s)
	}
	return t, nil
}

func auditTable() *table {
	return &table{header: []string{"TIME", "AGENT", "TOOL", "DECISION", "RESULT", "LATENCY", "ATTEMPTS", "ERROR"}}
}

func auditRow(rec audit.Record) []cell {
	what := grantTarget(rec.Server, rec.Tool)
	if rec.Kind == audit.KindOperation {
		what = rec.Operation
		switch {
		case rec.Tool != "": // tool pinning's records name the tool
			what += " " + grantTarget(rec.Server, rec.Tool)
		case rec.Server != "":
			what += " " + rec.Server
		}
	}
	result := cell{text: "ok", color: colorGreen}
	if !rec.Success {
		result = cell{text: orDash(rec.ErrorCode), color: colorRed}
	}
	return []cell{{text: stamp(rec.InvokedAt)}, {text: orDash(rec.AgentID)}, {text: orDash(what)},
		{text: orDash(rec.PolicyDecision), color: stateColor(rec.PolicyDecision)}, result,
		{text: strconv.FormatFloat(rec.LatencyMS, 'f', 1, 64) + " ms"}, {text: strconv.Itoa(rec.Attempts)},
		{text: orDash(clip(rec.Error, 60))}}
}

// followAudit polls for records newer than the newest seen. Records with
// the same timestamp as the newest are asked for again (since is
// inclusive) and skipped by id, so none is lost or printed twice.
func followAudit(ctx context.Context, r *remote, c *apiclient.Client, q apiclient.AuditQuery) error {
	seen := map[string]bool{}
	first := true
	tick := time.NewTicker(auditPollInterval)
	defer tick.Stop()
	for {
		recs, err := newRecords(ctx, c, q, first)
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: following ends normally
			}
			return explain(err, "audit logs")
		}
		slices.Reverse(recs) // oldest first
		var fresh []audit.Record
		for _, rec := range recs {
			if !seen[rec.ID] {
				fresh = append(fresh, rec)
			}
		}
		if len(recs) > 0 {
			newest := recs[len(recs)-1].InvokedAt
			// Forget ids older than the window: the next query cannot return them.
			for id := range seen {
				delete(seen, id)
			}
			for _, rec := range recs {
				if rec.InvokedAt.Equal(newest) {
					seen[rec.ID] = true
				}
			}
			q.Since = newest
		}
		if err := printFollowed(r, fresh, first); err != nil {
			return err
		}
		first = false
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// newRecords returns the records matching q, newest first: the first
// time one page (the last --limit records), later every page since q.Since,
// so a burst between two polls is not cut off.
func newRecords(ctx context.Context, c *apiclient.Client, q apiclient.AuditQuery, first bool) ([]audit.Record, error) {
	var out []audit.Record
	for {
		page, err := c.Audit(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Records...)
		if first || page.NextCursor == "" {
			return out, nil
		}
		q.Cursor = page.NextCursor
	}
}

func printFollowed(r *remote, recs []audit.Record, header bool) error {
	if r.output == "json" || r.output == "yaml" {
		// One object per line (JSON Lines) whatever -o says: a stream has
		// no enclosing document.
		for _, rec := range recs {
			raw, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			fmt.Fprintln(r.e.stdout, string(raw))
		}
		return nil
	}
	if header {
		fmt.Fprintln(r.e.stdout, "TIME                  AGENT            TOOL                            DECISION  RESULT              LATENCY")
	}
	for _, rec := range recs {
		row := auditRow(rec)
		fmt.Fprintf(r.e.stdout, "%-21s %-16s %-31s %-9s %-19s %s\n", row[0].text, row[1].text, row[2].text, row[3].text, row[4].text, row[5].text)
	}
	return nil
}

func newBreakers(e *env) *cobra.Command {
	r := &remote{e: e}
	cmd := &cobra.Command{
		Use:   "breakers",
		Short: "List the circuit breakers and their state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			list, err := c.Breakers(cmdContext(cmd))
			if err != nil {
				return explain(err, "circuit breakers")
			}
			if done, err := r.structured(list); done {
				return err
			}
			if len(list.Breakers) == 0 {
				fmt.Fprintln(e.stdout, "no circuit breakers yet (one appears with the first call of a tool)")
				return nil
			}
			t := &table{header: []string{"CIRCUIT", "STATE", "FAILURES", "SUCCESSES", "LAST FAILURE", "OPENED", "NEXT ATTEMPT"}}
			for _, b := range list.Breakers {
				t.add(cell{text: b.Key}, cell{text: b.State, color: stateColor(b.State)}, cell{text: strconv.Itoa(b.Failures)},
					cell{text: strconv.Itoa(b.Successes)}, cell{text: stampPtr(b.LastFailureAt)}, cell{text: stampPtr(b.OpenedAt)},
					cell{text: stampPtr(b.NextAttemptAt)})
			}
			return t.render(e.stdout, r.color())
		},
	}
	r.register(cmd)
	r.registerOutput(cmd)
	return cmd
}
