package main

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// echoReply is the demo server's answer to the bench harness's call.
const echoReply = `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"switchboard bench"}]}}`

// BenchmarkSDKDecode is the minimal reproduction of the go-sdk's cost per
// decoded message (bench/README.md, "The go-sdk's decoder"): every decode
// the SDK makes goes through its internal json.Unmarshal, which copies the
// message into a new segmentio json.Decoder and its fresh 32 KiB buffer,
// however small the message. Compare the bytes per op of the SDK's
// jsonrpc.DecodeMessage and mcp.CallToolResult.UnmarshalJSON with the
// standard library decoding the same bytes:
//
//	go test ./bench -run '^$' -bench SDKDecode -benchmem
func BenchmarkSDKDecode(b *testing.B) {
	msg := []byte(echoReply)
	b.Run("sdk-jsonrpc.DecodeMessage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonrpc.DecodeMessage(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stdlib-envelope", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      any             `json:"id"`
				Result  json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal(msg, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	result := []byte(`{"content":[{"type":"text","text":"switchboard bench"}]}`)
	b.Run("sdk-CallToolResult.UnmarshalJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r mcp.CallToolResult
			if err := r.UnmarshalJSON(result); err != nil {
				b.Fatal(err)
			}
		}
	})
}
