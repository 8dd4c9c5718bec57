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
	t.Cleanup(f.Close)
	ct, st := mcp.NewInMemoryTransports()
	ctx := authz.WithIdentity(t.Context(), authz.Identity{ID: "key:1", AgentID: "agent"})
	ss, err := f.Server().Connect(ctx, st, nil)
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
	if strings.Join(names, ",") != "switchboard.search_tools,switchboard.call_tool" {
		t.Fatalf("search mode lists %v, want only the meta-tools", names)
	}

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "switchboard.search_tools", Arguments: map[string]any{"query": "echo"}})
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

	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "switchboard.call_tool",
		Arguments: map[string]any{"name": "demo.echo", "arguments": map[string]any{"text": "hi"}},
		Meta:      mcp.Meta{front.MetaIdempotencyKey: "k"}})
	if err != nil || res.IsError {
		t.Fatalf("call_tool: %v %+v", err, res)
	}
	if len(caller.calls) != 1 || caller.calls[0].Name != "demo.echo" || string(caller.calls[0].Arguments) != `{"text":"hi"}` ||
		caller.calls[0].IdempotencyKey != "k" || caller.calls[0].Identity.AgentID != "agent" {
		t.Errorf("pipeline got %+v", caller.calls)
	}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "switchboard.call_tool", Arguments: map[string]any{}}); err == nil {
		t.Error("call_tool without a name succeeded")
	}
}
