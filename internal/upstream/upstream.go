// Package upstream supervises the MCP servers that switchboard fronts.
//
// Each registered server gets one supervisor goroutine that owns everything
// about it: the stdio child process or HTTP session, the goroutines that watch
// them, re-discovery after list_changed notifications and the status state
// machine. Callers talk to a [Manager]; they never see the supervisor. State
// reads ([Manager.Status], [Manager.Session]) take only a read lock so they can
// sit on the hot path of every proxied call.
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
