package invoke

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestNewCall(t *testing.T) {
	tests := []struct {
		name    string
		req     CallRequest
		want    Call
		wantErr bool
	}{
		{"gateway keys taken out, others kept", CallRequest{Name: "a.b", Arguments: json.RawMessage(`{"x":1}`), Meta: mcp.Meta{
			MetaApprovalToken: "sbt_secret", MetaIdempotencyKey: "k-1", MetaCorrelationID: "c-1",
			MetaTicketID: "T-1", MetaTaskID: "task-1", "switchboard/unknown": "x", "progressToken": "p1",
		}}, Call{Name: "a.b", Arguments: json.RawMessage(`{"x":1}`), Meta: mcp.Meta{"progressToken": "p1"},
			ApprovalToken: "sbt_secret", IdempotencyKey: "k-1", CorrelationID: "c-1", TicketID: "T-1", TaskID: "task-1"}, false},
		{"only gateway keys: no meta", CallRequest{Name: "a.b", Meta: mcp.Meta{MetaApprovalToken: "x", "switchboard/z": 1}},
			Call{Name: "a.b", ApprovalToken: "x"}, false},
		{"explicit values win", CallRequest{Name: "a.b", Server: "s", Meta: mcp.Meta{MetaApprovalToken: "from-meta", MetaTaskID: "m"},
			ApprovalToken: "from-header"}, Call{Name: "a.b", Server: "s", ApprovalToken: "from-header", TaskID: "m"}, false},
		{"non-string reserved value ignored", CallRequest{Name: "a.b", Meta: mcp.Meta{MetaApprovalToken: 42}}, Call{Name: "a.b"}, false},
		{"null arguments", CallRequest{Name: "a.b", Arguments: json.RawMessage(` null `)}, Call{Name: "a.b"}, false},
		{"array arguments", CallRequest{Name: "a.b", Arguments: json.RawMessage(`[1]`)}, Call{}, true},
		{"string arguments", CallRequest{Name: "a.b", Arguments: json.RawMessage(`"x"`)}, Call{}, true},
		{"broken arguments", CallRequest{Name: "a.b", Arguments: json.RawMessage(`{"x":`)}, Call{}, true},
		{"no name", CallRequest{Name: "  "}, Call{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewCall(tt.req)
			if tt.wantErr {
				if CodeOf(err) != CodeInvalidArgument {
					t.Fatalf("err = %v, want invalid_argument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("call (-want +got):\n%s", d)
			}
		})
	}
}

func TestUpstreamMeta(t *testing.T) {
	in := mcp.Meta{"switchboard/approval-token": "s", "progressToken": 1}
	if d := cmp.Diff(mcp.Meta{"progressToken": 1}, upstreamMeta(in)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if in["switchboard/approval-token"] != "s" {
		t.Error("upstreamMeta changed its argument (it may be shared with an idempotent replay)")
	}
	if got := upstreamMeta(mcp.Meta{"switchboard/x": 1}); got != nil {
		t.Errorf("only reserved: %v, want nil", got)
	}
	plain := mcp.Meta{"a": 1}
	if got := upstreamMeta(plain); len(got) != 1 {
		t.Errorf("no reserved key: %v", got)
	}
}

// FuzzNewCall: any _meta and arguments a caller sends build a call whose
// forwarded _meta holds no reserved key, or a clean invalid_argument.
func FuzzNewCall(f *testing.F) {
	f.Add(`{"switchboard/approval-token":"x","progressToken":1}`, `{"a":1}`)
	f.Add(`{}`, `null`)
	f.Add(`{"switchboard/":{"nested":true}}`, `[1,2]`)
	f.Add(`{"Switchboard/approval-token":"x"}`, ` {"x":"y"} `)
	f.Fuzz(func(t *testing.T, meta, args string) {
		var m mcp.Meta
		if json.Unmarshal([]byte(meta), &m) != nil {
			return
		}
		c, err := NewCall(CallRequest{Name: "s.t", Meta: m, Arguments: json.RawMessage(args)})
		if err != nil {
			if CodeOf(err) != CodeInvalidArgument {
				t.Fatalf("error %v is not invalid_argument", err)
			}
			return
		}
		for k := range upstreamMeta(c.Meta) {
			if len(k) >= len(MetaPrefix) && k[:len(MetaPrefix)] == MetaPrefix {
				t.Fatalf("reserved key %q forwarded", k)
			}
		}
		if c.Arguments != nil && !json.Valid(c.Arguments) {
			t.Fatalf("invalid arguments accepted: %q", c.Arguments)
		}
	})
}

// TestNewCallChecks: the builder's refusals, as each door spells its
// fields, and what it accepts byte for byte.
func TestNewCallChecks(t *testing.T) {
	tests := []struct {
		name     string
		req      CallRequest
		wantMsg  string // "" = accepted
		wantName bool   // the error is ErrNameRequired
		wantArgs string // accepted arguments, byte for byte
	}{
		{"no name, MCP", CallRequest{}, "a tool name is required", true, ""},
		{"blank name, tools/call", CallRequest{Name: " \t", NameField: "name"}, "name is required", true, ""},
		{"no name, mcp/invoke", CallRequest{NameField: "tool_name", ArgumentsField: "params"}, "tool_name is required", true, ""},
		{"name checked before arguments", CallRequest{Arguments: json.RawMessage(`[1]`), NameField: "name"}, "name is required", true, ""},
		{"array arguments, MCP", CallRequest{Name: "a.b", Arguments: json.RawMessage(`[1]`)}, "arguments must be a JSON object", false, ""},
		{"array params, mcp/invoke", CallRequest{Name: "a.b", Arguments: json.RawMessage(`[1]`), ArgumentsField: "params"}, "params must be a JSON object", false, ""},
		{"number arguments", CallRequest{Name: "a.b", Arguments: json.RawMessage(`12`)}, "arguments must be a JSON object", false, ""},
		{"true arguments", CallRequest{Name: "a.b", Arguments: json.RawMessage(`true`)}, "arguments must be a JSON object", false, ""},
		{"object then garbage", CallRequest{Name: "a.b", Arguments: json.RawMessage(`{} x`)}, "arguments must be a JSON object", false, ""},
		{"unterminated object", CallRequest{Name: "a.b", Arguments: json.RawMessage(`{"x":`)}, "arguments must be a JSON object", false, ""},
		{"absent arguments", CallRequest{Name: "a.b"}, "", false, ""},
		{"null arguments", CallRequest{Name: "a.b", Arguments: json.RawMessage(`null`)}, "", false, ""},
		{"padded object kept as sent", CallRequest{Name: "a.b", Arguments: json.RawMessage(" {\"b\":1, \"a\":2}\n")}, "", false, " {\"b\":1, \"a\":2}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewCall(tt.req)
			if tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				if string(c.Arguments) != tt.wantArgs {
					t.Errorf("arguments = %q, want %q", c.Arguments, tt.wantArgs)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidArgument || e.Message != tt.wantMsg {
				t.Fatalf("err = %#v, want invalid_argument %q", err, tt.wantMsg)
			}
			if got := errors.Is(err, ErrNameRequired); got != tt.wantName {
				t.Errorf("errors.Is(err, ErrNameRequired) = %v, want %v", got, tt.wantName)
			}
		})
	}
}

// TestNewCallReservedMeta: every key of the reserved namespace stays with
// the gateway, whatever its value; the caller's own keys pass as they are.
func TestNewCallReservedMeta(t *testing.T) {
	tests := []struct {
		name string
		meta mcp.Meta
		want mcp.Meta
	}{
		{"none", nil, nil},
		{"caller's keys only", mcp.Meta{"progressToken": 7, "trace": "t"}, mcp.Meta{"progressToken": 7, "trace": "t"}},
		{"known key with an object value", mcp.Meta{MetaApprovalToken: map[string]any{"x": 1}, "p": 1}, mcp.Meta{"p": 1}},
		{"unknown reserved key", mcp.Meta{MetaPrefix + "future": "x", "p": 1}, mcp.Meta{"p": 1}},
		{"the bare prefix", mcp.Meta{MetaPrefix: "x"}, nil},
		{"served-by from a caller", mcp.Meta{MetaPrefix + "served-by": "other.tool"}, nil},
		{"a lookalike outside the namespace", mcp.Meta{"switchboard": "x", "switchboardx/y": 1}, mcp.Meta{"switchboard": "x", "switchboardx/y": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewCall(CallRequest{Name: "a.b", Meta: tt.meta})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, c.Meta); d != "" {
				t.Errorf("forwarded _meta (-want +got):\n%s", d)
			}
		})
	}
}

func TestToolErrorText(t *testing.T) {
	text := func(s ...string) *mcp.CallToolResult {
		r := &mcp.CallToolResult{IsError: true}
		for _, t := range s {
			r.Content = append(r.Content, &mcp.TextContent{Text: t})
		}
		return r
	}
	long := strings.Repeat("x", ToolErrorMax+100)
	tests := []struct {
		name string
		res  *mcp.CallToolResult
		want string
	}{
		{"nil result", nil, "the tool reported an error"},
		{"no content", &mcp.CallToolResult{IsError: true}, "the tool reported an error"},
		{"no text", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png"}}}, "the tool reported an error"},
		{"one block", text("no such file"), "no such file"},
		{"blocks one per line", text("first", "second"), "first\nsecond"},
		{"non-text blocks skipped", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"},
			&mcp.ImageContent{MIMEType: "image/png"}, &mcp.TextContent{Text: "b"}}}, "a\nb"},
		{"cut at the bound", text(long), long[:ToolErrorMax]},
		{"exactly the bound", text(long[:ToolErrorMax]), long[:ToolErrorMax]},
		{"cut in a later block", text(long[:ToolErrorMax-10], "0123456789abc", "never"), long[:ToolErrorMax-10] + "\n012345678"},
		{"cut inside a rune drops the rune", text(long[:ToolErrorMax-1] + "é"), long[:ToolErrorMax-1]},
		{"rune ending at the bound kept", text(long[:ToolErrorMax-2] + "é"), long[:ToolErrorMax-2] + "é"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ToolErrorText(tt.res)
			if got != tt.want {
				t.Errorf("ToolErrorText = %q (%d bytes), want %q (%d bytes)", got, len(got), tt.want, len(tt.want))
			}
			if len(got) > ToolErrorMax || !utf8.ValidString(got) {
				t.Errorf("ToolErrorText = %d bytes, valid UTF-8 %v: over the bound or broken", len(got), utf8.ValidString(got))
			}
		})
	}
}
