// Package config is the typed gateway configuration read from switchboard.yaml.
//
// Decoding is strict: unknown keys, wrong types, duplicate keys and invalid values
// are all errors, and [Load] reports every problem at once, each with
// file:line:column and the dotted field path, so an operator can fix a file in one
// pass. Defaults live only in [DefaultSettings]; environment variables override
// the file, which overrides the defaults.
//
// A file looks like this:
//
//	servers:
//	  github:
//	    transport: http
//	    url: https://api.githubcopilot.com/mcp/
//	    bearer_token_env_var: GITHUB_TOKEN
//	  files:
//	    transport: stdio
//	    command: npx
//	    args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"]
//	    package: "@modelcontextprotocol/server-filesystem"
//	    env:
//	      LOG_LEVEL: info
//	    start_on_demand: true      # the first call starts it
//	    idle_timeout_seconds: 600  # and it stops after 10 idle minutes
//	    health_check:
//	      method: tool_call
//	      tool: list_allowed_directories
//	      interval_seconds: 60
//	settings:
//	  listen: 127.0.0.1:8080
//	  tool_name_separator: "__"
//	  log_directory: logs/mcp_servers
//	  bulkhead_max_concurrent: 32
//	  rate_limit_per_second: 10
//	auth:                          # absent = local mode, loopback listeners only
//	  mode: jwt                    # keys (default) | jwt | oauth | local
//	  jwt:
//	    secret: ${JWT_SECRET}      # HS256; or jwks_url: https://idp.example/jwks.json
//	    issuer: https://idp.example
//	    audience: switchboard
//	    leeway_seconds: 30
//	    claims: {roles: groups}    # the other claims keep their defaults
//	  # oauth:                     # mode oauth, an OAuth 2.1 resource server (docs/auth.md)
//	  #   resource: https://gw.example.com
//	  #   issuer: https://idp.example
//	  #   jwks_url: https://idp.example/jwks.json
//	  #   scopes: [mcp]
//	authz:
//	  role_restrictions:
//	    review:
//	      allowed_tools: [files__read_*, github__get_*]
//	  high_risk_tools: [write, delete, push]
//	  admin_needs_token: false
//	fallbacks:
//	  github__search_code: [files__search_files]
//	search:
//	  embeddings:                  # absent = lexical ranking only
//	    url: https://api.openai.com/v1
//	    model: text-embedding-3-small
//	    api_key_env: OPENAI_API_KEY  # the variable's NAME, never the key
//	skills:
//	  taxonomy:                    # replaces the built-in skills
//	    - id: issue_tracking
//	      name: Issue tracking
//	      description: Create, search and update issues and tickets
//	      examples: [open a bug report]
//	  classifier: {mode: offline}  # offline (default) | llm
//	front:
//	  tool_exposure: search        # all (default) | search
//	clients:                       # what each MCP client tool needs (seed 002)
//	  claude-code:
//	    mcp_tools:
//	      required: [files]        # server names from servers:
//	      recommended: [github]
//	    role_restrictions:
//	      review:
//	        allowed_tools: [files__read_file, github__*, bash]
//
// Seed 002's own files load too: mcp_servers: and mcp_settings: are other
// spellings of servers: and settings:, a server with a command needs no
// transport (stdio), and a command of several words without an args key is
// split as sh would split it:
//
//	mcp_servers:
//	  filesystem:
//	    command: "npx -y @modelcontextprotocol/server-filesystem /srv/data"
//	    health_check: {method: tool_call, tool: filesystem.list_directory}
//	mcp_settings:
//	  health_check_interval_seconds: 30
//
// The environment overrides the auth section too: SWITCHBOARD_AUTH_MODE sets
// auth.mode (creating the section), and SWITCHBOARD_JWT_SECRET or
// SWITCHBOARD_JWKS_URL replaces the jwt key source; see [Auth] and [JWT].
// SWITCHBOARD_TOOL_EXPOSURE overrides front.tool_exposure.
//
// Secrets (header values, env values, bearer tokens, the JWT secret) are never
// included in an error message; use [Server.Redacted] and [JWT.Redacted]
// before logging or serving a definition.
package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SelfCommand is the command name that means "the running switchboard binary", so
// the default config can start the built-in demo server without knowing where the
// binary is installed.
const SelfCommand = "switchboard"

// Transports a server may use.
const (
	TransportStdio = "stdio"
	TransportSSE   = "sse"
	TransportHTTP  = "http"
)

// Values of [Server.DefaultAccess].
const (
	AccessAllow = "allow"
	AccessDeny  = "deny"
)

// NameRE is the syntax of server names and prefixes. A dot is the namespace
// separator ("server.tool"), so names cannot contain one; upper case is excluded
// so that names compare the same everywhere (URLs, tool names, SQL).
var NameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// envNameRE is the syntax of environment variable names we accept as references.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Pos is the source position of a field in a config file, kept so that problems
// found after decoding (by the catalog, by a health probe) can still point at the
// line to fix.
type Pos struct{ Line, Column int }

// Config is one validated gateway configuration. It is immutable by convention:
// a reload builds a new Config rather than editing the running one.
type Config struct {
	File     string    // path it was loaded from; "" for the built-in default
	Servers  []*Server // sorted by Name
	Settings Settings
	// Auth is the auth: section; nil when the file has none (the app then
	// uses local mode on a loopback listener and refuses to start on any
	// other). SWITCHBOARD_AUTH_MODE creates it when the file has none.
	Auth *Auth `yaml:"auth,alloc"`
	// Authz is the authz: section; the zero value when the file has none.
	Authz Authz `yaml:"authz"`
	// Fallbacks maps a namespaced tool to the tools tried, in order, when it
	// fails after retries or its breaker is open:
	// fallbacks: {"a.search": ["b.search", "c.find"]}. Names are checked
	// for a known server part; the tools themselves only after discovery.
	Fallbacks map[string][]string `yaml:"fallbacks,nonempty"`
	// ToolVersions is the version compatibility matrix (tool_versions:):
	// server -> tool -> accepted versions. A manifest registering a tool
	// with another version registers it disabled.
	ToolVersions map[string]map[string][]string `yaml:"tool_versions,nonempty"`
	// Search is the search: section; the zero value ranks lexically only.
	Search Search `yaml:"search"`
	// Skills is the skills: section; the zero value means the built-in
	// taxonomy and the offline classifier. [Parse] fills the classifier's
	// defaults ([DefaultClassifier]) even when the file has no section.
	Skills Skills `yaml:"skills"`
	// Front is the front: section. [Parse] sets ToolExposure to "all" when
	// neither the file nor SWITCHBOARD_TOOL_EXPOSURE sets it.
	Front Front `yaml:"front"`
	// Clients are the declarations of the MCP client tools that use the
	// gateway (clients: {claude-code: {...}, cursor: {...}}), by name; nil
	// when the file has none. See [Client].
	Clients map[string]*Client `yaml:"clients"`
	// Pos is the position of each key of the sections other than servers
	// and settings by field path, e.g. Pos["fallbacks.a.search[0]"],
	// Pos["authz.role_restrictions.review.allowed_tools[1]"],
	// Pos["clients.cursor.role_restrictions.review.allowed_tools[0]"] or
	// Pos["skills.taxonomy[2].id"], so problems found after loading (an
	// unknown tool after discovery) can point at the line. Nil when the
	// file has none of them.
	Pos map[string]Pos

	// serversSection is how the file spelled the servers section
	// ("servers" or seed 002's "mcp_servers"); "" means "servers".
	serversSection string
}

// serversKey is the servers section as the file spelled it, for messages.
func (c *Config) serversKey() string {
	if c.serversSection == "" {
		return "servers"
	}
	return c.serversSection
}

// Server returns the server called name, or nil, so callers need not loop over
// the sorted slice themselves.
func (c *Config) Server(name string) *Server {
	i, ok := slices.BinarySearchFunc(c.Servers, name, func(s *Server, name string) int {
		return strings.Compare(s.Name, name)
	})
	if !ok {
		return nil
	}
	return c.Servers[i]
}

// Server is one upstream MCP server definition. The JSON tags match the YAML keys
// so the store can persist a definition and read it back; persist it before
// [Server.Expand] so that ${VAR} references, not secret values, are stored.
type Server struct {
	Name        string  `json:"name"`                       // the map key under servers:
	Transport   string  `json:"transport" yaml:"transport"` // "stdio" | "sse" | "http"
	Description string  `json:"description,omitempty" yaml:"description"`
	AutoStart   *bool   `json:"auto_start,omitempty" yaml:"auto_start"` // nil = settings.auto_start_default
	Prefix      *string `json:"prefix,omitempty" yaml:"prefix"`         // nil = the server name; "" = unprefixed

	// stdio
	Command        string            `json:"command,omitempty" yaml:"command"`
	Args           []string          `json:"args,omitempty" yaml:"args,omitempty"`
	Env            map[string]string `json:"env,omitempty" yaml:"env"`                                   // values may use ${VAR}; expanded by Expand; SECRET
	EnvPassthrough []string          `json:"env_passthrough,omitempty" yaml:"env_passthrough,omitempty"` // names of gateway env vars copied into the child
	// PlainEnv names the Env entries that are plain settings (a file path,
	// a log level), not secrets: a runtime registration stores them as
	// they are instead of sealing them (the API's plain_env, the CLI's
	// --env). A config file's env is the operator's own file and never
	// sealed, so it has no use for it. Views mask them like the others.
	PlainEnv []string `json:"plain_env,omitempty"`
	Cwd      string   `json:"cwd,omitempty" yaml:"cwd"`

	// sse / http
	URL               string            `json:"url,omitempty" yaml:"url"`
	Headers           map[string]string `json:"headers,omitempty" yaml:"headers"`                           // values may use ${VAR}; expanded by Expand; SECRET
	HeadersFromEnv    map[string]string `json:"headers_from_env,omitempty" yaml:"headers_from_env"`         // header name -> env var name
	BearerTokenEnvVar string            `json:"bearer_token_env_var,omitempty" yaml:"bearer_token_env_var"` // env var holding a token -> "Authorization: Bearer <tok>"
	HealthCheckURL    string            `json:"health_check_url,omitempty" yaml:"health_check_url"`
	// Auth makes the gateway the server's OAuth client; nil = none.
	Auth          *ServerAuth `json:"auth,omitempty" yaml:"auth,omitempty"`
	DefaultAccess string      `json:"default_access,omitempty" yaml:"default_access"` // "allow" (default) | "deny"
	// Credentials is whose credentials the gateway uses with the server:
	// "" or "shared" (the server's own: headers, auth) or "per_user"
	// (each caller's own linked account or personal credential; see
	// docs/auth.md "Per-user credentials").
	Credentials string `json:"credentials,omitempty" yaml:"credentials"`
	// UserSessionIdle closes a caller's own session to a per_user server
	// after this long without calls; zero = 5 minutes.
	UserSessionIdle Seconds `json:"user_session_idle_seconds,omitempty" yaml:"user_session_idle_seconds"`
	// PinDefinitions: nil or true pins the first definition seen of each
	// tool and quarantines a tool whose definition changes until an admin
	// approves it; false applies changes as they come.
	PinDefinitions *bool `json:"pin_definitions,omitempty" yaml:"pin_definitions"`
	// Identity forwards who the caller is to an http server (package
	// propagate); nil = not.
	Identity *ServerIdentity `json:"identity,omitempty" yaml:"identity,omitempty"`

	// Lifecycle overrides of the settings of the same name; nil or zero =
	// the setting.
	RestartOnFailure   *bool   `json:"restart_on_failure,omitempty" yaml:"restart_on_failure"`
	MaxRestartAttempts *int    `json:"max_restart_attempts,omitempty" yaml:"max_restart_attempts"`
	StartupTimeout     Seconds `json:"startup_timeout_seconds,omitempty" yaml:"startup_timeout_seconds"`
	ShutdownTimeout    Seconds `json:"shutdown_timeout_seconds,omitempty" yaml:"shutdown_timeout_seconds"`
	// StartOnDemand: the first call to the server while it is DISCONNECTED
	// starts it, instead of failing.
	StartOnDemand bool `json:"start_on_demand,omitempty" yaml:"start_on_demand"`
	// IdleTimeout stops a stdio server after this long without calls; it is
	// started again by the next call. Zero = never.
	IdleTimeout Seconds      `json:"idle_timeout_seconds,omitempty" yaml:"idle_timeout_seconds"`
	HealthCheck *HealthCheck `json:"health_check,omitempty" yaml:"health_check,omitempty"`
	// MaxResultBytes bounds one message from the server (a reply, a
	// request, a notification); 0 = settings.max_result_bytes. A larger
	// reply fails its call alone with result_too_large.
	MaxResultBytes int `json:"max_result_bytes,omitempty" yaml:"max_result_bytes"`
	// ProtocolVersion is the MCP revision the gateway asks the server for:
	// "" or "auto" (see [ProtocolAuto]) or one revision, e.g. "2026-07-28".
	ProtocolVersion string `json:"protocol_version,omitempty" yaml:"protocol_version"`
	// Package is the npm package that provides the server (for install
	// hints when its command is missing).
	Package string `json:"package,omitempty" yaml:"package"`

	// Pos is the position of each field key, e.g. Pos["url"]; Pos[""] is the
	// name key. Entries of maps and lists have their own keys too, e.g.
	// Pos["env.HOME"] and Pos["args[0]"]. Nil for servers not read from a file.
	Pos map[string]Pos `json:"-"`

	// resolved holds the values of HeadersFromEnv and BearerTokenEnvVar read by
	// Expand (header name -> value). SECRET.
	resolved map[string]string
	// authSecret is the value of Auth.ClientSecretEnv read by Expand. SECRET.
	authSecret string
	// identitySecret is the value of Identity.ClientSecretEnv read by
	// Expand. SECRET.
	identitySecret string
}

// ResolvedHeaders returns the headers to send upstream: Headers plus
// HeadersFromEnv and BearerTokenEnvVar resolved. All values are secrets. The
// environment is read by [Server.Expand] (which Load and Parse call), not here, so
// before Expand only Headers are returned.
func (s *Server) ResolvedHeaders() map[string]string {
	h := make(map[string]string, len(s.Headers)+len(s.resolved))
	maps.Copy(h, s.Headers)
	maps.Copy(h, s.resolved)
	return h
}

// AutoStartOr reports AutoStart, or def when unset, so callers apply
// settings.auto_start_default in one expression.
func (s *Server) AutoStartOr(def bool) bool {
	if s.AutoStart == nil {
		return def
	}
	return *s.AutoStart
}

// PinsDefinitions reports whether the server's tool definitions are pinned
// (pin_definitions, default true).
func (s *Server) PinsDefinitions() bool { return s.PinDefinitions == nil || *s.PinDefinitions }

// EffectivePrefix returns the namespace prefix of the server's tools: Prefix when
// set (possibly "" for unprefixed), otherwise the server name.
func (s *Server) EffectivePrefix() string {
	if s.Prefix == nil {
		return s.Name
	}
	return *s.Prefix
}

// Clone returns a deep copy, so a caller can edit a definition without racing
// readers of the original.
func (s *Server) Clone() *Server {
	c := *s
	if s.AutoStart != nil {
		v := *s.AutoStart
		c.AutoStart = &v
	}
	if s.Prefix != nil {
		v := *s.Prefix
		c.Prefix = &v
	}
	if s.RestartOnFailure != nil {
		v := *s.RestartOnFailure
		c.RestartOnFailure = &v
	}
	if s.MaxRestartAttempts != nil {
		v := *s.MaxRestartAttempts
		c.MaxRestartAttempts = &v
	}
	if s.PinDefinitions != nil {
		v := *s.PinDefinitions
		c.PinDefinitions = &v
	}
	if s.Auth != nil {
		a := *s.Auth
		a.Scopes = slices.Clone(s.Auth.Scopes)
		c.Auth = &a
	}
	if s.Identity != nil {
		id := *s.Identity
		id.Scopes = slices.Clone(s.Identity.Scopes)
		c.Identity = &id
	}
	if s.HealthCheck != nil {
		h := *s.HealthCheck
		h.Args = cloneArgs(s.HealthCheck.Args)
		c.HealthCheck = &h
	}
	c.Args = slices.Clone(s.Args)
	c.EnvPassthrough = slices.Clone(s.EnvPassthrough)
	c.PlainEnv = slices.Clone(s.PlainEnv)
	c.Env = maps.Clone(s.Env)
	c.Headers = maps.Clone(s.Headers)
	c.HeadersFromEnv = maps.Clone(s.HeadersFromEnv)
	c.Pos = maps.Clone(s.Pos)
	c.resolved = maps.Clone(s.resolved)
	return &c
}

// HealthMethod returns the health check method in effect: the configured
// one, else "http" when the server has a health_check_url, else "ping".
func (s *Server) HealthMethod() string {
	if s.HealthCheck != nil && s.HealthCheck.Method != "" {
		return s.HealthCheck.Method
	}
	if s.HealthCheckURL != "" {
		return HealthHTTP
	}
	return HealthPing
}

// Health check methods ([HealthCheck.Method]).
const (
	HealthPing     = "ping"      // MCP ping on the server's session
	HealthToolCall = "tool_call" // call Tool with Args: healthy if it succeeds and is not isError
	HealthHTTP     = "http"      // GET health_check_url: healthy on a 2xx status
)

// HealthCheck is how and how often a server's health is probed. Zero
// fields take the defaults: method from [Server.HealthMethod], interval and
// timeout from the settings.
type HealthCheck struct {
	Method   string         `json:"method,omitempty" yaml:"method"`
	Tool     string         `json:"tool,omitempty" yaml:"tool"` // the tool's name on the server (not namespaced)
	Args     map[string]any `json:"args,omitempty" yaml:"args"` // arguments of the tool call
	Interval Seconds        `json:"interval_seconds,omitempty" yaml:"interval_seconds"`
	Timeout  Seconds        `json:"timeout_seconds,omitempty" yaml:"timeout_seconds"`
}

// Seconds is a duration written as a number of seconds (fractions allowed)
// in files and JSON, so a stored definition reads like the file it came
// from. Zero means unset.
type Seconds time.Duration

// Duration returns s as a time.Duration.
func (s Seconds) Duration() time.Duration { return time.Duration(s) }

// Or returns s as a time.Duration, or def when s is unset.
func (s Seconds) Or(def time.Duration) time.Duration {
	if s == 0 {
		return def
	}
	return time.Duration(s)
}

// MarshalJSON writes the number of seconds.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, time.Duration(s).Seconds(), 'f', -1, 64), nil
}

// UnmarshalJSON reads a number of seconds.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("seconds: %w", err)
	}
	if math.IsNaN(v) || math.Abs(v) > maxSeconds*10 {
		return fmt.Errorf("seconds: %v is out of range", v)
	}
	*s = Seconds(v * float64(time.Second))
	return nil
}

// cloneArgs deep-copies decoded YAML/JSON values (maps, lists, scalars).
func cloneArgs(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return cloneArgs(t)
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = cloneValue(x)
		}
		return out
	}
	return v
}

// redactedValue replaces every secret in a [Server.Redacted] copy.
const redactedValue = "***"

// Redacted returns a copy safe to log or show in an API: header values, env
// values and the resolved bearer token replaced by "***" (keys kept), and any
// password in URLs masked as url.URL.Redacted does. Env var names (HeadersFromEnv, BearerTokenEnvVar,
// EnvPassthrough) are not secrets and are kept.
func (s *Server) Redacted() *Server {
	c := s.Clone()
	for _, m := range []map[string]string{c.Env, c.Headers, c.resolved} {
		for k := range m {
			m[k] = redactedValue
		}
	}
	if c.authSecret != "" {
		c.authSecret = redactedValue
	}
	if c.identitySecret != "" {
		c.identitySecret = redactedValue
	}
	c.URL = redactURL(c.URL)
	c.HealthCheckURL = redactURL(c.HealthCheckURL)
	return c
}

// redactURL masks the password of a URL with userinfo the standard way
// (url.URL.Redacted); an unparsable URL is replaced entirely, since we cannot tell
// which part is secret.
func redactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return redactedValue
	}
	if _, ok := u.User.Password(); !ok {
		return raw
	}
	return u.Redacted()
}

// Settings are the gateway-wide knobs. Every field has a default in
// [DefaultSettings], a YAML key under settings: and an environment variable.
type Settings struct {
	Listen            string        // default "127.0.0.1:8080"           env SWITCHBOARD_LISTEN
	Store             string        // default "./switchboard.db"         env SWITCHBOARD_STORE (may hold a password: SECRET)
	LogLevel          string        // debug|info|warn|error, default info env SWITCHBOARD_LOG_LEVEL
	LogFormat         string        // text|json, default text            env SWITCHBOARD_LOG_FORMAT
	ToolNameSeparator string        // "." (default) or "__"              env SWITCHBOARD_TOOL_NAME_SEPARATOR
	AutoStartDefault  bool          // default false (seed 002)           env SWITCHBOARD_AUTO_START_DEFAULT
	ShutdownTimeout   time.Duration // yaml shutdown_timeout_seconds, default 5s (1..30)  env SWITCHBOARD_SHUTDOWN_TIMEOUT_SECONDS

	// StartupTimeout bounds starting a server: process start, initialize and
	// discovery. yaml startup_timeout_seconds, default 10s (seed 002, range
	// 1..60), env SWITCHBOARD_STARTUP_TIMEOUT_SECONDS; a server may override
	// it.
	StartupTimeout time.Duration
	// ConnectTimeout is always equal to StartupTimeout once a config is
	// loaded. Its key connect_timeout_seconds (env
	// SWITCHBOARD_CONNECT_TIMEOUT_SECONDS) is still read, as the old name of
	// startup_timeout_seconds: the value set in the place of higher
	// precedence wins, and setting both in one place is an error.
	//
	// Deprecated: use StartupTimeout.
	ConnectTimeout time.Duration

	// Upstream lifecycle (issue 4). Each has a yaml key of the same name in
	// snake case (shown), an env var SWITCHBOARD_<KEY> and, where noted, a
	// per-server override.
	// Ranges are seed 002's (ADR-034), in seconds unless noted.
	HealthCheckInterval     time.Duration // health_check_interval_seconds  30s (10..300); server health_check.interval_seconds
	HealthCheckTimeout      time.Duration // health_check_timeout_seconds    5s (1..30); server health_check.timeout_seconds
	LogDirectory            string        // log_directory: stdio stderr goes to <dir>/<server>.log (relative: to the working directory); default DefaultLogDirectory; "" = no files
	RestartOnFailure        bool          // restart_on_failure              true; per server
	MaxRestartAttempts      int           // max_restart_attempts             3 (1..10) within RestartWindow; per server
	RestartWindow           time.Duration // restart_window_seconds         300s
	RestartBackoffInitialMS int           // restart_backoff_initial_ms      500
	RestartBackoffMaxMS     int           // restart_backoff_max_ms        30000
	DegradedErrorRate       float64       // degraded_error_rate             0.5: DEGRADED above this share of failed calls
	DegradedWindowCalls     int           // degraded_window_calls            20: over the last this many calls
	// MaxResultBytes bounds one message read from an upstream (a stdio
	// line, an HTTP response body, a server-sent event): a larger reply
	// fails its call alone with result_too_large, and the connection stays
	// up. yaml max_result_bytes, env SWITCHBOARD_MAX_RESULT_BYTES, default
	// [DefaultMaxResultBytes] (16 MiB), range [MinResultBytes]..[MaxResultBytesLimit];
	// per server.
	MaxResultBytes int

	// seed 000 parameters (yaml key = lower-case name; env var as given; defaults as given)
	RetryMaxAttempts        int     // retry_max_attempts          MCP_RETRY_MAX_ATTEMPTS       3
	RetryBaseMS             int     // retry_base_ms               MCP_RETRY_BASE_MS            500
	RetryFactor             float64 // retry_factor                MCP_RETRY_FACTOR             2.0
	RetryMaxDelayMS         int     // retry_max_delay_ms          MCP_RETRY_MAX_DELAY_MS       30000
	CircuitFailureThreshold int     // circuit_failure_threshold   MCP_CIRCUIT_FAILURE_THRESHOLD 5
	CircuitCooldownSeconds  int     // circuit_cooldown_seconds    MCP_CIRCUIT_COOLDOWN         60
	CircuitHalfOpenMax      int     // circuit_half_open_max       MCP_CIRCUIT_HALF_OPEN_MAX    3
	TokenTTLMinutes         int     // token_ttl_minutes           MCP_TOKEN_TTL_MINUTES        15
	AuthCacheTTLMinutes     int     // auth_cache_ttl_minutes      MCP_AUTH_CACHE_TTL           5
	InvocationTimeoutMS     int     // invocation_timeout_ms       MCP_INVOCATION_TIMEOUT_MS    30000
	AuditRetentionDays      int     // audit_retention_days        MCP_AUDIT_RETENTION_DAYS     90

	// Resilience and audit (issue 5): yaml key as shown, env var
	// SWITCHBOARD_<KEY in upper case>, default and range as shown.
	BulkheadMaxConcurrent int     // bulkhead_max_concurrent   64: calls in flight per server (1..100000)
	BulkheadMaxQueue      int     // bulkhead_max_queue       256: calls waiting for a slot per server (0..1000000)
	RateLimitPerSecond    float64 // rate_limit_per_second      0: calls per second per caller; 0 = off (>= 0)
	RateLimitBurst        int     // rate_limit_burst           0: 0 = max(1, ceil(rate)), see EffectiveRateLimitBurst (>= 0)
	RetryBudgetRatio      float64 // retry_budget_ratio       0.2: retries allowed as a share of calls (0..1)
	// IdempotencyTTL is how long a call's result is replayed for a repeated
	// idempotency key: yaml idempotency_ttl_seconds, default 3600s, env
	// SWITCHBOARD_IDEMPOTENCY_TTL_SECONDS.
	IdempotencyTTL        time.Duration
	IdempotencyMaxEntries int // idempotency_max_entries 10000 (1..10000000)
	AuditQueueSize        int // audit_queue_size        10000: records buffered before the writer drops (1..10000000)
	// AuditDurability is what an answered call promises about its audit
	// row: "durable" (default): the row is committed, and on SQLite synced
	// to disk, before the answer is sent (concurrent calls share one
	// commit); "async": rows are written in the background after the
	// answer, and a crash loses the last ones. yaml audit_durability, env
	// SWITCHBOARD_AUDIT_DURABILITY. See docs/security.md.
	AuditDurability string
	// AuditRedactPattern is a Go regexp; argument and result keys matching
	// it have their values redacted before audit records hash or summarize
	// them. yaml audit_redact_pattern, env SWITCHBOARD_AUDIT_REDACT_PATTERN,
	// default [DefaultAuditRedactPattern]; it must compile and not be empty.
	AuditRedactPattern string

	// Outbound requests (the SSRF guard, package netguard): what the
	// gateway may reach when it fetches a URL of the configuration or of a
	// caller (HTTP/SSE upstreams, health checks, JWKS, embeddings, the LLM
	// classifier). Link-local addresses and cloud metadata endpoints are
	// always refused unless allowed by OutboundAllow.
	OutboundDenyPrivate  bool     // outbound_deny_private     false: refuse RFC 1918, 100.64/10, fc00::/7
	OutboundDenyLoopback bool     // outbound_deny_loopback    false: refuse 127/8, ::1, localhost
	OutboundAllow        []string // outbound_allow            none: addresses, CIDR prefixes and host names allowed anyway (env: comma-separated)
	// RequireTLSUpstreams (yaml require_tls_upstreams, default false)
	// refuses sse/http servers reached over plain http:// at a host other
	// than loopback: in the config file (file:line error) and at
	// registration (422 validation_failed). The default only flags them (a warning and
	// insecure_transport on the server's status), because in-cluster
	// services behind a service mesh speak plain HTTP to a sidecar that
	// encrypts the hop (mTLS); see docs/security.md.
	RequireTLSUpstreams bool
	// OutboundProxyFromEnv routes outbound requests through HTTP_PROXY /
	// HTTPS_PROXY / NO_PROXY: yaml outbound_proxy_from_env, default false,
	// because the guard can only check the target as far as the gateway
	// can resolve it when a proxy makes the connection.
	OutboundProxyFromEnv bool

	// Escalation (docs/escalation.md): calls that failed after their
	// retries and fallbacks, and high-risk calls waiting for an approval,
	// are stored and POSTed to EscalationWebhookURL.
	EscalationWebhookURL string // escalation_webhook_url  none: where escalations are POSTed (passes the SSRF guard)
	// EscalationWebhookHeaders are "Header-Name=ENV_VAR" entries: each
	// header is sent with the value of the environment variable, read at
	// start and never logged (yaml escalation_webhook_headers).
	EscalationWebhookHeaders []string
	// EscalationEvents are the events escalated (recorded and POSTed):
	// call_failed, approval_requested. Default both; [] escalates nothing.
	EscalationEvents []string
	// ApprovalTTL is how long an approval request waits for a decision, and
	// how long a decision holds: an approval for the caller's retry, a
	// denial against the same call. yaml approval_ttl_seconds, default 3600.
	ApprovalTTL time.Duration

	// ListenTLS (yaml listen_tls, env SWITCHBOARD_LISTEN_TLS) serves the
	// listener over HTTPS; nil serves plain HTTP. See docs/deploy.md § TLS.
	ListenTLS *ListenTLS
	// AllowPlainHTTP (yaml allow_plain_http, default false) lets the
	// gateway serve plain HTTP on a non-loopback address, for a gateway
	// behind a TLS-terminating proxy: without it such a listener needs
	// listen_tls, so that credentials never cross a network in clear by
	// accident.
	AllowPlainHTTP bool
}

// Values of ListenTLS.ClientAuth.
const (
	// ClientAuthRequest asks for a client certificate and verifies one
	// that is sent; callers without one authenticate as before.
	ClientAuthRequest = "request"
	// ClientAuthRequire refuses the TLS handshake of a client without a
	// certificate signed by the client CA.
	ClientAuthRequire = "require"
)

// ListenTLS is settings.listen_tls: the certificate the gateway serves and,
// optionally, the CA that signs client certificates (mutual TLS). The files
// are read at start and re-read when they change.
type ListenTLS struct {
	CertFile     string `json:"cert_file" yaml:"cert_file"`                     // PEM certificate chain, leaf first
	KeyFile      string `json:"key_file" yaml:"key_file"`                       // PEM private key of the leaf
	ClientCAFile string `json:"client_ca_file,omitempty" yaml:"client_ca_file"` // PEM CA certificates; set = mutual TLS
	// ClientAuth is ClientAuthRequest (default) or ClientAuthRequire;
	// meaningful only with ClientCAFile.
	ClientAuth string `json:"client_auth,omitempty" yaml:"client_auth"`
	MinVersion string `json:"min_version" yaml:"min_version"` // "1.2" (default) or "1.3"
	// Pos is where listen_tls is written, so that errors found at start
	// (unreadable files) point at it; zero when it came from the
	// environment.
	Pos Pos `json:"-"`
}

// TLS versions of ListenTLS.MinVersion.
const (
	TLS12 = "1.2"
	TLS13 = "1.3"
)

// EffectiveRateLimitBurst returns the bucket size in effect: RateLimitBurst,
// or when it is 0 the rate rounded up (at least 1), so a configured rate
// always admits at least one call.
func (s *Settings) EffectiveRateLimitBurst() int {
	if s.RateLimitBurst > 0 {
		return s.RateLimitBurst
	}
	return max(1, int(math.Ceil(s.RateLimitPerSecond)))
}

// ProtocolAuto is the default [Server.ProtocolVersion]: the gateway opens a
// 2025-11-25 session (initialize), under which everything a server can do
// for a direct classic client works through the gateway: requests it sends
// while serving a call (sampling, elicitation, roots) are relayed, and a
// server of the 2026-07-28 revision that returns input requests instead has
// them fulfilled the same way by its SDK. A server that refuses the
// handshake is asked for the newest revision on the next attempt.
const ProtocolAuto = "auto"

// Values of [Settings.AuditDurability].
const (
	// AuditDurable: an answered call's audit row is on disk.
	AuditDurable = "durable"
	// AuditAsync: audit rows are written after the answer, in batches.
	AuditAsync = "async"
)

// The bounds of max_result_bytes (settings and servers). Below 64 KiB an
// ordinary tools/list or initialize result may not fit; above 1 GiB one
// reply could take the gateway's memory.
const (
	DefaultMaxResultBytes = 16 << 20
	MinResultBytes        = 64 << 10
	MaxResultBytesLimit   = 1 << 30
)

// DefaultLogDirectory is seed 002's default log_directory. A relative
// directory is relative to the gateway's working directory; it is created on
// the first line a stdio server writes to stderr.
const DefaultLogDirectory = "logs/mcp_servers"

// DefaultAuditRedactPattern is the default of settings.audit_redact_pattern:
// key names that usually hold credentials.
const DefaultAuditRedactPattern = "password|passwd|token|secret|key|credential|authorization|cookie"

// DefaultHighRiskTools returns the words that make a tool high-risk when
// authz.high_risk_tools is not set: seed 000's write, delete, modify, update
// and create. It returns a new slice each time.
func DefaultHighRiskTools() []string {
	return []string{"write", "delete", "modify", "update", "create"}
}

// DefaultJWT returns a [JWT] with the defaults of every field the file may
// leave out: a 30s leeway and seed 003's claim names.
func DefaultJWT() JWT {
	return JWT{
		Leeway: 30 * time.Second,
		Claims: JWTClaims{
			AgentID:      "sub",
			Roles:        "roles",
			Workspace:    "workspace",
			AllowServers: "mcpServerAllowIds",
			DenyServers:  "mcpServerDenyIds",
			Admin:        "isAdmin",
		},
	}
}

// DefaultSettings returns Settings with every default filled in. It is the one
// place defaults live, so the file, the environment and the docs cannot disagree.
func DefaultSettings() Settings {
	return Settings{
		Listen:            "127.0.0.1:8080",
		Store:             "./switchboard.db",
		LogLevel:          "info",
		LogFormat:         "text",
		ToolNameSeparator: ".",
		AutoStartDefault:  false,
		ShutdownTimeout:   5 * time.Second,
		StartupTimeout:    10 * time.Second,
		ConnectTimeout:    10 * time.Second,

		HealthCheckInterval:     30 * time.Second,
		HealthCheckTimeout:      5 * time.Second,
		LogDirectory:            DefaultLogDirectory,
		RestartOnFailure:        true,
		MaxRestartAttempts:      3,
		RestartWindow:           300 * time.Second,
		RestartBackoffInitialMS: 500,
		RestartBackoffMaxMS:     30000,
		DegradedErrorRate:       0.5,
		DegradedWindowCalls:     20,
		MaxResultBytes:          DefaultMaxResultBytes,

		RetryMaxAttempts:        3,
		RetryBaseMS:             500,
		RetryFactor:             2.0,
		RetryMaxDelayMS:         30000,
		CircuitFailureThreshold: 5,
		CircuitCooldownSeconds:  60,
		CircuitHalfOpenMax:      3,
		TokenTTLMinutes:         15,
		AuthCacheTTLMinutes:     5,
		InvocationTimeoutMS:     30000,
		AuditRetentionDays:      90,

		BulkheadMaxConcurrent: 64,
		BulkheadMaxQueue:      256,
		RateLimitPerSecond:    0,
		RateLimitBurst:        0,
		RetryBudgetRatio:      0.2,
		IdempotencyTTL:        3600 * time.Second,
		IdempotencyMaxEntries: 10000,
		AuditQueueSize:        10000,
		AuditDurability:       AuditDurable,
		AuditRedactPattern:    DefaultAuditRedactPattern,
		EscalationEvents:      EscalationEvents(),
		ApprovalTTL:           3600 * time.Second,
	}
}
