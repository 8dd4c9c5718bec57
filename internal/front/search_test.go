package front_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

// recordingCaller answers every call with the tool's name and arguments.
type recordingCaller struct {
	front.Caller
	calls []invoke.Call
}

func (c *recordingCaller) CallTool(_ context.Context, call invoke.Call) (*invoke.Result, error) {
	c.calls = append(c.calls, call)
	return &invoke.Result{CallToolResult: &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: call.Name + " " + string(call.Arguments)}}}}, nil
}

// catalogSearcher "finds" every catalog tool whose name contains the query.
type catalogSearcher struct {
	cat    *catalog.Catalog
	gotIDs []authz.Identity
}

func (s *catalogSearcher) SearchTools(_ context.Context, id authz.Identity, q string, servers []string, limit int) ([]front.SearchHit, error) {
	s.gotIDs = append(s.gotIDs, id)
	var out []front.SearchHit
	for _, t := range s.cat.Snapshot().Tools() {
		if strings.Contains(t.Name, q) && len(out) < limit {
			out = append(out, front.SearchHit{Tool: t, Score: 1})
		}
	}
	return out, nil
}

func TestSearchMode(t *testing.T) {
	cat := catalog.New(nil)
	schema := map[string]any{"type": "object"}
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Tools: []*mcp.Tool{
		{Name: "echo", Description: "Echo", InputSchema: schema}, {Name: "add", InputSchema: schema}}}); err != nil {
		t.Fatal(err)
	}
	caller := &recordingCaller{}
	searcher := &catalogSearcher{cat: cat}
	f := front.New(cat, caller, &front.Options{ToolExposure: front.ExposeSearch, Searcher: searcher})
	cs := connectFront(t, f, authz.Identity{ID: "key:1", AgentID: "agent"})

	lt, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "search_tools,call_tool" {
		t.Fatalf("search mode lists %v, want only the meta-tools", names)
	}

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo"}})
	if err != nil || res.IsError {
		t.Fatalf("search_tools: %v %+v", err, res)
	}
	var found struct {
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
		} `json:"tools"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &found); err != nil || len(found.Tools) != 1 || found.Tools[0].Name != "demo.echo" || found.Tools[0].InputSchema["type"] != "object" {
		t.Fatalf("search result = %s (%v)", b, err)
	}
	if len(searcher.gotIDs) != 1 || searcher.gotIDs[0].AgentID != "agent" {
		t.Errorf("searcher saw identities %+v, want the session's", searcher.gotIDs)
	}

	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "call_tool",
		Arguments: map[string]any{"name": "demo.echo", "arguments": map[string]any{"text": "hi"}},
		Meta:      mcp.Meta{front.MetaIdempotencyKey: "k"}})
	if err != nil || res.IsError {
		t.Fatalf("call_tool: %v %+v", err, res)
	}
	if len(caller.calls) != 1 || caller.calls[0].Name != "demo.echo" || string(caller.calls[0].Arguments) != `{"text":"hi"}` ||
		caller.calls[0].IdempotencyKey != "k" || caller.calls[0].Identity.AgentID != "agent" {
		t.Errorf("pipeline got %+v", caller.calls)
	}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{}}); err == nil {
		t.Error("call_tool without a name succeeded")
	}
}

// TestMetaToolNames checks the meta-tools' names (unprefixed by default,
// namespaced with MetaToolPrefix) and the collision rule: an upstream tool
// served under a meta-tool's name is shadowed in tools/list and tools/call
// and reachable through call_tool.
func TestMetaToolNames(t *testing.T) {
	schema := map[string]any{"type": "object"}
	empty := ""
	tests := []struct {
		name       string
		prefix     string
		wantSearch string
		wantCall   string
		// direct is what a tools/call of the shadowable name reaches:
		// "meta" (the gateway's search_tools) or "upstream".
		direct string
	}{
		{name: "default unprefixed", prefix: "", wantSearch: "search_tools", wantCall: "call_tool", direct: "meta"},
		{name: "prefixed", prefix: "switchboard", wantSearch: "switchboard.search_tools", wantCall: "switchboard.call_tool", direct: "upstream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cat := catalog.New(nil)
			// A server with an empty prefix serves its tools under their
			// own names: its search_tools collides with the meta-tool's
			// default name.
			if _, err := cat.Set(catalog.Entry{Server: "flat", Prefix: &empty, Available: true, Tools: []*mcp.Tool{
				{Name: "search_tools", Description: "upstream search", InputSchema: schema}}}); err != nil {
				t.Fatal(err)
			}
			caller := &recordingCaller{}
			f := front.New(cat, caller, &front.Options{ToolExposure: front.ExposeSearch, MetaToolPrefix: tt.prefix,
				Searcher: &catalogSearcher{cat: cat}})
			t.Cleanup(f.Close)
			ct, st := mcp.NewInMemoryTransports()
			ss, err := f.Server().Connect(t.Context(), st, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ss.Close() })
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(t.Context(), ct, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })

			lt, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range lt.Tools {
				names = append(names, tool.Name)
			}
			if got, want := strings.Join(names, ","), tt.wantSearch+","+tt.wantCall; got != want {
				t.Fatalf("tools/list = %s, want %s", got, want)
			}
			if s, c := front.MetaToolNames(tt.prefix, "."); s != tt.wantSearch || c != tt.wantCall {
				t.Errorf("MetaToolNames(%q) = %s, %s", tt.prefix, s, c)
			}

			// A direct call of "search_tools" reaches the meta-tool when it
			// bears that name, the upstream tool otherwise.
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "search"}})
			if err != nil {
				t.Fatal(err)
			}
			gotUpstream := len(caller.calls) == 1
			if want := tt.direct == "upstream"; gotUpstream != want {
				t.Fatalf("tools/call search_tools reached the upstream: %v, want %v (result %+v)", gotUpstream, want, res)
			}

			// call_tool reaches the upstream tool either way.
			caller.calls = nil
			res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tt.wantCall,
				Arguments: map[string]any{"name": "search_tools", "arguments": map[string]any{"q": 1}}})
			if err != nil || res.IsError {
				t.Fatalf("call_tool search_tools: %v %+v", err, res)
			}
			if len(caller.calls) != 1 || caller.calls[0].Name != "search_tools" || string(caller.calls[0].Arguments) != `{"q":1}` {
				t.Errorf("pipeline got %+v, want the upstream search_tools", caller.calls)
			}
		})
	}
}
