// Package api is the REST admin API of the gateway (JSON over HTTP). Every
// route is listed in routes.go; errors take one shape, mapped in errors.go.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/httperr"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
)

// Server is the API's view of one upstream server.
type Server struct {
	ID             string  `json:"id"`
	Name           string  `json:"name"`
	Description    string  `json:"description,omitempty"`
	Status         string  `json:"status"`
	TransportType  string  `json:"transport_type"` // STDIO | SSE | HTTP
	ToolCount      int     `json:"tool_count"`
	ErrorMessage   string  `json:"error_message"`
	Source         string  `json:"source"` // "config" or "api"
	AutoConnect    bool    `json:"auto_connect"`
	HealthCheckURL string  `json:"health_check_url,omitempty"`
	Prefix         *string `json:"prefix,omitempty"`
	// DefaultAccess is the default_access in force: the override when one
	// is set, else the definition's.
	DefaultAccess string `json:"default_access,omitempty"`
	// DefaultAccessSource says where DefaultAccess comes from: "config"
	// (the config file), "override" (set at run time over the file's value,
	// until reset) or "api" (a runtime-registered server's definition).
	DefaultAccessSource string `json:"default_access_source,omitempty"`
	// FileDefaultAccess is the config file's value while an override
	// replaces it.
	FileDefaultAccess string `json:"file_default_access,omitempty"`
	// DefaultAccessSetAt and DefaultAccessSetBy say when and by whom the
	// override was set.
	DefaultAccessSetAt *time.Time `json:"default_access_set_at,omitempty"`
	DefaultAccessSetBy string     `json:"default_access_set_by,omitempty"`
	PinDefinitions     *bool      `json:"pin_definitions,omitempty"`
	// Auth is how the gateway signs in to the server (OAuth); it holds no
	// secret (client_secret_env names a variable).
	Auth *config.ServerAuth `json:"auth,omitempty"`
	// Credentials is "per_user" when each caller's own credential is used
	// with the server; "" for the server's own (shared).
	Credentials string `json:"credentials,omitempty"`
	// UserSessionIdleSeconds is the definition's user_session_idle_seconds.
	UserSessionIdleSeconds float64 `json:"user_session_idle_seconds,omitempty"`
	// Identity is how the caller's identity is forwarded to the server;
	// it holds no secret.
	Identity *config.ServerIdentity `json:"identity,omitempty"`
	// The definition's restart policy; unset fields follow the settings.
	RestartOnFailure      *bool          `json:"restart_on_failure,omitempty"`
	MaxRestartAttempts    *int           `json:"max_restart_attempts,omitempty"`
	StartupTimeoutSeconds float64        `json:"startup_timeout_seconds,omitempty"`
	ConnectionConfig      map[string]any `json:"connection_config"` // secrets masked
	RegisteredAt          time.Time      `json:"registered_at"`
	StatusSince           *time.Time     `json:"status_since,omitempty"`
	// StatusDetail says what a CONNECTING server is busy with when a start
	// may take long, e.g. "installing packages, 23 s" during the first
	// start of npx, uvx or docker run.
	StatusDetail    string              `json:"status_detail,omitempty"`
	ConnectedAt     *time.Time          `json:"connected_at,omitempty"`
	PID             int                 `json:"pid,omitempty"`
	ServerInfo      *mcp.Implementation `json:"server_info,omitempty"`
	ProtocolVersion string              `json:"protocol_version,omitempty"`
	RejectedTools   []RejectedTool      `json:"rejected_tools,omitempty"`
	// InsecureTransport is true for an sse/http server reached over plain
	// http:// at a host other than loopback (NFR-SEC2): its traffic and
	// credentials cross the network unencrypted. See
	// settings.require_tls_upstreams.
	InsecureTransport bool `json:"insecure_transport,omitempty"`

	// Lifecycle: the process or session, restarts, draining, health.
	StartedAt     *time.Time `json:"started_at,omitempty"`
	UptimeSeconds float64    `json:"uptime_seconds,omitempty"`
	Restarts      int        `json:"restarts"`
	LastExit      string     `json:"last_exit,omitempty"`
	NextRestartAt *time.Time `json:"next_restart_at,omitempty"`
	Draining      bool       `json:"draining,omitempty"`
	InFlight      int        `json:"in_flight"`
	StartOnDemand bool       `json:"start_on_demand,omitempty"`
	Health        *Health    `json:"health,omitempty"`
}

// Health is the outcome of a server's health checks and calls.
type Health struct {
	Method              string     `json:"method"`
	LastCheck           *time.Time `json:"last_check,omitempty"`
	LastCheckOK         bool       `json:"last_check_ok"`
	LastCheckPassive    bool       `json:"last_check_passive,omitempty"`
	LastCheckError      string     `json:"last_check_error,omitempty"`
	ResponseTimeMS      float64    `json:"response_time_ms"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	ChecksTotal         int64      `json:"checks_total"`
	ChecksFailed        int64      `json:"checks_failed"`
	ErrorRate           float64    `json:"error_rate"`
	WindowCalls         int        `json:"window_calls"`
}

// RejectedTool is an item (usually a tool) the catalog refused, and why.
type RejectedTool struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // tool, resource, template or prompt
	Reason string `json:"reason"`
}

// ConnectionEvent is one status transition of a server.
type ConnectionEvent struct {
	From  string    `json:"from_status"`
	To    string    `json:"to_status"`
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// The API's view of the server registry is split by the handlers that use
// it: every route that names a server looks it up ([ServerLookup]); only
// the server routes change definitions ([ServerDefinitions]), drive
// connections ([ServerControl]) or read diagnostics ([ServerDiagnostics]).
// [Servers] is their union, what [New] takes; the app's registry
// implements it and persists, supervises and catalogs the servers.

// ServerLookup finds servers by id or name.
type ServerLookup interface {
	List(ctx context.Context) ([]Server, error)
	Get(ctx context.Context, idOrName string) (Server, error)
}

// ServerDefinitions changes what servers the gateway has and how they are
// defined (admin routes).
type ServerDefinitions interface {
	// Register adds a server defined at runtime; it connects in the
	// background when autoConnect is set.
	Register(ctx context.Context, def *config.Server, autoConnect bool) (Server, error)
	Remove(ctx context.Context, idOrName string) error
	// Rename gives a runtime-registered server a new name; its tools'
	// namespaced names follow.
	Rename(ctx context.Context, idOrName, newName string) (Server, error)
	// SetDefaultAccess changes a server's default_access ("allow" or
	// "deny"); authorization follows at once. A runtime-registered server's
	// definition changes; a config-file server gets an override, kept in the
	// store over the file's value until ResetDefaultAccess.
	SetDefaultAccess(ctx context.Context, idOrName, access string) (Server, error)
	// ResetDefaultAccess drops a config-file server's override, so the
	// file's default_access applies again. A server registered through the
	// API has no file value to go back to: 409.
	ResetDefaultAccess(ctx context.Context, idOrName string) (Server, error)
}

// ServerControl drives a server's connection (admin routes).
type ServerControl interface {
	// Connect starts connecting; with wait it returns once connected or
	// failed.
	Connect(ctx context.Context, idOrName string, wait bool) (Server, error)
	// Disconnect stops new calls at once, lets the calls in flight finish
	// (bounded), then disconnects; it reports how many were pending.
	Disconnect(ctx context.Context, idOrName string) (s Server, pending int, err error)
	// Discover re-lists the server's tools, resources and prompts now.
	Discover(ctx context.Context, idOrName string) (Server, error)
}

// ServerDiagnostics reads what a server did and said of itself.
type ServerDiagnostics interface {
	History(ctx context.Context, idOrName string, limit int) ([]ConnectionEvent, error)
	// Capabilities is what the server said of itself at initialize.
	Capabilities(ctx context.Context, idOrName string) (Capabilities, error)
	// Logs returns the last lines (at most max) a stdio server wrote to
	// stderr; none for other transports.
	Logs(ctx context.Context, idOrName string, max int) ([]string, error)
}

// Servers is every part of the registry the API uses.
type Servers interface {
	ServerLookup
	ServerDefinitions
	ServerControl
	ServerDiagnostics
}

// Capabilities is the upstream's initialize result and what was discovered.
type Capabilities struct {
	Server          string                  `json:"server"`
	Status          string                  `json:"status"`
	ServerInfo      *mcp.Implementation     `json:"server_info,omitempty"`
	ProtocolVersion string                  `json:"protocol_version,omitempty"`
	Capabilities    *mcp.ServerCapabilities `json:"capabilities,omitempty"`
	Instructions    string                  `json:"instructions,omitempty"`
	Tools           int                     `json:"tools"`
	Resources       int                     `json:"resources"`
	Templates       int                     `json:"resource_templates"`
	Prompts         int                     `json:"prompts"`
}

// Caller runs tool calls. *invoke.Pipeline implements it.
type Caller interface {
	CallTool(ctx context.Context, c invoke.Call) (*invoke.Result, error)
}

// Options configure the API handler.
type Options struct {
	Logger *slog.Logger
	// Ready reports whether startup has finished (GET /readyz).
	Ready func() bool
	// MaxBodyBytes bounds request bodies; default 4 MiB.
	MaxBodyBytes int64
	// Events, if set, is streamed by GET /api/v1/events.
	Events *telemetry.Bus

	// The identity-aware surface: each nil field answers its routes with
	// 501 not_configured, so a gateway without a store still serves the rest.
	Keys      Keys
	Policies  Policies
	Audit     AuditLog
	Breakers  BreakerLister
	Stats     StatsSource
	Registrar Registrar
	// Search serves /api/v1/search and /api/v1/skills; it filters its
	// answers per caller itself, so those routes are open to any caller.
	Search Search
	// Visible reports whether the caller may see/call a tool; nil = everything visible.
	// Hidden tools answer like unknown ones, so listings do not leak names.
	Visible func(id authz.Identity, t catalog.Tool) bool
	// ServerVisible reports whether a caller may use a server at all (the
	// server level of the access rule, docs/access.md); server listings
	// show a non-admin only those. nil = every server.
	ServerVisible func(id authz.Identity, server string) bool
	// Operation, if set, is told of every mutating admin call (for the audit log):
	// op is "server.register", "key.create", "policy.grant", ... (see
	// audit.Record.Operation); ctx carries the caller's identity.
	Operation func(ctx context.Context, op, server, detail string, err error)
	// ToolStatus, if set, supplies the version and enabled state of a tool
	// for GET /api/v1/mcp/tools; nil = the version in the tool's _meta
	// ("version") and enabled while its server is available.
	ToolStatus func(t catalog.Tool) ToolStatus
	// Cluster, if set, lists the live replicas (GET /api/v1/cluster).
	Cluster func(ctx context.Context) (ClusterView, error)
	// Pins, if set, serves the quarantined tools and their approval.
	Pins Pins
	// Escalations, if set, serves the escalations and approval requests.
	Escalations Escalations
	// Series, if set, serves GET /api/v1/stats/timeseries.
	Series TimeSeries
	// OAuth, if set, serves /api/v1/oauth: the clients and grants of the
	// built-in authorization server. nil (the gateway does not run it)
	// answers those routes with 404 oauth_server_off.
	OAuth OAuthAdmin
	// UpstreamAuth, if set, serves /api/v1/aggregator/servers/{id}/auth:
	// the OAuth authorization of upstream servers. nil answers 404
	// upstream_auth_not_configured.
	UpstreamAuth UpstreamAuth
}

// ClusterView is GET /api/v1/cluster: this replica and every live one.
type ClusterView struct {
	Self     string        `json:"self"`
	Backend  string        `json:"backend"` // sqlite | postgres
	Replicas []ReplicaView `json:"replicas"`
}

// ReplicaView is one gateway replica sharing the store.
type ReplicaView struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Version     string    `json:"version"`
	Address     string    `json:"address"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	Self        bool      `json:"self"`
}

type handler struct {
	servers ServerLookup
	defs    ServerDefinitions
	control ServerControl
	diag    ServerDiagnostics
	cat     *catalog.Catalog
	caller  Caller
	logger  *slog.Logger
	ready   func() bool
	maxBody int64
	events  *telemetry.Bus

	keys       Keys
	policies   Policies
	audit      AuditLog
	breakers   BreakerLister
	stats      StatsSource
	registrar  Registrar
	searcher   Search
	visible    func(id authz.Identity, t catalog.Tool) bool
	srvVisible func(id authz.Identity, server string) bool
	operation  func(ctx context.Context, op, server, detail string, err error)
	toolStatus func(t catalog.Tool) ToolStatus
	cluster    func(ctx context.Context) (ClusterView, error)
	pins       Pins

	escalations Escalations
	series      TimeSeries
	oauth       OAuthAdmin
	upAuth      UpstreamAuth
}

// New returns the REST API as an http.Handler (routes in routes.go).
func New(servers Servers, cat *catalog.Catalog, caller Caller, opts *Options) http.Handler {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Ready == nil {
		o.Ready = func() bool { return true }
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.Visible == nil {
		o.Visible = func(authz.Identity, catalog.Tool) bool { return true }
	}
	if o.ServerVisible == nil {
		o.ServerVisible = func(authz.Identity, string) bool { return true }
	}
	if o.Operation == nil {
		o.Operation = func(context.Context, string, string, string, error) {}
	}
	if o.ToolStatus == nil {
		o.ToolStatus = defaultToolStatus
	}
	h := &handler{servers: servers, defs: servers, control: servers, diag: servers, cat: cat, caller: caller, logger: o.Logger, ready: o.Ready, maxBody: o.MaxBodyBytes, events: o.Events,
		keys: o.Keys, policies: o.Policies, audit: o.Audit, breakers: o.Breakers, stats: o.Stats, registrar: o.Registrar,
		searcher: o.Search, visible: o.Visible, srvVisible: o.ServerVisible, operation: o.Operation, toolStatus: o.ToolStatus, cluster: o.Cluster, pins: o.Pins,
		escalations: o.Escalations, series: o.Series, oauth: o.OAuth, upAuth: o.UpstreamAuth}
	return h.routes()
}

// apiFunc is an http.Handler that may fail; failures are written by
// writeError in the one error shape.
type apiFunc func(w http.ResponseWriter, r *http.Request) error

func (h *handler) wrap(fn apiFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			h.writeError(w, r, err)
		}
	})
}

func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := toError(err)
	if e.Status >= 500 {
		h.logger.Warn("api request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "code", e.Code, "error", e.Message)
	}
	WriteError(w, e)
}

// WriteError writes e in the API's one error shape, with its status and
// Retry-After; the gateway's routes outside the API (authentication, the
// per-server endpoints) answer with it too. It is [httperr.Write], the one
// writer of that shape.
func WriteError(w http.ResponseWriter, e *Error) { httperr.Write(w, e) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client went away; nothing left to tell it
}

// decode reads a JSON body strictly: unknown fields are errors, so typos
// in a request do not silently do nothing.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, h.maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeBadRequest,
				Message: "request body exceeds " + itoa(mbe.Limit) + " bytes"}
		}
		if errors.Is(err, io.EOF) {
			return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "request body is empty"}
		}
		return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "invalid JSON body: " + err.Error()}
	}
	if dec.More() {
		return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "invalid JSON body: trailing data"}
	}
	return nil
}

// decodeOptional is decode for a body that may be left out: an empty (or
// white space only) body leaves v as it is.
func (h *handler) decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		return badRequest("reading the request body: " + err.Error())
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return h.decode(w, r, v)
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
