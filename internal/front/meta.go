package front

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// Tool exposure modes of the aggregate front.
const (
	// ExposeAll lists every tool the caller may call.
	ExposeAll = "all"
	// ExposeSearch lists only the meta-tools: clients find tools with
	// search_tools and call them with call_tool, so a catalog of thousands
	// of tools costs their context window two definitions.
	ExposeSearch = "search"
)

// Names of the meta-tools. They carry no prefix unless
// [Options.MetaToolPrefix] sets one (seed 004 AG-US7: the gateway's own tools
// are not namespaced like the upstreams' ones).
const (
	metaSearchName = "search_tools"
	metaCallName   = "call_tool"
)

// Searcher finds the tools a caller may call that match a query, best
// first.
type Searcher interface {
	SearchTools(ctx context.Context, id authz.Identity, query string, servers []string, limit int) ([]SearchHit, error)
}

// SearchHit is one tool found, with its relevance.
type SearchHit struct {
	Tool  catalog.Tool
	Score float64
}

type searchIn struct {
	Query        string   `json:"query"`
	Limit        int      `json:"limit,omitempty"`
	ServerFilter []string `json:"server_filter,omitempty"`
}

type callIn struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// searchedTool is one result of search_tools: enough to call it.
type searchedTool struct {
	Name        string  `json:"name"`
	Description string  `json:"description,omitempty"`
	Server      string  `json:"server"`
	Score       float64 `json:"score"`
	InputSchema any     `json:"input_schema,omitempty"`
}

var (
	searchSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"query": {"type": "string", "description": "What you want to do, in words: \"create a GitHub issue\", \"read a file\"."},
		"limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10, "description": "How many tools to return."},
		"server_filter": {"type": "array", "items": {"type": "string"}, "description": "Only tools of these servers."}
	},
	"required": ["query"]
}`)
	callSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"name": {"type": "string", "description": "The tool's name as search_tools returned it."},
		"arguments": {"type": "object", "description": "The tool's arguments, as its input_schema describes."}
	},
	"required": ["name"]
}`)
)

// MetaToolNames returns the names of the meta-tools search_tools and
// call_tool under prefix ("" = none) and separator sep.
func MetaToolNames(prefix, sep string) (search, call string) {
	if prefix == "" {
		return metaSearchName, metaCallName
	}
	return prefix + sep + metaSearchName, prefix + sep + metaCallName
}

// addMetaTools registers search_tools and call_tool on the front's server.
//
// Collision rule: the meta-tools keep their names. An upstream tool served
// under the same name (possible only for a server with an empty prefix) is
// shadowed: it is not listed or dispatched under that name, and stays
// reachable through call_tool, whose name argument always resolves against
// the catalog (call_tool never calls a meta-tool).
func (f *Front) addMetaTools(prefix, sep string) {
	f.metaSearch, f.metaCall = MetaToolNames(prefix, sep)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)}
	search := &mcp.Tool{
		Name: f.metaSearch,
		Description: "Search the tools of every server behind this gateway and return the best matches with their " +
			"input schemas. Call one with " + f.metaCall + ".",
		InputSchema: searchSchema,
		Annotations: ro,
	}
	call := &mcp.Tool{
		Name:        f.metaCall,
		Description: "Call a tool found with " + f.metaSearch + " by its name, with its arguments.",
		InputSchema: callSchema,
	}
	f.server.AddTool(search, f.searchTools)
	f.server.AddTool(call, f.callFound)
	f.metaTools = []*mcp.Tool{search, call}
}

// isMeta reports whether name is one of the meta-tools.
func (f *Front) isMeta(name string) bool {
	return f.metaSearch != "" && (name == f.metaSearch || name == f.metaCall)
}

func (f *Front) searchTools(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in searchIn
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.Query == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "search_tools needs a query (a string)"}
	}
	if in.Limit <= 0 {
		in.Limit = 10
	}
	in.Limit = min(in.Limit, 50)
	hits, err := f.searcher.SearchTools(ctx, callerIdentity(ctx, req), in.Query, in.ServerFilter, in.Limit)
	if err != nil {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "search failed: " + err.Error()}}}, nil
	}
	out := struct {
		Tools []searchedTool `json:"tools"`
	}{Tools: make([]searchedTool, 0, len(hits))}
	for _, h := range hits {
		st := searchedTool{Name: h.Tool.Name, Server: h.Tool.Server, Score: h.Score}
		if h.Tool.Def != nil {
			st.Description, st.InputSchema = h.Tool.Def.Description, h.Tool.Def.InputSchema
		}
		out.Tools = append(out.Tools, st)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	text := string(b)
	if len(hits) == 0 {
		text = fmt.Sprintf("no tool you may call matches %q", in.Query)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: json.RawMessage(b)}, nil
}

// callFound calls a tool by name through the pipeline, as a direct
// tools/call would: same authorization, audit and _meta handling.
func (f *Front) callFound(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in callIn
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.Name == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "call_tool needs the name of a tool (a string)"}
	}
	// in.Name resolves against the catalog, never to a meta-tool: that is
	// how an upstream tool shadowed by a meta-tool's name stays callable.
	inner := &mcp.CallToolRequest{Session: req.Session, Extra: req.Extra,
		Params: &mcp.CallToolParamsRaw{Meta: req.Params.Meta, Name: in.Name, Arguments: in.Arguments}}
	res, err := f.callTool(ctx, inner)
	if err == nil && res != nil && res.Content == nil {
		res.Content = []mcp.Content{}
	}
	return res, err
}
