package upstream_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// revisionServer is an HTTP server of the new revision (a stateless go-sdk
// handler), with a tool whose argument is mirrored in a header (SEP-2243),
// that counts the initialize requests it gets and records the
// Mcp-Param-Region headers of the requests.
type revisionServer struct {
	url     string
	mu      sync.Mutex
	inits   int
	regions []string
}

func (h *revisionServer) seen() (inits int, regions []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inits, h.regions
}

// serveRevision starts a revisionServer whose answer to initialize is
// changed by onInit: nil leaves it as the SDK answers (2025-11-25).
func serveRevision(t *testing.T, onInit func(*mcp.InitializeResult) (mcp.Result, error)) *revisionServer {
	t.Helper()
	h := &revisionServer{}
	s := mcp.NewServer(&mcp.Implementation{Name: "revision", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{
		Name:        "region",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "initialize" {
				return next(ctx, method, req)
			}
			h.mu.Lock()
			h.inits++
			h.mu.Unlock()
			res, err := next(ctx, method, req)
			if err != nil || onInit == nil {
				return res, err
			}
			return onInit(res.(*mcp.InitializeResult))
		}
	})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Param-Region"); v != "" {
			h.mu.Lock()
			h.regions = append(h.regions, v)
			h.mu.Unlock()
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

// TestClassicPeerOnNewRevisionServer checks which session the calls of
// classic clients (a peer with a session of its own downstream) use on an
// HTTP server whose shared session speaks 2026-07-28. Under auto such a
// client gets a classic session of its own where the server offers one, so
// that a tool written the classic way works as for a direct classic client;
// a server that refuses the classic handshake, or answers it with the new
// revision, offers none, and then every classic client's calls use the
// shared session (found by the official client conformance suite: before,
// they failed, or lost their Mcp-Param-* headers, on a session that had
// never listed the tools). The server is asked once, not per client.
func TestClassicPeerOnNewRevisionServer(t *testing.T) {
	refuse := func(*mcp.InitializeResult) (mcp.Result, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: initialize"}
	}
	answerNew := func(res *mcp.InitializeResult) (mcp.Result, error) {
		r := *res
		r.ProtocolVersion = "2026-07-28"
		return &r, nil
	}
	tests := []struct {
		name    string
		version string // protocol_version
		onInit  func(*mcp.InitializeResult) (mcp.Result, error)
		inits   int      // initialize requests the server gets for two clients
		regions []string // the Mcp-Param-Region headers of their calls
	}{
		{"auto, both revisions: a classic session each", config.ProtocolAuto, nil, 2, nil},
		{"auto, classic handshake refused: the shared session", config.ProtocolAuto, refuse, 1, []string{"us-west1", "us-west1"}},
		{"auto, classic handshake answered with 2026-07-28: the shared session", config.ProtocolAuto, answerNew, 1, []string{"us-west1", "us-west1"}},
		{"2026-07-28: the shared session", "2026-07-28", nil, 0, []string{"us-west1", "us-west1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := serveRevision(t, tt.onInit)
			m := newManager(t, nil, nil, nil)
			if err := m.Add(&config.Server{Name: "up", Transport: config.TransportHTTP, URL: h.url, ProtocolVersion: tt.version}); err != nil {
				t.Fatal(err)
			}
			if err := m.Connect(context.Background(), "up"); err != nil {
				t.Fatalf("Connect: %v", err)
			}
			if st, _ := m.Status("up"); st.ProtocolVersion != "2026-07-28" {
				t.Fatalf("the shared session speaks %q, want 2026-07-28", st.ProtocolVersion)
			}
			for _, id := range []string{"a", "b"} {
				ctx := upstream.WithPeer(context.Background(), newPeer(id, allCaps))
				res, err := m.CallTool(ctx, "up", &mcp.CallToolParams{Name: "region", Arguments: args(`{"region":"us-west1"}`)})
				if err != nil {
					t.Fatalf("call of peer %s: %v", id, err)
				}
				if got := textOf(t, res); res.IsError || got != `{"region":"us-west1"}` {
					t.Errorf("call of peer %s returned %q (isError %v), want the arguments back", id, got, res.IsError)
				}
			}
			inits, regions := h.seen()
			if inits != tt.inits {
				t.Errorf("the server got %d initialize requests, want %d", inits, tt.inits)
			}
			if diff := cmp.Diff(tt.regions, regions); diff != "" {
				t.Errorf("Mcp-Param-Region headers (-want +got):\n%s", diff)
			}
		})
	}
}
