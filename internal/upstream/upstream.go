// Package upstream supervises the MCP servers that switchboard fronts.
//
// Each registered server gets one supervisor goroutine that owns everything
// about it: the stdio child process or HTTP session, the goroutines that watch
// them, re-discovery after list_changed notifications and the status state
// machine. Callers talk to a [Manager]; they never see the supervisor. State
// reads ([Manager.Status], [Manager.Session]) take only a read lock so they can
// sit on the hot path of every proxied call.
//
// # Lifecycle
//
// A stdio server runs in its own process group; its stderr is kept (the
// last 200 lines, across restarts) and, with Options.LogDirectory, appended
// to <dir>/<server>.log, rotated by size. Stopping it closes its stdin,
// sends SIGTERM to the group after a fifth of the shutdown timeout and
// SIGKILL at its end, so nothing of it outlives [Manager.Close]. On Linux
// the kernel also kills the direct child if the gateway dies without
// stopping it.
//
// A server that was connected and fails (its process dies, its connection
// is lost, three health probes in a row fail, or a restart fails) is
// restarted with exponential backoff and jitter, until more than
// RestartPolicy.MaxAttempts restarts within RestartPolicy.Window make it a
// crash loop: ERROR, "crash loop: N restarts in Ws", until an operator's
// [Manager.Connect]. A stdio command that does not exist is ERROR at once,
// "command not found: npx", and is not retried.
//
// Health probes (ping, tool_call or http) run on CONNECTED and DEGRADED
// servers; a successful call within the interval counts as a passing probe.
// Calls also feed an error rate over a window of calls, above which the
// server is DEGRADED (and CONNECTED again below it).
//
// A server with start_on_demand is started by the first call that needs
// it; one with idle_timeout (stdio) is stopped after that long without
// calls and started again by the next. [Manager.Disconnect] drains: new
// calls fail at once, those in flight may finish, within
// Options.DrainTimeout.
//
// # Bounded replies
//
// Every message a server sends (a stdio line, the JSON body of a POST's
// answer, a server-sent event) is bounded by Options.MaxResultBytes (a
// server's max_result_bytes wins) before the SDK reads it. A reply over the
// bound fails its own call with a [ResultTooLargeError], and one that is
// not JSON-RPC fails the call it names; the connection and every other call
// on it go on. A message that names no call of ours is dropped and logged.
//
// # Relaying to the calling client
//
// A call made with a [Peer] in its context ([WithPeer]) gets what the server
// sends while serving it relayed to that peer: progress notifications, log
// messages, and sampling, elicitation and roots requests. A request for a
// feature the peer did not declare is refused with an error, never relayed.
//
// An sse/http server gets a session per peer, opened on the peer's first call
// with the transport settings of the server's primary session and declaring
// the peer's own sampling, elicitation and roots support: everything the
// server sends on it is the peer's. It closes when the peer's Done channel
// does, after Options.PeerSessionIdle without calls, and with the primary
// session (disconnect, error, removal, Close).
//
// A stdio server has one session, shared by every caller, and the primary
// session of an sse/http server serves the calls made without a peer. It
// declares sampling, elicitation and roots, so that servers offer the tools
// that need them, and attributes what arrives on it:
//   - progress by token: each call's progress token is replaced by one unique
//     to the call and mapped back to the caller's own token (string or
//     number, unchanged) on the way to its peer;
//   - input requests that a new-protocol (2026-07-28) server embeds in a
//     call's result, to that call's peer;
//   - anything else (log messages; sampling, elicitation and roots requests
//     of a legacy server, which say nothing of the call they belong to) to
//     the one peer with calls in flight on the session. With none, or with
//     several callers (a call without a peer counts as one), requests are
//     refused with an error saying so and log messages are dropped.
//
// That last rule is the limitation of a shared session: a stdio server
// serves one client, and the gateway can only guess which caller a request
// is for when a single one is waiting.
//
// # OAuth
//
// An sse/http server protected by OAuth gets its handler from Options.OAuth
// (package upstreamauth in the gateway): every session asks it for the
// token, and a 401 (or a 403 asking for scope) has it authorize before one
// retry. When it cannot without an operator (an [AuthRequired] error), the
// server is NEEDS_AUTH with the reason, at connect or on the first call or
// health probe that finds out, and is not restarted.
//
// A session an HTTP server no longer knows (it restarted, and answers 404 to
// the old session id) is replaced on the next call, which is then retried
// once: the primary session through the supervisor, re-discovering the
// server, and a per-peer session directly.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
)

// State is where an upstream is in its lifecycle. The values are the strings
// persisted in connection history, so they never change.
type State string

// The states of an upstream. Only CONNECTED and DEGRADED serve calls.
//
// DEGRADED is CONNECTED with too many failing calls (Options.DegradedErrorRate
// over the last Options.DegradedWindowCalls); it returns to CONNECTED when the
// rate falls back. ERROR is a failure: a crash, a lost connection, a failed
// start or failed health checks. An ERROR server is restarted with backoff
// (Status.NextRestartAt) unless restarts are off, the failure is a
// configuration problem (a command not found), or it is in a crash loop; an
// operator's [Manager.Connect] starts it in any case. DISCONNECTED is stopped
// on purpose: never started, [Manager.Disconnect], or idle (LastError "idle").
// NEEDS_AUTH is an sse/http server whose OAuth handler (Options.OAuth)
// holds no usable grant and cannot get one without an operator (an
// [AuthRequired] error: never authorized, a refused refresh, a step-up):
// LastError says why; it is not restarted until an operator's
// [Manager.Connect], after the authorization.
const (
	StateConnecting   State = "CONNECTING"
	StateConnected    State = "CONNECTED"
	StateDegraded     State = "DEGRADED"
	StateDisconnected State = "DISCONNECTED"
	StateError        State = "ERROR"
	StateNeedsAuth    State = "NEEDS_AUTH"
)

// AuthRequired is implemented by the errors of an OAuth handler
// (Options.OAuth) that mean an operator must authorize the server again;
// the supervisor then moves it to NEEDS_AUTH with AuthReason as the
// reason, instead of retrying. AuthReason must not contain secrets.
type AuthRequired interface {
	error
	AuthReason() string
}

// authReason is the reason of the AuthRequired error in err's chain, or
// "" when there is none.
func authReason(err error) string {
	var a AuthRequired
	if errors.As(err, &a) {
		if r := a.AuthReason(); r != "" {
			return r
		}
		return "authorization required"
	}
	return ""
}

// serving reports whether calls may be sent to a server in state s.
func (s State) serving() bool { return s == StateConnected || s == StateDegraded }

// Status is a point-in-time view of one upstream.
//
// ServerInfo, Capabilities, ProtocolVersion, Instructions and ConnectedAt
// describe the most recent successful session and are kept after it ends, so
// an operator can still see what a crashed server was. The pointers are shared
// and must not be modified.
type Status struct {
	Name            string
	Transport       string
	State           State
	LastError       string    // reason of the last failure ("" when none); never contains secrets
	Since           time.Time // when State was entered
	ConnectedAt     time.Time
	PID             int // stdio child pid while running, else 0
	ServerInfo      *mcp.Implementation
	Capabilities    *mcp.ServerCapabilities
	ProtocolVersion string
	Instructions    string

	// StartedAt is when the running process (stdio) or session (sse/http)
	// started; zero when none runs. Uptime is time.Since(StartedAt).
	StartedAt time.Time
	// Restarts counts the automatic restarts since the server was added.
	Restarts int
	// LastExit says how the last stdio process ended ("exit status 3",
	// "signal: killed"); "" before any ended. It is kept across restarts.
	LastExit string
	// NextRestartAt is when the next automatic restart is due; zero when
	// none is scheduled.
	NextRestartAt time.Time
	// Draining: [Manager.Disconnect] is waiting for the calls in flight
	// (InFlight) to finish. State is DISCONNECTED already and new calls are
	// refused.
	Draining bool
	// InFlight is the number of calls in progress on the server.
	InFlight int
	// OnDemand: the server is DISCONNECTED and the next call starts it
	// (start_on_demand, or it was stopped for being idle).
	OnDemand bool
	// Detail says what a CONNECTING server is busy with when a start may
	// take long: "installing packages, 23 s" during the first start of a
	// package runner (npx, uvx, docker run...), which is given
	// firstStartFactor times the startup timeout. "" otherwise.
	Detail string
	Health Health
}

// Callable reports whether a call to the server can succeed without an
// operator: it is serving, or the call will start it ([Status.OnDemand]).
// The catalog should offer its tools as available then.
func (s Status) Callable() bool { return s.State.serving() || s.OnDemand }

// Health is the outcome of a server's health checks and calls.
//
// Probes run every interval while the server is CONNECTED or DEGRADED. A
// successful call within the interval counts as a passing check and the probe
// is skipped (LastCheckPassive). Three failed probes in a row put the server
// in ERROR and restart it.
type Health struct {
	Method              string        // "ping", "tool_call" or "http"
	LastCheck           time.Time     // zero before the first check
	LastCheckOK         bool          //
	LastCheckPassive    bool          // the last check was a successful call, not a probe
	LastCheckError      string        // why the last probe failed; never contains secrets
	ResponseTime        time.Duration // of the last probe
	ConsecutiveFailures int           // failed probes in a row
	ChecksTotal         int64         // probes run since the server was added
	ChecksFailed        int64         // of which failed
	// ErrorRate is the share of failed calls among the last WindowCalls
	// (at most Options.DegradedWindowCalls) of the current session.
	ErrorRate   float64
	WindowCalls int
}

// HealthReport is the result of one health probe, reported to
// Options.OnHealth (metrics).
type HealthReport struct {
	Server       string
	Method       string
	OK           bool
	ResponseTime time.Duration
	Error        string // "" when OK; never contains secrets
	At           time.Time
	Health       Health // the server's health after the probe
}

// Transition is one state change, reported to Options.OnTransition (the app persists it as
// connection history).
type Transition struct {
	Server   string
	From, To State
	Error    string
	At       time.Time
	// Callable is [Status.Callable] after the change: whether the server's
	// tools should be offered as available.
	Callable bool
}

// Discovery is everything a server offers, as listed after connect and after each list_changed.
// The slices are fresh for every report; the elements are shared and must not be modified.
type Discovery struct {
	Server    string
	Tools     []*mcp.Tool
	Resources []*mcp.Resource
	Templates []*mcp.ResourceTemplate
	Prompts   []*mcp.Prompt
	// Announced says which lists the server announced changed
	// (notifications/*/list_changed) when this is a re-discovery they
	// caused; all false otherwise.
	Announced ListChanges
}

// ListChanges names the lists a server announced changed.
type ListChanges struct{ Tools, Resources, Prompts bool }

// Any reports whether any list changed.
func (c ListChanges) Any() bool { return c.Tools || c.Resources || c.Prompts }

// Options configures a [Manager]. The zero value (or nil) gives the defaults
// documented on each field.
type Options struct {
	// Logger receives the package's logs, each with a "server" attribute; nil discards them.
	Logger *slog.Logger
	// OnTransition is called in order per server, never concurrently for the
	// same server. It must not block long and must not call lifecycle methods
	// (Connect, Disconnect, Remove, Close) of the Manager, which would deadlock.
	OnTransition func(Transition)
	// OnDiscovery is called after the initial discovery (before the state
	// becomes CONNECTED) and after each re-discovery, from the server's
	// supervisor goroutine. The same restrictions as OnTransition apply.
	OnDiscovery func(Discovery)
	// OnHealth is called after each health probe, from the server's
	// supervisor goroutine; the same restrictions as OnTransition apply.
	OnHealth func(HealthReport)
	// ConnectTimeout bounds a start: process start, initialize and
	// discovery (settings.startup_timeout_seconds; a server's own
	// startup_timeout_seconds wins). Default 30s.
	ConnectTimeout time.Duration
	// ShutdownTimeout bounds the stop of a stdio server: stdin is closed,
	// the process group gets SIGTERM after a fifth of it, SIGKILL at its end.
	// A server's shutdown_timeout_seconds wins. Default 5s.
	ShutdownTimeout time.Duration
	// Restart is what happens when a server fails; the zero value restarts
	// with the defaults documented on [RestartPolicy].
	Restart RestartPolicy
	// HealthInterval and HealthTimeout are the defaults of a server's
	// health_check interval and timeout; default 30s and 5s.
	HealthInterval time.Duration
	HealthTimeout  time.Duration
	// A server is DEGRADED while more than DegradedErrorRate of its last
	// DegradedWindowCalls calls failed; default 0.5 of 20.
	DegradedErrorRate   float64
	DegradedWindowCalls int
	// DrainTimeout bounds how long [Manager.Disconnect] waits for calls in
	// flight before it aborts them; default 30s.
	DrainTimeout time.Duration
	// LogDirectory receives each stdio server's stderr as <server>.log,
	// rotated by size (10 MiB, 3 files); "" = no files.
	LogDirectory string
	// SelfExecutable is used when Command == config.SelfCommand; default os.Executable().
	SelfExecutable string
	// Getenv reads the gateway environment for env_passthrough and BaseEnv; default os.Getenv.
	Getenv func(string) string
	// BaseEnv lists the names copied from the gateway env into every stdio
	// child when set; default PATH, HOME, USER, LANG, LC_ALL, TZ, TMPDIR,
	// SHELL, TERM, SYSTEMROOT. An empty non-nil slice copies nothing.
	BaseEnv []string
	// Implementation is the client info announced upstream; default {Name: "switchboard", Version: "dev"}.
	Implementation *mcp.Implementation
	// HTTPClient is the base client for sse/http transports. The default has
	// dial, TLS and idle timeouts but no overall Timeout, because streams are
	// long-lived, and dials and follows redirects through Guard. It is cloned
	// per server, never modified. A client given here is used as is: build
	// its transport with [netguard.Guard.Transport] for the dial-time check.
	HTTPClient *http.Client
	// Guard refuses the destinations of sse/http servers and health check
	// URLs that the SSRF policy denies: before a connect (a permanent
	// ERROR, not retried) and, in the default HTTPClient, at every dial and
	// redirect. Nil means the default policy (link-local and metadata
	// endpoints refused).
	Guard *netguard.Guard
	// OnResourceUpdated is called when a server says a subscribed resource
	// changed (see [Manager.Subscribe]); the caller maps it to the interested
	// clients. It is called from the session's reader: it must not block long.
	OnResourceUpdated func(server string, p *mcp.ResourceUpdatedNotificationParams)
	// PeerSessionIdle is how long a per-peer session (sse/http) stays open
	// without calls; default 5 minutes.
	PeerSessionIdle time.Duration
	// MaxResultBytes bounds one message from a server: a stdio line, an
	// HTTP response body, a server-sent event (settings.max_result_bytes;
	// a server's max_result_bytes wins). A larger reply fails its call
	// alone with a [ResultTooLargeError]; the connection stays up. Default
	// 16 MiB.
	MaxResultBytes int
	// OAuth, if set, returns the OAuth handler of an sse/http server (nil
	// for none) from the definition being connected (during a reload, the
	// new one, before it replaces the running server's): the go-sdk's Streamable HTTP transport asks it for a
	// token before every request and has it authorize after a 401 or 403;
	// an sse server gets its token as a header. Every session of the
	// server (the primary one and those per peer) shares the handler. An
	// [AuthRequired] error from it puts the server in NEEDS_AUTH.
	OAuth func(srv *config.Server) auth.OAuthHandler
	// UserCredential, if set, returns the credential of the caller in ctx
	// for a server with `credentials: per_user`: every call to such a
	// server goes on a session of that caller's own, opened with it. Its
	// error fails the call as it is (a [*UserAuthRequiredError] when the
	// caller linked nothing). Without it, such servers' calls fail so.
	UserCredential func(ctx context.Context, srv *config.Server) (UserCredential, error)
	// DiscoveryCredential, if set, returns the credential the server's own
	// session of a per_user server (its tool list) connects with; an error
	// puts the server in NEEDS_AUTH with the error as the reason.
	DiscoveryCredential func(ctx context.Context, srv *config.Server) (UserCredential, error)
	// UserSessionIdle is how long a per_user server's session of one
	// caller stays open without calls; default PeerSessionIdle.
	UserSessionIdle time.Duration
	// Identity, if set, returns what tells an http server with an
	// `identity` section who the caller of each request is (nil for
	// none): its header goes on every request a caller's call makes
	// (package propagate).
	Identity func(srv *config.Server) IdentityHeader
	// Tracer, if set, makes a client span of every request relayed to a
	// server and propagates its trace context: in the request's _meta
	// (every transport) and in the traceparent header (sse/http). nil:
	// tracing is off and costs nothing.
	Tracer trace.Tracer
}

// RestartPolicy says whether and how fast failed servers are restarted
// (settings restart_on_failure, max_restart_attempts, restart_window_seconds,
// restart_backoff_*). A server's restart_on_failure and max_restart_attempts
// win over it.
//
// A restart waits an exponential backoff with jitter: BackoffInitial, then
// twice as long up to BackoffMax, each delay picked at random in its upper
// half. The backoff starts over once a restart connects. More than
// MaxAttempts restarts within Window is a crash loop: the server stays in
// ERROR with the reason "crash loop: N restarts in Ws" until an operator's
// [Manager.Connect].
type RestartPolicy struct {
	Disabled       bool          // never restart automatically
	MaxAttempts    int           // default 5
	Window         time.Duration // default 5m
	BackoffInitial time.Duration // default 500ms
	BackoffMax     time.Duration // default 30s
}

// ApplySettings sets the options that the gateway settings configure:
// timeouts, restart policy, health check defaults, DEGRADED thresholds, the
// log directory and the bound on a message. Fields the settings do not cover are left alone.
func (o *Options) ApplySettings(s config.Settings) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	o.ConnectTimeout = s.StartupTimeout
	o.ShutdownTimeout = s.ShutdownTimeout
	o.Restart = RestartPolicy{
		Disabled:       !s.RestartOnFailure,
		MaxAttempts:    s.MaxRestartAttempts,
		Window:         s.RestartWindow,
		BackoffInitial: ms(s.RestartBackoffInitialMS),
		BackoffMax:     ms(s.RestartBackoffMaxMS),
	}
	o.HealthInterval = s.HealthCheckInterval
	o.HealthTimeout = s.HealthCheckTimeout
	o.DegradedErrorRate = s.DegradedErrorRate
	o.DegradedWindowCalls = s.DegradedWindowCalls
	o.LogDirectory = s.LogDirectory
	o.MaxResultBytes = s.MaxResultBytes
}

// ErrNotFound is returned for a server name the Manager does not know.
var ErrNotFound = errors.New("upstream not found")

// ErrExists is returned by [Manager.Add] for a name already registered.
var ErrExists = errors.New("upstream already exists")

// ErrClosed is returned by [Manager.Add] after [Manager.Close].
var ErrClosed = errors.New("upstream manager closed")

// UnavailableError says a server cannot serve calls now; the API maps it to 503 naming server and state.
// It is also what a failed [Manager.Connect] returns, with State ERROR.
type UnavailableError struct {
	Server string
	State  State
	Reason string
	// Sent reports that the request had been sent to the upstream when its
	// session was lost: the upstream may have run it. False means the
	// request never left the gateway, so retrying it is safe.
	Sent bool

	cause error // what made it unavailable, for errors.Is; its text may be unredacted
}

// Error reads like `server "demo" is ERROR: process exited: signal: killed`.
func (e *UnavailableError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("server %q is %s", e.Server, e.State)
	}
	return fmt.Sprintf("server %q is %s: %s", e.Server, e.State, e.Reason)
}

// RequestSent reports whether err, returned by a routed call, may have
// happened after the request reached the upstream: a lost session under the
// call, or a failed exchange. It is false for errors that prove the request
// never left the gateway (the server was not connected, its queue refused
// it) and for errors that are not the upstream's.
func RequestSent(err error) bool {
	var u *UnavailableError
	if errors.As(err, &u) {
		return u.Sent
	}
	var r *relayError
	if errors.As(err, &r) {
		return r.sent && !rejectedUnsent(r.err)
	}
	return false
}

// codeRejected is the JSON-RPC code with which the go-sdk's HTTP client
// transports mark a request refused before or without processing
// (jsonrpc2.ErrRejected: a failed HTTP exchange, or a 429/5xx answer).
const codeRejected = -32005

// rejectedUnsent reports whether err is a transport rejection that proves
// the upstream did not process the request: it could not be dialled, or it
// answered 503 or 429. Other failed exchanges (a connection dropped after
// the body was written, 500, 502, 504) may have run it.
func rejectedUnsent(err error) bool {
	if !isRejected(err) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	msg := err.Error()
	return strings.HasSuffix(msg, http.StatusText(http.StatusServiceUnavailable)) ||
		strings.HasSuffix(msg, http.StatusText(http.StatusTooManyRequests))
}

func isRejected(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *jsonrpc.Error:
		if e.Code == codeRejected {
			return true
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return isRejected(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if isRejected(e) {
				return true
			}
		}
	}
	return false
}

// Transient reports whether err, returned by a routed call, is a failure
// that may pass if the call is tried again: the server was not connected or
// is restarting, its session broke under the call, or an HTTP upstream's
// exchange failed or answered 429/5xx. An answer of the upstream (a JSON-RPC
// error, a tool result with isError) is not transient.
func Transient(err error) bool {
	var u *UnavailableError
	if errors.As(err, &u) {
		// A disconnected (or draining) server, or one that needs
		// authorizing, stays so until an operator acts: not something to
		// wait out.
		return u.State != StateDisconnected && u.State != StateNeedsAuth && !errors.Is(u.cause, context.Canceled)
	}
	if isRejected(err) {
		return true
	}
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Unwrap exposes the underlying failure (a context error, mcp.ErrConnectionClosed, ...)
// to errors.Is and errors.As.
func (e *UnavailableError) Unwrap() error { return e.cause }
