package front

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StreamableHandler serves MCP Streamable HTTP (mount at /mcp).
func (f *Front) StreamableHandler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.server },
		&mcp.StreamableHTTPOptions{Logger: f.logger})
}

// SSEHandler serves the legacy HTTP+SSE transport (mount at /sse).
func (f *Front) SSEHandler() http.Handler {
	return mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return f.server }, nil)
}
