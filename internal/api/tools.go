package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/skills"
)

// Tool is the API's view of one catalog tool.
type Tool struct {
	Name         string               `json:"name"`
	OriginalName string               `json:"original_name"`
	Title        string               `json:"title,omitempty"`
	Description  string               `json:"description,omitempty"`
	ServerID     string               `json:"server_id"`
	ServerName   string               `json:"server_name"`
	ServerStatus string               `json:"server_status"`
	Available    bool                 `json:"available"`
	IsExternal   bool                 `json:"is_external"`
	InputSchema  any                  `json:"input_schema,omitempty"`
	OutputSchema any                  `json:"output_schema,omitempty"`
	Annotations  *mcp.ToolAnnotations `json:"annotations,omitempty"`
	// The tool's skills, as in search hits (AG-US3). They are absent when
	// the gateway has no search configured or has not indexed the tool yet.
	SkillIDs       []string            `json:"skill_ids,omitempty"`
	Skills         []skills.Assignment `json:"skills,omitempty"`
	PrimarySkillID string              `json:"primary_skill_id,omitempty"`
	IsClassified   bool                `json:"is_classified"`
	// ClassificationPending: see [SearchTool].
	ClassificationPending bool `json:"classification_pending,omitempty"`
}

// ServerGroup is one server's slice of the tool listing (AG-US7 AC5).
type ServerGroup struct {
	ServerID   string         `json:"server_id"`
	ServerName string         `json:"server_name"`
	Status     string         `json:"status"`
	ToolCount  int            `json:"tool_count"`
	Tools      []string       `json:"tools"`
	Rejected   []RejectedTool `json:"rejected_tools,omitempty"`
}

func (h *handler) listTools(w http.ResponseWriter, r *http.Request) error {
	servers, err := h.servers.List(r.Context())
	if err != nil {
		return err
	}
	filter := r.URL.Query().Get("server_id")
	byName := map[string]Server{}
	for _, s := range servers {
		byName[s.Name] = s
	}
	if filter != "" {
		s, err := h.servers.Get(r.Context(), filter)
		if err != nil {
			return err
		}
		byName = map[string]Server{s.Name: s}
	}
	id, _ := caller(r.Context())
	snap := h.cat.Snapshot()
	tools := []Tool{}
	groups := []ServerGroup{}
	for _, name := range snap.Servers() {
		s, ok := byName[name]
		if !ok || (!id.Admin && !h.srvVisible(id, name)) {
			continue
		}
		g := ServerGroup{ServerID: s.ID, ServerName: s.Name, Status: s.Status, Tools: []string{}}
		for _, t := range snap.ServerTools(name) {
			if !h.visible(id, t) {
				continue
			}
			tools = append(tools, toolView(t, s))
			g.Tools = append(g.Tools, t.Name)
		}
		if id.Admin {
			// What an upstream offered and the catalog refused is for
			// operators; agents see only what they may call.
			for _, rj := range snap.Rejected(name) {
				g.Rejected = append(g.Rejected, RejectedTool{Name: rj.OriginalName, Kind: string(rj.Kind), Reason: rj.Reason})
			}
		}
		g.ToolCount = len(g.Tools)
		groups = append(groups, g)
	}
	h.addSkills(r.Context(), tools)
	writeJSON(w, http.StatusOK, map[string]any{"tools": tools, "servers": groups, "total": len(tools)})
	return nil
}

func (h *handler) getTool(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	id, _ := caller(r.Context())
	t, ok := h.cat.Snapshot().Tool(name)
	if !ok || !h.visible(id, t) {
		// A hidden tool answers exactly like an unknown one, so that
		// probing names learns nothing.
		return &Error{Status: http.StatusNotFound, Code: string(invoke.CodeToolNotFound), Message: "unknown tool " + quote(name)}
	}
	s, err := h.servers.Get(r.Context(), t.Server)
	if err != nil {
		return err
	}
	v := []Tool{toolView(t, s)}
	h.addSkills(r.Context(), v)
	writeJSON(w, http.StatusOK, v[0])
	return nil
}

func toolView(t catalog.Tool, s Server) Tool {
	v := Tool{
		Name:         t.Name,
		OriginalName: t.OriginalName,
		ServerID:     s.ID,
		ServerName:   s.Name,
		ServerStatus: s.Status,
		Available:    t.Available,
		IsExternal:   true,
	}
	if d := t.Def; d != nil {
		v.Title = d.Title
		v.Description = d.Description
		v.InputSchema = d.InputSchema
		v.OutputSchema = d.OutputSchema
		v.Annotations = d.Annotations
	}
	return v
}

// addSkills fills the skill fields of tool records from the search
// index's classifications; without search they stay empty.
func (h *handler) addSkills(ctx context.Context, tools []Tool) {
	if h.searcher == nil || len(tools) == 0 {
		return
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	classes := h.searcher.ToolSkills(ctx, names)
	for i := range tools {
		c, ok := classes[tools[i].Name]
		if !ok {
			continue
		}
		v := &tools[i]
		v.Skills = c.Skills
		v.SkillIDs = make([]string, len(c.Skills))
		for j, a := range c.Skills {
			v.SkillIDs[j] = a.SkillID
		}
		v.PrimarySkillID, v.IsClassified, v.ClassificationPending = c.Primary, c.Classified, c.Pending
	}
}

// callRequest is the body of POST /api/v1/tools/call (AG-US4).
// IdempotencyKey and ApprovalToken may also come as the Idempotency-Key and
// X-Approval-Token headers.
type callRequest struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	ServerID       string          `json:"server_id"`
	Meta           mcp.Meta        `json:"_meta"`
	IdempotencyKey string          `json:"idempotency_key"`
	ApprovalToken  string          `json:"approval_token"`
	CorrelationID  string          `json:"correlation_id"`
	TicketID       string          `json:"ticket_id"`
	TaskID         string          `json:"task_id"`
}

// callResponse is the upstream's result, unchanged, plus routing metadata.
type callResponse struct {
	Content           []mcp.Content `json:"content"`
	StructuredContent any           `json:"structuredContent,omitempty"`
	IsError           bool          `json:"isError"`
	Meta              mcp.Meta      `json:"_meta,omitempty"`
	Metadata          callMetadata  `json:"metadata"`
}

type callMetadata struct {
	RoutedTo        string  `json:"routed_to"`
	Tool            string  `json:"tool"`
	OriginalName    string  `json:"original_name"`
	RoutingTimeMS   float64 `json:"routing_time_ms"`
	ExecutionTimeMS float64 `json:"execution_time_ms"`
	CorrelationID   string  `json:"correlation_id,omitempty"`
	Attempts        int     `json:"attempts,omitempty"`
	ServedBy        string  `json:"served_by,omitempty"`
	Replayed        bool    `json:"replayed,omitempty"`
}

func (h *handler) callTool(w http.ResponseWriter, r *http.Request) error {
	var req callRequest
	if err := h.decode(w, r, &req); err != nil {
		return err
	}
	id, _ := caller(r.Context())
	_, res, err := h.call(r, req.ServerID, invoke.CallRequest{Name: req.Name, Arguments: req.Arguments, Meta: req.Meta, Identity: id,
		CorrelationID: req.CorrelationID, IdempotencyKey: req.IdempotencyKey, ApprovalToken: req.ApprovalToken,
		TicketID: req.TicketID, TaskID: req.TaskID, NameField: "name"})
	if err != nil {
		return err
	}
	content := res.Content
	if content == nil {
		content = []mcp.Content{}
	}
	writeJSON(w, http.StatusOK, callResponse{
		Content:           content,
		StructuredContent: res.StructuredContent,
		IsError:           res.IsError,
		Meta:              res.Meta,
		Metadata: callMetadata{
			RoutedTo:        res.Tool.Server,
			Tool:            res.Tool.Name,
			OriginalName:    res.Tool.OriginalName,
			RoutingTimeMS:   ms(res.RoutingTime.Seconds()),
			ExecutionTimeMS: ms(res.ExecutionTime.Seconds()),
			CorrelationID:   res.CorrelationID,
			Attempts:        res.Attempts,
			ServedBy:        res.ServedBy,
			Replayed:        res.Replayed,
		},
	})
	return nil
}

func ms(seconds float64) float64 { return float64(int64(seconds*1e6)) / 1e3 }

// quote quotes a name in a message as the pipeline and the MCP front do, so
// that one failure reads the same whichever door it came through.
func quote(s string) string { return strconv.Quote(s) }

// call runs one tool call for either REST call route (POST
// /api/v1/tools/call, POST /api/v1/mcp/invoke), which differ only in the
// shape of their bodies and answers. The Idempotency-Key and
// X-Approval-Token headers fill the fields the body left empty; the call is
// built by [invoke.NewCall], as on the MCP front; serverID (an id or a name)
// selects the server whose original tool name cr.Name is. It returns the
// call as built (keys taken from headers included) with its result.
func (h *handler) call(r *http.Request, serverID string, cr invoke.CallRequest) (invoke.Call, *invoke.Result, error) {
	if err := fromHeader(r, &cr.IdempotencyKey, "idempotency_key", "Idempotency-Key"); err != nil {
		return invoke.Call{}, nil, err
	}
	if err := fromHeader(r, &cr.ApprovalToken, "approval_token", "X-Approval-Token"); err != nil {
		return invoke.Call{}, nil, err
	}
	call, err := invoke.NewCall(cr)
	if errors.Is(err, invoke.ErrNameRequired) {
		// A body without its required field is malformed, as for every
		// other route; invalid_argument is for values the call cannot use.
		return call, nil, badRequest(err.Error())
	}
	if err != nil {
		return call, nil, err
	}
	if serverID != "" {
		s, err := h.servers.Get(r.Context(), serverID)
		if err != nil {
			return call, nil, err
		}
		call.Server = s.Name
	}
	res, err := h.caller.CallTool(r.Context(), call)
	if err != nil {
		return call, nil, withCorrelation(err, call.CorrelationID)
	}
	return call, res, nil
}

// withCorrelation is err in the API's shape, its details echoing the
// caller's correlation id (when it gave one) so that a failure can be
// matched to the request that caused it.
func withCorrelation(err error, id string) error {
	e := *toError(err)
	if id == "" {
		return &e
	}
	// Copy the details: toError may return a shared *Error.
	d := map[string]any{"correlation_id": id}
	for k, v := range e.Details {
		d[k] = v
	}
	e.Details = d
	return &e
}

// fromHeader fills *field from header when the body left it empty; both
// set and different is a 400, since either could be the one meant.
func fromHeader(r *http.Request, field *string, name, header string) error {
	v := r.Header.Get(header)
	switch {
	case v == "":
	case *field == "":
		*field = v
	case *field != v:
		return badRequest(name + " and the " + header + " header disagree")
	}
	return nil
}
