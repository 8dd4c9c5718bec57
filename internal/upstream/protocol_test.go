package upstream_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// TestProtocolVersionPolicy over http: auto leaves the revision to the
// SDK's negotiation (a stateful handler: 2025-11-25; a 2026-07-28-only
// server: 2026-07-28); an explicit revision is asked for as it is. (auto
// over stdio is TestClassicServerThroughGateway in internal/app.)
func TestProtocolVersionPolicy(t *testing.T) {
	// serve runs the server; stateless serves 2026-07-28 (the SDK's
	// stateful handler speaks the classic revisions only).
	serve := func(t *testing.T, refuseInitialize, stateless bool) string {
		s := mcp.NewServer(&mcp.Implementation{Name: "p", Version: "1"}, nil)
		s.AddTool(&mcp.Tool{Name: "t", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		if refuseInitialize {
			s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					if method == "initialize" {
						return nil, &jsonrpc.Error{Code: mcp.CodeUnsupportedProtocolVersion, Message: "only 2026-07-28"}
					}
					return next(ctx, method, req)
				}
			})
		}
		srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
			&mcp.StreamableHTTPOptions{Stateless: stateless}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	for _, tt := range []struct {
		name     string
		protocol string
		refuse   bool
		attempts int // connects until CONNECTED
		want     string
	}{
		{"auto", "", false, 1, "2025-11-25"},
		{"auto, 2026-only server", config.ProtocolAuto, true, 2, "2026-07-28"},
		{"explicit 2026-07-28", "2026-07-28", false, 1, "2026-07-28"},
		{"explicit older", "2025-03-26", false, 1, "2025-03-26"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Served before the Manager exists, so that the server closes
			// after it (cleanups run last first).
			url := serve(t, tt.refuse, tt.want == "2026-07-28")
			m := newManager(t, nil, nil, nil)
			if err := m.Add(&config.Server{Name: "up", Transport: config.TransportHTTP, URL: url, ProtocolVersion: tt.protocol}); err != nil {
				t.Fatal(err)
			}
			var err error
			for range tt.attempts {
				if err = m.Connect(context.Background(), "up"); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("Connect after %d attempts: %v", tt.attempts, err)
			}
			st, err := m.Status("up")
			if err != nil {
				t.Fatal(err)
			}
			if st.ProtocolVersion != tt.want {
				t.Errorf("negotiated %q, want %q", st.ProtocolVersion, tt.want)
			}
		})
	}
}
