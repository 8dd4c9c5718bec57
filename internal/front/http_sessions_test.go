package front_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/front"
)

// cappedFixture is an httpFixture whose requests carry the identity named
// by their X-Test-Identity header, as the gateway's front door would put
// it, and which counts the requests its handlers are serving.
type cappedFixture struct {
	*httpFixture
	front    *front.Front
	sessions *front.Sessions
	inflight atomic.Int64
}

const identityHeader = "X-Test-Identity"

func newCappedFixture(t *testing.T, caller front.Caller, opts front.HTTPOptions) *cappedFixture {
	t.Helper()
	cat := catalog.New(nil)
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Tools: []*mcp.Tool{
		{Name: "echo", InputSchema: map[string]any{"type": "object"}},
	}}); err != nil {
		t.Fatal(err)
	}
	f := front.New(cat, caller, nil)
	t.Cleanup(f.Close)
	if opts.Sessions == nil {
		opts.Sessions = front.NewSessions(nil)
	}
	fx := &cappedFixture{front: f, sessions: opts.Sessions}
	wrap := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fx.inflight.Add(1)
			defer fx.inflight.Add(-1)
			if who := r.Header.Get(identityHeader); who != "" {
				r = r.WithContext(authz.WithIdentity(r.Context(), authz.Identity{ID: who, AgentID: who}))
			}
			h.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", wrap(f.StreamableHandler(&opts)))
	mux.Handle("/sse", wrap(f.SSEHandler(&opts)))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	fx.httpFixture = &httpFixture{cat: cat, srv: srv}
	return fx
}

// sdkSessions counts the sessions the SDK holds: the table must agree.
func (fx *cappedFixture) sdkSessions() int {
	n := 0
	for range fx.front.Server().Sessions() {
		n++
	}
	return n
}

// openAs starts and initializes a session of who under protocol version
// and returns its id.
func (fx *cappedFixture) openAs(t *testing.T, who, version string) string {
	t.Helper()
	body := strings.Replace(initializeBody, "2025-11-25", version, 1)
	resp, b := fx.do(t, rawRequest{method: http.MethodPost, path: "/mcp", body: body, header: map[string]string{identityHeader: who}})
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize as %s: status %d, session %q, body %s", who, resp.StatusCode, id, b)
	}
	if st := fx.send(t, who, id, initializedBody); st != http.StatusAccepted {
		t.Fatalf("initialized as %s: status %d", who, st)
	}
	return id
}

// send POSTs body to session sid as who and returns the status.
func (fx *cappedFixture) send(t *testing.T, who, sid, body string) int {
	t.Helper()
	resp, _ := fx.do(t, rawRequest{method: http.MethodPost, path: "/mcp", body: body,
		header: map[string]string{identityHeader: who, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-03-26"}})
	return resp.StatusCode
}

// refusal is the JSON-RPC error a capped initialize gets.
type refusal struct {
	Status  int
	ID      json.RawMessage
	Code    int
	Data    map[string]any
	Mention bool // the message names the setting
}

func readRefusal(t *testing.T, resp *http.Response, body string) refusal {
	t.Helper()
	var msg struct {
		ID    json.RawMessage
		Error struct {
			Code    int
			Message string
			Data    map[string]any
		}
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil {
		t.Fatalf("refusal body %q: %v", body, err)
	}
	setting, _ := msg.Error.Data["setting"].(string)
	return refusal{resp.StatusCode, msg.ID, msg.Error.Code, msg.Error.Data, setting != "" && strings.Contains(msg.Error.Message, setting)}
}

// eventually polls cond until it holds; the deadline only bounds a broken
// build, it is not a speed requirement.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHTTPSessionEviction: past a cap the least recently used idle session
// goes (the per-identity cap takes the identity's own, the total cap
// anyone's); its requests then get 404, the others' go on, and the SDK
// holds no more sessions than the table counts.
func TestHTTPSessionEviction(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2025-03-26"} { // with and without a priming event
		t.Run(version, func(t *testing.T) {
			fx := newCappedFixture(t, &httpCaller{}, front.HTTPOptions{
				Sessions: front.NewSessions(&front.SessionOptions{MaxSessions: 5, MaxSessionsPerIdentity: 2})})
			a1, a2 := fx.openAs(t, "alice", version), fx.openAs(t, "alice", version)
			b1, b2 := fx.openAs(t, "bob", version), fx.openAs(t, "bob", version)
			fx.send(t, "alice", a1, toolsListBody) // a1 is now alice's most recently used
			a3 := fx.openAs(t, "alice", version)   // ends a2
			c1 := fx.openAs(t, "carol", version)   // the fifth
			c2 := fx.openAs(t, "carol", version)   // ends the least recently used of all: b1

			got := map[string]int{}
			for name, s := range map[string]struct{ who, id string }{
				"a1": {"alice", a1}, "a2": {"alice", a2}, "a3": {"alice", a3},
				"b1": {"bob", b1}, "b2": {"bob", b2}, "c1": {"carol", c1}, "c2": {"carol", c2},
			} {
				got[name] = fx.send(t, s.who, s.id, toolsListBody)
			}
			want := map[string]int{"a1": 200, "a2": 404, "a3": 200, "b1": 404, "b2": 200, "c1": 200, "c2": 200}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("tools/list per session (-want +got):\n%s", d)
			}
			eventually(t, "the SDK to hold the 5 live sessions only", func() bool { return fx.sdkSessions() == 5 })
			if n := fx.sessions.Live(); n != 5 {
				t.Errorf("Live = %d, want 5", n)
			}
			// As the spec says, the client of an ended session starts a new one.
			fx.openAs(t, "alice", version)
		})
	}
}

// TestHTTPBusySessionNotEvicted: a session with a call in flight (even
// after its client dropped the POST) or with an open GET stream is never
// evicted; when none can be, the initialize is refused with an error that
// names the cap, and other identities are not affected.
func TestHTTPBusySessionNotEvicted(t *testing.T) {
	perIdentity := refusal{Status: 429, ID: json.RawMessage("1"), Code: int(front.RPCGatewayError), Mention: true, Data: map[string]any{
		"code": "too_many_sessions", "limit": "identity", "setting": "front.max_sessions_per_identity", "max": 1.0}}
	total := refusal{Status: 503, ID: json.RawMessage("1"), Code: int(front.RPCGatewayError), Mention: true, Data: map[string]any{
		"code": "too_many_sessions", "limit": "total", "setting": "front.max_sessions", "max": 1.0}}

	t.Run("call in flight after the client dropped its POST", func(t *testing.T) {
		caller := &httpCaller{arrived: make(chan struct{}, 1), gate: make(chan struct{})}
		fx := newCappedFixture(t, caller, front.HTTPOptions{
			Sessions: front.NewSessions(&front.SessionOptions{MaxSessions: 10, MaxSessionsPerIdentity: 1})})
		// Registered after the fixture, so it runs before the server
		// closes: a failing test must not leave the call blocking that.
		var open sync.Once
		t.Cleanup(func() { open.Do(func() { close(caller.gate) }) })
		a1 := fx.openAs(t, "alice", "2025-11-25")
		ctx, cancel := context.WithCancel(streamCtx(t))
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := fx.roundTrip(ctx, rawRequest{method: http.MethodPost, path: "/mcp", body: echoCall(3, "slow"),
				header: map[string]string{identityHeader: "alice", "Mcp-Session-Id": a1, "Mcp-Protocol-Version": "2025-11-25"}})
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		<-caller.arrived
		cancel()
		<-done
		eventually(t, "the dropped POST to end on the server", func() bool { return fx.inflight.Load() == 0 })

		resp, body := fx.do(t, rawRequest{method: http.MethodPost, path: "/mcp", body: initializeBody, header: map[string]string{identityHeader: "alice"}})
		if d := cmp.Diff(perIdentity, readRefusal(t, resp, body)); d != "" {
			t.Errorf("initialize over a busy cap (-want +got):\n%s", d)
		}
		fx.openAs(t, "bob", "2025-11-25") // another identity has its own cap

		open.Do(func() { close(caller.gate) }) // the call ends: a1 is idle
		var a2 string
		eventually(t, "a1 to become idle and be evicted", func() bool {
			resp, _ := fx.do(t, rawRequest{method: http.MethodPost, path: "/mcp", body: initializeBody, header: map[string]string{identityHeader: "alice"}})
			a2 = resp.Header.Get("Mcp-Session-Id")
			return resp.StatusCode == http.StatusOK
		})
		if st := fx.send(t, "alice", a1, toolsListBody); st != http.StatusNotFound {
			t.Errorf("evicted session: status %d, want 404", st)
		}
		if st := fx.send(t, "alice", a2, toolsListBody); st != http.StatusOK {
			t.Errorf("new session: status %d, want 200", st)
		}
	})

	for _, tt := range []struct {
		name     string
		max, per int
		who      string // of the refused initialize
		want     refusal
	}{
		{"open GET stream, per-identity cap", 10, 1, "alice", perIdentity},
		{"open GET stream, total cap", 1, 10, "bob", total},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx := newCappedFixture(t, &httpCaller{}, front.HTTPOptions{
				Sessions: front.NewSessions(&front.SessionOptions{MaxSessions: tt.max, MaxSessionsPerIdentity: tt.per})})
			a1 := fx.openAs(t, "alice", "2025-11-25")
			ctx, cancel := context.WithCancel(streamCtx(t))
			get, err := fx.roundTrip(ctx, rawRequest{method: http.MethodGet, path: "/mcp",
				header: map[string]string{identityHeader: "alice", "Mcp-Session-Id": a1, "Mcp-Protocol-Version": "2025-11-25"}})
			if err != nil || get.StatusCode != http.StatusOK {
				t.Fatalf("GET stream: %v %v", err, get)
			}
			resp, body := fx.do(t, rawRequest{method: http.MethodPost, path: "/mcp", body: initializeBody, header: map[string]string{identityHeader: tt.who}})
			if d := cmp.Diff(tt.want, readRefusal(t, resp, body)); d != "" {
				t.Errorf("initialize over a busy cap (-want +got):\n%s", d)
			}
			if st := fx.send(t, "alice", a1, toolsListBody); st != http.StatusOK {
				t.Errorf("the streaming session: status %d, want 200", st)
			}
			cancel()
			get.Body.Close()
			eventually(t, "the session to be evictable once its stream closed", func() bool {
				resp, _ := fx.do(t, rawRequest{method: http.MethodPost, path: "/mcp", body: initializeBody, header: map[string]string{identityHeader: tt.who}})
				return resp.StatusCode == http.StatusOK
			})
			if st := fx.send(t, "alice", a1, toolsListBody); st != http.StatusNotFound {
				t.Errorf("evicted session: status %d, want 404", st)
			}
		})
	}
}

// TestHTTPSSESessionCap: a legacy SSE session counts while its stream is
// open and is never evicted; over the cap a new one is refused, and it
// may take the place of an idle Streamable HTTP session.
func TestHTTPSSESessionCap(t *testing.T) {
	fx := newCappedFixture(t, &httpCaller{}, front.HTTPOptions{
		Sessions: front.NewSessions(&front.SessionOptions{MaxSessions: 1, MaxSessionsPerIdentity: 5})})
	ctx, cancel := context.WithCancel(streamCtx(t))
	first, err := fx.roundTrip(ctx, rawRequest{method: http.MethodGet, path: "/sse", header: map[string]string{identityHeader: "alice"}})
	if err != nil || first.StatusCode != http.StatusOK {
		t.Fatalf("GET /sse: %v %v", err, first)
	}
	for _, r := range []rawRequest{
		{method: http.MethodGet, path: "/sse", header: map[string]string{identityHeader: "bob"}},
		{method: http.MethodPost, path: "/mcp", body: initializeBody, header: map[string]string{identityHeader: "bob"}},
	} {
		resp, body := fx.do(t, r)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "front.max_sessions") {
			t.Errorf("%s %s over the cap: status %d, body %s; want 503 naming front.max_sessions", r.method, r.path, resp.StatusCode, body)
		}
	}
	cancel()
	first.Body.Close()
	eventually(t, "the closed stream to stop counting", func() bool { return fx.sessions.Live() == 0 })
	s := fx.openAs(t, "bob", "2025-11-25")
	second := fx.open(t, rawRequest{method: http.MethodGet, path: "/sse", header: map[string]string{identityHeader: "alice"}})
	if second.StatusCode != http.StatusOK {
		t.Fatalf("GET /sse with an idle session at the cap: status %d", second.StatusCode)
	}
	if st := fx.send(t, "bob", s, toolsListBody); st != http.StatusNotFound {
		t.Errorf("the idle session the stream replaced: status %d, want 404", st)
	}
}

// TestHTTPSessionEndForgotten: sessions that end without an eviction (a
// DELETE, the idle timeout) stop counting at once, or the table would
// fill with the dead.
func TestHTTPSessionEndForgotten(t *testing.T) {
	t.Run("delete", func(t *testing.T) {
		fx := newCappedFixture(t, &httpCaller{}, front.HTTPOptions{})
		a, b := fx.openAs(t, "alice", "2025-11-25"), fx.openAs(t, "alice", "2025-11-25")
		resp, _ := fx.do(t, rawRequest{method: http.MethodDelete, path: "/mcp", header: map[string]string{identityHeader: "alice", "Mcp-Session-Id": a}})
		if resp.StatusCode != http.StatusNoContent || fx.sessions.Live() != 1 {
			t.Errorf("after DELETE: status %d, live %d; want 204, 1", resp.StatusCode, fx.sessions.Live())
		}
		if st := fx.send(t, "alice", b, toolsListBody); st != http.StatusOK {
			t.Errorf("the other session: %d", st)
		}
		// A failed initialize starts no lasting session and leaves nothing.
		resp, _ = fx.do(t, rawRequest{method: http.MethodPost, path: "/mcp", header: map[string]string{identityHeader: "alice"},
			body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":"not an object"}`})
		if fx.sessions.Live() != 1 {
			t.Errorf("after a failed initialize (status %d): live %d, want 1", resp.StatusCode, fx.sessions.Live())
		}
		eventually(t, "the SDK to hold one session", func() bool { return fx.sdkSessions() == 1 })
	})
	t.Run("idle timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := front.New(catalog.New(nil), &httpCaller{}, nil)
			defer f.Close()
			sessions := front.NewSessions(nil)
			h := f.StreamableHandler(&front.HTTPOptions{SessionTimeout: time.Minute, Sessions: sessions})
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(initializeBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			got := []int{rec.Code, sessions.Live()}
			time.Sleep(2 * time.Minute)
			synctest.Wait()
			got = append(got, sessions.Live())
			if d := cmp.Diff([]int{200, 1, 0}, got); d != "" {
				t.Errorf("status, live before and after the timeout (-want +got):\n%s", d)
			}
		})
	})
}

// TestHTTPSessionGoroutines: every session holds a goroutine; evicted
// sessions give theirs back, so after 5x the cap of initializes the count
// is the baseline plus the cap, and the baseline once they all ended.
func TestHTTPSessionGoroutines(t *testing.T) {
	const perIdentity = 20
	fx := newCappedFixture(t, &httpCaller{}, front.HTTPOptions{
		Sessions: front.NewSessions(&front.SessionOptions{MaxSessionsPerIdentity: perIdentity})})
	client := fx.srv.Client()
	settle := func(what string, want func(n int) bool) int {
		var n int
		eventually(t, what, func() bool { n = runtime.NumGoroutine(); return want(n) })
		return n
	}
	// A request that starts no session first, so the keep-alive
	// connection's goroutines are in the baseline.
	if resp, _ := fx.do(t, rawRequest{method: http.MethodPost, path: "/mcp", body: toolsListBody}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("session-less tools/list: status %d", resp.StatusCode)
	}
	base := runtime.NumGoroutine()
	first := fx.openAs(t, "alice", "2025-11-25")
	for range 5 * perIdentity {
		fx.openAs(t, "alice", "2025-11-25")
	}
	n := settle("goroutines to settle at baseline + cap", func(n int) bool { return n <= base+perIdentity })
	t.Logf("baseline %d, after %d initializes at cap %d: %d", base, 5*perIdentity+1, perIdentity, n)
	if st := fx.send(t, "alice", first, toolsListBody); st != http.StatusNotFound {
		t.Errorf("first session: status %d, want 404 (evicted)", st)
	}
	// End the live ones the way clients do.
	var live []string
	for ss := range fx.front.Server().Sessions() {
		live = append(live, ss.ID())
	}
	for _, id := range live {
		resp, _ := fx.do(t, rawRequest{method: http.MethodDelete, path: "/mcp", header: map[string]string{identityHeader: "alice", "Mcp-Session-Id": id}})
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE: %d", resp.StatusCode)
		}
	}
	settle("goroutines back to the baseline", func(n int) bool { return n <= base })
	if n := fx.sessions.Live(); n != 0 {
		t.Errorf("Live = %d after every session ended", n)
	}
	client.CloseIdleConnections()
}

// TestHTTPStatelessUncapped: stateless serving keeps no session, so the
// caps neither count nor refuse anything.
func TestHTTPStatelessUncapped(t *testing.T) {
	sessions := front.NewSessions(&front.SessionOptions{MaxSessions: 1, MaxSessionsPerIdentity: 1})
	fx := newCappedFixture(t, &httpCaller{}, front.HTTPOptions{Stateless: true, Sessions: sessions})
	for i := range 5 {
		for _, body := range []string{initializeBody, echoCall(i, fmt.Sprint("call-", i))} {
			resp, b := fx.do(t, rawRequest{method: http.MethodPost, path: "/mcp", body: body, header: map[string]string{identityHeader: "alice"}})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("stateless request %d: status %d, body %s", i, resp.StatusCode, b)
			}
		}
	}
	if n := sessions.Live(); n != 0 {
		t.Errorf("Live = %d, want 0", n)
	}
}
