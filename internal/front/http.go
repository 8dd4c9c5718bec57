package front

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/httpguard"
)

// Defaults of [HTTPOptions].
const (
	// DefaultMaxBodyBytes bounds one POSTed JSON-RPC payload: large enough
	// for any sane tool arguments, small enough that a client cannot make
	// the gateway buffer unbounded memory.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultSessionTimeout is how long a Streamable HTTP session may stay
	// idle before the gateway forgets it; the client then gets 404 and
	// starts a new session, as the spec requires.
	DefaultSessionTimeout = 30 * time.Minute
)

// HTTPOptions configure the MCP HTTP endpoints. nil means defaults.
type HTTPOptions struct {
	// AllowedOrigins are extra browser Origins (scheme://host[:port]) that
	// may drive the endpoints, e.g. a web client served from another host.
	// Same-origin requests and requests without an Origin (non-browser
	// clients) are always allowed; every other Origin gets 403, other
	// ports of localhost included. See [httpguard.Options].
	AllowedOrigins []string
	// AllowedHosts are extra Host header values (host names, port ignored),
	// e.g. the public name a reverse proxy on the same machine forwards.
	// Any other non-loopback Host on a loopback listener gets 403: that is
	// what a DNS rebinding attack looks like. See [httpguard.Options].
	AllowedHosts []string
	// Guarded says every request reaches the handler through an
	// [httpguard.Guard] already (the gateway mounts all its routes behind
	// one), so the handler does not check Host and Origin a second time.
	// AllowedOrigins and AllowedHosts are then unused.
	Guarded bool
	// MaxBodyBytes bounds a POST body; larger bodies get 413. Zero or
	// negative means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// SessionTimeout closes Streamable HTTP sessions idle this long. Zero
	// means DefaultSessionTimeout, negative means never.
	SessionTimeout time.Duration
	// EventStore keeps the events of Streamable HTTP streams so a client
	// can resume with Last-Event-ID. nil means an in-memory store owned by
	// the handler (bounded, see mcp.MemoryEventStore).
	EventStore mcp.EventStore
	// Stateless serves every Streamable HTTP request on its own temporary
	// session (no Mcp-Session-Id): any replica behind a load balancer can
	// answer any request of a client. The price: no server-to-client
	// requests (sampling, elicitation, roots) or notifications outside a
	// call's response stream, and no resumption.
	Stateless bool
	// Sessions caps the live sessions of the stateful endpoints (see
	// [Sessions]); handlers given the same one share its caps, so /mcp,
	// /sse and the per-server endpoints count one total. nil: each handler
	// gets its own with the default caps. Unused when Stateless.
	Sessions *Sessions
}

func (o *HTTPOptions) resolve() HTTPOptions {
	var r HTTPOptions
	if o != nil {
		r = *o
	}
	if r.MaxBodyBytes <= 0 {
		r.MaxBodyBytes = DefaultMaxBodyBytes
	}
	switch {
	case r.SessionTimeout == 0:
		r.SessionTimeout = DefaultSessionTimeout
	case r.SessionTimeout < 0:
		r.SessionTimeout = 0 // the SDK's "never"
	}
	if r.Sessions == nil {
		r.Sessions = NewSessions(nil)
	}
	return r
}

// ServerTimeouts are the http.Server timeouts suited to the MCP endpoints:
// a bound on slow headers and on idle keep-alive connections. There is
// deliberately no write timeout: SSE streams stay open for the life of a
// session.
func ServerTimeouts() (readHeader, idle time.Duration) {
	return 10 * time.Second, 2 * time.Minute
}

// StreamableHandler serves MCP Streamable HTTP (mount at /mcp) behind the
// gateway's transport checks (see [HTTPOptions]). Legacy (< 2026-07-28)
// clients get sessions, capped by [HTTPOptions.Sessions]; unknown or ended
// sessions get 404, and DELETE ends one.
func (f *Front) StreamableHandler(opts *HTTPOptions) http.Handler {
	o := opts.resolve()
	store := o.EventStore
	if store == nil {
		store = mcp.NewMemoryEventStore(nil)
	}
	if !o.Stateless {
		store = endNotifier{EventStore: store, ended: o.Sessions.forget}
	}
	sdkHandler := func(stateless bool) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.server },
			&mcp.StreamableHTTPOptions{
				Logger:              f.logger,
				EventStore:          store,
				SessionTimeout:      o.SessionTimeout,
				MaxRequestBodyBytes: o.MaxBodyBytes,
				Stateless:           stateless,
				// A stateless caller's request ends its call when it goes.
				PropagateRequestCancellation: stateless,
				// The guard does the same check, with AllowedHosts on top.
				DisableLocalhostProtection: true,
			})
	}
	// The SDK serves the stateless revision only on a stateless handler,
	// and sessions only on a stateful one: one of each on the same URL,
	// chosen per request by the guard.
	stateless := sdkHandler(true)
	if o.Stateless {
		g := newHTTPGuard(stateless, o, f.logger, false)
		g.stateless, g.forward, g.fast = stateless, f.forwardParked, f.fastToolCall
		return g
	}
	g := newHTTPGuard(sdkHandler(false), o, f.logger, true)
	g.stateless, g.forward, g.fast = stateless, f.forwardParked, f.fastToolCall
	g.sessions = o.Sessions
	return g
}

// SSEHandler serves the legacy HTTP+SSE transport (mount at /sse) behind
// the same checks as [Front.StreamableHandler]. A session lives as long as
// its GET stream, and counts against the caps of [HTTPOptions.Sessions].
func (f *Front) SSEHandler(opts *HTTPOptions) http.Handler {
	o := opts.resolve()
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return f.server },
		&mcp.SSEOptions{
			MaxRequestBodyBytes:        o.MaxBodyBytes,
			DisableLocalhostProtection: true, // done by the guard
		})
	g := newHTTPGuard(h, o, f.logger, false)
	g.sessions, g.sse = o.Sessions, true
	return g
}

// httpGuard enforces what the SDK handlers leave to the application: the
// Origin check, the Host check with an allow list, (Streamable HTTP only) a
// session id on every legacy POST but initialize, and the session caps.
type httpGuard struct {
	next      http.Handler
	stateless http.Handler // requests of the stateless revision; nil: next serves all
	// forward passes a request to another replica when it must be served
	// there, and reports whether it did.
	forward func(w http.ResponseWriter, r *http.Request, maxBody int64) bool
	// fast serves a tools/call of the stateless revision without the SDK
	// when it can (see [Front.fastToolCall]), and reports whether it did.
	fast           func(w http.ResponseWriter, r *http.Request, maxBody int64) bool
	browser        *httpguard.Guard // nil with HTTPOptions.Guarded
	maxBody        int64
	requireSession bool
	sessions       *Sessions // nil when stateless
	sse            bool      // the legacy SSE endpoint
	logger         *slog.Logger
}

func newHTTPGuard(next http.Handler, o HTTPOptions, logger *slog.Logger, requireSession bool) *httpGuard {
	var browser *httpguard.Guard
	if !o.Guarded {
		var err error
		browser, err = httpguard.New(httpguard.Options{AllowedHosts: o.AllowedHosts, AllowedOrigins: o.AllowedOrigins, Logger: logger})
		if err != nil {
			// The config validates both lists; a hand-built bad value must
			// not open the door, so fall back to no extra entries.
			logger.Warn("allowed hosts/origins ignored", "error", err)
			browser, _ = httpguard.New(httpguard.Options{Logger: logger})
		}
	}
	return &httpGuard{
		next:           next,
		browser:        browser,
		maxBody:        o.MaxBodyBytes,
		requireSession: requireSession,
		logger:         logger,
	}
}

// Protocol constants the SDK keeps unexported.
const (
	protocolVersionHeader = "Mcp-Protocol-Version"
	sessionIDHeader       = "Mcp-Session-Id"
	// statelessProtocol is the first protocol version without sessions
	// (SEP-2575): its requests carry their version in the header and in
	// _meta instead of a session id.
	statelessProtocol = "2026-07-28"
	metaProtocolKey   = "io.modelcontextprotocol/protocolVersion"
)

func (g *httpGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.browser != nil {
		if ref := g.browser.Check(r); ref != nil {
			g.browser.Refuse(w, r, ref)
			return
		}
	}
	if r.Method == http.MethodPost && !g.sse && !acceptsBoth(r.Header.Values("Accept")) {
		g.reject(w, r, http.StatusBadRequest, "Accept must list both application/json and text/event-stream")
		return
	}
	if g.stateless != nil && r.Header.Get(protocolVersionHeader) >= statelessProtocol {
		if g.forward != nil && g.forward(w, r, g.maxBody) {
			return
		}
		if g.fast != nil && g.fast(w, r, g.maxBody) {
			return
		}
		g.stateless.ServeHTTP(w, r) // the SDK checks the rest (_meta, Mcp-Method, Mcp-Name)
		return
	}
	var initID json.RawMessage
	if g.requireSession && r.Method == http.MethodPost && r.Header.Get(sessionIDHeader) == "" {
		var ok, stateless bool
		if initID, stateless, ok = g.startsSession(w, r); !ok {
			return
		}
		if stateless && g.stateless != nil {
			// _meta names the stateless revision but the header does not:
			// the SDK answers with the spec's header-mismatch error.
			g.stateless.ServeHTTP(w, r)
			return
		}
	}
	if g.sessions != nil {
		g.serveCounted(w, r, initID)
		return
	}
	g.next.ServeHTTP(w, r)
}

// acceptsBoth reports whether Accept values list both media types a
// Streamable HTTP POST must accept (wildcards count).
func acceptsBoth(values []string) bool {
	var json, stream bool
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			switch mt {
			case "*/*":
				json, stream = true, true
			case "application/*":
				json = true
			case "text/*":
				stream = true
			case "application/json":
				json = true
			case "text/event-stream":
				stream = true
			}
		}
	}
	return json && stream
}

// startsSession reports whether a POST without a session id may go on to
// the SDK. Under the legacy protocols only a lone initialize request may
// start a session (an initialize must not be batched); anything else gets
// 400, where the SDK would open a throwaway session and answer 200 with a
// JSON-RPC error. Requests whose _meta names the stateless protocol pass
// (stateless is true): they never carry a session id. On false the
// response has been written. initID is the id of the lone initialize (the
// only request that starts a lasting session), nil for the others.
func (g *httpGuard) startsSession(w http.ResponseWriter, r *http.Request) (initID json.RawMessage, stateless, ok bool) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return nil, false, true // the SDK answers 415
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			g.reject(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
			return nil, false, false
		}
		g.reject(w, r, http.StatusBadRequest, "reading body: "+err.Error())
		return nil, false, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))

	msgs, batch, err := peekMessages(body)
	if err != nil {
		g.rejectRPC(w, r, nil, jsonrpc.CodeParseError, "malformed JSON-RPC payload: "+err.Error())
		return nil, false, false
	}
	for _, m := range msgs {
		if m.isCall() && (m.metaProtocol() >= statelessProtocol || m.Method == "server/discover") {
			return nil, true, true
		}
	}
	if !batch && len(msgs) == 1 && msgs[0].Method == "initialize" && msgs[0].isCall() {
		return msgs[0].ID, false, true
	}
	var id json.RawMessage
	if !batch && len(msgs) == 1 && msgs[0].isCall() {
		id = msgs[0].ID
	}
	g.rejectRPC(w, r, id, jsonrpc.CodeInvalidRequest,
		"Bad Request: Mcp-Session-Id header is required (only a single initialize request may start a session)")
	return nil, false, false
}

// peekedMessage is the little of a JSON-RPC message the guard looks at.
type peekedMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (m peekedMessage) isCall() bool {
	return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null"
}

// metaProtocol returns params._meta's protocol version, "" if absent.
func (m peekedMessage) metaProtocol() string {
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return ""
	}
	v, _ := p.Meta[metaProtocolKey].(string)
	return v
}

func peekMessages(body []byte) (msgs []peekedMessage, batch bool, err error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, false, errors.New("empty body")
	}
	if body[0] == '[' {
		if err := json.Unmarshal(body, &msgs); err != nil {
			return nil, true, err
		}
		if len(msgs) == 0 {
			return nil, true, errors.New("empty batch")
		}
		return msgs, true, nil
	}
	var m peekedMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, false, err
	}
	return []peekedMessage{m}, false, nil
}

func (g *httpGuard) reject(w http.ResponseWriter, r *http.Request, status int, msg string) {
	g.logRejected(r, status, msg)
	http.Error(w, msg, status)
}

// rejectRPC answers with a JSON-RPC error body, so a client that reads the
// payload of a failed POST learns why.
func (g *httpGuard) rejectRPC(w http.ResponseWriter, r *http.Request, id json.RawMessage, code int64, msg string) {
	g.logRejected(r, http.StatusBadRequest, msg)
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}

func (g *httpGuard) logRejected(r *http.Request, status int, msg string) {
	// Debug: a browser or scanner hammering the port must not flood the log.
	g.logger.Debug("mcp http request rejected", "status", status, "reason", msg,
		"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr,
		"origin", r.Header.Get("Origin"), "host", r.Host)
}
