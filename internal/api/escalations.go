package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// Escalations lists and acknowledges escalations, and lists and decides
// approval requests (docs/escalation.md). *escalation.Service implements
// it.
type Escalations interface {
	List(ctx context.Context, unacked bool) ([]store.Escalation, error)
	Ack(ctx context.Context, id, by string) (store.Escalation, error)
	Approvals(ctx context.Context, status string) ([]store.Approval, error)
	Decide(ctx context.Context, id string, approve bool, by, reason string) (store.Approval, error)
}

// EscalationView is one escalation in the API: a call that failed after
// its retries and fallbacks (event call_failed) or a high-risk call
// waiting for approval (approval_requested).
type EscalationView struct {
	ID               string     `json:"id"`
	Event            string     `json:"event"`
	CorrelationID    string     `json:"correlation_id,omitempty"`
	AgentID          string     `json:"agent_id,omitempty"`
	Server           string     `json:"server,omitempty"`
	Tool             string     `json:"tool,omitempty"`
	ErrorCode        string     `json:"error_code,omitempty"`
	Error            string     `json:"error,omitempty"`
	Attempts         int        `json:"attempts"`
	ApprovalID       string     `json:"approval_id,omitempty"`
	CreatedAt        time.Time  `json:"created_at"`
	DeliveredAt      *time.Time `json:"delivered_at,omitempty"`
	DeliveryAttempts int        `json:"delivery_attempts"`
	DeliveryError    string     `json:"delivery_error,omitempty"`
	AckedAt          *time.Time `json:"acked_at,omitempty"`
	AckedBy          string     `json:"acked_by,omitempty"`
}

func escalationView(e store.Escalation) EscalationView {
	return EscalationView{ID: e.ID, Event: e.Event, CorrelationID: e.CorrelationID, AgentID: e.AgentID, Server: e.Server, Tool: e.Tool,
		ErrorCode: e.ErrorCode, Error: e.Error, Attempts: e.Attempts, ApprovalID: e.ApprovalID, CreatedAt: e.CreatedAt,
		DeliveredAt: e.DeliveredAt, DeliveryAttempts: e.DeliveryAttempts, DeliveryError: e.DeliveryError, AckedAt: e.AckedAt, AckedBy: e.AckedBy}
}

// ApprovalView is one approval request in the API. The token an approval
// issues is never shown: only the caller's retry receives it.
type ApprovalView struct {
	ID            string     `json:"id"`
	Status        string     `json:"status"` // pending | approved | denied | used
	AgentID       string     `json:"agent_id"`
	Server        string     `json:"server"`
	Tool          string     `json:"tool"`
	Name          string     `json:"name"`
	ArgsDigest    string     `json:"args_digest"`
	CorrelationID string     `json:"correlation_id,omitempty"`
	RequestedAt   time.Time  `json:"requested_at"`
	ExpiresAt     time.Time  `json:"expires_at"`
	DecidedAt     *time.Time `json:"decided_at,omitempty"`
	DecidedBy     string     `json:"decided_by,omitempty"`
	Reason        string     `json:"reason,omitempty"`
	UsedAt        *time.Time `json:"used_at,omitempty"`
}

func approvalView(a store.Approval) ApprovalView {
	return ApprovalView{ID: a.ID, Status: a.Status, AgentID: a.AgentID, Server: a.Server, Tool: a.Tool, Name: a.Name,
		ArgsDigest: a.ArgsDigest, CorrelationID: a.CorrelationID, RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt,
		DecidedAt: a.DecidedAt, DecidedBy: a.DecidedBy, Reason: a.Reason, UsedAt: a.UsedAt}
}

func (h *handler) listEscalations(w http.ResponseWriter, r *http.Request) error {
	if h.escalations == nil {
		return notConfigured("escalations")
	}
	unacked, err := boolParam(r, "unacked")
	if err != nil {
		return err
	}
	list, err := h.escalations.List(r.Context(), unacked)
	if err != nil {
		return err
	}
	out := make([]EscalationView, 0, len(list))
	for _, e := range list {
		out = append(out, escalationView(e))
	}
	writeJSON(w, http.StatusOK, map[string]any{"escalations": out, "total": len(out)})
	return nil
}

func (h *handler) ackEscalation(w http.ResponseWriter, r *http.Request) error {
	if h.escalations == nil {
		return notConfigured("escalations")
	}
	id, _ := caller(r.Context())
	e, err := h.escalations.Ack(r.Context(), r.PathValue("id"), actor(id))
	h.operation(r.Context(), "escalation.ack", e.Server, r.PathValue("id"), err)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, escalationView(e))
	return nil
}

func (h *handler) listApprovals(w http.ResponseWriter, r *http.Request) error {
	if h.escalations == nil {
		return notConfigured("approvals")
	}
	status := r.URL.Query().Get("status")
	switch status {
	case "", store.ApprovalPending, store.ApprovalApproved, store.ApprovalDenied, store.ApprovalUsed:
	default:
		return badParam("status", "must be pending, approved, denied or used")
	}
	list, err := h.escalations.Approvals(r.Context(), status)
	if err != nil {
		return err
	}
	out := make([]ApprovalView, 0, len(list))
	for _, a := range list {
		out = append(out, approvalView(a))
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": out, "total": len(out)})
	return nil
}

// decisionRequest is the optional body of POST
// /api/v1/approvals/{id}/approve|deny.
type decisionRequest struct {
	Reason string `json:"reason"`
}

func (h *handler) approveRequest(w http.ResponseWriter, r *http.Request) error {
	return h.decide(w, r, true)
}

func (h *handler) denyRequest(w http.ResponseWriter, r *http.Request) error {
	return h.decide(w, r, false)
}

func (h *handler) decide(w http.ResponseWriter, r *http.Request, approve bool) error {
	if h.escalations == nil {
		return notConfigured("approvals")
	}
	var req decisionRequest
	if err := h.decodeOptional(w, r, &req); err != nil {
		return err
	}
	id, _ := caller(r.Context())
	a, err := h.escalations.Decide(r.Context(), r.PathValue("id"), approve, actor(id), req.Reason)
	op := "approval.deny"
	if approve {
		op = "approval.approve"
	}
	detail := r.PathValue("id")
	if err == nil {
		detail += " " + a.Name + " for " + a.AgentID
	}
	h.operation(r.Context(), op, a.Server, detail, err)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, approvalView(a))
	return nil
}

// boolParam reads an optional boolean query parameter.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badParam(name, "must be true or false")
	}
	return b, nil
}
