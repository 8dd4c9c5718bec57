package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// relayCase is one kind of upstream session the relay is tested on.
type relayCase struct {
	name      string
	transport string
	legacy    bool // the server speaks only the legacy protocol
}

var (
	// stdio is a session shared by every caller, in each protocol; sse and
	// http (whose stateful handler negotiates the legacy protocol) give each
	// peer a session of its own.
	relayCases = []relayCase{
		{"stdio", config.TransportStdio, false},
		{"stdio legacy", config.TransportStdio, true},
		{"http", config.TransportHTTP, false},
		{"sse", config.TransportSSE, false},
	}
	stdioCases = relayCases[:2]
)

// shared reports whether the peer's calls run on the session every caller shares.
func (c relayCase) shared() bool { return c.transport == config.TransportStdio }

// startRelay connects a relay server named "up" of kind c. The returned
// relayHTTP is nil for stdio.
func startRelay(t *testing.T, c relayCase, rec *recorder, opts *upstream.Options) (*upstream.Manager, *relayHTTP) {
	t.Helper()
	var protocols []string
	if c.legacy {
		protocols = []string{legacyProtocol}
	}
	var h *relayHTTP
	srv := &config.Server{Name: "up", Transport: c.transport}
	if c.shared() {
		fake := "relay"
		if c.legacy {
			fake = "relay-legacy"
		}
		srv = fakeStdio("up", fake)
		if !c.legacy {
			// The new-protocol relay paths (input requests embedded in
			// results) run only on a 2026-07-28 session, which
			// protocol_version auto does not ask for.
			srv.ProtocolVersion = "2026-07-28"
		}
	} else {
		h = serveRelay(t, c.transport, protocols...)
		srv.URL = h.url
	}
	m := newManager(t, rec, nil, opts)
	if err := m.Add(srv); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(context.Background(), "up"); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return m, h
}

// waitUntil polls cond. The deadline only keeps a broken test from
// hanging; nothing is asserted about timing.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func args(v string) json.RawMessage { return json.RawMessage(v) }

func TestRelayProgressAndLogs(t *testing.T) {
	for _, c := range relayCases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := startRelay(t, c, nil, nil)
			// JSON numbers reach the gateway as float64.
			for i, token := range []any{"caller-token", float64(42)} {
				p := newPeer(fmt.Sprintf("peer-%d", i), allCaps)
				ctx := upstream.WithPeer(context.Background(), p)
				if err := m.SetLoggingLevel(ctx, "up", &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
					t.Fatalf("SetLoggingLevel: %v", err)
				}
				ctx = context.WithValue(ctx, callMark{}, "the call")
				meta := mcp.Meta{"progressToken": token, "other": "kept"}
				res, err := m.CallTool(ctx, "up", &mcp.CallToolParams{Name: "work", Arguments: args(`{"marker":"m"}`), Meta: meta})
				if err != nil {
					t.Fatalf("CallTool: %v", err)
				}
				if got := textOf(t, res); got != "done m" {
					t.Errorf("result %q, want %q", got, "done m")
				}
				progress, logs, _ := p.snapshot()
				type note struct {
					Token   any
					Message string
				}
				var got []note
				for _, n := range progress {
					got = append(got, note{n.ProgressToken, n.Message})
				}
				want := []note{{token, "progress m 1/2"}, {token, "progress m 2/2"}}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("token %v: progress (-want +got):\n%s", token, diff)
				}
				if diff := cmp.Diff([]string{"log m"}, logs); diff != "" {
					t.Errorf("token %v: logs (-want +got):\n%s", token, diff)
				}
				// In the call's context, where the downstream SDK finds the request
				// whose stream they go on.
				if diff := cmp.Diff([]any{"the call", "the call", "the call"}, p.contexts()); diff != "" {
					t.Errorf("token %v: contexts of the relayed messages (-want +got):\n%s", token, diff)
				}
				if diff := cmp.Diff(mcp.Meta{"progressToken": token, "other": "kept"}, meta); diff != "" {
					t.Errorf("the caller's _meta was modified (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestRelayServerRequests(t *testing.T) {
	none := &mcp.ClientCapabilities{}
	tools := []struct {
		tool, args string
		want       string // result text for peer "p-<tool>"
		asked      string // what the peer was asked
	}{
		{"work", `{"marker":"m","sample":true}`, "p-work answers sample m", "sample m"},
		{"elicit", `{"marker":"m"}`, "accept p-elicit", "name for m"},
		{"roots", `{"marker":"m"}`, "file:///p-roots", "roots"},
	}
	for _, c := range relayCases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := startRelay(t, c, nil, nil)
			for _, tt := range tools {
				t.Run(tt.tool, func(t *testing.T) {
					call := func(ctx context.Context) (*mcp.CallToolResult, error) {
						return m.CallTool(ctx, "up", &mcp.CallToolParams{Name: tt.tool, Arguments: args(tt.args)})
					}

					p := newPeer("p", allCaps) // a new session, whose ID the server has not seen
					p.id = "p-" + tt.tool
					res, err := call(context.WithValue(upstream.WithPeer(context.Background(), p), callMark{}, "the call"))
					if err != nil {
						t.Fatalf("with a capable peer: %v", err)
					}
					if got := textOf(t, res); got != tt.want {
						t.Errorf("with a capable peer: result %q, want %q", got, tt.want)
					}
					if _, _, asked := p.snapshot(); !slices.Equal(asked, []string{tt.asked}) {
						t.Errorf("the peer was asked %q, want %q", asked, tt.asked)
					}
					if got := p.contexts(); !slices.Equal(got, []any{"the call"}) {
						t.Errorf("the peer was asked in contexts marked %v, want the call's", got)
					}

					incapable := newPeer("incapable-"+tt.tool, none)
					_, err = call(upstream.WithPeer(context.Background(), incapable))
					if err == nil || !strings.Contains(err.Error(), "support") {
						t.Errorf("with a peer without the capability: err = %v, want one saying it is not supported", err)
					}
					if _, _, asked := incapable.snapshot(); len(asked) != 0 {
						t.Errorf("a peer without the capability was asked %q", asked)
					}

					_, err = call(context.Background())
					if want := `no client call in progress on server "up"`; err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("without a peer: err = %v, want one saying %q", err, want)
					}
				})
			}
		})
	}
}

func TestRelaySharedSessionAttribution(t *testing.T) {
	// While a's call is in flight on the shared session, b's call needs
	// sampling. A legacy server sends a request that names no call: it is
	// refused. A new-protocol server embeds it in b's call's result: it
	// reaches b. Log messages name no call in either protocol.
	for _, c := range stdioCases {
		t.Run(c.name, func(t *testing.T) {
			rec := newRecorder()
			m, _ := startRelay(t, c, rec, nil)
			a, b := newPeer("a", allCaps), newPeer("b", allCaps)
			actx, cancel := context.WithCancel(upstream.WithPeer(context.Background(), a))
			defer cancel()
			bctx := upstream.WithPeer(context.Background(), b)
			for _, ctx := range []context.Context{actx, bctx} {
				if err := m.SetLoggingLevel(ctx, "up", &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
					t.Fatal(err)
				}
			}
			slow := make(chan error, 1)
			go func() {
				_, err := m.CallTool(actx, "up", &mcp.CallToolParams{Name: "slow", Arguments: args(`{"marker":"a"}`)})
				slow <- err
			}()
			rec.waitFor(t, "a's call to start", func() bool { return slices.Contains(m.Stderr("up"), "slow started a") })

			res, err := m.CallTool(bctx, "up", &mcp.CallToolParams{Name: "work", Arguments: args(`{"marker":"b","sample":true}`)})
			if c.legacy {
				if err == nil || !strings.Contains(err.Error(), "2 callers have calls in progress") {
					t.Errorf("sampling with two callers: err = %v, want it refused as ambiguous", err)
				}
			} else if err != nil || textOf(t, res) != "b answers sample b" {
				t.Errorf("sampling embedded in b's result: %v, %v; want b's answer", res, err)
			}
			if _, logs, _ := b.snapshot(); len(logs) != 0 {
				t.Errorf("b got log messages while a had a call in flight: %q", logs)
			}
			cancel()
			<-slow

			// Alone, b gets its log messages.
			if _, err := m.CallTool(bctx, "up", &mcp.CallToolParams{Name: "work", Arguments: args(`{"marker":"b2"}`)}); err != nil {
				t.Fatal(err)
			}
			if _, logs, _ := b.snapshot(); !slices.Equal(logs, []string{"log b2"}) {
				t.Errorf("b alone got logs %q, want [log b2]", logs)
			}
			if _, logs, asked := a.snapshot(); len(logs)+len(asked) != 0 {
				t.Errorf("a got b's traffic: logs %q, asked %q", logs, asked)
			}
		})
	}
}

func TestRelayConcurrentPeers(t *testing.T) {
	// 50 clients call the same tool on one upstream at once, all with the
	// same progress token: each gets its own progress, logs and sampling
	// requests and nobody else's.
	const n = 50
	for _, transport := range []string{config.TransportHTTP, config.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			m, h := startRelay(t, relayCase{transport: transport}, nil, nil)
			peers := make([]*fakePeer, n)
			results := make([]string, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range peers {
				p := newPeer(fmt.Sprintf("peer-%02d", i), allCaps)
				peers[i] = p
				wg.Go(func() {
					ctx := upstream.WithPeer(context.Background(), p)
					if errs[i] = m.SetLoggingLevel(ctx, "up", &mcp.SetLoggingLevelParams{Level: "info"}); errs[i] != nil {
						return
					}
					res, err := m.CallTool(ctx, "up", &mcp.CallToolParams{
						Name:      "work",
						Arguments: args(fmt.Sprintf(`{"marker":%q,"sample":true}`, p.id)),
						Meta:      mcp.Meta{"progressToken": "same-token"},
					})
					if errs[i] = err; err == nil {
						results[i] = textOf(t, res)
					}
				})
			}
			wg.Wait()
			for i, p := range peers {
				if errs[i] != nil {
					t.Errorf("%s: %v", p.id, errs[i])
					continue
				}
				if want := p.id + " answers sample " + p.id; results[i] != want {
					t.Errorf("%s: result %q, want %q", p.id, results[i], want)
				}
				progress, logs, asked := p.snapshot()
				var got []string
				for _, n := range progress {
					got = append(got, fmt.Sprintf("%v %s", n.ProgressToken, n.Message))
				}
				want := []string{"same-token progress " + p.id + " 1/2", "same-token progress " + p.id + " 2/2"}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: progress (-want +got):\n%s", p.id, diff)
				}
				if diff := cmp.Diff([]string{"log " + p.id}, logs); diff != "" {
					t.Errorf("%s: logs (-want +got):\n%s", p.id, diff)
				}
				if diff := cmp.Diff([]string{"sample " + p.id}, asked); diff != "" {
					t.Errorf("%s: sampling requests (-want +got):\n%s", p.id, diff)
				}
			}
			if got := h.initialized(); got != n+1 {
				t.Errorf("the server initialized %d sessions, want %d: the primary and one per peer", got, n+1)
			}
		})
	}
}

func TestPeerSessionLifecycle(t *testing.T) {
	work := func(m *upstream.Manager, p upstream.Peer) error {
		ctx := context.Background()
		if p != nil {
			ctx = upstream.WithPeer(ctx, p)
		}
		_, err := m.CallTool(ctx, "up", &mcp.CallToolParams{Name: "work", Arguments: args(`{"marker":"x"}`)})
		return err
	}
	c := relayCase{transport: config.TransportHTTP}

	t.Run("one session for concurrent first calls", func(t *testing.T) {
		m, h := startRelay(t, c, nil, nil)
		p := newPeer("p", allCaps)
		errs := make(chan error, 10)
		for range 10 {
			go func() { errs <- work(m, p) }()
		}
		for range 10 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if got := h.initialized(); got != 2 {
			t.Errorf("the server initialized %d sessions, want 2 (the primary and the peer's)", got)
		}
	})

	t.Run("closed when the peer leaves", func(t *testing.T) {
		m, h := startRelay(t, c, nil, nil)
		p := newPeer("p", allCaps)
		if err := work(m, p); err != nil {
			t.Fatal(err)
		}
		if got := h.live(); got != 2 {
			t.Fatalf("%d live sessions, want 2", got)
		}
		p.leave()
		waitUntil(t, "the peer's session to close", func() bool { return h.live() == 1 })
	})

	t.Run("closed when idle, reopened on use", func(t *testing.T) {
		m, h := startRelay(t, c, nil, &upstream.Options{PeerSessionIdle: time.Millisecond})
		p := newPeer("p", allCaps)
		for i := range 2 {
			if err := work(m, p); err != nil {
				t.Fatalf("call %d: %v", i+1, err)
			}
			waitUntil(t, "the idle session to close", func() bool { return h.live() == 1 })
		}
		if got := h.initialized(); got != 3 {
			t.Errorf("the server initialized %d sessions, want 3 (the primary and the peer's twice)", got)
		}
	})

	t.Run("closed with the server", func(t *testing.T) {
		m, h := startRelay(t, c, nil, nil)
		for _, id := range []string{"a", "b"} {
			if err := work(m, newPeer(id, allCaps)); err != nil {
				t.Fatal(err)
			}
		}
		if got := h.live(); got != 3 {
			t.Fatalf("%d live sessions, want 3", got)
		}
		if _, err := m.Disconnect(context.Background(), "up"); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "every session to close", func() bool { return h.live() == 0 })
	})

	t.Run("a failed open fails the call only", func(t *testing.T) {
		rec := newRecorder()
		m, h := startRelay(t, c, rec, nil)
		var refuse sync.Mutex // held: the server refuses new sessions
		h.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "initialize" {
					if !refuse.TryLock() {
						return nil, errors.New("no more sessions")
					}
					refuse.Unlock()
				}
				return next(ctx, method, req)
			}
		})
		refuse.Lock()
		p := newPeer("p", allCaps)
		err := work(m, p)
		var unavail *upstream.UnavailableError
		if err == nil || errors.As(err, &unavail) || !strings.Contains(err.Error(), "no more sessions") {
			t.Errorf("call whose session cannot open: err = %v, want a plain error with the reason", err)
		}
		if st, _ := m.Status("up"); st.State != upstream.StateConnected {
			t.Errorf("state %s after a per-peer session failed, want CONNECTED", st.State)
		}
		if err := work(m, nil); err != nil { // calls without a peer are unaffected
			t.Errorf("call without a peer: %v", err)
		}
		refuse.Unlock()
		if err := work(m, p); err != nil {
			t.Errorf("call once the server accepts sessions again: %v", err)
		}
		if diff := cmp.Diff([]string{"DISCONNECTED>CONNECTING", "CONNECTING>CONNECTED"}, rec.steps("up")); diff != "" {
			t.Errorf("transitions (-want +got):\n%s", diff)
		}
	})
}

func TestHTTPUpstreamRestart(t *testing.T) {
	// An HTTP server that restarted answers 404 to the old session id: the
	// next call reconnects and succeeds, whether the gateway found out
	// before the call (its event stream got the 404) or by the call.
	tests := []struct {
		name    string
		peer    bool
		noticed bool
	}{
		{"primary, found by the call", false, false},
		{"per peer, found by the call", true, false},
		{"primary, noticed before", false, true},
		{"per peer, noticed before", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var servers []*http.Server
			t.Cleanup(func() { // before the Manager's Close, so it runs after it
				for _, s := range servers {
					s.Close()
				}
			})
			start := func(l net.Listener) {
				h := &relayHTTP{}
				s := &http.Server{Handler: h.handler(t, config.TransportHTTP)}
				servers = append(servers, s)
				go s.Serve(l)
			}
			start(l)
			rec := newRecorder()
			client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
			m := newManager(t, rec, nil, &upstream.Options{HTTPClient: client})
			if err := m.Add(&config.Server{Name: "up", Transport: config.TransportHTTP, URL: "http://" + l.Addr().String()}); err != nil {
				t.Fatal(err)
			}
			if err := m.Connect(context.Background(), "up"); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tt.peer {
				ctx = upstream.WithPeer(ctx, newPeer("p", allCaps))
			}
			call := func(marker string) error {
				res, err := m.CallTool(ctx, "up", &mcp.CallToolParams{Name: "work", Arguments: args(fmt.Sprintf(`{"marker":%q}`, marker))})
				if err == nil && textOf(t, res) != "done "+marker {
					err = fmt.Errorf("result %q", textOf(t, res))
				}
				return err
			}
			if err := call("before"); err != nil {
				t.Fatal(err)
			}

			servers[0].Close()
			// A restart takes long enough for net/http to see that the server
			// closed the idle connections; a POST on one would fail before
			// reaching the new server.
			client.CloseIdleConnections()
			l2, err := net.Listen("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			start(l2)
			if tt.noticed {
				rec.waitFor(t, "the gateway to notice", func() bool {
					st, _ := m.Status("up")
					return st.State == upstream.StateError
				})
			}

			if err := call("after"); err != nil {
				t.Fatalf("call after the restart: %v", err)
			}
			st, _ := m.Status("up")
			if st.State != upstream.StateConnected {
				t.Errorf("state %s after the call, want CONNECTED", st.State)
			}
			if diff := cmp.Diff([]string{
				"DISCONNECTED>CONNECTING", "CONNECTING>CONNECTED", "CONNECTED>ERROR", "ERROR>CONNECTING", "CONNECTING>CONNECTED",
			}, rec.steps("up")); diff != "" {
				t.Errorf("transitions (-want +got):\n%s", diff)
			}
			if n := len(rec.discoveriesOf("up")); n != 2 {
				t.Errorf("%d discoveries, want 2: the reconnect re-lists the server", n)
			}
		})
	}
}

func TestRelayCancellation(t *testing.T) {
	// Cancelling a call's context cancels the upstream handler's.
	for _, c := range relayCases[:3] {
		for _, withPeer := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s peer=%v", c.name, withPeer), func(t *testing.T) {
				rec := newRecorder()
				m, h := startRelay(t, c, rec, nil)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if withPeer {
					ctx = upstream.WithPeer(ctx, newPeer("p", allCaps))
				}
				done := make(chan error, 1)
				go func() {
					_, err := m.CallTool(ctx, "up", &mcp.CallToolParams{Name: "slow", Arguments: args(`{"marker":"s"}`)})
					done <- err
				}()
				wait := func(what, line string, started bool) {
					if h == nil {
						rec.waitFor(t, what, func() bool { return slices.Contains(m.Stderr("up"), line) })
						return
					}
					select {
					case <-h.wait(started, "s"):
					case <-time.After(30 * time.Second):
						t.Fatalf("gave up waiting for %s", what)
					}
				}
				wait("the call to start", "slow started s", true)
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("cancelled call: err = %v, want context.Canceled", err)
				}
				wait("the upstream handler to be cancelled", "slow cancelled s", false)
			})
		}
	}
}

func TestRelayPassThrough(t *testing.T) {
	for _, c := range relayCases[:3] {
		t.Run(c.name, func(t *testing.T) {
			updates := make(chan string, 10)
			opts := &upstream.Options{OnResourceUpdated: func(server string, p *mcp.ResourceUpdatedNotificationParams) {
				updates <- fmt.Sprintf("%s %s %v", server, p.URI, p.Meta)
			}}
			m, _ := startRelay(t, c, nil, opts)
			ctx := upstream.WithPeer(context.Background(), newPeer("p", allCaps))
			call := func(tool, a string) string {
				t.Helper()
				res, err := m.CallTool(ctx, "up", &mcp.CallToolParams{Name: tool, Arguments: args(a)})
				if err != nil {
					t.Fatalf("%s: %v", tool, err)
				}
				return textOf(t, res)
			}

			comp, err := m.Complete(ctx, "up", &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
				Argument: mcp.CompleteParamsArgument{Name: "who", Value: "wor"},
			})
			if err != nil || !slices.Equal(comp.Completion.Values, []string{"who=wor"}) {
				t.Errorf("Complete = %+v, %v; want [who=wor]", comp, err)
			}

			const uri = "file:///watched"
			if err := m.Subscribe(ctx, "up", &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatalf("Subscribe: %v", err)
			}
			waitUntil(t, "the subscription", func() bool { return call("subs", `{}`) == uri })
			call("touch", `{"uri":"`+uri+`"}`)
			select {
			case got := <-updates:
				if want := "up " + uri + " map[]"; got != want {
					t.Errorf("OnResourceUpdated got %q, want %q", got, want)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("gave up waiting for resources/updated")
			}

			// A reconnect renews the subscription.
			if _, err := m.Disconnect(context.Background(), "up"); err != nil {
				t.Fatal(err)
			}
			if err := m.Connect(context.Background(), "up"); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the renewed subscription", func() bool { return call("subs", `{}`) == uri })

			// A second subscriber keeps it alive when the first leaves; the
			// server hears of the subscription once, and of its end once.
			other := upstream.WithPeer(context.Background(), newPeer("other", allCaps))
			if err := m.Subscribe(other, "up", &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatalf("second Subscribe: %v", err)
			}
			if err := m.Unsubscribe(ctx, "up", &mcp.UnsubscribeParams{URI: uri}); err != nil {
				t.Fatalf("Unsubscribe: %v", err)
			}
			if got := call("subs", `{}`); got != uri {
				t.Fatalf("after one of two subscribers left, the server has subscriptions %q, want %q", got, uri)
			}
			call("touch", `{"uri":"`+uri+`"}`)
			select {
			case <-updates:
			case <-time.After(30 * time.Second):
				t.Fatal("the remaining subscriber got no resources/updated")
			}
			if err := m.Unsubscribe(other, "up", &mcp.UnsubscribeParams{URI: uri}); err != nil {
				t.Fatalf("second Unsubscribe: %v", err)
			}
			waitUntil(t, "the subscription to end", func() bool { return call("subs", `{}`) == "" })

			for _, err := range []error{
				func() error { _, err := m.Complete(ctx, "nope", &mcp.CompleteParams{}); return err }(),
				m.SetLoggingLevel(ctx, "nope", &mcp.SetLoggingLevelParams{Level: "info"}),
				m.Subscribe(ctx, "nope", &mcp.SubscribeParams{URI: uri}),
				m.Unsubscribe(ctx, "nope", &mcp.UnsubscribeParams{URI: uri}),
			} {
				if !errors.Is(err, upstream.ErrNotFound) {
					t.Errorf("on an unknown server: err = %v, want ErrNotFound", err)
				}
			}
		})
	}
}

func TestRelayStripsReservedMeta(t *testing.T) {
	// A downstream client's own protocol fields in _meta would make a legacy
	// server read the request as a new-protocol one, and reject it.
	m, _ := startRelay(t, stdioCases[1], nil, nil)
	res, err := m.CallTool(context.Background(), "up", &mcp.CallToolParams{
		Name:      "work",
		Arguments: args(`{"marker":"m"}`),
		Meta:      mcp.Meta{mcp.MetaKeyProtocolVersion: "2026-07-28", mcp.MetaKeyClientInfo: map[string]any{"name": "downstream"}},
	})
	if err != nil || textOf(t, res) != "done m" {
		t.Errorf("CallTool with downstream protocol _meta = %v, %v; want done m", res, err)
	}
}

// pooledPeer is a caller of the stateless revision whose calls may reuse
// the sessions opened for earlier calls of the same client.
type pooledPeer struct {
	*fakePeer
	client string
}

func (p *pooledPeer) Stateless() bool { return true }
func (p *pooledPeer) PoolKey() string { return p.client }

func TestPooledPeerSessions(t *testing.T) {
	// Stateless callers have a peer per call. On a classic server each call
	// needs a session the server's requests during it can be attributed
	// by; once the call ends, a later call of the same client reuses it.
	for _, transport := range []string{config.TransportHTTP, config.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			m, h := startRelay(t, relayCase{transport: transport}, nil, nil)
			call := func(p *pooledPeer) error {
				ctx := upstream.WithPeer(context.Background(), p)
				res, err := m.CallTool(ctx, "up", &mcp.CallToolParams{
					Name:      "work",
					Arguments: args(fmt.Sprintf(`{"marker":%q,"sample":true}`, p.id)),
					Meta:      mcp.Meta{"progressToken": "same-token"},
				})
				if err != nil {
					return err
				}
				if got, want := textOf(t, res), p.id+" answers sample "+p.id; got != want {
					return fmt.Errorf("%s: result %q, want %q", p.id, got, want)
				}
				progress, _, asked := p.snapshot()
				if len(progress) != 2 || progress[0].Message != "progress "+p.id+" 1/2" {
					return fmt.Errorf("%s: progress %v, want its own two", p.id, progress)
				}
				if !slices.Equal(asked, []string{"sample " + p.id}) {
					return fmt.Errorf("%s: asked %q, want its own sampling request only", p.id, asked)
				}
				p.leave() // the call is over: its peer is done
				return nil
			}

			// Concurrent calls of one client: each on a session no other
			// call holds at the same time.
			const n = 20
			errs := make(chan error, n)
			for i := range n {
				p := &pooledPeer{fakePeer: newPeer(fmt.Sprintf("c-%02d", i), allCaps), client: "alice"}
				go func() { errs <- call(p) }()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
			opened := h.initialized()
			if opened < 2 || opened > n+1 {
				t.Fatalf("the server initialized %d sessions for %d concurrent calls, want 2..%d", opened, n, n+1)
			}

			// Later calls of the same client, one after another: no new
			// session, though each call's peer is gone when it ends.
			for i := range n {
				if err := call(&pooledPeer{fakePeer: newPeer(fmt.Sprintf("s-%02d", i), allCaps), client: "alice"}); err != nil {
					t.Fatal(err)
				}
			}
			if got := h.initialized(); got != opened {
				t.Errorf("the server initialized %d sessions after %d more calls of the same client, want still %d", got, n, opened)
			}

			// Another client, or the same one declaring other
			// capabilities, never shares them.
			if err := call(&pooledPeer{fakePeer: newPeer("bob-1", allCaps), client: "bob"}); err != nil {
				t.Fatal(err)
			}
			if got := h.initialized(); got != opened+1 {
				t.Errorf("another client's call: %d sessions initialized, want %d", got, opened+1)
			}
			sampleOnly := &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}
			if err := call(&pooledPeer{fakePeer: newPeer("alice-sampling", sampleOnly), client: "alice"}); err != nil {
				t.Fatal(err)
			}
			if got := h.initialized(); got != opened+2 {
				t.Errorf("a call declaring other capabilities: %d sessions initialized, want %d", got, opened+2)
			}
			if live := h.live(); live != opened+2 {
				t.Errorf("%d live sessions, want %d: pooled sessions outlive their calls", live, opened+2)
			}
		})
	}
}
