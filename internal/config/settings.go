package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/switchboard-mcp/switchboard/internal/netguard"
)

// settingDef ties one Settings field to its YAML key, its environment variable
// and its validation, so the three cannot drift apart. The field's Go type (via
// ptr) decides how values are decoded: *string, *bool, *int, *float64,
// *[]string (a YAML list; comma-separated in the environment), or
// *time.Duration written as seconds.
type settingDef struct {
	key   string
	env   string
	ptr   func(*Settings) any
	check func(*Settings) string // "" when valid
}

// maxSeconds bounds the *_seconds durations: longer is surely a typo, and it keeps
// the conversion to time.Duration far from overflow.
const maxSeconds = 86400

// maxRestartAttempts bounds max_restart_attempts (settings and servers):
// seed 002's range is 1..10.
const maxRestartAttempts = 10

// Seed 002's ranges of its durations, in seconds (settings and the
// per-server overrides of the same name).
var (
	startupRange        = secondsRange{1, 60}
	shutdownRange       = secondsRange{1, 30}
	healthIntervalRange = secondsRange{10, 300}
	healthTimeoutRange  = secondsRange{1, 30}
)

// secondsRange is an inclusive range of seconds.
type secondsRange struct{ lo, hi float64 }

// check reports why d is outside r, "" when inside.
func (r secondsRange) check(d time.Duration) string {
	if v := d.Seconds(); v < r.lo || v > r.hi {
		return fmt.Sprintf("must be between %s and %s seconds (got %s)", strconv.FormatFloat(r.lo, 'f', -1, 64),
			strconv.FormatFloat(r.hi, 'f', -1, 64), strconv.FormatFloat(v, 'f', -1, 64))
	}
	return ""
}

var settingDefs = []settingDef{
	{"listen", "SWITCHBOARD_LISTEN", func(s *Settings) any { return &s.Listen }, func(s *Settings) string { return checkListen(s.Listen) }},
	{"store", "SWITCHBOARD_STORE", func(s *Settings) any { return &s.Store }, func(s *Settings) string {
		if s.Store == "" {
			return "must not be empty"
		}
		return ""
	}},
	{"log_level", "SWITCHBOARD_LOG_LEVEL", func(s *Settings) any { return &s.LogLevel }, func(s *Settings) string {
		return oneOf(s.LogLevel, "debug", "info", "warn", "error")
	}},
	{"log_format", "SWITCHBOARD_LOG_FORMAT", func(s *Settings) any { return &s.LogFormat }, func(s *Settings) string {
		return oneOf(s.LogFormat, "text", "json")
	}},
	{"tool_name_separator", "SWITCHBOARD_TOOL_NAME_SEPARATOR", func(s *Settings) any { return &s.ToolNameSeparator }, func(s *Settings) string {
		return oneOf(s.ToolNameSeparator, ".", "__")
	}},
	{"auto_start_default", "SWITCHBOARD_AUTO_START_DEFAULT", func(s *Settings) any { return &s.AutoStartDefault }, nil},
	{"startup_timeout_seconds", "SWITCHBOARD_STARTUP_TIMEOUT_SECONDS", func(s *Settings) any { return &s.StartupTimeout }, func(s *Settings) string {
		return startupRange.check(s.StartupTimeout)
	}},
	{"connect_timeout_seconds", "SWITCHBOARD_CONNECT_TIMEOUT_SECONDS", func(s *Settings) any { return &s.ConnectTimeout }, nil}, // old name of startup_timeout_seconds
	{"shutdown_timeout_seconds", "SWITCHBOARD_SHUTDOWN_TIMEOUT_SECONDS", func(s *Settings) any { return &s.ShutdownTimeout }, func(s *Settings) string {
		return shutdownRange.check(s.ShutdownTimeout)
	}},
	{"health_check_interval_seconds", "SWITCHBOARD_HEALTH_CHECK_INTERVAL_SECONDS", func(s *Settings) any { return &s.HealthCheckInterval }, func(s *Settings) string {
		return healthIntervalRange.check(s.HealthCheckInterval)
	}},
	{"health_check_timeout_seconds", "SWITCHBOARD_HEALTH_CHECK_TIMEOUT_SECONDS", func(s *Settings) any { return &s.HealthCheckTimeout }, func(s *Settings) string {
		if msg := healthTimeoutRange.check(s.HealthCheckTimeout); msg != "" {
			return msg
		}
		if s.HealthCheckTimeout > s.HealthCheckInterval {
			return fmt.Sprintf("must be at most health_check_interval_seconds (%s)", formatSeconds(s.HealthCheckInterval))
		}
		return ""
	}},
	{"log_directory", "SWITCHBOARD_LOG_DIRECTORY", func(s *Settings) any { return &s.LogDirectory }, func(s *Settings) string {
		if strings.ContainsRune(s.LogDirectory, 0) {
			return "must not contain a NUL byte"
		}
		return ""
	}},
	{"restart_on_failure", "SWITCHBOARD_RESTART_ON_FAILURE", func(s *Settings) any { return &s.RestartOnFailure }, nil},
	{"max_restart_attempts", "SWITCHBOARD_MAX_RESTART_ATTEMPTS", func(s *Settings) any { return &s.MaxRestartAttempts }, func(s *Settings) string {
		return between(s.MaxRestartAttempts, 1, maxRestartAttempts)
	}},
	{"restart_window_seconds", "SWITCHBOARD_RESTART_WINDOW_SECONDS", func(s *Settings) any { return &s.RestartWindow }, nil},
	{"restart_backoff_initial_ms", "SWITCHBOARD_RESTART_BACKOFF_INITIAL_MS", func(s *Settings) any { return &s.RestartBackoffInitialMS }, func(s *Settings) string {
		return between(s.RestartBackoffInitialMS, 1, maxSeconds*1000)
	}},
	{"restart_backoff_max_ms", "SWITCHBOARD_RESTART_BACKOFF_MAX_MS", func(s *Settings) any { return &s.RestartBackoffMaxMS }, func(s *Settings) string {
		if msg := between(s.RestartBackoffMaxMS, 1, maxSeconds*1000); msg != "" {
			return msg
		}
		if s.RestartBackoffMaxMS < s.RestartBackoffInitialMS {
			return fmt.Sprintf("must be at least restart_backoff_initial_ms (%d)", s.RestartBackoffInitialMS)
		}
		return ""
	}},
	{"degraded_error_rate", "SWITCHBOARD_DEGRADED_ERROR_RATE", func(s *Settings) any { return &s.DegradedErrorRate }, func(s *Settings) string {
		if !(s.DegradedErrorRate > 0 && s.DegradedErrorRate <= 1) {
			return "must be greater than 0 and at most 1 (a share of calls: 0.5 = half)"
		}
		return ""
	}},
	{"degraded_window_calls", "SWITCHBOARD_DEGRADED_WINDOW_CALLS", func(s *Settings) any { return &s.DegradedWindowCalls }, func(s *Settings) string {
		return between(s.DegradedWindowCalls, 1, 10000)
	}},
	{"max_result_bytes", "SWITCHBOARD_MAX_RESULT_BYTES", func(s *Settings) any { return &s.MaxResultBytes }, func(s *Settings) string {
		return checkMaxResultBytes(s.MaxResultBytes)
	}},
	{"retry_max_attempts", "MCP_RETRY_MAX_ATTEMPTS", func(s *Settings) any { return &s.RetryMaxAttempts }, func(s *Settings) string {
		return between(s.RetryMaxAttempts, 1, 100)
	}},
	{"retry_base_ms", "MCP_RETRY_BASE_MS", func(s *Settings) any { return &s.RetryBaseMS }, func(s *Settings) string {
		return between(s.RetryBaseMS, 1, maxSeconds*1000)
	}},
	{"retry_factor", "MCP_RETRY_FACTOR", func(s *Settings) any { return &s.RetryFactor }, func(s *Settings) string {
		if !(s.RetryFactor >= 1 && s.RetryFactor <= 100) {
			return "must be between 1 and 100"
		}
		return ""
	}},
	{"retry_max_delay_ms", "MCP_RETRY_MAX_DELAY_MS", func(s *Settings) any { return &s.RetryMaxDelayMS }, func(s *Settings) string {
		if msg := between(s.RetryMaxDelayMS, 1, maxSeconds*1000); msg != "" {
			return msg
		}
		if s.RetryMaxDelayMS < s.RetryBaseMS {
			return fmt.Sprintf("must be at least retry_base_ms (%d)", s.RetryBaseMS)
		}
		return ""
	}},
	{"circuit_failure_threshold", "MCP_CIRCUIT_FAILURE_THRESHOLD", func(s *Settings) any { return &s.CircuitFailureThreshold }, func(s *Settings) string {
		return between(s.CircuitFailureThreshold, 1, 1_000_000)
	}},
	{"circuit_cooldown_seconds", "MCP_CIRCUIT_COOLDOWN", func(s *Settings) any { return &s.CircuitCooldownSeconds }, func(s *Settings) string {
		return between(s.CircuitCooldownSeconds, 1, maxSeconds)
	}},
	{"circuit_half_open_max", "MCP_CIRCUIT_HALF_OPEN_MAX", func(s *Settings) any { return &s.CircuitHalfOpenMax }, func(s *Settings) string {
		return between(s.CircuitHalfOpenMax, 1, 1_000_000)
	}},
	{"token_ttl_minutes", "MCP_TOKEN_TTL_MINUTES", func(s *Settings) any { return &s.TokenTTLMinutes }, func(s *Settings) string {
		return between(s.TokenTTLMinutes, 1, 366*24*60)
	}},
	{"auth_cache_ttl_minutes", "MCP_AUTH_CACHE_TTL", func(s *Settings) any { return &s.AuthCacheTTLMinutes }, func(s *Settings) string {
		return between(s.AuthCacheTTLMinutes, 1, 366*24*60)
	}},
	{"invocation_timeout_ms", "MCP_INVOCATION_TIMEOUT_MS", func(s *Settings) any { return &s.InvocationTimeoutMS }, func(s *Settings) string {
		return between(s.InvocationTimeoutMS, 1, maxSeconds*1000)
	}},
	{"audit_retention_days", "MCP_AUDIT_RETENTION_DAYS", func(s *Settings) any { return &s.AuditRetentionDays }, func(s *Settings) string {
		return between(s.AuditRetentionDays, 1, 36500)
	}},
	{"bulkhead_max_concurrent", "SWITCHBOARD_BULKHEAD_MAX_CONCURRENT", func(s *Settings) any { return &s.BulkheadMaxConcurrent }, func(s *Settings) string {
		return between(s.BulkheadMaxConcurrent, 1, 100_000)
	}},
	{"bulkhead_max_queue", "SWITCHBOARD_BULKHEAD_MAX_QUEUE", func(s *Settings) any { return &s.BulkheadMaxQueue }, func(s *Settings) string {
		return between(s.BulkheadMaxQueue, 0, 1_000_000)
	}},
	{"rate_limit_per_second", "SWITCHBOARD_RATE_LIMIT_PER_SECOND", func(s *Settings) any { return &s.RateLimitPerSecond }, func(s *Settings) string {
		if !(s.RateLimitPerSecond >= 0) {
			return "must be at least 0 (0 = no rate limit)"
		}
		return ""
	}},
	{"rate_limit_burst", "SWITCHBOARD_RATE_LIMIT_BURST", func(s *Settings) any { return &s.RateLimitBurst }, func(s *Settings) string {
		if s.RateLimitBurst < 0 {
			return fmt.Sprintf("must be at least 0 (0 = the rate rounded up) (got %d)", s.RateLimitBurst)
		}
		return ""
	}},
	{"retry_budget_ratio", "SWITCHBOARD_RETRY_BUDGET_RATIO", func(s *Settings) any { return &s.RetryBudgetRatio }, func(s *Settings) string {
		if !(s.RetryBudgetRatio >= 0 && s.RetryBudgetRatio <= 1) {
			return "must be between 0 and 1 (a share of calls: 0.2 = one retry per five calls)"
		}
		return ""
	}},
	{"idempotency_ttl_seconds", "SWITCHBOARD_IDEMPOTENCY_TTL_SECONDS", func(s *Settings) any { return &s.IdempotencyTTL }, nil},
	{"idempotency_max_entries", "SWITCHBOARD_IDEMPOTENCY_MAX_ENTRIES", func(s *Settings) any { return &s.IdempotencyMaxEntries }, func(s *Settings) string {
		return between(s.IdempotencyMaxEntries, 1, 10_000_000)
	}},
	{"audit_queue_size", "SWITCHBOARD_AUDIT_QUEUE_SIZE", func(s *Settings) any { return &s.AuditQueueSize }, func(s *Settings) string {
		return between(s.AuditQueueSize, 1, 10_000_000)
	}},
	{"audit_durability", "SWITCHBOARD_AUDIT_DURABILITY", func(s *Settings) any { return &s.AuditDurability }, func(s *Settings) string {
		return oneOf(s.AuditDurability, AuditDurable, AuditAsync)
	}},
	{"audit_redact_pattern", "SWITCHBOARD_AUDIT_REDACT_PATTERN", func(s *Settings) any { return &s.AuditRedactPattern }, func(s *Settings) string {
		if s.AuditRedactPattern == "" {
			return "must not be empty: an empty pattern matches every key"
		}
		if _, err := regexp.Compile(s.AuditRedactPattern); err != nil {
			return fmt.Sprintf("not a valid Go regexp: %v", err)
		}
		return ""
	}},
	{"outbound_deny_private", "SWITCHBOARD_OUTBOUND_DENY_PRIVATE", func(s *Settings) any { return &s.OutboundDenyPrivate }, nil},
	{"outbound_deny_loopback", "SWITCHBOARD_OUTBOUND_DENY_LOOPBACK", func(s *Settings) any { return &s.OutboundDenyLoopback }, nil},
	{"outbound_allow", "SWITCHBOARD_OUTBOUND_ALLOW", func(s *Settings) any { return &s.OutboundAllow }, func(s *Settings) string {
		var bad []string
		for i, entry := range s.OutboundAllow {
			if err := netguard.ValidateAllow(entry); err != nil {
				bad = append(bad, fmt.Sprintf("entry %d: %v", i+1, err))
			}
		}
		return strings.Join(bad, "; ")
	}},
	{"outbound_proxy_from_env", "SWITCHBOARD_OUTBOUND_PROXY_FROM_ENV", func(s *Settings) any { return &s.OutboundProxyFromEnv }, nil},
	{"require_tls_upstreams", "SWITCHBOARD_REQUIRE_TLS_UPSTREAMS", func(s *Settings) any { return &s.RequireTLSUpstreams }, nil},
	{"escalation_webhook_url", "SWITCHBOARD_ESCALATION_WEBHOOK_URL", func(s *Settings) any { return &s.EscalationWebhookURL }, func(s *Settings) string {
		return checkWebhookURL(s.EscalationWebhookURL)
	}},
	{"escalation_webhook_headers", "SWITCHBOARD_ESCALATION_WEBHOOK_HEADERS", func(s *Settings) any { return &s.EscalationWebhookHeaders }, func(s *Settings) string {
		var bad []string
		for i, h := range s.EscalationWebhookHeaders {
			name, env, ok := strings.Cut(h, "=")
			if !ok || !headerName.MatchString(name) || !envName.MatchString(env) {
				bad = append(bad, fmt.Sprintf("entry %d (%q) must be Header-Name=ENV_VAR: the header's value is read from the environment variable", i+1, h))
			}
		}
		return strings.Join(bad, "; ")
	}},
	{"escalation_events", "SWITCHBOARD_ESCALATION_EVENTS", func(s *Settings) any { return &s.EscalationEvents }, func(s *Settings) string {
		var bad []string
		for _, e := range s.EscalationEvents {
			if msg := oneOf(e, EscalationEvents()...); msg != "" {
				bad = append(bad, msg)
			}
		}
		return strings.Join(bad, "; ")
	}},
	{"listen_tls", "SWITCHBOARD_LISTEN_TLS", func(s *Settings) any { return &s.ListenTLS }, func(s *Settings) string {
		return checkListenTLS(s.ListenTLS)
	}},
	{"allow_plain_http", "SWITCHBOARD_ALLOW_PLAIN_HTTP", func(s *Settings) any { return &s.AllowPlainHTTP }, nil},
	{"approval_ttl_seconds", "SWITCHBOARD_APPROVAL_TTL_SECONDS", func(s *Settings) any { return &s.ApprovalTTL }, func(s *Settings) string {
		if s.ApprovalTTL < time.Second {
			return "must be at least 1 second"
		}
		return ""
	}},
}

// Escalation events (settings.escalation_events).
const (
	// EventCallFailed: a call failed after its retries and fallbacks.
	EventCallFailed = "call_failed"
	// EventApprovalRequested: a high-risk call waits for a human approval.
	EventApprovalRequested = "approval_requested"
)

// EscalationEvents returns every escalation event, the default of
// settings.escalation_events.
func EscalationEvents() []string { return []string{EventCallFailed, EventApprovalRequested} }

var (
	headerName = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// checkWebhookURL accepts "" (no webhook) or an absolute http(s) URL
// without credentials (they would be logged with the URL; use
// escalation_webhook_headers).
func checkWebhookURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "not a URL: " + err.Error()
	case u.Scheme != "http" && u.Scheme != "https":
		return "must be an http:// or https:// URL"
	case u.Host == "":
		return "must name a host"
	case u.User != nil:
		return "must not carry credentials: send them in a header (escalation_webhook_headers)"
	}
	return ""
}

// SettingEnvVars returns the environment variable of each setting, keyed by YAML
// key, so the CLI can document them without repeating the list.
func SettingEnvVars() map[string]string {
	m := make(map[string]string, len(settingDefs))
	for _, def := range settingDefs {
		m[def.key] = def.env
	}
	return m
}

func settingKeys() []string {
	keys := make([]string, len(settingDefs))
	for i, def := range settingDefs {
		keys[i] = def.key
	}
	return keys
}

func findSetting(key string) *settingDef {
	for i := range settingDefs {
		if settingDefs[i].key == key {
			return &settingDefs[i]
		}
	}
	return nil
}

// settingSource records where a setting's value came from, to point errors at it.
type settingSource struct {
	env  bool
	pos  Pos
	file bool
}

// decodeSettings reads the settings: mapping (spelled key: settings or
// mcp_settings) into s.
func (d *decoder) decodeSettings(n ast.Node, key string, s *Settings, src map[string]settingSource) {
	entries, _ := d.mapping(n, key)
	for _, e := range entries {
		field := join(key, e.key)
		def := findSetting(e.key)
		if def == nil {
			d.errorf(e.pos, field, "unknown setting %q%s", e.key, suggest(e.key, settingKeys()))
			continue
		}
		if d.decodeSetting(e.value, field, def.ptr(s)) {
			src[def.key] = settingSource{file: true, pos: e.pos}
			if t, ok := def.ptr(s).(**ListenTLS); ok && *t != nil {
				(*t).Pos = e.pos // errors found at start point at the key
			}
		}
	}
}

// decodeSetting stores the value at n into ptr, unless it is null or has a
// problem; it reports whether a value was stored. Durations are seconds, and
// a list skips null items.
func (d *decoder) decodeSetting(n ast.Node, field string, ptr any) bool {
	switch p := ptr.(type) {
	case *[]string:
		items, ok := d.sequence(n, field)
		list := make([]string, 0, len(items))
		for i, item := range items {
			v, set, itemOK := d.str(item, fmt.Sprintf("%s[%d]", field, i))
			ok = ok && itemOK
			if itemOK && set {
				list = append(list, v)
			}
		}
		if ok {
			*p = list
		}
		return ok
	case *time.Duration:
		v, _, _, set, ok := d.number(n, field)
		if !ok || !set {
			return false
		}
		dur, msg := seconds(v)
		if msg != "" {
			d.errorf(posOf(n), field, "%s", msg)
			return false
		}
		*p = dur
		return true
	}
	v := reflect.New(reflect.TypeOf(ptr).Elem()).Elem()
	a := at{field, &spot{}}
	if !d.decode(n, v, a, tagOpts{}) || a.s.null {
		return false
	}
	reflect.ValueOf(ptr).Elem().Set(v)
	return true
}

// applyEnv overrides settings from the environment. An empty variable counts as
// unset, as in most shells' ${VAR:-default}.
func applyEnv(s *Settings, getenv func(string) string, src map[string]settingSource) Errors {
	var errs Errors
	for _, def := range settingDefs {
		raw := getenv(def.env)
		if raw == "" {
			continue
		}
		if msg := parseSetting(raw, def.ptr(s)); msg != "" {
			errs = append(errs, &Error{File: EnvironmentFile, Field: def.env, Msg: msg})
			continue
		}
		src[def.key] = settingSource{env: true}
	}
	return errs
}

// parseSetting stores raw into ptr, or returns why it cannot. Values of string
// settings are never quoted back (settings.store may hold a password); the others
// are numbers and booleans and are quoted to help the operator.
func parseSetting(raw string, ptr any) string {
	switch p := ptr.(type) {
	case *string:
		*p = raw
	case *[]string:
		// A comma-separated list, as environment variables hold lists.
		var list []string
		for _, item := range strings.Split(raw, ",") {
			if item = strings.TrimSpace(item); item != "" {
				list = append(list, item)
			}
		}
		*p = list
	case *bool:
		v, ok := parseBool(raw)
		if !ok {
			return fmt.Sprintf("invalid value %q: must be true or false", raw)
		}
		*p = v
	case *int:
		v, err := strconv.Atoi(raw)
		if err != nil {
			return fmt.Sprintf("invalid value %q: must be an integer", raw)
		}
		*p = v
	case *float64:
		v, err := strconv.ParseFloat(raw, 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Sprintf("invalid value %q: must be a number", raw)
		}
		*p = v
	case **ListenTLS:
		t, msg := parseListenTLS(raw)
		if msg != "" {
			return msg
		}
		*p = t
	case *time.Duration:
		v, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fmt.Sprintf("invalid value %q: must be a number of seconds", raw)
		}
		dur, msg := seconds(v)
		if msg != "" {
			return fmt.Sprintf("invalid value %q: %s", raw, msg)
		}
		*p = dur
	default:
		panic(fmt.Sprintf("config: setting has unsupported type %T", ptr))
	}
	return ""
}

// seconds converts a number of seconds (fractions allowed) to a Duration.
func seconds(v float64) (time.Duration, string) {
	if !(v > 0 && v <= maxSeconds) { // also rejects NaN
		return 0, fmt.Sprintf("must be a number of seconds greater than 0 and at most %d", maxSeconds)
	}
	return time.Duration(v * float64(time.Second)), ""
}

// formatSeconds writes d as in a file: "300s", "2.5s".
func formatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// settingAliases maps an old setting name to its new one. Both keys stay
// readable; the value from the place of higher precedence wins (environment
// over file over default), and setting both in one place is an error.
var settingAliases = []struct{ old, new string }{
	{"connect_timeout_seconds", "startup_timeout_seconds"},
}

// resolveAliases copies each old setting's value to its new one where the old
// was set with higher precedence, then the new value back to the old, so both
// fields read the same.
func resolveAliases(file, section string, s *Settings, src map[string]settingSource) Errors {
	rank := func(from settingSource) int {
		switch {
		case from.env:
			return 2
		case from.file:
			return 1
		}
		return 0
	}
	var errs Errors
	for _, a := range settingAliases {
		oldDef, newDef := findSetting(a.old), findSetting(a.new)
		oldSrc, newSrc := src[a.old], src[a.new]
		oldP, newP := oldDef.ptr(s).(*time.Duration), newDef.ptr(s).(*time.Duration)
		switch ro, rn := rank(oldSrc), rank(newSrc); {
		case ro > 0 && ro == rn:
			msg := fmt.Sprintf("%s is the old name of %s; set only %s", a.old, a.new, a.new)
			if oldSrc.env {
				msg = fmt.Sprintf("%s is the old name of %s; set only %s", oldDef.env, newDef.env, newDef.env)
				errs = append(errs, &Error{File: EnvironmentFile, Field: oldDef.env, Msg: msg})
			} else {
				errs = append(errs, &Error{File: file, Line: oldSrc.pos.Line, Column: oldSrc.pos.Column, Field: section + "." + a.old, Msg: msg})
			}
		case ro > rn:
			*newP = *oldP
			src[a.new] = oldSrc
		}
		*oldP = *newP
	}
	return errs
}

// validateSettings checks the final values and points each problem at the place
// the value came from: the environment variable, the file, or (for a bad default,
// a bug) nowhere.
func validateSettings(file, section string, s *Settings, src map[string]settingSource) Errors {
	var errs Errors
	for _, def := range settingDefs {
		if def.check == nil {
			continue
		}
		msg := def.check(s)
		if msg == "" {
			continue
		}
		from := src[def.key]
		switch {
		case from.env:
			errs = append(errs, &Error{File: EnvironmentFile, Field: def.env, Msg: msg})
		case from.file:
			errs = append(errs, &Error{File: file, Line: from.pos.Line, Column: from.pos.Column, Field: section + "." + def.key, Msg: msg})
		default:
			errs = append(errs, &Error{Field: "settings." + def.key, Msg: msg + " (built-in default)"})
		}
	}
	return errs
}

// checkMaxResultBytes checks a max_result_bytes value (settings or server).
func checkMaxResultBytes(v int) string {
	if v < MinResultBytes || v > MaxResultBytesLimit {
		return fmt.Sprintf("must be between %d (64 KiB) and %d (1 GiB) bytes (got %d)", MinResultBytes, MaxResultBytesLimit, v)
	}
	return ""
}

func checkListen(addr string) string {
	msg := fmt.Sprintf("must be host:port, e.g. \"127.0.0.1:8080\" (got %q)", addr)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return msg
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return msg
	}
	return ""
}

func oneOf(v string, allowed ...string) string {
	if slices.Contains(allowed, v) {
		return ""
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = strconv.Quote(a)
	}
	return fmt.Sprintf("invalid value %q: must be one of %s", v, joinOr(quoted))
}

func between(v, lo, hi int) string {
	if v < lo || v > hi {
		return fmt.Sprintf("must be between %d and %d (got %d)", lo, hi, v)
	}
	return ""
}

// joinOr joins ["a","b","c"] as "a, b or c".
func joinOr(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	out := ""
	for i, it := range items[:len(items)-1] {
		if i > 0 {
			out += ", "
		}
		out += it
	}
	return out + " or " + items[len(items)-1]
}

// parseBool accepts what strconv.ParseBool does plus yes/no and on/off, the
// spellings operators use in environment files.
func parseBool(raw string) (bool, bool) {
	switch strings.ToLower(raw) {
	case "yes", "on":
		return true, true
	case "no", "off":
		return false, true
	}
	v, err := strconv.ParseBool(raw)
	return v, err == nil
}
