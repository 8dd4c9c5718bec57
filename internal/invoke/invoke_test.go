package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// fakeUpstreams answers CallTool with fn.
type fakeUpstreams struct {
	fn  func(ctx context.Context, server string, p *mcp.CallToolParams) (*mcp.CallToolResult, error)
	got *mcp.CallToolParams
	srv string
}

func (f *fakeUpstreams) CallTool(ctx context.Context, server string, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	f.got, f.srv = p, server
	return f.fn(ctx, server, p)
}

func (f *fakeUpstreams) ReadResource(ctx context.Context, server string, p *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: p.URI, Text: server}}}, nil
}

func (f *fakeUpstreams) GetPrompt(ctx context.Context, server string, p *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	return &mcp.GetPromptResult{Description: server + ":" + p.Name}, nil
}

func (f *fakeUpstreams) Complete(ctx context.Context, server string, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{server, p.Ref.Name + p.Ref.URI}}}, nil
}

func (f *fakeUpstreams) Subscribe(ctx context.Context, server string, p *mcp.SubscribeParams) error {
	f.srv = server + " " + p.URI
	return nil
}

func (f *fakeUpstreams) Unsubscribe(ctx context.Context, server string, p *mcp.UnsubscribeParams) error {
	f.srv = server + " " + p.URI
	return nil
}

func (f *fakeUpstreams) SetLoggingLevel(ctx context.Context, server string, p *mcp.SetLoggingLevelParams) error {
	f.srv += server + ","
	return nil
}

func newCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	cat := catalog.New(nil)
	schema := map[string]any{"type": "object"}
	for _, s := range []string{"a", "b"} {
		// held is quarantined: its definition changed since it was pinned.
		_, err := cat.Set(catalog.Entry{Server: s, Available: true,
			Tools:     []*mcp.Tool{{Name: "echo", InputSchema: schema}, {Name: "held", InputSchema: schema}},
			Held:      map[string]bool{"held": true},
			Resources: []*mcp.Resource{{URI: "mem://x", Name: "x"}},
			Prompts:   []*mcp.Prompt{{Name: "p"}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return cat
}

func TestCallToolRoutesAndPassesThrough(t *testing.T) {
	ok := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}, Meta: mcp.Meta{"k": "v"}}
	up := &fakeUpstreams{fn: func(context.Context, string, *mcp.CallToolParams) (*mcp.CallToolResult, error) { return ok, nil }}
	p := New(newCatalog(t), up, nil)
	args := json.RawMessage(`{"b":1,"a":[2]}`)
	for _, c := range []Call{
		{Name: "b.echo", Arguments: args},
		{Name: "b__echo", Arguments: args},
		{Name: "echo", Server: "b", Arguments: args},
	} {
		res, err := p.CallTool(t.Context(), c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if up.srv != "b" || up.got.Name != "echo" {
			t.Errorf("%+v routed to %s/%s, want b/echo", c, up.srv, up.got.Name)
		}
		if raw, _ := up.got.Arguments.(json.RawMessage); string(raw) != string(args) {
			t.Errorf("arguments = %v, want %s unchanged", up.got.Arguments, args)
		}
		if res.CallToolResult != ok || res.Tool.Name != "b.echo" {
			t.Errorf("result = %+v", res)
		}
	}
}

func TestCallToolErrors(t *testing.T) {
	rpcErr := &jsonrpc.Error{Code: -32000, Message: "upstream says no"}
	tests := []struct {
		name string
		call Call
		fn   func(ctx context.Context) (*mcp.CallToolResult, error)
		ctx  func() (context.Context, context.CancelFunc)
		code Code
	}{
		{name: "unknown tool", call: Call{Name: "a.nope"}, code: CodeToolNotFound},
		{name: "unknown original on server", call: Call{Name: "nope", Server: "a"}, code: CodeToolNotFound},
		{name: "quarantined tool", call: Call{Name: "a.held"}, code: CodeToolDefinitionChanged},
		{name: "quarantined tool, other separator", call: Call{Name: "a__held"}, code: CodeToolDefinitionChanged},
		{name: "quarantined original on server", call: Call{Name: "held", Server: "b"}, code: CodeToolDefinitionChanged},
		{name: "invalid json", call: Call{Name: "a.echo", Arguments: json.RawMessage(`{`)}, code: CodeInvalidArgument},
		{name: "unavailable", call: Call{Name: "a.echo"}, code: CodeServerUnavailable,
			fn: func(context.Context) (*mcp.CallToolResult, error) {
				return nil, &upstream.UnavailableError{Server: "a", State: upstream.StateError, Reason: "gone"}
			}},
		{name: "protocol error relayed", call: Call{Name: "a.echo"}, code: CodeUpstream,
			fn: func(context.Context) (*mcp.CallToolResult, error) { return nil, rpcErr }},
		{name: "timeout", call: Call{Name: "a.echo"}, code: CodeTimeout,
			fn: func(ctx context.Context) (*mcp.CallToolResult, error) { <-ctx.Done(); return nil, ctx.Err() }},
		{name: "caller cancels", call: Call{Name: "a.echo"}, code: CodeCanceled,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			},
			fn: func(ctx context.Context) (*mcp.CallToolResult, error) { <-ctx.Done(); return nil, ctx.Err() }},
		{name: "transport failure", call: Call{Name: "a.echo"}, code: CodeUpstream,
			fn: func(context.Context) (*mcp.CallToolResult, error) { return nil, errors.New("connection reset") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := &fakeUpstreams{fn: func(ctx context.Context, _ string, _ *mcp.CallToolParams) (*mcp.CallToolResult, error) {
				if tc.fn == nil {
					t.Fatal("upstream called")
				}
				return tc.fn(ctx)
			}}
			p := New(newCatalog(t), up, &Options{Timeout: 20 * time.Millisecond})
			ctx := t.Context()
			if tc.ctx != nil {
				c, cancel := tc.ctx()
				defer cancel()
				ctx = c
			}
			_, err := p.CallTool(ctx, tc.call)
			if CodeOf(err) != tc.code {
				t.Fatalf("err = %v (code %q), want code %q", err, CodeOf(err), tc.code)
			}
			if tc.code == CodeUpstream && tc.name == "protocol error relayed" {
				var got *jsonrpc.Error
				if !errors.As(err, &got) || got != rpcErr {
					t.Errorf("the upstream's *jsonrpc.Error is not reachable: %v", err)
				}
			}
			var ie *Error
			if errors.As(err, &ie) && tc.code == CodeServerUnavailable && (ie.Server != "a" || ie.Status != "ERROR") {
				t.Errorf("unavailable error = %+v, want server a status ERROR", ie)
			}
		})
	}
}

func TestResourcesAndPrompts(t *testing.T) {
	p := New(newCatalog(t), &fakeUpstreams{}, nil)
	snap := p.cat.Snapshot()
	uri := snap.NamespaceURI("b", "mem://x")
	res, err := p.ReadResource(t.Context(), "", &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	// The upstream saw its own URI; the client sees the namespaced one.
	if res.Contents[0].Text != "b" || res.Contents[0].URI != uri {
		t.Errorf("contents = %+v, want server b and URI %s", res.Contents[0], uri)
	}
	if _, err := p.ReadResource(t.Context(), "", &mcp.ReadResourceParams{URI: "zz+mem://x"}); CodeOf(err) != CodeToolNotFound {
		t.Errorf("unknown resource: %v", err)
	}
	pr, err := p.GetPrompt(t.Context(), "", &mcp.GetPromptParams{Name: "a.p"})
	if err != nil || pr.Description != "a:p" {
		t.Errorf("prompt = %+v, %v", pr, err)
	}
	// A transparent endpoint uses the server's own names.
	res, err = p.ReadResource(t.Context(), "a", &mcp.ReadResourceParams{URI: "mem://x"})
	if err != nil || res.Contents[0].Text != "a" || res.Contents[0].URI != "mem://x" {
		t.Errorf("scoped read = %+v, %v", res, err)
	}
	if pr, err := p.GetPrompt(t.Context(), "b", &mcp.GetPromptParams{Name: "p"}); err != nil || pr.Description != "b:p" {
		t.Errorf("scoped prompt = %+v, %v", pr, err)
	}
}

func TestCompleteSubscribeSetLevel(t *testing.T) {
	up := &fakeUpstreams{}
	p := New(newCatalog(t), up, nil)
	res, err := p.Complete(t.Context(), "", &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "b.p"}})
	if err != nil || res.Completion.Values[0] != "b" || res.Completion.Values[1] != "p" {
		t.Errorf("complete prompt = %+v, %v", res, err)
	}
	uri := p.cat.Snapshot().NamespaceURI("a", "mem://x")
	res, err = p.Complete(t.Context(), "", &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: uri}})
	if err != nil || res.Completion.Values[0] != "a" || res.Completion.Values[1] != "mem://x" {
		t.Errorf("complete resource = %+v, %v", res, err)
	}
	if _, err := p.Complete(t.Context(), "", &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/nope"}}); CodeOf(err) != CodeInvalidArgument {
		t.Errorf("bad ref: %v", err)
	}
	if err := p.Subscribe(t.Context(), "", &mcp.SubscribeParams{URI: uri}); err != nil || up.srv != "a mem://x" {
		t.Errorf("subscribe routed to %q, %v", up.srv, err)
	}
	if err := p.Unsubscribe(t.Context(), "b", &mcp.UnsubscribeParams{URI: "mem://y"}); err != nil || up.srv != "b mem://y" {
		t.Errorf("scoped unsubscribe routed to %q, %v", up.srv, err)
	}
	up.srv = ""
	if err := p.SetLoggingLevel(t.Context(), "", &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil || up.srv != "a,b," {
		t.Errorf("setLevel went to %q, %v", up.srv, err)
	}
}
