package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

// Pins reads and approves the pinned definitions of tools (tool pinning:
// a tool whose upstream changed its definition since it was pinned is held
// back by the catalog until an admin approves the new definition). The
// app implements it.
type Pins interface {
	// Pinned returns the pin of a held tool.
	Pinned(ctx context.Context, t catalog.Tool) (PinRecord, error)
	// Approve pins the held tool's current definition (hash, if set, must
	// be its hash: the definition the admin saw) and serves it again.
	Approve(ctx context.Context, t catalog.Tool, hash, approvedBy string) (PinRecord, error)
}

// PinRecord is a tool's pinned definition.
type PinRecord struct {
	Hash       string
	Definition json.RawMessage
	PinnedAt   time.Time
	// ApprovedBy is who approved it; "" when pinned on first sight.
	ApprovedBy string
	// ChangedAt is when the upstream's other definition was first seen;
	// zero when unknown or none.
	ChangedAt time.Time
}

// Definition is one definition of a tool in the pinned form (name,
// description, inputSchema, outputSchema, annotations; canonical JSON).
type Definition struct {
	Hash       string          `json:"hash"`
	Definition json.RawMessage `json:"definition"`
	PinnedAt   *time.Time      `json:"pinned_at,omitempty"`
	ApprovedBy string          `json:"approved_by,omitempty"`
}

// QuarantinedTool is a tool held back because its upstream presents
// another definition than the pinned one: the two definitions, and which
// of their fields differ.
type QuarantinedTool struct {
	Name          string     `json:"name"`
	OriginalName  string     `json:"original_name"`
	ServerID      string     `json:"server_id"`
	ServerName    string     `json:"server_name"`
	Available     bool       `json:"available"`
	Pinned        Definition `json:"pinned"`
	Current       Definition `json:"current"`
	ChangedFields []string   `json:"changed_fields"`
	// ChangedAt is when the gateway first saw the current definition.
	ChangedAt *time.Time `json:"changed_at,omitempty"`
}

// ApprovedTool is the answer of POST /api/v1/tools/{name}/approve.
type ApprovedTool struct {
	Name         string    `json:"name"`
	OriginalName string    `json:"original_name"`
	ServerName   string    `json:"server_name"`
	Hash         string    `json:"hash"`
	ApprovedBy   string    `json:"approved_by"`
	PinnedAt     time.Time `json:"pinned_at"`
}

// approveRequest is the optional body of POST /api/v1/tools/{name}/approve.
type approveRequest struct {
	// Hash is the current definition's hash as the admin saw it (GET
	// /api/v1/tools/quarantined): the approval fails with 409 if the
	// upstream changed the definition again since.
	Hash string `json:"hash"`
}

func (h *handler) listQuarantined(w http.ResponseWriter, r *http.Request) error {
	if h.pins == nil {
		return notConfigured("tool pins")
	}
	out := []QuarantinedTool{}
	ids := map[string]string{}
	for _, t := range h.cat.Snapshot().Held() {
		cur, err := t.Pin()
		if err != nil {
			return err
		}
		pin, err := h.pins.Pinned(r.Context(), t)
		if err != nil {
			return err
		}
		id, ok := ids[t.Server]
		if !ok {
			if s, err := h.servers.Get(r.Context(), t.Server); err == nil {
				id = s.ID
			}
			ids[t.Server] = id
		}
		q := QuarantinedTool{Name: t.Name, OriginalName: t.OriginalName, ServerID: id, ServerName: t.Server, Available: t.Available,
			Pinned:        Definition{Hash: pin.Hash, Definition: pin.Definition, PinnedAt: timePtr(pin.PinnedAt), ApprovedBy: pin.ApprovedBy},
			Current:       Definition{Hash: cur.Hash, Definition: cur.Definition},
			ChangedFields: catalog.ChangedFields(pin.Definition, cur.Definition),
			ChangedAt:     timePtr(pin.ChangedAt)}
		out = append(out, q)
	}
	writeJSON(w, http.StatusOK, map[string]any{"tools": out, "total": len(out)})
	return nil
}

func (h *handler) approveTool(w http.ResponseWriter, r *http.Request) error {
	if h.pins == nil {
		return notConfigured("tool pins")
	}
	// The body is optional: without one, the current definition is approved.
	var req approveRequest
	if err := h.decodeOptional(w, r, &req); err != nil {
		return err
	}
	name := r.PathValue("name")
	snap := h.cat.Snapshot()
	t, ok := snap.HeldTool(name)
	if !ok {
		if served, found := snap.Tool(name); found {
			return &Error{Status: http.StatusConflict, Code: CodeConflict,
				Message: "tool " + quote(served.Name) + " is not quarantined: its definition is the pinned one"}
		}
		return &Error{Status: http.StatusNotFound, Code: string(invoke.CodeToolNotFound), Message: "unknown tool " + quote(name)}
	}
	id, _ := caller(r.Context())
	p, err := h.pins.Approve(r.Context(), t, req.Hash, actor(id))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ApprovedTool{Name: t.Name, OriginalName: t.OriginalName, ServerName: t.Server,
		Hash: p.Hash, ApprovedBy: p.ApprovedBy, PinnedAt: p.PinnedAt})
	return nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
