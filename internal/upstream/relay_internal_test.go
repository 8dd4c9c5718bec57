package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testPeer records the log messages and progress that reach it.
type testPeer struct {
	id string

	mu       sync.Mutex
	logs     []string
	progress []any // tokens
}

func (p *testPeer) ID() string                            { return p.id }
func (p *testPeer) Done() <-chan struct{}                 { return nil }
func (p *testPeer) Capabilities() *mcp.ClientCapabilities { return nil }
func (p *testPeer) NotifyProgress(_ context.Context, n *mcp.ProgressNotificationParams) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.progress = append(p.progress, n.ProgressToken)
	return nil
}
func (p *testPeer) Log(_ context.Context, n *mcp.LoggingMessageParams) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.logs = append(p.logs, n.Data.(string))
	return nil
}
func (p *testPeer) CreateMessage(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return nil, errors.New("not used")
}
func (p *testPeer) Elicit(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return nil, errors.New("not used")
}
func (p *testPeer) ListRoots(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	return nil, errors.New("not used")
}

func testRouter(fixed Peer) *router {
	return newRouter("srv", slog.New(slog.DiscardHandler), fixed, new(atomic.Uint64), nil)
}

func TestRouterAttribution(t *testing.T) {
	a, b := &testPeer{id: "a"}, &testPeer{id: "b"}
	tests := []struct {
		name  string
		fixed Peer
		calls []Peer    // in flight; nil is a call without a peer
		call  *callInfo // the context's call (multi round-trip), if any
		want  string    // the peer's ID, or a part of the error
	}{
		{name: "per-peer session", fixed: a, calls: []Peer{b}, want: "a"},
		{name: "the call of a multi round-trip", calls: []Peer{a, b}, call: &callInfo{peer: b}, want: "b"},
		{name: "a multi round-trip of a call without a peer", calls: []Peer{a}, call: &callInfo{}, want: "no client call in progress"},
		{name: "nothing in flight", want: `no client call in progress on server "srv"`},
		{name: "one peer", calls: []Peer{a}, want: "a"},
		{name: "one peer, two calls", calls: []Peer{a, a}, want: "a"},
		{name: "two peers", calls: []Peer{a, b}, want: "2 callers have calls in progress"},
		{name: "a peer and a call without one", calls: []Peer{a, nil}, want: "2 callers have calls in progress"},
		{name: "only calls without a peer", calls: []Peer{nil, nil}, want: "no client call in progress"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testRouter(tt.fixed)
			var ends []func()
			for _, p := range tt.calls {
				_, end := r.begin(&callInfo{peer: p}, nil, "", false)
				ends = append(ends, end)
			}
			ctx := context.Background()
			if tt.call != nil {
				ctx = context.WithValue(ctx, callKey{}, tt.call)
			}
			p, _, err := r.peerFor(ctx, "sampling/createMessage")
			got := ""
			switch {
			case err != nil:
				got = err.Error()
				var werr *jsonrpc.Error
				if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidRequest {
					t.Errorf("error %v is not an invalid-request JSON-RPC error", err)
				}
			default:
				got = p.ID()
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("peerFor = %q, want %q", got, tt.want)
			}
			for _, end := range ends {
				end()
			}
			if len(r.calls) != 0 {
				t.Errorf("%d callers still registered after every call ended", len(r.calls))
			}
		})
	}
}

func TestRouterBegin(t *testing.T) {
	a := &testPeer{id: "a"}
	tests := []struct {
		name     string
		peer     Peer
		meta     mcp.Meta
		level    mcp.LoggingLevel
		newProto bool
		want     mcp.Meta // with "progressToken" compared by presence
		routed   any      // the caller's token the upstream one leads back to
	}{
		{
			name: "no meta",
			peer: a,
		},
		{
			name:   "progress token replaced",
			peer:   a,
			meta:   mcp.Meta{"progressToken": float64(7), "x": "y"},
			want:   mcp.Meta{"progressToken": "*", "x": "y"},
			routed: float64(7),
		},
		{
			name: "progress token dropped without a peer",
			meta: mcp.Meta{"progressToken": "t"},
		},
		{
			name: "reserved keys stripped",
			peer: a,
			meta: mcp.Meta{mcp.MetaKeyProtocolVersion: "2026-07-28", mcp.MetaKeyClientInfo: "c", mcp.MetaKeyClientCapabilities: "c", "k": 1},
			want: mcp.Meta{"k": 1},
		},
		{
			name:     "log level added on a new-protocol session",
			peer:     a,
			level:    "debug",
			newProto: true,
			want: mcp.Meta{mcp.MetaKeyLogLevel: mcp.LoggingLevel("debug"),
				mcp.MetaKeyClientCapabilities: map[string]any{}},
		},
		{
			name:     "the caller's log level wins",
			peer:     a,
			meta:     mcp.Meta{mcp.MetaKeyLogLevel: "error"},
			level:    "debug",
			newProto: true,
			want: mcp.Meta{mcp.MetaKeyLogLevel: "error",
				mcp.MetaKeyClientCapabilities: map[string]any{}},
		},
		{
			name:  "no log level on a legacy session",
			peer:  a,
			level: "debug",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := testRouter(nil)
			orig := maps.Clone(tt.meta)
			got, end := r.begin(&callInfo{peer: tt.peer}, tt.meta, tt.level, tt.newProto)
			token, hasToken := got["progressToken"].(string)
			if hasToken {
				got["progressToken"] = "*"
			}
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("meta (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(orig, tt.meta); diff != "" {
				t.Errorf("the caller's meta changed (-want +got):\n%s", diff)
			}
			if hasToken {
				r.progressTo(context.Background(), &mcp.ProgressNotificationParams{ProgressToken: token})
				a.mu.Lock()
				routed := a.progress[len(a.progress)-1]
				a.mu.Unlock()
				if routed != tt.routed {
					t.Errorf("progress reached the peer with token %#v, want %#v", routed, tt.routed)
				}
			}
			end()
			if len(r.progress) != 0 || len(r.calls) != 0 {
				t.Errorf("the call is still registered after it ended")
			}
		})
	}
}

func TestEventFilter(t *testing.T) {
	const (
		logEvent = "event: message\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"first\"}}\r\n\r\n"
		result   = "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n"
		endpoint = "event: endpoint\ndata: /messages?notifications/message\n\n"
		noID     = "data: {\"jsonrpc\":\"2.0\",\n" + "data: \"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"second\"}}\n\n"
		request  = "id: 4\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"notifications/message\",\"params\":{}}\n\n"
		progress = "id: 5\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"unknown\",\"progress\":1}}\n\n"
		tail     = "data: partial"
	)
	in := logEvent + result + endpoint + noID + request + progress + tail
	want := "id: 1\n\n" + result + endpoint + request + "id: 5\n\n" + tail
	readers := map[string]func(io.Reader) io.Reader{
		"whole":         func(r io.Reader) io.Reader { return r },
		"byte by byte":  iotest.OneByteReader,
		"half the time": iotest.HalfReader,
	}
	for name, wrap := range readers {
		t.Run(name, func(t *testing.T) {
			p := &testPeer{id: "p"}
			f := &eventFilter{body: io.NopCloser(wrap(strings.NewReader(in))), r: testRouter(p), ctx: context.Background()}
			out, err := io.ReadAll(iotest.OneByteReader(f))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, string(out)); diff != "" {
				t.Errorf("filtered stream (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"first", "second"}, p.logs); diff != "" {
				t.Errorf("relayed log messages (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnknownResultType: a result whose resultType is neither complete nor
// input_required is refused, not passed on as an answer.
func TestUnknownResultType(t *testing.T) {
	r := testRouter(nil)
	for _, tt := range []struct {
		wire string
		ok   bool
	}{
		{`{"content":[]}`, true},
		{`{"resultType":"complete","content":[]}`, true},
		{`{"resultType":"bogus","content":[]}`, false},
	} {
		var res mcp.CallToolResult
		if err := json.Unmarshal([]byte(tt.wire), &res); err != nil {
			t.Fatal(err)
		}
		next := func(context.Context, string, mcp.Request) (mcp.Result, error) { return &res, nil }
		req := &mcp.ClientRequest[*mcp.CallToolParams]{Params: &mcp.CallToolParams{Name: "t"}}
		_, err := r.multiRoundTrip(next)(t.Context(), "tools/call", req)
		if (err == nil) != tt.ok {
			t.Errorf("%s: error %v, want ok %v", tt.wire, err, tt.ok)
		}
	}
}
