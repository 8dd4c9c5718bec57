package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// AuditLog answers audit queries, newest first, a page at a time.
type AuditLog interface {
	Query(ctx context.Context, f audit.Filter) (recs []audit.Record, next string, err error)
}

// queryAudit serves GET /api/v1/audit. Every filter is checked before the
// query runs: a typo in a filter must not silently widen the result.
func (h *handler) queryAudit(w http.ResponseWriter, r *http.Request) error {
	if h.audit == nil {
		return notConfigured("audit logs")
	}
	f, err := auditFilter(r.URL.Query())
	if err != nil {
		return err
	}
	recs, next, err := h.audit.Query(r.Context(), f)
	if f.Cursor != "" && errors.Is(err, store.ErrInvalid) {
		return badParam("cursor", "malformed: pass the next_cursor of a previous page unchanged")
	}
	if err != nil {
		return err
	}
	if recs == nil {
		recs = []audit.Record{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": recs, "next_cursor": next})
	return nil
}

func auditFilter(q url.Values) (audit.Filter, error) {
	f := audit.Filter{
		AgentID: q.Get("agent_id"),
		Server:  q.Get("server_id"),
		Tool:    q.Get("tool_name"),
		Cursor:  q.Get("cursor"),
	}
	if v := q.Get("decision"); v != "" {
		f.Decision = strings.ToUpper(v)
		if f.Decision != "ALLOW" && f.Decision != "DENY" {
			return f, badParam("decision", "must be ALLOW or DENY")
		}
	}
	if v := q.Get("kind"); v != "" {
		if v != audit.KindInvocation && v != audit.KindOperation {
			return f, badParam("kind", "must be "+audit.KindInvocation+" or "+audit.KindOperation)
		}
		f.Kind = v
	}
	if v := q.Get("success"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return f, badParam("success", "must be true or false")
		}
		f.Success = &b
	}
	var err error
	if f.Since, f.Until, err = timeRange(q); err != nil {
		return f, err
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return f, badParam("limit", "must be an integer in 1..1000")
		}
		f.Limit = n
	}
	return f, nil
}

// timeRange parses the since and until parameters (RFC 3339).
func timeRange(q url.Values) (since, until time.Time, err error) {
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"since", &since}, {"until", &until}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		if *p.t, err = time.Parse(time.RFC3339, v); err != nil {
			return since, until, badParam(p.name, "must be an RFC 3339 time, like 2025-01-16T10:30:00Z")
		}
	}
	if !since.IsZero() && !until.IsZero() && until.Before(since) {
		return since, until, badParam("until", "must not be before since")
	}
	return since, until, nil
}
