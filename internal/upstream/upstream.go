// Package upstream supervises the MCP servers that switchboard fronts.
//
// Each registered server gets one supervisor goroutine that owns everything
// about it: the stdio child process or HTTP session, the goroutines that watch
// them, re-discovery after list_changed notifications and the status state
// machine. Callers talk to a [Manager]; they never see the supervisor. State
// reads ([Manager.Status], [Manager.Session]) take only a read lock so they can
// sit on the hot path of every proxied call.
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
// A session an HTTP server no longer knows (it restarted, and answers 404 to
// the old session id) is replaced on the next call, which is then retried
// once: the primary session through the supervisor, re-discovering the
// server, and a per-peer session directly.
package upstream

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// State is where an upstream is in its lifecycle. The values are the strings
// persisted in connection history, so they never change.
type State string

// The states of an upstream. Only CONNECTED and DEGRADED serve calls.
const (
	StateConnecting   State = "CONNECTING"
	StateConnected    State = "CONNECTED"
	StateDegraded     State = "DEGRADED"
	StateDisconnected State = "DISCONNECTED"
	StateError        State = "ERROR"
)

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
}

// Transition is one state change, reported to Options.OnTransition (the app persists it as
// connection history).
type Transition struct {
	Server   string
	From, To State
	Error    string
	At       time.Time
}

// Discovery is everything a server offers, as listed after connect and after each list_changed.
// The slices are fresh for every report; the elements are shared and must not be modified.
type Discovery struct {
	Server    string
	Tools     []*mcp.Tool
	Resources []*mcp.Resource
	Templates []*mcp.ResourceTemplate
	Prompts   []*mcp.Prompt
}

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
	OnDiscovery     func(Discovery)
	ConnectTimeout  time.Duration // bound on start+initialize+discovery; default 30s
	ShutdownTimeout time.Duration // stdio: CommandTransport.TerminateDuration; default 5s
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
	// long-lived. It is cloned per server, never modified.
	HTTPClient *http.Client
	// OnResourceUpdated is called when a server says a subscribed resource
	// changed (see [Manager.Subscribe]); the caller maps it to the interested
	// clients. It is called from the session's reader: it must not block long.
	OnResourceUpdated func(server string, p *mcp.ResourceUpdatedNotificationParams)
	// PeerSessionIdle is how long a per-peer session (sse/http) stays open
	// without calls; default 5 minutes.
	PeerSessionIdle time.Duration
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

	cause error // what made it unavailable, for errors.Is; its text may be unredacted
}

// Error reads like `server "demo" is ERROR: process exited: signal: killed`.
func (e *UnavailableError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("server %q is %s", e.Server, e.State)
	}
	return fmt.Sprintf("server %q is %s: %s", e.Server, e.State, e.Reason)
}

// Unwrap exposes the underlying failure (a context error, mcp.ErrConnectionClosed, ...)
// to errors.Is and errors.As.
func (e *UnavailableError) Unwrap() error { return e.cause }
