package front

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMetaCapabilities holds the fast path's decoding of the client
// capabilities to the SDK's own (ServerRequest.ClientCapabilities).
func TestMetaCapabilities(t *testing.T) {
	for _, caps := range []string{
		`{}`,
		`{"elicitation":{}}`,
		`{"elicitation":{"form":{},"url":{}},"sampling":{"context":{},"tools":{}}}`,
		`{"roots":{}}`,
		`{"roots":{"listChanged":true},"experimental":{"x":{"y":1}},"extensions":{"e":{}}}`,
		`{"sampling":{},"tasks":{"list":{}}}`,
	} {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
		var msg struct {
			Params *mcp.CallToolParamsRaw `json:"params"`
		}
		if err := json.Unmarshal([]byte(body), &msg); err != nil {
			t.Fatal(err)
		}
		want := (&mcp.CallToolRequest{Params: msg.Params}).ClientCapabilities()
		got, ok := metaCapabilities([]byte(body))
		if !ok {
			t.Fatalf("%s: not decoded", caps)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: (-SDK +fast path)\n%s", caps, d)
		}
	}
	if _, ok := metaCapabilities([]byte(`{"params":{"_meta":{}}}`)); ok {
		t.Error("no capabilities decoded as some")
	}
}
