package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/skills"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// fakeSearch records what the handler passed it and answers two hits.
type fakeSearch struct {
	id       authz.Identity
	req      SearchRequest
	skill    string
	limit    int
	searched int
}

func (f *fakeSearch) Search(_ context.Context, id authz.Identity, req SearchRequest) (SearchResponse, error) {
	f.id, f.req = id, req
	f.searched++
	if req.Query == "boom" {
		return SearchResponse{}, errors.New("index exploded")
	}
	return SearchResponse{
		Query: req.Query,
		Tools: []SearchTool{
			{Name: "demo.create_issue", OriginalName: "create_issue", Score: 0.9,
				SourceServer: SourceServer{ID: "id-1", Name: "demo", Status: "CONNECTED"},
				SkillIDs:     []string{"issue_tracking", "code_management"}, PrimarySkillID: "issue_tracking", IsClassified: true,
				Skills: []skills.Assignment{{SkillID: "issue_tracking", Confidence: 0.61}, {SkillID: "code_management", Confidence: 0.22}}},
			{Name: "demo.echo", OriginalName: "echo", Score: 0.1,
				SourceServer: SourceServer{ID: "id-1", Name: "demo", Status: "CONNECTED"}},
		},
		Metadata: SearchMetadata{ServersSearched: 1, TotalToolsSearched: 2, Ranking: "lexical", Degraded: "embeddings endpoint down"},
	}, nil
}

func (f *fakeSearch) Skills(context.Context) ([]SkillView, error) {
	return []SkillView{
		{ID: "issue_tracking", Name: "Issue tracking", Description: "tickets", Examples: []string{"open a bug"}, ToolCount: 1},
		{ID: "memory", Name: "Memory"},
	}, nil
}

func (f *fakeSearch) SkillTools(_ context.Context, id authz.Identity, skill string, limit int) ([]SearchTool, error) {
	f.id, f.skill, f.limit = id, skill, limit
	if skill != "issue_tracking" {
		return nil, fmt.Errorf("skill %q: %w", skill, store.ErrNotFound)
	}
	return []SearchTool{{Name: "demo.create_issue", OriginalName: "create_issue", SkillIDs: []string{"issue_tracking"}}}, nil
}

func (f *fakeSearch) Suggestions(context.Context) ([]skills.Suggestion, error) {
	return []skills.Suggestion{{ID: "sg1"}}, nil
}

// ToolSkills knows demo.echo only, so a test sees both a classified tool
// record and one the index has not reached.
func (f *fakeSearch) ToolSkills(_ context.Context, names []string) map[string]skills.Classification {
	out := map[string]skills.Classification{}
	for _, n := range names {
		if n == "demo.echo" {
			out[n] = skills.Classification{Skills: []skills.Assignment{{SkillID: "utilities", Confidence: 0.69}, {SkillID: "communication", Confidence: 0.2}},
				Primary: "utilities", Classified: true, Method: skills.MethodOffline}
		}
	}
	return out
}

func TestSearch(t *testing.T) {
	e := newEnv(t)
	st, body, _ := e.do(t, &agentA, "POST", "/api/v1/search",
		`{"query":"create a GitHub issue","include_external":true,"server_filter":["demo"," jira "],"skill_filter":["issue_tracking"],"limit":5}`)
	if st != 200 {
		t.Fatalf("status %d: %v", st, body)
	}
	yes := true
	want := SearchRequest{Query: "create a GitHub issue", IncludeExternal: &yes, ServerFilter: []string{"demo", "jira"},
		SkillFilter: []string{"issue_tracking"}, Limit: 5}
	if diff := cmp.Diff(want, e.search.req); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(agentA, e.search.id); diff != "" {
		t.Errorf("identity (-want +got):\n%s", diff)
	}

	// The wire shape of seed 004's contract: ranks as ids, arrays not nulls.
	var got struct {
		Query string `json:"query"`
		Tools []struct {
			ID           string           `json:"id"`
			Name         string           `json:"name"`
			SourceServer SourceServer     `json:"source_server"`
			SkillIDs     []string         `json:"skill_ids"`
			Skills       []map[string]any `json:"skills"`
			Primary      *string          `json:"primary_skill_id"`
		} `json:"tools"`
		Metadata map[string]any `json:"metadata"`
	}
	remarshal(t, body, &got)
	if got.Query != "create a GitHub issue" || len(got.Tools) != 2 {
		t.Fatalf("response: %v", body)
	}
	for i, wantID := range []string{"1", "2"} {
		if got.Tools[i].ID != wantID {
			t.Errorf("tools[%d].id = %q, want %q", i, got.Tools[i].ID, wantID)
		}
	}
	if got.Tools[1].SkillIDs == nil || got.Tools[1].Skills == nil || got.Tools[1].Primary != nil {
		t.Errorf("unclassified hit: skill_ids %v skills %v primary %v, want [], [] and absent", got.Tools[1].SkillIDs, got.Tools[1].Skills, got.Tools[1].Primary)
	}
	wantSkills := []map[string]any{{"skill_id": "issue_tracking", "confidence": 0.61}, {"skill_id": "code_management", "confidence": 0.22}}
	if diff := cmp.Diff(wantSkills, got.Tools[0].Skills); diff != "" {
		t.Errorf("skills with confidences (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(SourceServer{ID: "id-1", Name: "demo", Status: "CONNECTED"}, got.Tools[0].SourceServer); diff != "" {
		t.Errorf("source_server (-want +got):\n%s", diff)
	}
	for _, k := range []string{"servers_searched", "total_tools_searched", "ranking", "degraded", "took_ms"} {
		if _, ok := got.Metadata[k]; !ok {
			t.Errorf("metadata lacks %q: %v", k, got.Metadata)
		}
	}

	if st, body, _ := e.do(t, &agentA, "POST", "/api/v1/search", `{"query":"boom"}`); st != 500 || errCode(body) != CodeInternal {
		t.Errorf("failing search: %d %v", st, body)
	}
}

func TestSearchDefaults(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name, body string
		want       SearchRequest
	}{
		{"only a query", `{"query":"  list files "}`, SearchRequest{Query: "list files", IncludeExternal: &yes, Limit: 10}},
		{"nulls", `{"query":"q","include_external":null,"server_filter":null,"skill_filter":null,"limit":null}`,
			SearchRequest{Query: "q", IncludeExternal: &yes, Limit: 10}},
		{"empty filters", `{"query":"q","server_filter":[],"skill_filter":[]}`, SearchRequest{Query: "q", IncludeExternal: &yes, Limit: 10}},
		{"include_external false", `{"query":"q","include_external":false}`, SearchRequest{Query: "q", IncludeExternal: &no, Limit: 10}},
		{"limit bounds low", `{"query":"q","limit":1}`, SearchRequest{Query: "q", IncludeExternal: &yes, Limit: 1}},
		{"limit bounds high", `{"query":"q","limit":100}`, SearchRequest{Query: "q", IncludeExternal: &yes, Limit: 100}},
		{"1000 characters of 2 bytes", `{"query":"` + strings.Repeat("é", 1000) + `"}`,
			SearchRequest{Query: strings.Repeat("é", 1000), IncludeExternal: &yes, Limit: 10}},
		// Queries the index answers as it can (internal/search TestBadInput):
		// they are the searcher's to rank, not the handler's to refuse.
		{"non-English", `{"query":"读取文件 διάβασε"}`, SearchRequest{Query: "读取文件 διάβασε", IncludeExternal: &yes, Limit: 10}},
		{"control characters", `{"query":"\u0000\u001b[31mlist"}`, SearchRequest{Query: "\x00\x1b[31mlist", IncludeExternal: &yes, Limit: 10}},
		{"invalid UTF-8 in the string", "{\"query\":\"\xff\xferead\"}", SearchRequest{Query: "\ufffd\ufffdread", IncludeExternal: &yes, Limit: 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if st, body, _ := e.do(t, &agentA, "POST", "/api/v1/search", tc.body); st != 200 {
				t.Fatalf("status %d: %v", st, body)
			}
			if diff := cmp.Diff(tc.want, e.search.req); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSearchValidation(t *testing.T) {
	tests := []struct {
		name, body string
		field      string // details.field; "" = a body-level error
	}{
		{"no query", `{"limit":5}`, "query"},
		{"blank query", `{"query":"  \t "}`, "query"},
		{"query too long", `{"query":"` + strings.Repeat("a", 1001) + `"}`, "query"},
		{"10 KB query", `{"query":"` + strings.Repeat("find a file ", 900) + `"}`, "query"},
		{"binary body", "\x00\x01\xff\xfe", ""},
		{"limit zero", `{"query":"q","limit":0}`, "limit"},
		{"limit negative", `{"query":"q","limit":-1}`, "limit"},
		{"limit too high", `{"query":"q","limit":101}`, "limit"},
		{"blank server", `{"query":"q","server_filter":["demo",""]}`, "server_filter"},
		{"blank skill", `{"query":"q","skill_filter":[" "]}`, "skill_filter"},
		{"too many servers", `{"query":"q","server_filter":[` + strings.TrimSuffix(strings.Repeat(`"s",`, 101), ",") + `]}`, "server_filter"},
		{"limit not a number", `{"query":"q","limit":"5"}`, ""},
		{"limit fractional", `{"query":"q","limit":2.5}`, ""},
		{"filter not a list", `{"query":"q","server_filter":"demo"}`, ""},
		{"unknown field", `{"query":"q","max_results":3}`, ""},
		{"empty body", ``, ""},
		{"trailing data", `{"query":"q"} {}`, ""},
		{"not JSON", `query=q`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			st, body, _ := e.do(t, &agentA, "POST", "/api/v1/search", tc.body)
			if st != 400 || errCode(body) != CodeBadRequest {
				t.Fatalf("status %d code %q, want 400 %q; %v", st, errCode(body), CodeBadRequest, body)
			}
			if tc.field != "" {
				details, _ := body["error"].(map[string]any)["details"].(map[string]any)
				msg, _ := body["error"].(map[string]any)["message"].(string)
				if details["field"] != tc.field || !strings.HasPrefix(msg, tc.field+": ") {
					t.Errorf("error %v does not name field %q", body["error"], tc.field)
				}
			}
			if e.search.searched != 0 {
				t.Errorf("Search ran on an invalid request")
			}
		})
	}
}

func TestSkills(t *testing.T) {
	e := newEnv(t)
	st, body, _ := e.do(t, &agentA, "GET", "/api/v1/skills", "")
	if st != 200 {
		t.Fatalf("status %d: %v", st, body)
	}
	var got struct {
		Skills []map[string]any `json:"skills"`
	}
	remarshal(t, body, &got)
	want := []map[string]any{
		{"id": "issue_tracking", "name": "Issue tracking", "description": "tickets", "examples": []any{"open a bug"}, "tool_count": float64(1)},
		{"id": "memory", "name": "Memory", "description": "", "examples": []any{}, "tool_count": float64(0)},
	}
	if diff := cmp.Diff(want, got.Skills); diff != "" {
		t.Errorf("skills (-want +got):\n%s", diff)
	}
}

func TestSkillTools(t *testing.T) {
	tests := []struct {
		name, path string
		status     int
		code       string
		limit      int // passed to SkillTools; 0 = not called
	}{
		{"default limit", "/api/v1/skills/issue_tracking/tools", 200, "", 100},
		{"limit", "/api/v1/skills/issue_tracking/tools?limit=7", 200, "", 7},
		{"max limit", "/api/v1/skills/issue_tracking/tools?limit=1000", 200, "", 1000},
		{"limit zero", "/api/v1/skills/issue_tracking/tools?limit=0", 400, string(invoke.CodeInvalidArgument), 0},
		{"limit too high", "/api/v1/skills/issue_tracking/tools?limit=1001", 400, string(invoke.CodeInvalidArgument), 0},
		{"limit not a number", "/api/v1/skills/issue_tracking/tools?limit=ten", 400, string(invoke.CodeInvalidArgument), 0},
		{"unknown skill", "/api/v1/skills/nope/tools", 404, CodeNotFound, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			st, body, _ := e.do(t, &agentA, "GET", tc.path, "")
			if st != tc.status || errCode(body) != tc.code {
				t.Fatalf("status %d code %q, want %d %q; %v", st, errCode(body), tc.status, tc.code, body)
			}
			if e.search.limit != tc.limit {
				t.Errorf("limit passed = %d, want %d", e.search.limit, tc.limit)
			}
			if tc.limit != 0 {
				if diff := cmp.Diff(agentA, e.search.id); diff != "" {
					t.Errorf("identity (-want +got):\n%s", diff)
				}
			}
			if st != 200 {
				return
			}
			tools, _ := body["tools"].([]any)
			if body["skill_id"] != "issue_tracking" || len(tools) != 1 || tools[0].(map[string]any)["id"] != "1" {
				t.Errorf("body %v", body)
			}
		})
	}
}

func TestSkillSuggestions(t *testing.T) {
	e := newEnv(t)
	if st, body, _ := e.do(t, &agentA, "GET", "/api/v1/skills/suggestions", ""); st != 403 || errCode(body) != CodeForbidden {
		t.Errorf("agent: %d %v", st, body)
	}
	st, body, _ := e.do(t, &adminID, "GET", "/api/v1/skills/suggestions", "")
	if sg, _ := body["suggestions"].([]any); st != 200 || len(sg) != 1 {
		t.Errorf("admin: %d %v", st, body)
	}
}

// TestSearchEmpty checks that an implementation's nil slices still answer
// as JSON arrays, which clients iterate without a null check.
func TestSearchEmpty(t *testing.T) {
	h := New(&fakeServers{}, catalog.New(nil), &fakeCaller{}, &Options{Search: emptySearch{}})
	for _, rt := range []struct{ method, path, body, key string }{
		{"POST", "/api/v1/search", `{"query":"q"}`, `"tools":[]`},
		{"GET", "/api/v1/skills", "", `"skills":[]`},
		{"GET", "/api/v1/skills/x/tools", "", `"tools":[]`},
		{"GET", "/api/v1/skills/suggestions", "", `"suggestions":[]`},
	} {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			as(h, &adminID).ServeHTTP(rec, httptest.NewRequest(rt.method, rt.path, strings.NewReader(rt.body)))
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), rt.key) {
				t.Errorf("status %d body %s, want 200 with %s", rec.Code, rec.Body, rt.key)
			}
		})
	}
}

type emptySearch struct{}

func (emptySearch) Search(context.Context, authz.Identity, SearchRequest) (SearchResponse, error) {
	return SearchResponse{}, nil
}
func (emptySearch) Skills(context.Context) ([]SkillView, error) { return nil, nil }
func (emptySearch) SkillTools(context.Context, authz.Identity, string, int) ([]SearchTool, error) {
	return nil, nil
}
func (emptySearch) Suggestions(context.Context) ([]skills.Suggestion, error) { return nil, nil }
func (emptySearch) ToolSkills(context.Context, []string) map[string]skills.Classification {
	return nil
}

// remarshal decodes a generic JSON body into a typed view of it.
func remarshal(t *testing.T, from, to any) {
	t.Helper()
	b, err := json.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, to); err != nil {
		t.Fatal(err)
	}
}

// TestToolRecordSkills checks that tool records carry the same skills and
// confidences as search hits, and leave them out for a tool not indexed yet.
func TestToolRecordSkills(t *testing.T) {
	e := newEnv(t)
	wantEcho := map[string]any{
		"skill_ids":        []any{"utilities", "communication"},
		"skills":           []any{map[string]any{"skill_id": "utilities", "confidence": 0.69}, map[string]any{"skill_id": "communication", "confidence": 0.2}},
		"primary_skill_id": "utilities",
		"is_classified":    true,
	}
	skillFields := func(rec map[string]any) map[string]any {
		out := map[string]any{}
		for _, k := range []string{"skill_ids", "skills", "primary_skill_id", "is_classified"} {
			if v, ok := rec[k]; ok {
				out[k] = v
			}
		}
		return out
	}
	st, body, _ := e.do(t, &adminID, "GET", "/api/v1/tools/demo.echo", "")
	if st != 200 {
		t.Fatalf("status %d: %v", st, body)
	}
	if diff := cmp.Diff(wantEcho, skillFields(body)); diff != "" {
		t.Errorf("GET /api/v1/tools/demo.echo skills (-want +got):\n%s", diff)
	}
	st, body, _ = e.do(t, &adminID, "GET", "/api/v1/tools", "")
	if st != 200 {
		t.Fatalf("status %d: %v", st, body)
	}
	got := map[string]map[string]any{}
	for _, rec := range body["tools"].([]any) {
		r := rec.(map[string]any)
		got[r["name"].(string)] = skillFields(r)
	}
	want := map[string]map[string]any{"demo.echo": wantEcho, "demo.secret": {"is_classified": false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET /api/v1/tools skills (-want +got):\n%s", diff)
	}
}
