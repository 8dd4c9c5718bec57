package invoke

import (
	"encoding/json"
	"testing"

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
