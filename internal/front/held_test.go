package front_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

// TestHeldTools checks that a tool the catalog holds back (quarantined by
// tool pinning) is not listed, and that a call to it gets the pipeline's
// reason as an isError result, on the aggregate front and on a server's
// transparent front alike.
func TestHeldTools(t *testing.T) {
	cat := catalog.New(nil)
	schema := map[string]any{"type": "object"}
	tools := []*mcp.Tool{{Name: "echo", InputSchema: schema}, {Name: "rug", Description: "changed", InputSchema: schema}}
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Tools: tools, Held: map[string]bool{"rug": true}}); err != nil {
		t.Fatal(err)
	}
	// The real pipeline: it is what refuses the call. The upstream is never
	// reached.
	pipe := invoke.New(cat, nil, nil)
	for _, tc := range []struct {
		name, scope, echo, rug string
	}{
		{"aggregate", "", "demo.echo", "demo.rug"},
		{"transparent", "demo", "echo", "rug"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := front.New(cat, pipe, &front.Options{Server: tc.scope})
			cs := connectFront(t, f, authz.LocalAdmin())

			lt, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(lt.Tools) != 1 || lt.Tools[0].Name != tc.echo {
				var names []string
				for _, tool := range lt.Tools {
					names = append(names, tool.Name)
				}
				t.Errorf("tools/list = %v, want only %s", names, tc.echo)
			}

			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tc.rug})
			if err != nil {
				t.Fatalf("calling the held tool: %v, want an isError result", err)
			}
			detail, _ := res.Meta[front.ErrorMetaKey].(map[string]any)
			text := ""
			if len(res.Content) == 1 {
				text = res.Content[0].(*mcp.TextContent).Text
			}
			want := invoke.DefinitionChanged(mustHeld(t, cat, "demo.rug")).Message
			if !res.IsError || detail["code"] != string(invoke.CodeToolDefinitionChanged) || detail["server"] != "demo" || text != want {
				t.Errorf("held tool call = isError %v, meta %v, text %q; want code %s and %q", res.IsError, res.Meta, text, invoke.CodeToolDefinitionChanged, want)
			}

			_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tc.rug + "x"})
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpcErr.Message, "unknown tool") {
				t.Errorf("unknown tool: %v, want a -32602 error", err)
			}
		})
	}
}

func mustHeld(t *testing.T, cat *catalog.Catalog, name string) catalog.Tool {
	t.Helper()
	h, ok := cat.Snapshot().HeldTool(name)
	if !ok {
		t.Fatalf("%s is not held", name)
	}
	return h
}
