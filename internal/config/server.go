package config

import (
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serverFields are the keys a server definition may have, in documentation
// order.
var serverFields = infoOf(reflect.TypeFor[Server]()).keys

// healthMethods are the values of health_check.method.
var healthMethods = []string{HealthPing, HealthToolCall, HealthHTTP}

// problem is a server problem before it is given a file position: sub is the
// field path below the server ("url", "env.HOME", "args[2]"; "" = the name).
type problem struct{ sub, msg string }

// decodeServers reads the servers: mapping (spelled key: servers or
// mcp_servers). Each server comes with its spot, whose bad fields are not
// validated, to avoid reporting one mistake twice; ok is false when servers
// may be missing.
func (d *decoder) decodeServers(n ast.Node, key string) ([]*Server, []*spot, bool) {
	if r, ok := d.resolve(n, key); ok {
		if _, isSeq := r.(*ast.SequenceNode); isSeq {
			d.errorf(posOf(r), key, "must be a mapping of server name to definition, got a list")
			return nil, nil, false
		}
	}
	entries, complete := d.mapping(n, key)
	var servers []*Server
	var spots []*spot
	for _, e := range entries {
		s := &Server{Name: e.key}
		a := d.child(at{key, &spot{}}, e.key, e.pos)
		d.decode(e.value, reflect.ValueOf(s).Elem(), a, tagOpts{})
		s.Pos = a.s.positions()
		servers = append(servers, s)
		spots = append(spots, a.s)
	}
	return servers, spots, complete
}

func (s *Server) unknownKey(key string, known []string) string {
	if key == "name" {
		return "unknown field \"name\": the server name is its key under servers"
	}
	return fmt.Sprintf("unknown field %q%s", key, suggest(key, known))
}

// ValidateServer validates one server definition that did not come from a file
// (the REST API registers servers at runtime) with the same rules as [Load]. The
// problems are returned as *Errors with Field set ("servers.NAME.url") and no
// position. It does not read the environment: call [Server.Expand] next.
func ValidateServer(s *Server) error {
	return s.problemsError(validateServer(s))
}

// Expand resolves the environment references of a definition in place: ${VAR} in
// Env and Headers values (write $$ for a literal $), and the variables named by
// HeadersFromEnv, BearerTokenEnvVar and EnvPassthrough, which must all be set and
// non-empty. [Load] and [Parse] call it; the REST API calls it, after
// [ValidateServer], for servers registered at runtime, and the store's reader for
// definitions read back. Call it once per definition: expanded values are not
// re-expanded. On error s is unchanged and the returned *Errors (Field set, no
// position) name variables but never values. getenv nil means os.Getenv.
//
// Expand must not run concurrently with other uses of s.
func (s *Server) Expand(getenv func(string) string) error {
	return s.problemsError(s.expand(orOSGetenv(getenv)))
}

func (s *Server) problemsError(probs []problem) error {
	var errs Errors
	for _, p := range probs {
		errs = append(errs, &Error{Field: serverField(s.Name, p.sub), Msg: p.msg})
	}
	return asError(errs)
}

// serverField is the dotted path of a server's field, as in a file.
func serverField(name, sub string) string {
	f := "servers." + name
	if sub == "" {
		return f
	}
	return f + "." + sub
}

// posFor returns the position of sub in a decoded server: the field itself if
// recorded, else its top-level key, else the name.
func (s *Server) posFor(sub string) Pos {
	if p, ok := s.Pos[sub]; ok {
		return p
	}
	if p, ok := s.Pos[topField(sub)]; ok {
		return p
	}
	return s.Pos[""]
}

// topField returns the server key a sub-path belongs to: "env.HOME" -> "env".
func topField(sub string) string {
	if i := strings.IndexAny(sub, ".["); i >= 0 {
		return sub[:i]
	}
	return sub
}

// validateServer applies every rule that does not need the environment.
func validateServer(s *Server) []problem {
	var probs []problem
	add := func(sub, format string, args ...any) {
		probs = append(probs, problem{sub, fmt.Sprintf(format, args...)})
	}

	if msg := checkName("server name", s.Name); msg != "" {
		add("", "%s", msg)
	}
	if s.Prefix != nil && *s.Prefix != "" {
		if msg := checkName("prefix", *s.Prefix); msg != "" {
			add("prefix", "%s", msg)
		}
	}

	stdioOnly := []struct {
		key string
		set bool
	}{
		{"command", s.Command != ""}, {"args", len(s.Args) > 0}, {"env", len(s.Env) > 0},
		{"env_passthrough", len(s.EnvPassthrough) > 0}, {"cwd", s.Cwd != ""},
		{"idle_timeout_seconds", s.IdleTimeout != 0},
	}
	httpOnly := []struct {
		key string
		set bool
	}{
		{"url", s.URL != ""}, {"headers", len(s.Headers) > 0}, {"headers_from_env", len(s.HeadersFromEnv) > 0},
		{"bearer_token_env_var", s.BearerTokenEnvVar != ""}, {"health_check_url", s.HealthCheckURL != ""},
	}
	switch s.Transport {
	case "":
		add("transport", "transport is required (one of \"stdio\", \"sse\" or \"http\")")
	case TransportStdio:
		if s.Command == "" {
			add("command", "command is required for a stdio server")
		}
		for _, f := range httpOnly {
			if f.set {
				add(f.key, "not allowed for a stdio server (only for sse and http servers)")
			}
		}
	case TransportSSE, TransportHTTP:
		if s.URL == "" {
			add("url", "url is required for an %s server", s.Transport)
		} else if msg := checkHTTPURL(s.URL); msg != "" {
			add("url", "%s", msg)
		}
		for _, f := range stdioOnly {
			if f.set {
				add(f.key, "not allowed for an %s server (only for stdio servers)", s.Transport)
			}
		}
	default:
		add("transport", "unknown transport %q: must be \"stdio\", \"sse\" or \"http\"", s.Transport)
	}

	if s.HealthCheckURL != "" && s.Transport != TransportStdio {
		if msg := checkHTTPURL(s.HealthCheckURL); msg != "" {
			add("health_check_url", "%s", msg)
		}
	}
	switch s.DefaultAccess {
	case "", AccessAllow, AccessDeny:
	default:
		add("default_access", "invalid value %q: must be \"allow\" or \"deny\"", s.DefaultAccess)
	}

	probs = append(probs, validateLifecycle(s)...)
	probs = append(probs, validateServerAuth(s)...)
	probs = append(probs, validateCredentials(s)...)
	probs = append(probs, validateServerIdentity(s)...)

	if strings.ContainsRune(s.Command, 0) {
		add("command", "must not contain a NUL byte")
	}
	for i, a := range s.Args {
		if strings.ContainsRune(a, 0) {
			add(fmt.Sprintf("args[%d]", i), "must not contain a NUL byte")
		}
	}
	for _, k := range sortedKeys(s.Env) {
		if !envNameRE.MatchString(k) {
			add("env."+k, "invalid environment variable name %q: use letters, digits and _, not starting with a digit", k)
		}
		if strings.ContainsRune(s.Env[k], 0) {
			add("env."+k, "value must not contain a NUL byte")
		}
	}
	for i, name := range s.EnvPassthrough {
		sub := fmt.Sprintf("env_passthrough[%d]", i)
		switch {
		case !envNameRE.MatchString(name):
			add(sub, "%s", badRefMsg)
		case hasKey(s.Env, name):
			add(sub, "%s is also set in env; keep one", name)
		}
	}

	// Header names are compared case-insensitively, as HTTP does.
	headerAt := map[string]string{}
	claim := func(header, sub string) {
		canon := http.CanonicalHeaderKey(header)
		if first, dup := headerAt[canon]; dup {
			add(sub, "header %s is also set by %s; keep one", header, serverField(s.Name, first))
			return
		}
		headerAt[canon] = sub
	}
	for _, h := range sortedKeys(s.Headers) {
		sub := "headers." + h
		if !validHeaderName(h) {
			add(sub, "invalid header name %q", h)
			continue
		}
		if strings.ContainsAny(s.Headers[h], "\r\n\x00") {
			add(sub, "value must not contain line breaks or NUL bytes")
		}
		claim(h, sub)
	}
	for _, h := range sortedKeys(s.HeadersFromEnv) {
		sub := "headers_from_env." + h
		if !validHeaderName(h) {
			add(sub, "invalid header name %q", h)
			continue
		}
		if name := s.HeadersFromEnv[h]; !envNameRE.MatchString(name) {
			add(sub, "%s", badRefMsg)
		}
		claim(h, sub)
	}
	if s.BearerTokenEnvVar != "" {
		if !envNameRE.MatchString(s.BearerTokenEnvVar) {
			add("bearer_token_env_var", "%s", badRefMsg)
		}
		claim("Authorization", "bearer_token_env_var")
	}
	return probs
}

// npmPackageRE is an npm package name, scoped or not, optionally with a
// version or tag: "@modelcontextprotocol/server-filesystem@1.2.0".
var npmPackageRE = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*(@[A-Za-z0-9._~^<>=*+-]+)?$`)

// validateLifecycle checks the restart, timeout, health check and package
// fields of a server.
func validateLifecycle(s *Server) []problem {
	var probs []problem
	add := func(sub, format string, args ...any) {
		probs = append(probs, problem{sub, fmt.Sprintf(format, args...)})
	}
	if n := s.MaxRestartAttempts; n != nil {
		if msg := between(*n, 1, maxRestartAttempts); msg != "" {
			add("max_restart_attempts", "%s (set restart_on_failure: false to never restart)", msg)
		}
	}
	checkSeconds := func(sub string, v Seconds) {
		if v != 0 {
			if _, msg := seconds(time.Duration(v).Seconds()); msg != "" {
				add(sub, "%s", msg)
			}
		}
	}
	checkRange := func(sub string, v Seconds, r secondsRange) {
		if v != 0 {
			if msg := r.check(v.Duration()); msg != "" {
				add(sub, "%s", msg)
			}
		}
	}
	checkRange("startup_timeout_seconds", s.StartupTimeout, startupRange)
	checkRange("shutdown_timeout_seconds", s.ShutdownTimeout, shutdownRange)
	checkSeconds("idle_timeout_seconds", s.IdleTimeout)
	if s.MaxResultBytes != 0 {
		if msg := checkMaxResultBytes(s.MaxResultBytes); msg != "" {
			add("max_result_bytes", "%s", msg)
		}
	}
	if v := s.ProtocolVersion; v != "" && v != ProtocolAuto && !slices.Contains(mcp.SupportedProtocolVersions(), v) {
		add("protocol_version", "unknown MCP revision %q: want auto or one of %s", v, strings.Join(mcp.SupportedProtocolVersions(), ", "))
	}

	if h := s.HealthCheck; h != nil {
		checkSeconds("health_check.interval_seconds", h.Interval)
		checkRange("health_check.timeout_seconds", h.Timeout, healthTimeoutRange)
		if h.Interval > 0 && h.Timeout > h.Interval {
			add("health_check.timeout_seconds", "must be at most health_check.interval_seconds (%s)", formatSeconds(h.Interval.Duration()))
		}
		switch h.Method {
		case "", HealthPing, HealthToolCall, HealthHTTP:
		default:
			quoted := make([]string, len(healthMethods))
			for i, m := range healthMethods {
				quoted[i] = strconv.Quote(m)
			}
			add("health_check.method", "unknown method %q: must be %s", h.Method, joinOr(quoted))
		}
		method := s.HealthMethod()
		if method == HealthHTTP && s.HealthCheckURL == "" {
			add("health_check.method", "method \"http\" needs health_check_url (sse and http servers only)")
		}
		if method == HealthToolCall && h.Tool == "" {
			add("health_check.tool", "tool is required for method \"tool_call\"")
		}
		if method != HealthToolCall {
			if h.Tool != "" {
				add("health_check.tool", "only used by method \"tool_call\" (the method is %q)", method)
			}
			if len(h.Args) > 0 {
				add("health_check.args", "only used by method \"tool_call\" (the method is %q)", method)
			}
		}
	}

	if s.Package != "" && (len(s.Package) > 214 || !npmPackageRE.MatchString(s.Package)) {
		add("package", "invalid npm package name %q: use lower-case letters, digits, -, ., _ and ~, optionally @scope/ before and @version after", s.Package)
	}
	return probs
}

// checkName validates a server name or prefix against NameRE, explaining the
// likely mistake.
func checkName(what, name string) string {
	switch {
	case name == "":
		return what + " is required"
	case strings.Contains(name, "."):
		return fmt.Sprintf("%s %q contains a dot: the dot is the namespace separator (server.tool), so it cannot appear in %ss", what, name, what)
	case !NameRE.MatchString(name):
		return fmt.Sprintf("%s %q is invalid: use lower-case letters, digits, - and _, starting with a letter or digit", what, name)
	case strings.Contains(name, "__"):
		return fmt.Sprintf("%s %q contains \"__\", the alternative namespace separator (server__tool)", what, name)
	}
	return ""
}

// checkHTTPURL reports why raw is not an absolute http(s) URL. It never quotes
// the URL, which may carry credentials.
func checkHTTPURL(raw string) string {
	const msg = "must be an absolute http:// or https:// URL"
	u, err := url.Parse(raw)
	if err != nil {
		return msg
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		if u.Scheme == "" {
			return msg + " (it has no scheme)"
		}
		return fmt.Sprintf("%s (scheme %q is not supported)", msg, u.Scheme)
	}
	if u.Host == "" {
		return msg + " (it has no host)"
	}
	return ""
}

// validHeaderName reports whether h is an RFC 9110 field name (a token).
func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// expand computes the expanded Env and Headers and the resolved env-sourced
// headers, and commits them only if there is no problem.
func (s *Server) expand(getenv func(string) string) []problem {
	var probs []problem
	add := func(sub, msg string) { probs = append(probs, problem{sub, msg}) }
	lookup := func(sub, name string) (string, bool) {
		v := getenv(name)
		if v == "" {
			add(sub, notSetMsg(name))
			return "", false
		}
		return v, true
	}

	var env map[string]string
	if s.Env != nil {
		env = make(map[string]string, len(s.Env))
	}
	for _, k := range sortedKeys(s.Env) {
		v, msgs := expandVars(s.Env[k], getenv)
		for _, m := range msgs {
			add("env."+k, m)
		}
		env[k] = v
	}

	var headers map[string]string
	if s.Headers != nil {
		headers = make(map[string]string, len(s.Headers))
	}
	for _, h := range sortedKeys(s.Headers) {
		v, msgs := expandVars(s.Headers[h], getenv)
		for _, m := range msgs {
			add("headers."+h, m)
		}
		if len(msgs) == 0 && strings.ContainsAny(v, "\r\n\x00") {
			add("headers."+h, "value contains line breaks or NUL bytes after expanding ${...}")
		}
		headers[h] = v
	}

	resolved := map[string]string{}
	for _, h := range sortedKeys(s.HeadersFromEnv) {
		name := s.HeadersFromEnv[h]
		if !envNameRE.MatchString(name) {
			continue // reported by validateServer
		}
		if v, ok := lookup("headers_from_env."+h, name); ok {
			if strings.ContainsAny(v, "\r\n\x00") {
				add("headers_from_env."+h, fmt.Sprintf("environment variable %s contains line breaks or NUL bytes", name))
			}
			resolved[h] = v
		}
	}
	if name := s.BearerTokenEnvVar; name != "" && envNameRE.MatchString(name) {
		if v, ok := lookup("bearer_token_env_var", name); ok {
			if strings.ContainsAny(v, "\r\n\x00") {
				add("bearer_token_env_var", fmt.Sprintf("environment variable %s contains line breaks or NUL bytes", name))
			}
			resolved["Authorization"] = "Bearer " + v
		}
	}
	for i, name := range s.EnvPassthrough {
		if envNameRE.MatchString(name) {
			lookup(fmt.Sprintf("env_passthrough[%d]", i), name)
		}
	}
	var authSecret string
	if s.Auth != nil && s.Auth.ClientSecretEnv != "" && envNameRE.MatchString(s.Auth.ClientSecretEnv) {
		authSecret, _ = lookup("auth.client_secret_env", s.Auth.ClientSecretEnv)
	}
	var identitySecret string
	if s.Identity != nil && s.Identity.ClientSecretEnv != "" && envNameRE.MatchString(s.Identity.ClientSecretEnv) {
		identitySecret, _ = lookup("identity.client_secret_env", s.Identity.ClientSecretEnv)
	}

	if len(probs) > 0 {
		return probs
	}
	s.Env, s.Headers = env, headers
	s.authSecret = authSecret
	s.identitySecret = identitySecret
	s.resolved = nil
	if len(resolved) > 0 {
		s.resolved = resolved
	}
	return nil
}

// expandVars replaces ${NAME} in v with getenv(NAME) and $$ with $; a $ followed
// by anything else is kept. Messages name variables but never quote v.
func expandVars(v string, getenv func(string) string) (string, []string) {
	if !strings.Contains(v, "$") {
		return v, nil
	}
	var b strings.Builder
	var msgs []string
	for i := 0; i < len(v); {
		c := v[i]
		if c != '$' || i+1 >= len(v) {
			b.WriteByte(c)
			i++
			continue
		}
		switch v[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
			continue
		case '{':
		default:
			b.WriteByte('$')
			i++
			continue
		}
		end := strings.IndexByte(v[i+2:], '}')
		if end < 0 {
			msgs = append(msgs, fmt.Sprintf("unterminated \"${\" at offset %d (write $$ for a literal $)", i))
			break
		}
		name := v[i+2 : i+2+end]
		switch {
		case name == "":
			msgs = append(msgs, fmt.Sprintf("empty variable name in \"${}\" at offset %d", i))
		case !envNameRE.MatchString(name):
			msgs = append(msgs, fmt.Sprintf("invalid variable name in \"${...}\" at offset %d: use ${NAME} with letters, digits and _", i))
		default:
			if val := getenv(name); val == "" {
				msgs = append(msgs, notSetMsg(name))
			} else {
				b.WriteString(val)
			}
		}
		i += 2 + end + 1
	}
	return b.String(), msgs
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// badRefMsg reports an invalid variable name where a reference is expected. The
// name is not quoted: a token pasted in place of a variable name is a common
// mistake, and the field path already says where to look.
const badRefMsg = "not a valid environment variable name: use letters, digits and _, not starting with a digit (the value is not shown in case it is a secret)"

// conventionalEnvName matches the UPPER_CASE names that are safe to quote in
// messages.
var conventionalEnvName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// notSetMsg reports an unset variable, naming it only when the name is
// conventional UPPER_CASE: "ghp_..." or "sk_live_..." is more likely a token
// written where its variable's name belongs than a variable.
func notSetMsg(name string) string {
	if conventionalEnvName.MatchString(name) {
		return fmt.Sprintf("environment variable %s is not set", name)
	}
	return "the environment variable named here is not set (its name is not shown: it is not UPPER_CASE and may be a secret written in place of a variable name)"
}

// InsecureTransportRefused is the message given for a plain http:// URL to
// a non-loopback host when settings.require_tls_upstreams is true.
const InsecureTransportRefused = "plain http:// to a host other than loopback is refused by settings.require_tls_upstreams: use https://"

// InsecureTransport reports whether the server is reached over plain
// http:// at a host other than the loopback interface (NFR-SEC2): its
// traffic, headers and bearer tokens included, can be read and altered on
// the network. Loopback hosts (localhost, *.localhost, 127.0.0.0/8, ::1)
// never leave the machine. A stdio server is never insecure in this sense.
func (s *Server) InsecureTransport() bool {
	if s.Transport == TransportStdio || s.URL == "" {
		return false
	}
	u, err := url.Parse(s.URL)
	if err != nil || !strings.EqualFold(u.Scheme, "http") {
		return false
	}
	return !loopbackHost(u.Hostname())
}

// loopbackHost reports whether host names the loopback interface.
func loopbackHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}
