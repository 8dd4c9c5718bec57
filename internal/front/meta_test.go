package front

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

func TestGatewayMetaIsNotForwarded(t *testing.T) {
	var c invoke.Call
	fwd := gatewayMeta(mcp.Meta{
		MetaApprovalToken:  "sbt_secret",
		MetaIdempotencyKey: "k-1",
		MetaCorrelationID:  "c-1",
		MetaTicketID:       "T-1",
		MetaTaskID:         "task-1",
		"progressToken":    "p1",
	}, &c)
	if d := cmp.Diff(mcp.Meta{"progressToken": "p1"}, fwd); d != "" {
		t.Errorf("forwarded _meta (-want +got):\n%s", d)
	}
	want := invoke.Call{ApprovalToken: "sbt_secret", IdempotencyKey: "k-1", CorrelationID: "c-1", TicketID: "T-1", TaskID: "task-1"}
	if d := cmp.Diff(want, c, cmp.AllowUnexported(invoke.Call{})); d != "" {
		t.Errorf("call (-want +got):\n%s", d)
	}
	if fwd := gatewayMeta(mcp.Meta{MetaApprovalToken: "x"}, &c); fwd != nil {
		t.Errorf("only gateway keys: forwarded %v, want nil", fwd)
	}
}
