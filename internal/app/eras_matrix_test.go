package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixture"
)

// matrixClient is a go-sdk client of one revision that samples, elicits,
// has one root, and counts progress and tools/list_changed notifications.
type matrixClient struct {
	cs       *mcp.ClientSession
	progress atomic.Int64
	changed  atomic.Int64
}

func newMatrixClient(t *testing.T, url, revision string) *matrixClient {
	t.Helper()
	mc := &matrixClient{}
	c := mcp.NewClient(&mcp.Implementation{Name: "matrix-" + revision, Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "Paris"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com"}}, nil
		},
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { mc.progress.Add(1) },
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { mc.changed.Add(1) },
	})
	c.AddRoots(&mcp.Root{URI: "file:///srv/matrix", Name: "matrix"})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatalf("%s client: %v", revision, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != revision {
		t.Fatalf("%s client negotiated %s", revision, got)
	}
	mc.cs = cs
	return mc
}

// TestErasMatrix: {2025-11-25 client, 2026-07-28 client} × {classic server,
// server of the new revision} × {stdio, HTTP} × {sampling, elicitation,
// roots, progress, list_changed}, all through /mcp. Every cell works: the
// gateway carries a classic server's requests to a stateless client as
// input_required and a new server's input requests to a classic client as
// requests on its session. The matrix is printed (and copied into
// docs/protocol.md).
func TestErasMatrix(t *testing.T) {
	// A classic HTTP server speaks only the session revisions: a stateful
	// handler, as servers built before 2026-07-28 are.
	classic := fixture.NewServer(&fixture.Options{Classic: true, Mutable: true})
	ch := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return classic }, nil))
	t.Cleanup(ch.Close)
	nh := httptest.NewServer(fixture.Handler(&fixture.Options{Mutable: true}))
	t.Cleanup(nh.Close)
	servers := []struct{ name, kind, transport, def string }{
		{"cs", "classic", "stdio", fmt.Sprintf("    transport: stdio\n    command: switchboard\n    env: {%s: classic-mutable}\n", fixtureEnv)},
		{"ns", "2026-07-28", "stdio", fmt.Sprintf("    transport: stdio\n    command: switchboard\n    env: {%s: mutable}\n    protocol_version: 2026-07-28\n", fixtureEnv)},
		{"ch", "classic", "http", fmt.Sprintf("    transport: http\n    url: %s/mcp\n", ch.URL)},
		{"nh", "2026-07-28", "http", fmt.Sprintf("    transport: http\n    url: %s/mcp\n", nh.URL)},
	}
	yaml := "servers:\n"
	for _, s := range servers {
		yaml += "  " + s.name + ":\n" + s.def + "    auto_start: true\n"
	}
	g := startGateway(t, yaml, nil)

	features := []string{"sampling", "elicitation", "roots", "progress", "list_changed"}
	var table strings.Builder
	table.WriteString("| client | server | transport | " + strings.Join(features, " | ") + " |\n|---|---|---|" + strings.Repeat("---|", len(features)) + "\n")
	mutated := map[string]bool{}
	for _, revision := range []string{"2025-11-25", "2026-07-28"} {
		mc := newMatrixClient(t, g.url()+"/mcp", revision)
		for _, s := range servers {
			row := []string{revision, s.kind, s.transport}
			for _, feature := range features {
				err := matrixCell(t, mc, s.name, feature, mutated)
				cell := "works"
				if err != nil {
					cell = "fails: " + err.Error()
					t.Errorf("%s client, %s server over %s, %s: %v", revision, s.kind, s.transport, feature, err)
				}
				row = append(row, cell)
			}
			table.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
	}
	t.Logf("cross-era matrix:\n%s", table.String())
}

// matrixCell exercises one feature of server for mc; nil means it works.
// A tool whose definition changes is held back by pinning until approved,
// so the first mutation of a server's tool takes it off the list and the
// second (back to the pinned text) puts it back: both change the list the
// gateway serves. mutated records which servers were mutated once.
func matrixCell(t *testing.T, mc *matrixClient, server, feature string, mutated map[string]bool) error {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a bound on a broken build
	defer cancel()
	call := func(tool string, args map[string]any, token any) (string, error) {
		p := &mcp.CallToolParams{Name: server + "." + tool, Arguments: args}
		if token != nil {
			p.SetProgressToken(token)
		}
		res, err := mc.cs.CallTool(ctx, p)
		if err != nil {
			return "", err
		}
		text := resultText(res)
		if res.IsError {
			return "", fmt.Errorf("isError: %s", text)
		}
		return text, nil
	}
	want := func(got, wantText string, err error) error {
		if err != nil {
			return err
		}
		if !strings.Contains(got, wantText) {
			return fmt.Errorf("result %q, want %q", got, wantText)
		}
		return nil
	}
	eventually := func(what string, cond func() bool) error {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if cond() {
				return nil
			}
		}
		return fmt.Errorf("no %s", what)
	}
	switch feature {
	case "sampling":
		got, err := call(fixture.ToolSampling, map[string]any{"prompt": "capital?"}, nil)
		return want(got, "LLM response: Paris", err)
	case "elicitation":
		got, err := call(fixture.ToolElicitation, map[string]any{"message": "who?"}, nil)
		return want(got, `action=accept, content={"email":"ada@example.com","username":"ada"}`, err)
	case "roots":
		got, err := call(fixture.ToolInputRequiredListRoots, nil, nil)
		return want(got, "1 root(s): file:///srv/matrix", err)
	case "progress":
		before := mc.progress.Load()
		if _, err := call(fixture.ToolWithProgress, nil, "tok-"+server); err != nil {
			return err
		}
		return eventually("3 progress notifications", func() bool { return mc.progress.Load()-before >= 3 })
	case "list_changed":
		before := mc.changed.Load()
		desc := "changed by " + mc.cs.InitializeResult().ProtocolVersion
		if mutated[server] {
			desc = fixture.DefaultMutableDescription
		}
		mutated[server] = true
		if _, err := call(fixture.ToolMutate, map[string]any{"description": desc}, nil); err != nil {
			return err
		}
		return eventually("tools/list_changed", func() bool { return mc.changed.Load() > before })
	}
	return fmt.Errorf("unknown feature %s", feature)
}
