package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/skills"
)

// Search is the discovery surface; the app implements it over the index, the classifier and the
// catalog, filtered to what the caller may call.
type Search interface {
	Search(ctx context.Context, id authz.Identity, req SearchRequest) (SearchResponse, error)
	Skills(ctx context.Context) ([]SkillView, error)
	// SkillTools lists the tools of one skill the caller may call, best
	// first. An unknown skill is an error wrapping store.ErrNotFound (404).
	SkillTools(ctx context.Context, id authz.Identity, skillID string, limit int) ([]SearchTool, error)
	// Suggestions are the new skills the classifier proposes for tools that
	// fit none of the taxonomy; they wait for an operator's review.
	Suggestions(ctx context.Context) ([]skills.Suggestion, error)
	// ToolSkills returns the classifications of catalog tools by
	// namespaced name, so tool records carry the same skills and
	// confidences as search hits. A tool not indexed yet is absent from the
	// map. One call serves a whole listing, so an implementation may wait
	// briefly for its index to catch up with the catalog.
	ToolSkills(ctx context.Context, names []string) map[string]skills.Classification
}

// Limits of a search request, exported so the MCP front's search tool can
// hold to the same. MaxSearchQuery counts characters, not bytes, so a query
// in any script gets the same room.
const (
	MaxSearchQuery     = 1000
	DefaultSearchLimit = 10
	MaxSearchLimit     = 100
)

const (
	// maxSearchFilter bounds server_filter and skill_filter: a filter that
	// long is a mistake, not a narrowing.
	maxSearchFilter = 100
	// GET /api/v1/skills/{id}/tools?limit=: a skill may hold many tools.
	defaultSkillToolsLimit = 100
	maxSkillToolsLimit     = 1000
)

// SearchRequest is the body of POST /api/v1/search (seed 004, AG-US2). By
// the time [Search.Search] sees it, the handler has validated it and filled
// the defaults: Query is trimmed and non-empty, IncludeExternal is set,
// Limit is in 1..[MaxSearchLimit].
type SearchRequest struct {
	Query string `json:"query"` // required, ≤ 1000 chars
	// IncludeExternal defaults to true. False asks for the gateway's own
	// tools only: there are none today, so the answer is empty; the flag is
	// kept because the seed's clients send it.
	IncludeExternal *bool    `json:"include_external"`
	ServerFilter    []string `json:"server_filter"` // server names or ids; empty = all
	SkillFilter     []string `json:"skill_filter"`  // skill ids; empty = all
	Limit           int      `json:"limit"`         // default 10, 1..100 (400 outside)
}

// SearchResponse is the answer of POST /api/v1/search.
type SearchResponse struct {
	Query    string         `json:"query"`
	Tools    []SearchTool   `json:"tools"`
	Metadata SearchMetadata `json:"metadata"`
}

// SearchTool is one search hit, shaped as seed 004's contract.
type SearchTool struct {
	// ID is the hit's 1-based rank as a string ("1", "2", ...), as in the
	// seed's contract; the handler fills it when the implementation leaves
	// it empty. Name is the stable handle to call the tool by.
	ID           string       `json:"id"`
	Name         string       `json:"name"`
	OriginalName string       `json:"original_name"`
	Description  string       `json:"description"`
	Score        float64      `json:"score"`
	SourceServer SourceServer `json:"source_server"`
	SkillIDs     []string     `json:"skill_ids"`
	// Skills are SkillIDs with the classifier's confidence in each (0..1),
	// most confident first, so a client can weigh a weak secondary skill
	// differently from a sure primary one (AG-US3 AC2).
	Skills         []skills.Assignment `json:"skills"`
	PrimarySkillID string              `json:"primary_skill_id,omitempty"`
	IsClassified   bool                `json:"is_classified"`
	// ClassificationPending: the skills are the offline classifier's
	// provisional verdict while the LLM's is queued; the tool is
	// searchable meanwhile.
	ClassificationPending bool `json:"classification_pending,omitempty"`
	InputSchema           any  `json:"input_schema,omitempty"`
}

// SourceServer names the upstream a hit comes from, so a client can tell
// same-named tools of different servers apart (AG-US2 AC2).
type SourceServer struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status string `json:"status"`
}

// SearchMetadata says how much was searched and how it was ranked, so a
// client can tell a weak answer from a degraded one.
type SearchMetadata struct {
	ServersSearched    int     `json:"servers_searched"`
	TotalToolsSearched int     `json:"total_tools_searched"`
	Ranking            string  `json:"ranking"`            // "lexical" | "hybrid"
	Degraded           string  `json:"degraded,omitempty"` // why semantic ranking was not used
	TookMS             float64 `json:"took_ms"`
}

// SkillView is one skill of the taxonomy with the number of tools in it.
type SkillView struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Examples    []string `json:"examples"`
	ToolCount   int      `json:"tool_count"`
	// EmbeddedTools is the number of embedded tools the skill's embedding
	// is the centroid of; absent without embeddings (search.embeddings).
	EmbeddedTools int `json:"embedded_tools,omitempty"`
}

// searchBody is SearchRequest on the wire: Limit is a pointer so that an
// explicit 0 is refused rather than taken for "absent".
type searchBody struct {
	Query           string   `json:"query"`
	IncludeExternal *bool    `json:"include_external"`
	ServerFilter    []string `json:"server_filter"`
	SkillFilter     []string `json:"skill_filter"`
	Limit           *int     `json:"limit"`
}

// badField is a 400 naming the body field at fault.
func badField(name, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: name + ": " + msg,
		Details: map[string]any{"field": name}}
}

// searchRequest validates a decoded body and fills the defaults.
func searchRequest(b searchBody) (SearchRequest, error) {
	req := SearchRequest{Query: strings.TrimSpace(b.Query), IncludeExternal: b.IncludeExternal, Limit: DefaultSearchLimit}
	switch {
	case req.Query == "":
		return req, badField("query", "is required")
	case utf8.RuneCountInString(req.Query) > MaxSearchQuery:
		return req, badField("query", "must be at most "+strconv.Itoa(MaxSearchQuery)+" characters")
	}
	if req.IncludeExternal == nil {
		t := true
		req.IncludeExternal = &t
	}
	if b.Limit != nil {
		if *b.Limit < 1 || *b.Limit > MaxSearchLimit {
			return req, badField("limit", "must be an integer in 1.."+strconv.Itoa(MaxSearchLimit))
		}
		req.Limit = *b.Limit
	}
	var err error
	if req.ServerFilter, err = filter("server_filter", b.ServerFilter); err != nil {
		return req, err
	}
	if req.SkillFilter, err = filter("skill_filter", b.SkillFilter); err != nil {
		return req, err
	}
	return req, nil
}

// filter checks a list filter: a blank entry would match nothing and
// silently empty the result, so it is refused.
func filter(name string, vs []string) ([]string, error) {
	if len(vs) > maxSearchFilter {
		return nil, badField(name, "must have at most "+strconv.Itoa(maxSearchFilter)+" entries")
	}
	var out []string
	for i, v := range vs {
		v = strings.TrimSpace(v)
		if v == "" {
			return nil, badField(name, "entry "+strconv.Itoa(i)+" is empty")
		}
		out = append(out, v)
	}
	return out, nil
}

func (h *handler) search(w http.ResponseWriter, r *http.Request) error {
	if h.searcher == nil {
		return notConfigured("search and skills")
	}
	var b searchBody
	if err := h.decode(w, r, &b); err != nil {
		return err
	}
	req, err := searchRequest(b)
	if err != nil {
		return err
	}
	id, _ := caller(r.Context())
	start := time.Now()
	res, err := h.searcher.Search(r.Context(), id, req)
	if err != nil {
		return err
	}
	if res.Query == "" {
		res.Query = req.Query
	}
	if res.Metadata.TookMS == 0 {
		res.Metadata.TookMS = ms(time.Since(start).Seconds())
	}
	res.Tools = rankTools(res.Tools)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// rankTools makes a listing match the contract whatever the implementation
// left out: arrays, not nulls, and each hit's rank as its id.
func rankTools(ts []SearchTool) []SearchTool {
	if ts == nil {
		return []SearchTool{}
	}
	for i := range ts {
		if ts[i].ID == "" {
			ts[i].ID = strconv.Itoa(i + 1)
		}
		if ts[i].SkillIDs == nil {
			ts[i].SkillIDs = []string{}
		}
		if ts[i].Skills == nil {
			ts[i].Skills = []skills.Assignment{}
		}
	}
	return ts
}

func (h *handler) listSkills(w http.ResponseWriter, r *http.Request) error {
	if h.searcher == nil {
		return notConfigured("search and skills")
	}
	ss, err := h.searcher.Skills(r.Context())
	if err != nil {
		return err
	}
	if ss == nil {
		ss = []SkillView{}
	}
	for i := range ss {
		if ss[i].Examples == nil {
			ss[i].Examples = []string{}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"skills": ss})
	return nil
}

func (h *handler) skillTools(w http.ResponseWriter, r *http.Request) error {
	if h.searcher == nil {
		return notConfigured("search and skills")
	}
	limit := defaultSkillToolsLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSkillToolsLimit {
			return badParam("limit", "must be an integer in 1.."+strconv.Itoa(maxSkillToolsLimit))
		}
		limit = n
	}
	skill := r.PathValue("id")
	id, _ := caller(r.Context())
	ts, err := h.searcher.SkillTools(r.Context(), id, skill, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"skill_id": skill, "tools": rankTools(ts)})
	return nil
}

func (h *handler) skillSuggestions(w http.ResponseWriter, r *http.Request) error {
	if h.searcher == nil {
		return notConfigured("search and skills")
	}
	ss, err := h.searcher.Suggestions(r.Context())
	if err != nil {
		return err
	}
	if ss == nil {
		ss = []skills.Suggestion{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"suggestions": ss})
	return nil
}
