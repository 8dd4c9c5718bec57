package api

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/authz"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

func (h *handler) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (h *handler) readyz(w http.ResponseWriter, r *http.Request) error {
	if !h.ready() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}

func (h *handler) listServers(w http.ResponseWriter, r *http.Request) error {
	servers, err := h.servers.List(r.Context())
	if err != nil {
		return err
	}
	// An agent sees the servers the access rule lets it use, as its tool
	// listings do; admins see every one.
	if id, _ := caller(r.Context()); !id.Admin {
		servers = slices.DeleteFunc(servers, func(s Server) bool { return !h.srvVisible(id, s.Name) })
	}
	if servers == nil {
		servers = []Server{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"servers": servers})
	return nil
}

func (h *handler) getServer(w http.ResponseWriter, r *http.Request) error {
	s, err := h.servers.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s)
	return nil
}

// registerRequest is the body of POST /api/v1/aggregator/servers (AG-US1).
type registerRequest struct {
	Name             string           `json:"name"`
	Description      string           `json:"description"`
	TransportType    string           `json:"transport_type"`
	ConnectionConfig ConnectionConfig `json:"connection_config"`
	AutoConnect      *bool            `json:"auto_connect"`
	HealthCheckURL   string           `json:"health_check_url"`
	Prefix           *string          `json:"prefix"`
	DefaultAccess    string           `json:"default_access"`
	// PinDefinitions false turns tool-definition pinning off for the
	// server (default on).
	PinDefinitions *bool `json:"pin_definitions"`
	// Auth signs the gateway in to an OAuth-protected http or sse server
	// (servers.NAME.auth of the config file; client_secret_env names an
	// environment variable of the gateway, never a value).
	Auth *config.ServerAuth `json:"auth"`
	// Credentials "per_user" makes each caller use its own account or
	// personal credential with the server (config's credentials).
	Credentials string `json:"credentials"`
	// UserSessionIdleSeconds closes a caller's own session to a per_user
	// server after this long without calls (user_session_idle_seconds).
	UserSessionIdleSeconds float64 `json:"user_session_idle_seconds"`
	// Identity forwards who the caller is to an http server
	// (servers.NAME.identity; client_secret_env names a variable).
	Identity *config.ServerIdentity `json:"identity"`
	// The restart policy; left out, the settings' defaults apply.
	RestartOnFailure      *bool   `json:"restart_on_failure"`
	MaxRestartAttempts    *int    `json:"max_restart_attempts"`
	StartupTimeoutSeconds float64 `json:"startup_timeout_seconds"`
}

// ConnectionConfig is how to reach a server: command and args (stdio), or
// url and headers (sse, http).
type ConnectionConfig struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
	// Env values are secrets: stored sealed (or as ${VAR} references),
	// never in clear.
	Env map[string]string `json:"env"`
	// PlainEnv values are settings (a file path, a log level): stored as
	// they are, so they need no secret key. A name in both Env and
	// PlainEnv is a secret.
	PlainEnv          map[string]string `json:"plain_env"`
	EnvPassthrough    []string          `json:"env_passthrough"`
	Cwd               string            `json:"cwd"`
	URL               string            `json:"url"`
	Headers           map[string]string `json:"headers"`
	HeadersFromEnv    map[string]string `json:"headers_from_env"`
	BearerTokenEnvVar string            `json:"bearer_token_env_var"`
}

func (h *handler) registerServer(w http.ResponseWriter, r *http.Request) error {
	var req registerRequest
	if err := h.decode(w, r, &req); err != nil {
		return err
	}
	def := serverDef(req)
	autoConnect := *def.AutoStart
	s, err := h.defs.Register(r.Context(), def, autoConnect)
	if err := h.op(r.Context(), "server.register", req.Name, "transport "+def.Transport, err); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, s)
	return nil
}

// ServerUpdater replaces the definition of a runtime-registered server
// (PUT); a Servers without it answers 405.
type ServerUpdater interface {
	Update(ctx context.Context, idOrName string, def *config.Server, autoConnect bool) (Server, error)
}

// updateServer replaces a runtime server's definition: the body is a
// registration's (name optional; it cannot change here). Values shown as
// "***" keep what they were.
func (h *handler) updateServer(w http.ResponseWriter, r *http.Request) error {
	up, ok := h.defs.(ServerUpdater)
	if !ok {
		return &Error{Status: http.StatusMethodNotAllowed, Code: CodeBadRequest, Message: "this gateway cannot update server definitions"}
	}
	var req registerRequest
	if err := h.decode(w, r, &req); err != nil {
		return err
	}
	def := serverDef(req)
	id := r.PathValue("id")
	s, err := up.Update(r.Context(), id, def, *def.AutoStart)
	if err := h.op(r.Context(), "server.update", id, "transport "+def.Transport, err); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s)
	return nil
}

// serverDef is the definition a registration asks for; AutoStart is always
// set (auto_connect, default true).
func serverDef(req registerRequest) *config.Server {
	def := &config.Server{
		Name:               req.Name,
		Transport:          strings.ToLower(req.TransportType),
		Description:        req.Description,
		Prefix:             req.Prefix,
		Command:            req.ConnectionConfig.Command,
		Args:               req.ConnectionConfig.Args,
		Env:                req.ConnectionConfig.Env,
		EnvPassthrough:     req.ConnectionConfig.EnvPassthrough,
		Cwd:                req.ConnectionConfig.Cwd,
		URL:                req.ConnectionConfig.URL,
		Headers:            req.ConnectionConfig.Headers,
		HeadersFromEnv:     req.ConnectionConfig.HeadersFromEnv,
		BearerTokenEnvVar:  req.ConnectionConfig.BearerTokenEnvVar,
		HealthCheckURL:     req.HealthCheckURL,
		DefaultAccess:      req.DefaultAccess,
		PinDefinitions:     req.PinDefinitions,
		Auth:               req.Auth,
		Credentials:        req.Credentials,
		UserSessionIdle:    config.Seconds(time.Duration(req.UserSessionIdleSeconds * float64(time.Second))),
		Identity:           req.Identity,
		RestartOnFailure:   req.RestartOnFailure,
		MaxRestartAttempts: req.MaxRestartAttempts,
		StartupTimeout:     config.Seconds(time.Duration(req.StartupTimeoutSeconds * float64(time.Second))),
	}
	for k, v := range req.ConnectionConfig.PlainEnv {
		if _, secret := def.Env[k]; secret {
			continue
		}
		if def.Env == nil {
			def.Env = make(map[string]string, len(req.ConnectionConfig.PlainEnv))
		}
		def.Env[k] = v
		def.PlainEnv = append(def.PlainEnv, k)
	}
	slices.Sort(def.PlainEnv)
	autoConnect := req.AutoConnect == nil || *req.AutoConnect
	def.AutoStart = &autoConnect
	return def
}

func (h *handler) removeServer(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := h.op(r.Context(), "server.remove", id, "", h.defs.Remove(r.Context(), id)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// connectServer starts a connection (AG-US6). By default it answers at once
// with CONNECTING; ?wait=true waits for the outcome, which scripts prefer.
func (h *handler) connectServer(w http.ResponseWriter, r *http.Request) error {
	var wait bool
	if v := r.URL.Query().Get("wait"); v != "" {
		var err error
		if wait, err = strconv.ParseBool(v); err != nil {
			return badParam("wait", "must be true or false")
		}
	}
	s, err := h.control.Connect(r.Context(), r.PathValue("id"), wait)
	if err := h.op(r.Context(), "server.connect", r.PathValue("id"), "", err); err != nil {
		return err
	}
	status := http.StatusAccepted
	msg := "Connection initiated"
	if wait {
		status = http.StatusOK
		msg = "Connection finished"
	}
	writeJSON(w, status, map[string]any{"status": s.Status, "message": msg, "server": s})
	return nil
}

func (h *handler) disconnectServer(w http.ResponseWriter, r *http.Request) error {
	s, pending, err := h.control.Disconnect(r.Context(), r.PathValue("id"))
	if err := h.op(r.Context(), "server.disconnect", r.PathValue("id"), "", err); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": s.Status, "pending_requests": pending, "server": s})
	return nil
}

func (h *handler) discoverServer(w http.ResponseWriter, r *http.Request) error {
	s, err := h.control.Discover(r.Context(), r.PathValue("id"))
	if err := h.op(r.Context(), "server.discover", r.PathValue("id"), "", err); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s)
	return nil
}

func (h *handler) serverHistory(w http.ResponseWriter, r *http.Request) error {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 10000 {
			return badParam("limit", "must be an integer in 1..10000")
		}
		limit = n
	}
	events, err := h.diag.History(r.Context(), r.PathValue("id"), limit)
	if err != nil {
		return err
	}
	if events == nil {
		events = []ConnectionEvent{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"history": events})
	return nil
}

func (h *handler) serverCapabilities(w http.ResponseWriter, r *http.Request) error {
	c, err := h.diag.Capabilities(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

// patchRequest is the body of PATCH /api/v1/aggregator/servers/{id}.
type patchRequest struct {
	Name          string `json:"name"`
	DefaultAccess string `json:"default_access"`
}

// resetDefaultAccess drops the runtime override of a config-file server's
// default_access: the file's value applies again.
func (h *handler) resetDefaultAccess(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	s, err := h.defs.ResetDefaultAccess(r.Context(), id)
	if err := h.op(r.Context(), "server.default_access_reset", id, "default_access back to the config file's", err); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s)
	return nil
}

// patchServer renames a runtime-registered server or changes its
// default_access (one of the two per request); for a config-file server
// only default_access, as an override of the file.
func (h *handler) patchServer(w http.ResponseWriter, r *http.Request) error {
	var req patchRequest
	if err := h.decode(w, r, &req); err != nil {
		return err
	}
	id := r.PathValue("id")
	switch {
	case req.Name != "" && req.DefaultAccess != "":
		return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "change name or default_access, not both at once"}
	case req.DefaultAccess != "":
		if req.DefaultAccess != "allow" && req.DefaultAccess != "deny" {
			return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: `default_access must be "allow" or "deny"`}
		}
		s, err := h.defs.SetDefaultAccess(r.Context(), id, req.DefaultAccess)
		if err := h.op(r.Context(), "server.default_access", id, "default_access "+quote(req.DefaultAccess), err); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, s)
		return nil
	case req.Name == "":
		return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "name or default_access is required (the fields that can be changed)"}
	}
	s, err := h.defs.Rename(r.Context(), id, req.Name)
	if err := h.op(r.Context(), "server.rename", id, "new name "+quote(req.Name), err); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s)
	return nil
}

// serverLogs serves the last stderr lines of a stdio server.
func (h *handler) serverLogs(w http.ResponseWriter, r *http.Request) error {
	n := 100
	if v := r.URL.Query().Get("lines"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 1000 {
			return badParam("lines", "must be an integer in 1..1000")
		}
	}
	s, err := h.servers.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	lines, err := h.diag.Logs(r.Context(), s.Name, n)
	if err != nil {
		return err
	}
	if lines == nil {
		lines = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"server": s.Name, "lines": lines})
	return nil
}

// whoami tells callers who the gateway thinks they are (the dashboard hides
// admin actions from others).
func (h *handler) whoami(w http.ResponseWriter, r *http.Request) error {
	id, _ := authz.IdentityFrom(r.Context())
	// The workspace policy fields say which half of the access rule applies
	// to the caller (docs/access.md).
	writeJSON(w, http.StatusOK, map[string]any{"id": id.ID, "agent_id": id.AgentID, "roles": nonNil(id.Roles),
		"workspace": id.Workspace, "admin": id.Admin, "method": id.Method, "workspace_policy": id.WorkspacePolicy,
		"allow_servers": nonNil(id.AllowServers), "deny_servers": nonNil(id.DenyServers)})
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// clusterView lists the gateway replicas sharing the store.
func (h *handler) clusterView(w http.ResponseWriter, r *http.Request) error {
	if h.cluster == nil {
		return notConfigured("cluster")
	}
	v, err := h.cluster(r.Context())
	if err != nil {
		return err
	}
	if v.Replicas == nil {
		v.Replicas = []ReplicaView{}
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
