package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixture"
)

// TestClassicServerThroughGateway: a server written the classic way (its
// tools call CreateMessage and Elicit while serving the call) works through
// the gateway as it works for a classic client calling it directly: with
// protocol_version auto the gateway opens a 2025-11-25 session upstream.
// Asking it for 2026-07-28 (as the gateway did before) breaks it, which is
// why auto does not.
func TestClassicServerThroughGateway(t *testing.T) {
	client := mcp.NewClient(&mcp.Implementation{Name: "classic-client", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "forty-two"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com"}}, nil
		},
	})
	for _, tt := range []struct {
		protocol string // "" = auto
		works    bool
		want     string // in protocol_version of the server object
	}{
		{"", true, "2025-11-25"},
		{"auto", true, "2025-11-25"},
		{"2025-06-18", true, "2025-06-18"},
		{"2026-07-28", false, "2026-07-28"},
	} {
		t.Run("protocol_version="+tt.protocol, func(t *testing.T) {
			def := fmt.Sprintf("servers:\n  classic:\n    transport: stdio\n    command: switchboard\n    env: {%s: classic}\n    auto_start: true\n", fixtureEnv)
			if tt.protocol != "" {
				def += "    protocol_version: " + tt.protocol + "\n"
			}
			g := startGateway(t, def, nil)
			if got := g.serverByName(t, "classic")["protocol_version"]; got != tt.want {
				t.Errorf("negotiated %v, want %s", got, tt.want)
			}
			cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.url() + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			for _, c := range []struct {
				tool string
				args map[string]any
				want string
			}{
				{"classic." + fixture.ToolSampling, map[string]any{"prompt": "p"}, "LLM response: forty-two"},
				{"classic." + fixture.ToolElicitation, map[string]any{"message": "m"}, `User response: action=accept, content={"email":"ada@example.com","username":"ada"}`},
			} {
				tool, want := c.tool, c.want
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: c.args})
				if err != nil {
					t.Fatalf("%s: %v", tool, err)
				}
				var text strings.Builder
				for _, c := range res.Content {
					if tc, ok := c.(*mcp.TextContent); ok {
						text.WriteString(tc.Text)
					}
				}
				if ok := !res.IsError && text.String() == want; ok != tt.works {
					t.Errorf("%s: isError %v, %q; want working %v (%q)", tool, res.IsError, text.String(), tt.works, want)
				}
			}
		})
	}
}
