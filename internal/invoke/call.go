package invoke

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

// MetaPrefix starts every _meta key reserved for the gateway. Keys under it
// are read by the gateway and never forwarded to an upstream (an approval
// token must never reach a third-party server), whichever door the request
// came through.
const MetaPrefix = "switchboard/"

// Keys of a request's _meta that the gateway reads.
const (
	MetaIdempotencyKey = MetaPrefix + "idempotency-key"
	MetaApprovalToken  = MetaPrefix + "approval-token"
	MetaCorrelationID  = MetaPrefix + "correlation-id"
	MetaTicketID       = MetaPrefix + "ticket-id"
	MetaTaskID         = MetaPrefix + "task-id"
)

// CallRequest is a tools/call as a door (the MCP front, the REST API)
// received it, before the gateway has taken its own parts out.
type CallRequest struct {
	// Name and Server: see [Call].
	Name, Server string
	// Arguments as received; they must be a JSON object, null or absent.
	Arguments json.RawMessage
	// Meta is the caller's _meta, reserved keys included.
	Meta     mcp.Meta
	Identity authz.Identity
	// Values the door received outside _meta (REST body fields and
	// headers). A non-empty one wins over the same key in Meta.
	IdempotencyKey, ApprovalToken, CorrelationID, TicketID, TaskID string

	// NameField and ArgumentsField are how the door's request spells the
	// tool name and its arguments ("tool_name" and "params" on POST
	// /api/v1/mcp/invoke), so that an error names the field the caller
	// sent. Empty: "arguments", and a name error that names none (MCP's
	// tools/call).
	NameField, ArgumentsField string
}

// ErrNameRequired is the cause of the error [NewCall] returns for a request
// that names no tool. The error's code is CodeInvalidArgument, like every
// check of the builder; a door whose vocabulary tells a malformed request
// from a bad value (REST's bad_request) finds it with errors.Is.
var ErrNameRequired = errors.New("a tool name is required")

// NewCall is the one place a [Call] is built from a request, for every
// door (the MCP front, both REST call routes): it checks the name and the
// arguments, takes the gateway's keys out of _meta and drops every other key
// of the reserved namespace, so no door can forward one upstream. Its errors
// are *Error with CodeInvalidArgument.
func NewCall(r CallRequest) (Call, error) {
	c := Call{Name: r.Name, Server: r.Server, Identity: r.Identity}
	if strings.TrimSpace(r.Name) == "" {
		msg := ErrNameRequired.Error()
		if r.NameField != "" {
			msg = r.NameField + " is required"
		}
		return c, &Error{Code: CodeInvalidArgument, Message: msg, Err: ErrNameRequired}
	}
	args := bytes.TrimSpace(r.Arguments)
	switch {
	case len(args) == 0 || string(args) == "null":
	case args[0] != '{' || !json.Valid(args):
		return c, &Error{Code: CodeInvalidArgument, Message: cmp.Or(r.ArgumentsField, "arguments") + " must be a JSON object"}
	default:
		c.Arguments = r.Arguments
	}
	for k, v := range r.Meta {
		if !strings.HasPrefix(k, MetaPrefix) {
			if c.Meta == nil {
				c.Meta = make(mcp.Meta, len(r.Meta))
			}
			c.Meta[k] = v
			continue
		}
		s, _ := v.(string)
		switch k {
		case MetaIdempotencyKey:
			c.IdempotencyKey = s
		case MetaApprovalToken:
			c.ApprovalToken = s
		case MetaCorrelationID:
			c.CorrelationID = s
		case MetaTicketID:
			c.TicketID = s
		case MetaTaskID:
			c.TaskID = s
		}
	}
	for _, f := range []struct {
		dst *string
		v   string
	}{
		{&c.IdempotencyKey, r.IdempotencyKey}, {&c.ApprovalToken, r.ApprovalToken},
		{&c.CorrelationID, r.CorrelationID}, {&c.TicketID, r.TicketID}, {&c.TaskID, r.TaskID},
	} {
		if f.v != "" {
			*f.dst = f.v
		}
	}
	return c, nil
}

// upstreamMeta returns m without the reserved keys, allocating only when
// it has one. Every request the pipeline sends upstream passes through it:
// a Call built by hand (not by [NewCall]) or a resource read carrying
// _meta must not leak the gateway's keys either.
func upstreamMeta(m mcp.Meta) mcp.Meta {
	reserved := 0
	for k := range m {
		if strings.HasPrefix(k, MetaPrefix) {
			reserved++
		}
	}
	if reserved == 0 {
		return m
	}
	if reserved == len(m) {
		return nil
	}
	out := make(mcp.Meta, len(m)-reserved)
	for k, v := range m {
		if !strings.HasPrefix(k, MetaPrefix) {
			out[k] = v
		}
	}
	return out
}

// ToolErrorMax bounds [ToolErrorText]: seed 000's 500-character summaries.
// The whole result still reaches the caller; this is the one-line account
// of it.
const ToolErrorMax = 500

// ToolErrorText is the text a tool put in its isError result: its text
// blocks, one per line, cut at [ToolErrorMax] bytes on a rune boundary;
// "the tool reported an error" when it has none. Every door that reports a
// tool's error as text uses it (the audit record's error column, the error
// of POST /api/v1/mcp/invoke), so they say the same.
func ToolErrorText(r *mcp.CallToolResult) string {
	var b strings.Builder
	if r != nil {
		for _, c := range r.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(t.Text)
			}
			if b.Len() >= ToolErrorMax {
				break
			}
		}
	}
	s := b.String()
	if s == "" {
		return "the tool reported an error"
	}
	if len(s) > ToolErrorMax {
		s = s[:ToolErrorMax]
	}
	return strings.ToValidUTF8(s, "")
}
