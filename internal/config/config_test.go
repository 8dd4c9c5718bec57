package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// envFunc returns a getenv backed by m.
func envFunc(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// wantErr is one expected problem: File defaults to the parsed file's name and Msg
// is a substring of the message.
type wantErr struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func TestParseErrors(t *testing.T) {
	const file = "switchboard.yaml"
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []wantErr
	}{
		{
			name: "YAML syntax",
			yaml: "servers:\n  a:\n    args: [1, 2\n",
			want: []wantErr{{Line: 3, Msg: "invalid YAML"}},
		},
		{
			name: "tool_versions tool without versions",
			yaml: "servers: {}\ntool_versions:\n  gh:\n    create_issue: []\n",
			want: []wantErr{{Line: 4, Field: "tool_versions.gh.create_issue", Msg: "needs at least one compatible version"}},
		},
		{
			name: "tool_versions duplicate version",
			yaml: "servers: {}\ntool_versions:\n  gh:\n    create_issue: [\"1.0\", \"1.0\"]\n",
			want: []wantErr{{Line: 4, Field: "tool_versions.gh.create_issue[1]", Msg: `version "1.0" is listed twice`}},
		},
		{
			name: "tool_versions not a mapping",
			yaml: "servers: {}\ntool_versions: [a]\n",
			want: []wantErr{{Line: 2, Field: "tool_versions"}},
		},
		{
			name: "tab indentation",
			yaml: "servers:\n\tdemo: {}\n",
			want: []wantErr{{Line: 2, Msg: "invalid YAML"}},
		},
		{
			name: "unknown top-level key",
			yaml: "servers: {}\nserver:\n  x: 1\n",
			want: []wantErr{{Line: 2, Field: "server", Msg: `unknown top-level key "server"`}},
		},
		{
			name: "unknown server field with suggestion",
			yaml: "servers:\n  github:\n    transport: http\n    url: https://example.com/mcp\n    urll: https://example.com\n",
			want: []wantErr{{Line: 5, Field: "servers.github.urll", Msg: `unknown field "urll" (did you mean "url"?)`}},
		},
		{
			name: "name field inside a server",
			yaml: "servers:\n  github:\n    name: github\n    transport: http\n    url: https://example.com/mcp\n",
			want: []wantErr{{Line: 3, Field: "servers.github.name", Msg: "server name is its key"}},
		},
		{
			name: "unknown settings field",
			yaml: "settings:\n  listen: 127.0.0.1:9090\n  colour: blue\n",
			want: []wantErr{{Line: 3, Field: "settings.colour", Msg: `unknown setting "colour"`}},
		},
		{
			name: "missing url for http",
			yaml: "servers:\n  remote:\n    transport: http\n",
			want: []wantErr{{Line: 2, Field: "servers.remote.url", Msg: "url is required"}},
		},
		{
			name: "missing command for stdio",
			yaml: "servers:\n  local:\n    transport: stdio\n    args: [x]\n",
			want: []wantErr{{Line: 2, Field: "servers.local.command", Msg: "command is required"}},
		},
		{
			name: "missing transport with a url",
			yaml: "servers:\n  remote:\n    url: https://e/mcp\n",
			want: []wantErr{{Line: 2, Field: "servers.remote.transport", Msg: "transport is required"}},
		},
		{
			name: "name with a dot",
			yaml: "servers:\n  my.server:\n    transport: stdio\n    command: x\n",
			want: []wantErr{{Line: 2, Field: "servers.my.server", Msg: "namespace separator"}},
		},
		{
			name: "name with upper case",
			yaml: "servers:\n  GitHub:\n    transport: stdio\n    command: x\n",
			want: []wantErr{{Line: 2, Field: "servers.GitHub", Msg: "lower-case"}},
		},
		{
			name: "duplicate name",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n  a:\n    transport: stdio\n    command: y\n",
			want: []wantErr{{Line: 5, Field: "servers.a", Msg: `duplicate key "a" (first defined at line 2)`}},
		},
		{
			name: "duplicate field",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n    command: y\n",
			want: []wantErr{{Line: 5, Field: "servers.a.command", Msg: "duplicate key"}},
		},
		{
			name: "unknown transport",
			yaml: "servers:\n  a:\n    transport: websocket\n    url: https://example.com\n",
			want: []wantErr{{Line: 3, Field: "servers.a.transport", Msg: `unknown transport "websocket"`}},
		},
		{
			name: "unset variable in header",
			yaml: "servers:\n  a:\n    transport: sse\n    url: https://example.com/sse\n    headers:\n      X-Api-Key: \"${NOPE}\"\n",
			want: []wantErr{{Line: 6, Field: "servers.a.headers.X-Api-Key", Msg: "environment variable NOPE is not set"}},
		},
		{
			name: "unset variable in env",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n    env:\n      TOKEN: \"prefix-${NOPE}\"\n",
			want: []wantErr{{Line: 6, Field: "servers.a.env.TOKEN", Msg: "environment variable NOPE is not set"}},
		},
		{
			name: "bad ${ syntax",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n    env:\n      A: \"${UNCLOSED\"\n      B: \"${}\"\n      C: \"${1X}\"\n",
			want: []wantErr{
				{Line: 6, Field: "servers.a.env.A", Msg: "unterminated"},
				{Line: 7, Field: "servers.a.env.B", Msg: "empty variable name"},
				{Line: 8, Field: "servers.a.env.C", Msg: "invalid variable name"},
			},
		},
		{
			name: "unset bearer token and header env vars",
			yaml: "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    bearer_token_env_var: NO_TOKEN\n    headers_from_env:\n      X-Key: NO_KEY\n",
			want: []wantErr{
				{Line: 5, Field: "servers.a.bearer_token_env_var", Msg: "environment variable NO_TOKEN is not set"},
				{Line: 7, Field: "servers.a.headers_from_env.X-Key", Msg: "environment variable NO_KEY is not set"},
			},
		},
		{
			name: "bearer token and Authorization header",
			yaml: "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    headers:\n      authorization: Basic x\n    bearer_token_env_var: TOKEN\n",
			env:  map[string]string{"TOKEN": "t"},
			want: []wantErr{{Line: 7, Field: "servers.a.bearer_token_env_var", Msg: "also set by servers.a.headers.authorization"}},
		},
		{
			name: "oauth: unknown type, grant and auth method",
			yaml: "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    auth:\n      type: saml\n      grant: password\n      token_endpoint_auth_method: private_key_jwt\n",
			want: []wantErr{
				{Line: 6, Field: "servers.a.auth.type", Msg: `unknown type "saml": must be "oauth"`},
				{Line: 7, Field: "servers.a.auth.grant", Msg: `"password" is not authorization_code or client_credentials`},
				{Line: 8, Field: "servers.a.auth.token_endpoint_auth_method", Msg: "is not client_secret_basic"},
			},
		},
		{
			name: "oauth: on a stdio server, and without type",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n    auth:\n      client_id: c\n",
			want: []wantErr{
				{Line: 5, Field: "servers.a.auth.type", Msg: "type is required"},
				{Line: 5, Field: "servers.a.auth", Msg: "not allowed for a stdio server"},
			},
		},
		{
			name: "oauth: with a bearer token and an Authorization header",
			yaml: "servers:\n  a:\n    transport: sse\n    url: https://example.com/sse\n    bearer_token_env_var: TOKEN\n    auth: {type: oauth}\n" +
				"  b:\n    transport: http\n    url: https://example.com/mcp\n    headers: {authorization: Basic x}\n    auth: {type: oauth}\n",
			env: map[string]string{"TOKEN": "t"},
			want: []wantErr{
				{Line: 6, Field: "servers.a.auth", Msg: "remove bearer_token_env_var"},
				{Line: 11, Field: "servers.b.auth", Msg: "remove headers.authorization"},
			},
		},
		{
			name: "credentials: unknown value, per_user on stdio, with a shared Authorization, with client credentials",
			yaml: "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    credentials: mine\n" +
				"  b:\n    transport: stdio\n    command: x\n    credentials: per_user\n" +
				"  c:\n    transport: http\n    url: https://example.com/mcp\n    headers: {Authorization: Basic x}\n    credentials: per_user\n" +
				"  d:\n    transport: http\n    url: https://example.com/mcp\n    credentials: per_user\n    auth: {type: oauth, grant: client_credentials, client_id: c, client_secret_env: S}\n",
			env: map[string]string{"S": "s"},
			want: []wantErr{
				{Line: 5, Field: "servers.a.credentials", Msg: `unknown value "mine": must be "shared" or "per_user"`},
				{Line: 9, Field: "servers.b.credentials", Msg: "not allowed for a stdio server"},
				{Line: 14, Field: "servers.c.credentials", Msg: "remove headers.Authorization"},
				{Line: 18, Field: "servers.d.credentials", Msg: "client_credentials grant authenticates the gateway itself"},
			},
		},
		{
			name: "user_session_idle_seconds: without per_user, out of range",
			yaml: "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    user_session_idle_seconds: 60\n" +
				"  b:\n    transport: http\n    url: https://example.com/mcp\n    credentials: per_user\n    user_session_idle_seconds: 0.5\n",
			want: []wantErr{
				{Line: 5, Field: "servers.a.user_session_idle_seconds", Msg: "only with credentials: per_user"},
				{Line: 10, Field: "servers.b.user_session_idle_seconds", Msg: "must be between 1 and 86400 seconds"},
			},
		},
		{
			name: "oauth: client credentials without a client, bad fields",
			yaml: "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    auth:\n      type: oauth\n      grant: client_credentials\n" +
				"      client_metadata_url: http://gw.example.com/md.json\n      scopes: [\"a b\"]\n      issuer: idp.example.com\n      refresh_margin_seconds: -1\n      max_step_ups: 99\n",
			want: []wantErr{
				{Line: 5, Field: "servers.a.auth.client_id", Msg: "needs a registered client"},
				{Line: 5, Field: "servers.a.auth.client_secret_env", Msg: "needs the client's secret"},
				{Line: 8, Field: "servers.a.auth.client_metadata_url", Msg: "only for the authorization_code grant"},
				{Line: 8, Field: "servers.a.auth.client_metadata_url", Msg: "must be an https URL with a path"},
				{Line: 9, Field: "servers.a.auth.scopes[0]", Msg: "is not a scope token"},
				{Line: 10, Field: "servers.a.auth.issuer", Msg: "absolute http"},
				{Line: 11, Field: "servers.a.auth.refresh_margin_seconds", Msg: "must be between 0 and"},
				{Line: 12, Field: "servers.a.auth.max_step_ups", Msg: "must be between 0 and 10"},
			},
		},
		{
			name: "oauth: client secret variable unset, invalid, or with none",
			yaml: "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    auth:\n      type: oauth\n      client_id: c\n      client_secret_env: NO_SECRET\n" +
				"  b:\n    transport: http\n    url: https://example.com/mcp\n    auth:\n      type: oauth\n      client_secret_env: 1bad\n      token_endpoint_auth_method: none\n",
			want: []wantErr{
				{Line: 8, Field: "servers.a.auth.client_secret_env", Msg: "environment variable NO_SECRET is not set"},
				{Line: 14, Field: "servers.b.auth.client_secret_env", Msg: "not a valid environment variable name"},
				{Line: 14, Field: "servers.b.auth.client_secret_env", Msg: "a secret without client_id"},
				{Line: 15, Field: "servers.b.auth.token_endpoint_auth_method", Msg: "none sends no secret"},
			},
		},
		{
			name: "wrong type for setting",
			yaml: "settings:\n  listen: [1]\n",
			want: []wantErr{{Line: 2, Field: "settings.listen", Msg: "must be a string, got a list"}},
		},
		{
			name: "wrong type for integer setting",
			yaml: "settings:\n  retry_max_attempts: three\n  retry_base_ms: 1.5\n",
			want: []wantErr{
				{Line: 2, Field: "settings.retry_max_attempts", Msg: "must be a number, got a string"},
				{Line: 3, Field: "settings.retry_base_ms", Msg: "must be an integer"},
			},
		},
		{
			name: "wrong type for server field",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n    args: --verbose\n    auto_start: yes\n",
			want: []wantErr{
				{Line: 5, Field: "servers.a.args", Msg: "must be a list"},
				{Line: 6, Field: "servers.a.auto_start", Msg: "must be true or false"},
			},
		},
		{
			name: "bad default_access",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n    default_access: block\n",
			want: []wantErr{{Line: 5, Field: "servers.a.default_access", Msg: `must be "allow" or "deny"`}},
		},
		{
			name: "bad separator",
			yaml: "settings:\n  tool_name_separator: /\n",
			want: []wantErr{{Line: 2, Field: "settings.tool_name_separator", Msg: `must be one of "." or "__"`}},
		},
		{
			name: "bad log level and format",
			yaml: "settings:\n  log_level: verbose\n  log_format: xml\n",
			want: []wantErr{
				{Line: 2, Field: "settings.log_level", Msg: "must be one of"},
				{Line: 3, Field: "settings.log_format", Msg: "must be one of"},
			},
		},
		{
			name: "numbers out of range",
			yaml: "settings:\n  retry_max_attempts: 0\n  connect_timeout_seconds: -1\n  retry_base_ms: 1000\n  retry_max_delay_ms: 10\n",
			want: []wantErr{
				{Line: 2, Field: "settings.retry_max_attempts", Msg: "must be between 1 and 100"},
				{Line: 3, Field: "settings.connect_timeout_seconds", Msg: "greater than 0"},
				{Line: 5, Field: "settings.retry_max_delay_ms", Msg: "at least retry_base_ms"},
			},
		},
		{
			name: "bad listen address",
			yaml: "settings:\n  listen: 8080\n",
			want: []wantErr{{Line: 2, Field: "settings.listen", Msg: "must be host:port"}},
		},
		{
			name: "url on stdio server",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n    url: https://example.com\n",
			want: []wantErr{{Line: 5, Field: "servers.a.url", Msg: "not allowed for a stdio server"}},
		},
		{
			name: "headers on stdio server",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n    headers: {X-A: b}\n",
			want: []wantErr{{Line: 5, Field: "servers.a.headers", Msg: "not allowed for a stdio server"}},
		},
		{
			name: "command and args on sse server",
			yaml: "servers:\n  a:\n    transport: sse\n    url: https://example.com/sse\n    command: x\n    args: [y]\n",
			want: []wantErr{
				{Line: 5, Field: "servers.a.command", Msg: "not allowed for an sse server"},
				{Line: 6, Field: "servers.a.args", Msg: "not allowed for an sse server"},
			},
		},
		{
			name: "relative url",
			yaml: "servers:\n  a:\n    transport: http\n    url: /mcp\n",
			want: []wantErr{{Line: 4, Field: "servers.a.url", Msg: "must be an absolute http:// or https:// URL"}},
		},
		{
			name: "url with unsupported scheme",
			yaml: "servers:\n  a:\n    transport: http\n    url: ftp://example.com/mcp\n    health_check_url: example.com/health\n",
			want: []wantErr{
				{Line: 4, Field: "servers.a.url", Msg: `scheme "ftp"`},
				{Line: 5, Field: "servers.a.health_check_url", Msg: "absolute"},
			},
		},
		{
			name: "bad env_passthrough and env names",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n    env:\n      BAD-NAME: v\n    env_passthrough:\n      - HOME\n      - 1PATH\n",
			env:  map[string]string{"HOME": "/root"},
			want: []wantErr{
				{Line: 6, Field: "servers.a.env.BAD-NAME", Msg: "invalid environment variable name"},
				{Line: 9, Field: "servers.a.env_passthrough[1]", Msg: "not a valid environment variable name"},
			},
		},
		{
			name: "unset env_passthrough variable",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n    env_passthrough: [NOT_THERE]\n",
			want: []wantErr{{Line: 5, Field: "servers.a.env_passthrough[0]", Msg: "environment variable NOT_THERE is not set"}},
		},
		{
			name: "bad prefix",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n    prefix: My.Prefix\n",
			want: []wantErr{{Line: 5, Field: "servers.a.prefix", Msg: "contains a dot"}},
		},
		{
			name: "null env value",
			yaml: "servers:\n  a:\n    transport: stdio\n    command: x\n    env:\n      EMPTY:\n",
			want: []wantErr{{Line: 6, Field: "servers.a.env.EMPTY", Msg: "got null"}},
		},
		{
			name: "servers as a list",
			yaml: "servers:\n  - name: a\n    transport: stdio\n",
			want: []wantErr{{Line: 2, Field: "servers", Msg: "mapping of server name to definition"}},
		},
		{
			name: "top level not a mapping",
			yaml: "- servers\n",
			want: []wantErr{{Line: 1, Field: "", Msg: "top level must be a mapping"}},
		},
		{
			name: "alias to no anchor",
			yaml: "servers:\n  a:\n    <<: *base\n    transport: stdio\n",
			want: []wantErr{{Line: 3, Field: "servers.a", Msg: "alias *base refers to no anchor defined before it"}},
		},
		{
			name: "unsupported tag",
			yaml: "servers:\n  a: !include other.yaml\n",
			want: []wantErr{{Line: 2, Field: "servers.a", Msg: `unsupported YAML tag "!include"`}},
		},
		{
			name: "multiple documents",
			yaml: "servers: {}\n---\nsettings: {}\n",
			want: []wantErr{{Line: 3, Msg: "multiple YAML documents"}},
		},
		{
			name: "env override not a number",
			yaml: "settings:\n  retry_max_attempts: 4\n",
			env:  map[string]string{"MCP_RETRY_MAX_ATTEMPTS": "abc"},
			want: []wantErr{{File: EnvironmentFile, Field: "MCP_RETRY_MAX_ATTEMPTS", Msg: `invalid value "abc": must be an integer`}},
		},
		{
			name: "env override fails validation",
			yaml: "",
			env:  map[string]string{"SWITCHBOARD_LOG_LEVEL": "loud", "SWITCHBOARD_AUTO_START_DEFAULT": "maybe"},
			want: []wantErr{
				{File: EnvironmentFile, Field: "SWITCHBOARD_AUTO_START_DEFAULT", Msg: "must be true or false"},
				{File: EnvironmentFile, Field: "SWITCHBOARD_LOG_LEVEL", Msg: "must be one of"},
			},
		},
		{
			name: "env overrides of numbers and durations",
			yaml: "settings:\n  retry_factor: 2\n",
			env: map[string]string{
				"MCP_RETRY_FACTOR":                     "0.5",
				"SWITCHBOARD_CONNECT_TIMEOUT_SECONDS":  "0",
				"SWITCHBOARD_SHUTDOWN_TIMEOUT_SECONDS": "soon",
				"MCP_AUDIT_RETENTION_DAYS":             "NaN",
				"SWITCHBOARD_TOOL_NAME_SEPARATOR":      "/",
			},
			want: []wantErr{
				{File: EnvironmentFile, Field: "SWITCHBOARD_CONNECT_TIMEOUT_SECONDS", Msg: "greater than 0"},
				{File: EnvironmentFile, Field: "SWITCHBOARD_SHUTDOWN_TIMEOUT_SECONDS", Msg: `invalid value "soon"`},
				{File: EnvironmentFile, Field: "MCP_AUDIT_RETENTION_DAYS", Msg: "must be an integer"},
				{File: EnvironmentFile, Field: "SWITCHBOARD_TOOL_NAME_SEPARATOR", Msg: `must be one of "." or "__"`},
				{File: EnvironmentFile, Field: "MCP_RETRY_FACTOR", Msg: "must be between 1 and 100"},
			},
		},
		{
			name: "bad health checks",
			yaml: "servers:\n" +
				"  a:\n    transport: stdio\n    command: x\n    health_check:\n      method: tcp\n" +
				"  b:\n    transport: stdio\n    command: x\n    health_check: {method: http}\n" +
				"  c:\n    transport: stdio\n    command: x\n    health_check:\n      method: tool_call\n      args: {q: 1}\n" +
				"  d:\n    transport: http\n    url: https://e/mcp\n    health_check_url: https://e/health\n    health_check:\n      tool: status\n" +
				"  d2:\n    transport: stdio\n    command: x\n    health_check:\n      method: tool_call\n      tool: t\n      args: [1]\n" +
				"  e:\n    transport: stdio\n    command: x\n    health_check:\n      intervall_seconds: 5\n" +
				"  f:\n    transport: stdio\n    command: x\n    health_check:\n      interval_seconds: 1\n      timeout_seconds: 2\n" +
				"  g:\n    transport: stdio\n    command: x\n    health_check: ping\n",
			want: []wantErr{
				{Line: 6, Field: "servers.a.health_check.method", Msg: `unknown method "tcp": must be "ping", "tool_call" or "http"`},
				{Line: 10, Field: "servers.b.health_check.method", Msg: `method "http" needs health_check_url`},
				{Line: 14, Field: "servers.c.health_check.tool", Msg: `tool is required for method "tool_call"`},
				{Line: 22, Field: "servers.d.health_check.tool", Msg: `only used by method "tool_call" (the method is "http")`},
				{Line: 29, Field: "servers.d2.health_check.args", Msg: "must be a mapping of argument names to values, got a list"},
				{Line: 34, Field: "servers.e.health_check.intervall_seconds", Msg: `unknown field "intervall_seconds" (did you mean "interval_seconds"?)`},
				{Line: 40, Field: "servers.f.health_check.timeout_seconds", Msg: "must be at most health_check.interval_seconds (1s)"},
				{Line: 44, Field: "servers.g.health_check", Msg: "must be a mapping, got a string"},
			},
		},
		{
			name: "bad lifecycle fields",
			yaml: "servers:\n" +
				"  a:\n    transport: stdio\n    command: x\n    max_restart_attempts: 0\n    startup_timeout_seconds: -1\n    restart_on_failure: yes\n    start_on_demand: 1\n    package: Not A Package\n    pin_definitions: sometimes\n" +
				"  b:\n    transport: http\n    url: https://e/mcp\n    idle_timeout_seconds: 60\n    max_restart_attempts: three\n    shutdown_timeout_seconds: 100000\n" +
				"  c:\n    transport: sse\n    url: https://e/sse\n    max_result_bytes: 1024\n" +
				"  d:\n    transport: stdio\n    command: x\n    max_result_bytes: 1.5\n",
			want: []wantErr{
				{Line: 5, Field: "servers.a.max_restart_attempts", Msg: "must be between 1 and 10 (got 0) (set restart_on_failure: false to never restart)"},
				{Line: 6, Field: "servers.a.startup_timeout_seconds", Msg: "greater than 0"},
				{Line: 7, Field: "servers.a.restart_on_failure", Msg: "must be true or false"},
				{Line: 8, Field: "servers.a.start_on_demand", Msg: "must be true or false"},
				{Line: 9, Field: "servers.a.package", Msg: `invalid npm package name "Not A Package"`},
				{Line: 10, Field: "servers.a.pin_definitions", Msg: "must be true or false"},
				{Line: 14, Field: "servers.b.idle_timeout_seconds", Msg: "not allowed for an http server (only for stdio servers)"},
				{Line: 15, Field: "servers.b.max_restart_attempts", Msg: "must be a number, got a string"},
				{Line: 16, Field: "servers.b.shutdown_timeout_seconds", Msg: "at most 86400"},
				{Line: 20, Field: "servers.c.max_result_bytes", Msg: "must be between 65536 (64 KiB) and 1073741824 (1 GiB) bytes (got 1024)"},
				{Line: 24, Field: "servers.d.max_result_bytes", Msg: "must be an integer"},
			},
		},
		{
			name: "bad lifecycle settings",
			yaml: "settings:\n  health_check_interval_seconds: 12\n  health_check_timeout_seconds: 13\n  max_restart_attempts: 0\n" +
				"  restart_window_seconds: 0\n  restart_backoff_initial_ms: 1000\n  restart_backoff_max_ms: 999\n" +
				"  degraded_error_rate: 1.5\n  degraded_window_calls: 0\n  restart_on_failure: sometimes\n  log_directory: [logs]\n" +
				"  max_result_bytes: 2147483648\n",
			want: []wantErr{
				{Line: 3, Field: "settings.health_check_timeout_seconds", Msg: "must be at most health_check_interval_seconds (12s)"},
				{Line: 4, Field: "settings.max_restart_attempts", Msg: "must be between 1 and 10"},
				{Line: 5, Field: "settings.restart_window_seconds", Msg: "greater than 0"},
				{Line: 7, Field: "settings.restart_backoff_max_ms", Msg: "must be at least restart_backoff_initial_ms (1000)"},
				{Line: 8, Field: "settings.degraded_error_rate", Msg: "must be greater than 0 and at most 1"},
				{Line: 9, Field: "settings.degraded_window_calls", Msg: "must be between 1 and 10000"},
				{Line: 10, Field: "settings.restart_on_failure", Msg: "must be true or false"},
				{Line: 11, Field: "settings.log_directory", Msg: "must be a string, got a list"},
				{Line: 12, Field: "settings.max_result_bytes", Msg: "must be between 65536 (64 KiB) and 1073741824 (1 GiB) bytes (got 2147483648)"},
			},
		},
		{
			name: "startup timeout under both names in the file",
			yaml: "settings:\n  startup_timeout_seconds: 5\n  connect_timeout_seconds: 7\n",
			want: []wantErr{{Line: 3, Field: "settings.connect_timeout_seconds", Msg: "connect_timeout_seconds is the old name of startup_timeout_seconds; set only startup_timeout_seconds"}},
		},
		{
			name: "startup timeout under both names in the environment",
			env:  map[string]string{"SWITCHBOARD_STARTUP_TIMEOUT_SECONDS": "1", "SWITCHBOARD_CONNECT_TIMEOUT_SECONDS": "2"},
			want: []wantErr{{File: EnvironmentFile, Field: "SWITCHBOARD_CONNECT_TIMEOUT_SECONDS", Msg: "old name of SWITCHBOARD_STARTUP_TIMEOUT_SECONDS"}},
		},
		{
			name: "lifecycle env overrides",
			yaml: "",
			env: map[string]string{
				"SWITCHBOARD_RESTART_ON_FAILURE":            "maybe",
				"SWITCHBOARD_DEGRADED_ERROR_RATE":           "0",
				"SWITCHBOARD_HEALTH_CHECK_INTERVAL_SECONDS": "-5",
				"SWITCHBOARD_MAX_RESTART_ATTEMPTS":          "1.5",
				"SWITCHBOARD_MAX_RESULT_BYTES":              "16MiB",
			},
			want: []wantErr{
				{File: EnvironmentFile, Field: "SWITCHBOARD_HEALTH_CHECK_INTERVAL_SECONDS", Msg: "greater than 0"},
				{File: EnvironmentFile, Field: "SWITCHBOARD_RESTART_ON_FAILURE", Msg: "must be true or false"},
				{File: EnvironmentFile, Field: "SWITCHBOARD_MAX_RESTART_ATTEMPTS", Msg: "must be an integer"},
				{File: EnvironmentFile, Field: "SWITCHBOARD_MAX_RESULT_BYTES", Msg: `invalid value "16MiB": must be an integer`},
				{File: EnvironmentFile, Field: "SWITCHBOARD_DEGRADED_ERROR_RATE", Msg: "must be greater than 0 and at most 1"},
			},
		},
		{
			name: "unknown auth mode",
			yaml: "auth:\n  mode: saml\n",
			want: []wantErr{{Line: 2, Field: "auth.mode", Msg: `unknown mode "saml": must be "keys", "jwt", "oauth" or "local"`}},
		},
		{
			name: "jwt mode without jwt section",
			yaml: "auth:\n  mode: jwt\n",
			want: []wantErr{{Line: 2, Field: "auth.mode", Msg: "mode jwt needs a jwt: section with secret or jwks_url"}},
		},
		{
			name: "jwt with both secret and jwks_url",
			yaml: "auth:\n  mode: jwt\n  jwt:\n    secret: ${S}\n    jwks_url: https://idp.example/jwks.json\n",
			env:  map[string]string{"S": "k"},
			want: []wantErr{{Line: 5, Field: "auth.jwt.jwks_url", Msg: "set either secret (an HS256 key) or jwks_url, not both"}},
		},
		{
			name: "jwt with neither secret nor jwks_url",
			yaml: "auth:\n  mode: jwt\n  jwt:\n    issuer: https://idp.example\n",
			want: []wantErr{{Line: 3, Field: "auth.jwt", Msg: "needs secret"}},
		},
		{
			name: "jwks_url not http(s)",
			yaml: "auth:\n  mode: jwt\n  jwt:\n    jwks_url: file:///etc/jwks.json\n",
			want: []wantErr{{Line: 4, Field: "auth.jwt.jwks_url", Msg: `must be an absolute http:// or https:// URL (scheme "file" is not supported)`}},
		},
		{
			name: "jwt section under mode keys",
			yaml: "auth:\n  jwt:\n    secret: x\n",
			want: []wantErr{{Line: 2, Field: "auth.jwt", Msg: `only used with mode: jwt (the mode is "keys")`}},
		},
		{
			name: "jwt section under mode local",
			yaml: "auth:\n  mode: local\n  jwt: {jwks_url: https://idp.example/jwks.json}\n",
			want: []wantErr{{Line: 3, Field: "auth.jwt", Msg: `only used with mode: jwt (the mode is "local")`}},
		},
		{
			name: "bad jwt fields",
			yaml: "auth:\n  mode: jwt\n  jwt:\n    secret: ${NO_SECRET}\n    leeway_seconds: -5\n    audience: [a, b]\n    claims:\n      role: groups\n      admin: \"\"\n    issuer: x\n    isuer: y\n  mod: jwt\n",
			want: []wantErr{
				{Line: 4, Field: "auth.jwt.secret", Msg: "environment variable NO_SECRET is not set"},
				{Line: 5, Field: "auth.jwt.leeway_seconds", Msg: "must be a number of seconds from 0 to 3600"},
				{Line: 6, Field: "auth.jwt.audience", Msg: "must be a string, got a list"},
				{Line: 8, Field: "auth.jwt.claims.role", Msg: `unknown claim "role" (did you mean "roles"?)`},
				{Line: 9, Field: "auth.jwt.claims.admin", Msg: `must name a claim (remove the key to use the default "isAdmin")`},
				{Line: 11, Field: "auth.jwt.isuer", Msg: `unknown field "isuer" (did you mean "issuer"?)`},
				{Line: 12, Field: "auth.mod", Msg: `unknown field "mod" (did you mean "mode"?)`},
			},
		},
		{
			name: "auth not a mapping",
			yaml: "auth: jwt\n",
			want: []wantErr{{Line: 1, Field: "auth", Msg: "must be a mapping, got a string"}},
		},
		{
			name: "bad role restrictions",
			yaml: "authz:\n  role_restrictions:\n    review:\n      tools: [a.b]\n    impl:\n      allowed_tools: [fs.write, \"\", ~, \"fs read\"]\n    ops: {}\n    empty:\n",
			want: []wantErr{
				{Line: 3, Field: "authz.role_restrictions.review", Msg: "allowed_tools is required"},
				{Line: 4, Field: "authz.role_restrictions.review.tools", Msg: `unknown field "tools"`},
				{Line: 6, Field: "authz.role_restrictions.impl.allowed_tools[1]", Msg: "must not be empty"},
				{Line: 6, Field: "authz.role_restrictions.impl.allowed_tools[2]", Msg: "must be a string, got null"},
				{Line: 6, Field: "authz.role_restrictions.impl.allowed_tools[3]", Msg: `tool pattern "fs read" is invalid`},
				{Line: 7, Field: "authz.role_restrictions.ops", Msg: "allowed_tools is required"},
				{Line: 8, Field: "authz.role_restrictions.empty", Msg: "allowed_tools is required"},
			},
		},
		{
			name: "bad authz fields",
			yaml: "authz:\n  high_risk_tools: [write, \"\"]\n  admin_needs_token: sometimes\n  role_restriction: {}\n",
			want: []wantErr{
				{Line: 2, Field: "authz.high_risk_tools[1]", Msg: "must not be empty"},
				{Line: 3, Field: "authz.admin_needs_token", Msg: "must be true or false"},
				{Line: 4, Field: "authz.role_restriction", Msg: `unknown field "role_restriction" (did you mean "role_restrictions"?)`},
			},
		},
		{
			name: "bad fallbacks",
			yaml: "servers:\n  a: {transport: stdio, command: x}\n  b: {transport: stdio, command: x, prefix: bee}\n" +
				"fallbacks:\n" +
				"  search: [a.find]\n" +
				"  a.search: [a.search, bee.search, bee.search, b.search, lookup]\n" +
				"  a.empty: []\n" +
				"  a.null:\n" +
				"  c.search: [a.find, \"\"]\n",
			want: []wantErr{
				{Line: 5, Field: "fallbacks.search", Msg: `"search" is not a namespaced tool name: write server.tool`},
				{Line: 6, Field: "fallbacks.a.search[0]", Msg: "a tool cannot fall back to itself"},
				{Line: 6, Field: "fallbacks.a.search[2]", Msg: `"bee.search" is listed twice (first at [1])`},
				{Line: 6, Field: "fallbacks.a.search[3]", Msg: `unknown server "b": no server in servers: has this name or prefix`},
				{Line: 6, Field: "fallbacks.a.search[4]", Msg: `"lookup" is not a namespaced tool name`},
				{Line: 7, Field: "fallbacks.a.empty", Msg: "needs at least one fallback tool"},
				{Line: 8, Field: "fallbacks.a.null", Msg: "needs at least one fallback tool"},
				{Line: 9, Field: "fallbacks.c.search", Msg: `unknown server "c"`},
				{Line: 9, Field: "fallbacks.c.search[1]", Msg: "must not be empty"},
			},
		},
		{
			name: "fallbacks with the __ separator",
			yaml: "servers:\n  a: {transport: stdio, command: x}\nsettings:\n  tool_name_separator: __\nfallbacks:\n  a.search: [a__find]\n  a__search: [x__find]\n",
			want: []wantErr{
				{Line: 6, Field: "fallbacks.a.search", Msg: `"a.search" is not a namespaced tool name: write server__tool`},
				{Line: 7, Field: "fallbacks.a__search[0]", Msg: `unknown server "x"`},
			},
		},
		{
			name: "fallbacks not a mapping of lists",
			yaml: "fallbacks:\n  a.search: b.search\n",
			want: []wantErr{{Line: 2, Field: "fallbacks.a.search", Msg: "must be a list, got a string"}},
		},
		{
			name: "resilience and audit settings out of range",
			yaml: "settings:\n  bulkhead_max_concurrent: 0\n  bulkhead_max_queue: -1\n  rate_limit_per_second: -0.5\n" +
				"  rate_limit_burst: -1\n  retry_budget_ratio: 1.5\n  idempotency_ttl_seconds: 0\n" +
				"  idempotency_max_entries: 0\n  audit_queue_size: 10000001\n  audit_redact_pattern: \"(token\"\n",
			want: []wantErr{
				{Line: 2, Field: "settings.bulkhead_max_concurrent", Msg: "must be between 1 and 100000 (got 0)"},
				{Line: 3, Field: "settings.bulkhead_max_queue", Msg: "must be between 0 and 1000000 (got -1)"},
				{Line: 4, Field: "settings.rate_limit_per_second", Msg: "must be at least 0"},
				{Line: 5, Field: "settings.rate_limit_burst", Msg: "must be at least 0"},
				{Line: 6, Field: "settings.retry_budget_ratio", Msg: "must be between 0 and 1"},
				{Line: 7, Field: "settings.idempotency_ttl_seconds", Msg: "greater than 0"},
				{Line: 8, Field: "settings.idempotency_max_entries", Msg: "must be between 1 and 10000000 (got 0)"},
				{Line: 9, Field: "settings.audit_queue_size", Msg: "must be between 1 and 10000000 (got 10000001)"},
				{Line: 10, Field: "settings.audit_redact_pattern", Msg: "not a valid Go regexp: error parsing regexp: missing closing ): `(token`"},
			},
		},
		{
			name: "outbound settings",
			yaml: "settings:\n  outbound_deny_private: yes please\n  outbound_allow:\n    - 10.0.0.0/8\n    - not a host\n" +
				"    - 10.0.0.0/33\n    - 2852039166\n",
			want: []wantErr{
				{Line: 2, Field: "settings.outbound_deny_private", Msg: "must be true or false"},
				// One error for the setting, naming every bad entry.
				{Line: 3, Field: "settings.outbound_allow", Msg: `entry 2: "not a host" is not an IP address, a CIDR prefix or a host name ` +
					`("*.example.com" for a whole domain); entry 3: "10.0.0.0/33" is not a valid CIDR prefix (e.g. 10.0.0.0/8, fd00::/8); ` +
					`entry 4: "2852039166" is not a standard IP address`},
			},
		},
		{
			name: "escalation settings",
			yaml: "settings:\n  escalation_webhook_url: ftp://hooks.example\n  escalation_webhook_headers: [\"Authorization\", \"X-Key=1BAD\", \"X-Ok=HOOK_KEY\"]\n" +
				"  escalation_events: [call_failed, paged]\n  approval_ttl_seconds: 0\nauthz:\n  approval: ask\n",
			want: []wantErr{
				{Line: 2, Field: "settings.escalation_webhook_url", Msg: "must be an http:// or https:// URL"},
				// One error for the setting, naming every bad entry.
				{Line: 3, Field: "settings.escalation_webhook_headers", Msg: `entry 1 ("Authorization") must be Header-Name=ENV_VAR: ` +
					`the header's value is read from the environment variable; entry 2 ("X-Key=1BAD") must be Header-Name=ENV_VAR`},
				{Line: 4, Field: "settings.escalation_events", Msg: `invalid value "paged": must be one of "call_failed" or "approval_requested"`},
				{Line: 5, Field: "settings.approval_ttl_seconds", Msg: "must be a number of seconds greater than 0"},
				{Line: 7, Field: "authz.approval", Msg: `invalid value "ask": must be one of "token" or "request"`},
			},
		},
		{
			name: "escalation webhook with credentials",
			yaml: "settings:\n  escalation_webhook_url: https://user:pw@hooks.example/x\n",
			want: []wantErr{{Line: 2, Field: "settings.escalation_webhook_url", Msg: "must not carry credentials"}},
		},
		{
			name: "outbound_allow not a list of strings",
			yaml: "settings:\n  outbound_allow: 10.0.0.0/8\n",
			want: []wantErr{{Line: 2, Field: "settings.outbound_allow", Msg: "must be a list, got a string"}},
		},
		{
			name: "outbound_allow item not a string",
			yaml: "settings:\n  outbound_allow:\n    - {cidr: 10.0.0.0/8}\n",
			want: []wantErr{{Line: 3, Field: "settings.outbound_allow[0]", Msg: "must be a string"}},
		},
		{
			name: "outbound env overrides",
			env:  map[string]string{"SWITCHBOARD_OUTBOUND_ALLOW": "10.0.0.0/8, *.corp.example,bad host", "SWITCHBOARD_OUTBOUND_DENY_LOOPBACK": "sometimes"},
			want: []wantErr{
				{File: EnvironmentFile, Field: "SWITCHBOARD_OUTBOUND_DENY_LOOPBACK", Msg: `invalid value "sometimes": must be true or false`},
				{File: EnvironmentFile, Field: "SWITCHBOARD_OUTBOUND_ALLOW", Msg: `entry 3: "bad host"`},
			},
		},
		{
			name: "empty audit redact pattern",
			yaml: "settings:\n  audit_redact_pattern: \"\"\n",
			want: []wantErr{{Line: 2, Field: "settings.audit_redact_pattern", Msg: "must not be empty"}},
		},
		{
			name: "resilience and audit env overrides",
			env: map[string]string{
				"SWITCHBOARD_BULKHEAD_MAX_CONCURRENT": "100001",
				"SWITCHBOARD_RATE_LIMIT_PER_SECOND":   "fast",
				"SWITCHBOARD_RETRY_BUDGET_RATIO":      "-0.1",
				"SWITCHBOARD_IDEMPOTENCY_TTL_SECONDS": "86401",
				"SWITCHBOARD_AUDIT_REDACT_PATTERN":    "[a-",
			},
			want: []wantErr{
				{File: EnvironmentFile, Field: "SWITCHBOARD_RATE_LIMIT_PER_SECOND", Msg: `invalid value "fast": must be a number`},
				{File: EnvironmentFile, Field: "SWITCHBOARD_IDEMPOTENCY_TTL_SECONDS", Msg: "at most 86400"},
				{File: EnvironmentFile, Field: "SWITCHBOARD_BULKHEAD_MAX_CONCURRENT", Msg: "must be between 1 and 100000"},
				{File: EnvironmentFile, Field: "SWITCHBOARD_RETRY_BUDGET_RATIO", Msg: "must be between 0 and 1"},
				{File: EnvironmentFile, Field: "SWITCHBOARD_AUDIT_REDACT_PATTERN", Msg: "missing closing ]"},
			},
		},
		{
			name: "auth env overrides",
			yaml: "auth:\n  mode: keys\n",
			env:  map[string]string{"SWITCHBOARD_AUTH_MODE": "sso"},
			want: []wantErr{{File: EnvironmentFile, Field: "SWITCHBOARD_AUTH_MODE", Msg: `unknown mode "sso"`}},
		},
		{
			name: "jwt mode from env without a key",
			env:  map[string]string{"SWITCHBOARD_AUTH_MODE": "jwt"},
			want: []wantErr{{File: EnvironmentFile, Field: "SWITCHBOARD_AUTH_MODE", Msg: "mode jwt needs a jwt: section"}},
		},
		{
			name: "jwt env vars without jwt mode",
			yaml: "auth:\n  mode: keys\n",
			env:  map[string]string{"SWITCHBOARD_JWKS_URL": "https://idp.example/jwks.json"},
			want: []wantErr{{File: EnvironmentFile, Field: "SWITCHBOARD_JWKS_URL", Msg: `only used with auth mode jwt (the mode is "keys")`}},
		},
		{
			name: "jwt env var without an auth section",
			env:  map[string]string{"SWITCHBOARD_JWT_SECRET": "k"},
			want: []wantErr{{File: EnvironmentFile, Field: "SWITCHBOARD_JWT_SECRET", Msg: "there is no auth: section"}},
		},
		{
			name: "both jwt env vars, and a bad one",
			yaml: "auth:\n  mode: jwt\n",
			env:  map[string]string{"SWITCHBOARD_JWT_SECRET": "k", "SWITCHBOARD_JWKS_URL": "https://idp.example/jwks.json"},
			want: []wantErr{{File: EnvironmentFile, Field: "SWITCHBOARD_JWKS_URL", Msg: "SWITCHBOARD_JWT_SECRET is set too: set only one of them"}},
		},
		{
			name: "bad jwks url from env",
			env:  map[string]string{"SWITCHBOARD_AUTH_MODE": "jwt", "SWITCHBOARD_JWKS_URL": "idp.example/jwks.json"},
			want: []wantErr{{File: EnvironmentFile, Field: "SWITCHBOARD_JWKS_URL", Msg: "it has no scheme"}},
		},
		{
			name: "search unknown key with suggestion",
			yaml: "search:\n  embedings: {}\n",
			want: []wantErr{{Line: 2, Field: "search.embedings", Msg: `unknown field "embedings" (did you mean "embeddings"?)`}},
		},
		{
			name: "embeddings unknown key with suggestion",
			yaml: "search:\n  embeddings:\n    url: https://e/v1\n    model: m\n    batchsize: 8\n",
			want: []wantErr{{Line: 5, Field: "search.embeddings.batchsize", Msg: `(did you mean "batch_size"?)`}},
		},
		{
			name: "embeddings without url and model",
			yaml: "search:\n  embeddings:\n    batch_size: 8\n",
			want: []wantErr{
				{Line: 2, Field: "search.embeddings.url", Msg: "url is required"},
				{Line: 2, Field: "search.embeddings.model", Msg: "model is required"},
			},
		},
		{
			name: "embeddings empty mapping",
			yaml: "search:\n  embeddings: {}\n",
			want: []wantErr{
				{Line: 2, Field: "search.embeddings.url", Msg: "url is required"},
				{Line: 2, Field: "search.embeddings.model", Msg: "model is required"},
			},
		},
		{
			name: "embeddings url not http",
			yaml: "search:\n  embeddings:\n    url: ftp://e/v1\n    model: m\n",
			want: []wantErr{{Line: 3, Field: "search.embeddings.url", Msg: `scheme "ftp" is not supported`}},
		},
		{
			name: "embeddings batch size and timeout out of range",
			yaml: "search:\n  embeddings:\n    url: https://e\n    model: m\n    batch_size: 0\n    timeout_seconds: 301\n",
			want: []wantErr{
				{Line: 5, Field: "search.embeddings.batch_size", Msg: "must be between 1 and 2048 (got 0)"},
				{Line: 6, Field: "search.embeddings.timeout_seconds", Msg: "must be between 1 and 300 (got 301)"},
			},
		},
		{
			name: "embeddings timeout not an integer",
			yaml: "search:\n  embeddings: {url: \"https://e\", model: m, timeout_seconds: 1.5}\n",
			want: []wantErr{{Line: 2, Field: "search.embeddings.timeout_seconds", Msg: "must be an integer"}},
		},
		{
			name: "api_key_env holding a literal key",
			yaml: "search:\n  embeddings:\n    url: https://e\n    model: m\n    api_key_env: sk-proj-abc123\n",
			want: []wantErr{{Line: 5, Field: "search.embeddings.api_key_env", Msg: "put the key in an environment variable and name the variable here"}},
		},
		{
			name: "api_key_env not a variable name",
			yaml: "skills:\n  classifier:\n    mode: llm\n    url: https://e\n    model: m\n    api_key_env: MY-KEY\n",
			want: []wantErr{{Line: 6, Field: "skills.classifier.api_key_env", Msg: "not a valid environment variable name"}},
		},
		{
			name: "classifier unknown mode",
			yaml: "skills:\n  classifier:\n    mode: gpt\n",
			want: []wantErr{{Line: 3, Field: "skills.classifier.mode", Msg: `unknown mode "gpt": must be "offline" (the default) or "llm"`}},
		},
		{
			name: "llm classifier without url and model",
			yaml: "skills:\n  classifier:\n    mode: llm\n",
			want: []wantErr{
				{Line: 2, Field: "skills.classifier.url", Msg: "url is required"},
				{Line: 2, Field: "skills.classifier.model", Msg: "model is required"},
			},
		},
		{
			name: "llm classifier url without scheme",
			yaml: "skills:\n  classifier: {mode: llm, url: \"localhost:11434/v1\", model: m}\n",
			want: []wantErr{{Line: 2, Field: "skills.classifier.url", Msg: "must be an absolute http:// or https:// URL"}},
		},
		{
			name: "url and model with the offline classifier",
			yaml: "skills:\n  classifier:\n    url: https://e\n    model: m\n    api_key_env: K\n",
			want: []wantErr{
				{Line: 3, Field: "skills.classifier.url", Msg: `only used with mode: llm (the mode is "offline")`},
				{Line: 4, Field: "skills.classifier.model", Msg: "only used with mode: llm"},
				{Line: 5, Field: "skills.classifier.api_key_env", Msg: "only used with mode: llm"},
			},
		},
		{
			name: "classifier numbers out of range",
			yaml: "skills:\n  classifier:\n    batch_size: 201\n    concurrency: 0\n    timeout_seconds: 601\n    concurency: 2\n",
			want: []wantErr{
				{Line: 3, Field: "skills.classifier.batch_size", Msg: "must be between 1 and 200 (got 201)"},
				{Line: 4, Field: "skills.classifier.concurrency", Msg: "must be between 1 and 64 (got 0)"},
				{Line: 5, Field: "skills.classifier.timeout_seconds", Msg: "must be between 1 and 600 (got 601)"},
				{Line: 6, Field: "skills.classifier.concurency", Msg: `(did you mean "concurrency"?)`},
			},
		},
		{
			name: "taxonomy duplicate and badly spelled ids",
			yaml: "skills:\n  taxonomy:\n    - {id: files, name: Files, description: d}\n    - {id: files, name: F, description: d}\n    - {id: File-System, name: F, description: d}\n",
			want: []wantErr{
				{Line: 4, Field: "skills.taxonomy[1].id", Msg: `duplicate skill id "files" (first at skills.taxonomy[0])`},
				{Line: 5, Field: "skills.taxonomy[2].id", Msg: `invalid skill id "File-System": use snake_case`},
			},
		},
		{
			name: "taxonomy skill without id, name and description",
			yaml: "skills:\n  taxonomy:\n    - examples: [x]\n      name: \" \"\n",
			want: []wantErr{
				{Line: 3, Field: "skills.taxonomy[0].id", Msg: "id is required"},
				{Line: 3, Field: "skills.taxonomy[0].name", Msg: "name is required"},
				{Line: 3, Field: "skills.taxonomy[0].description", Msg: "description is required"},
			},
		},
		{
			name: "taxonomy empty examples and unknown key",
			yaml: "skills:\n  taxonomy:\n    - id: db\n      name: Database\n      description: SQL\n      examples: [\"\", query rows, \"  \"]\n      keywords: [sql, ~]\n      example: [x]\n",
			want: []wantErr{
				{Line: 6, Field: "skills.taxonomy[0].examples[0]", Msg: "must not be empty"},
				{Line: 6, Field: "skills.taxonomy[0].examples[2]", Msg: "must not be blank"},
				{Line: 7, Field: "skills.taxonomy[0].keywords[1]", Msg: "must be a string, got null"},
				{Line: 8, Field: "skills.taxonomy[0].example", Msg: `unknown field "example" (did you mean "examples"?)`},
			},
		},
		{
			name: "taxonomy not a list",
			yaml: "skills:\n  taxonomy: {id: x}\n",
			want: []wantErr{{Line: 2, Field: "skills.taxonomy", Msg: "must be a list, got a mapping"}},
		},
		{
			name: "tool_exposure unknown",
			yaml: "front:\n  tool_exposure: some\n  tool_exposur: all\n",
			want: []wantErr{
				{Line: 2, Field: "front.tool_exposure", Msg: `invalid value "some": must be one of "all" or "search"`},
				{Line: 3, Field: "front.tool_exposur", Msg: `(did you mean "tool_exposure"?)`},
			},
		},
		{
			name: "require_tls_upstreams refuses plain http to a remote host",
			yaml: "settings:\n  require_tls_upstreams: true\nservers:\n  remote:\n    transport: http\n    url: http://10.0.0.5:8080/mcp\n  local:\n    transport: http\n    url: http://127.0.0.1:8080/mcp\n",
			want: []wantErr{{Line: 6, Field: "servers.remote.url", Msg: InsecureTransportRefused}},
		},
		{
			name: "meta_tool_prefix not a name",
			yaml: "front:\n  meta_tool_prefix: switch.board\n",
			want: []wantErr{{Line: 2, Field: "front.meta_tool_prefix", Msg: `"switch.board" is not a name: use lower-case letters, digits, - and _, without a separator (. or __)`}},
		},
		{
			name: "session caps out of bounds",
			yaml: "front:\n  max_sessions: 0\n  max_sessions_per_identity: 1000001\n  max_session: 5\n",
			want: []wantErr{
				{Line: 2, Field: "front.max_sessions", Msg: "must be between 1 and 1000000 (got 0)"},
				{Line: 3, Field: "front.max_sessions_per_identity", Msg: "must be between 1 and 1000000 (got 1000001)"},
				{Line: 4, Field: "front.max_session", Msg: `(did you mean "max_sessions"?)`},
			},
		},
		{
			name: "session cap not a number",
			yaml: "front:\n  max_sessions_per_identity: lots\n",
			want: []wantErr{{Line: 2, Field: "front.max_sessions_per_identity", Msg: "must be a number, got a string"}},
		},
		{
			name: "tool_exposure unknown from env",
			yaml: "front:\n  tool_exposure: all\n",
			env:  map[string]string{"SWITCHBOARD_TOOL_EXPOSURE": "none"},
			want: []wantErr{{File: EnvironmentFile, Field: "SWITCHBOARD_TOOL_EXPOSURE", Msg: `invalid value "none"`}},
		},
		{
			name: "unknown key in skills with suggestion",
			yaml: "skills:\n  clasifier: {}\n",
			want: []wantErr{{Line: 2, Field: "skills.clasifier", Msg: `unknown field "clasifier" (did you mean "classifier"?)`}},
		},
		{
			name: "front misspelled at the top level",
			yaml: "fron:\n  tool_exposure: search\n",
			want: []wantErr{{Line: 1, Field: "fron", Msg: `(did you mean "front"?)`}},
		},
		{
			name: "every problem reported at once, in file order",
			yaml: "servers:\n  a.b:\n    transport: stdio\n    command: x\n  c:\n    transport: http\nsettings:\n  log_level: loud\nextra: 1\n",
			want: []wantErr{
				{Line: 2, Field: "servers.a.b", Msg: "contains a dot"},
				{Line: 5, Field: "servers.c.url", Msg: "url is required"},
				{Line: 8, Field: "settings.log_level", Msg: "must be one of"},
				{Line: 9, Field: "extra", Msg: "unknown top-level key"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(file, []byte(tt.yaml), envFunc(tt.env))
			if err == nil {
				t.Fatalf("Parse succeeded, want errors; config: %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("Parse returned a config along with errors")
			}
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want *Errors: %v", err, err)
			}
			type loc struct {
				File  string
				Line  int
				Field string
			}
			var got, want []loc
			for _, e := range *errs {
				got = append(got, loc{e.File, e.Line, e.Field})
			}
			for _, w := range tt.want {
				if w.File == "" {
					w.File = file
				}
				want = append(want, loc{w.File, w.Line, w.Field})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("error locations mismatch (-want +got):\n%s\nerrors:\n%v", diff, err)
			}
			for i, w := range tt.want {
				e := (*errs)[i]
				if !strings.Contains(e.Msg, w.Msg) {
					t.Errorf("error %d message = %q, want it to contain %q", i, e.Msg, w.Msg)
				}
				if e.Line > 0 {
					prefix := fmt.Sprintf("%s:%d:%d: ", file, e.Line, e.Column)
					if e.Column < 1 || !strings.HasPrefix(e.Error(), prefix) {
						t.Errorf("error %d = %q, want prefix %q", i, e.Error(), prefix)
					}
				}
				if !strings.Contains(err.Error(), e.Error()) {
					t.Errorf("joined error does not contain %q", e.Error())
				}
			}
		})
	}
}

func TestParseValid(t *testing.T) {
	const yaml = `# a file using most features
servers:
  github:
    transport: http
    description: GitHub tools
    url: https://api.example.com/mcp/
    bearer_token_env_var: GH_TOKEN
    headers:
      X-Api-Key: "key-${API_KEY}-$$-$x"
    headers_from_env:
      X-Tenant: TENANT
    health_check_url: https://api.example.com/health
    default_access: deny
    prefix: gh
  files: &stdio
    transport: stdio
    command: npx
    args: ["-y", server-filesystem, 8080]
    env:
      ROOT: ${HOME}/data
    env_passthrough: [PATH]
    cwd: /srv
    auto_start: true
  files-2:
    <<: *stdio
    prefix: ""
    auto_start: false
settings:
  connect_timeout_seconds: 1.5
  tool_name_separator: __
`
	env := map[string]string{"GH_TOKEN": "ghtok", "API_KEY": "k", "TENANT": "acme", "HOME": "/home/u", "PATH": "/bin"}
	cfg, err := Parse("s.yaml", []byte(yaml), envFunc(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	yes, no, empty, gh := true, false, "", "gh"
	files := &Server{
		Name: "files", Transport: "stdio", AutoStart: &yes,
		Command: "npx", Args: []string{"-y", "server-filesystem", "8080"},
		Env: map[string]string{"ROOT": "/home/u/data"}, EnvPassthrough: []string{"PATH"}, Cwd: "/srv",
		DefaultAccess: "allow",
	}
	files2 := files.Clone()
	files2.Name, files2.Prefix, files2.AutoStart = "files-2", &empty, &no
	want := []*Server{
		files,
		files2,
		{
			Name: "github", Transport: "http", Description: "GitHub tools", Prefix: &gh,
			URL:               "https://api.example.com/mcp/",
			Headers:           map[string]string{"X-Api-Key": "key-k-$-$x"},
			HeadersFromEnv:    map[string]string{"X-Tenant": "TENANT"},
			BearerTokenEnvVar: "GH_TOKEN",
			HealthCheckURL:    "https://api.example.com/health",
			DefaultAccess:     "deny",
			resolved:          map[string]string{"X-Tenant": "acme", "Authorization": "Bearer ghtok"},
		},
	}
	opts := cmp.Options{cmp.AllowUnexported(Server{}), cmpopts.IgnoreFields(Server{}, "Pos")}
	if diff := cmp.Diff(want, cfg.Servers, opts); diff != "" {
		t.Errorf("servers mismatch (-want +got):\n%s", diff)
	}
	wantHeaders := map[string]string{"X-Api-Key": "key-k-$-$x", "X-Tenant": "acme", "Authorization": "Bearer ghtok"}
	if diff := cmp.Diff(wantHeaders, cfg.Server("github").ResolvedHeaders()); diff != "" {
		t.Errorf("ResolvedHeaders mismatch (-want +got):\n%s", diff)
	}
	wantPos := map[string]Pos{"": {3, 3}, "url": {6, 5}, "headers": {8, 5}, "headers.X-Api-Key": {9, 7}}
	for k, p := range wantPos {
		if got := cfg.Server("github").Pos[k]; got != p {
			t.Errorf("Pos[%q] = %v, want %v", k, got, p)
		}
	}
	if got, want := cfg.Server("files").Pos["args[2]"], (Pos{18, 37}); got != want {
		t.Errorf(`Pos["args[2]"] = %v, want %v`, got, want)
	}
	if got, want := cfg.Settings.ConnectTimeout, 1500*time.Millisecond; got != want {
		t.Errorf("ConnectTimeout = %v, want %v", got, want)
	}
	if cfg.File != "s.yaml" {
		t.Errorf("File = %q, want s.yaml", cfg.File)
	}
	if s := cfg.Server("nope"); s != nil {
		t.Errorf(`Server("nope") = %v, want nil`, s)
	}
}

func TestParseLifecycle(t *testing.T) {
	const yaml = `servers:
  files:
    transport: stdio
    command: npx
    package: "@modelcontextprotocol/server-filesystem"
    restart_on_failure: false
    max_restart_attempts: 2
    startup_timeout_seconds: 60
    shutdown_timeout_seconds: 1.5
    start_on_demand: true
    idle_timeout_seconds: 600
    pin_definitions: false
    health_check:
      method: tool_call
      tool: list_allowed_directories
      args: {path: /srv, depth: 2, opts: {all: true, ratio: 0.5}, tags: [a, ~]}
      interval_seconds: 10
      timeout_seconds: 2.5
    max_result_bytes: 1048576
  remote:
    transport: http
    url: https://e/mcp
    health_check_url: https://e/health
    health_check: {}
  plain:
    transport: stdio
    command: x
settings:
  log_directory: logs/mcp_servers
  startup_timeout_seconds: 20
  degraded_error_rate: 0.25
`
	env := map[string]string{
		"SWITCHBOARD_RESTART_BACKOFF_MAX_MS":       "1000",
		"SWITCHBOARD_RESTART_ON_FAILURE":           "off",
		"SWITCHBOARD_HEALTH_CHECK_TIMEOUT_SECONDS": "1",
		"SWITCHBOARD_MAX_RESULT_BYTES":             "33554432",
	}
	cfg, err := Parse("s.yaml", []byte(yaml), envFunc(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	no, two := false, 2
	want := &Server{
		Name: "files", Transport: "stdio", Command: "npx", DefaultAccess: "allow",
		Package:          "@modelcontextprotocol/server-filesystem",
		RestartOnFailure: &no, MaxRestartAttempts: &two,
		StartupTimeout: Seconds(time.Minute), ShutdownTimeout: Seconds(1500 * time.Millisecond),
		StartOnDemand: true, IdleTimeout: Seconds(10 * time.Minute), PinDefinitions: &no, MaxResultBytes: 1 << 20,
		HealthCheck: &HealthCheck{
			Method: "tool_call", Tool: "list_allowed_directories",
			Args:     map[string]any{"path": "/srv", "depth": int64(2), "opts": map[string]any{"all": true, "ratio": 0.5}, "tags": []any{"a", nil}},
			Interval: Seconds(10 * time.Second), Timeout: Seconds(2500 * time.Millisecond),
		},
	}
	opts := cmp.Options{cmp.AllowUnexported(Server{}), cmpopts.IgnoreFields(Server{}, "Pos")}
	if diff := cmp.Diff(want, cfg.Server("files"), opts); diff != "" {
		t.Errorf("files mismatch (-want +got):\n%s", diff)
	}
	if got := cfg.Server("files").Pos["health_check.tool"]; got != (Pos{15, 7}) {
		t.Errorf(`Pos["health_check.tool"] = %v, want {15 7}`, got)
	}
	if h := cfg.Server("remote").HealthCheck; h != nil {
		t.Errorf("empty health_check decoded as %+v, want nil", h)
	}

	methods := map[string]string{}
	for _, s := range cfg.Servers {
		methods[s.Name] = s.HealthMethod()
	}
	if diff := cmp.Diff(map[string]string{"files": HealthToolCall, "remote": HealthHTTP, "plain": HealthPing}, methods); diff != "" {
		t.Errorf("HealthMethod (-want +got):\n%s", diff)
	}
	if got := cfg.Server("plain").StartupTimeout.Or(cfg.Settings.StartupTimeout); got != 20*time.Second {
		t.Errorf("plain startup timeout = %v, want the setting 20s", got)
	}
	if got := cfg.Server("files").StartupTimeout.Or(cfg.Settings.StartupTimeout); got != time.Minute {
		t.Errorf("files startup timeout = %v, want its own 1m", got)
	}

	wantSettings := DefaultSettings()
	wantSettings.LogDirectory = "logs/mcp_servers"
	wantSettings.StartupTimeout = 20 * time.Second
	wantSettings.ConnectTimeout = 20 * time.Second // follows StartupTimeout
	wantSettings.DegradedErrorRate = 0.25
	wantSettings.RestartBackoffMaxMS = 1000
	wantSettings.RestartOnFailure = false
	wantSettings.HealthCheckTimeout = time.Second
	wantSettings.MaxResultBytes = 32 << 20
	if diff := cmp.Diff(wantSettings, cfg.Settings); diff != "" {
		t.Errorf("settings mismatch (-want +got):\n%s", diff)
	}
}

func TestStartupTimeoutAlias(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want time.Duration
	}{
		{name: "default", want: 10 * time.Second},
		{name: "new name", yaml: "settings: {startup_timeout_seconds: 3}", want: 3 * time.Second},
		{name: "old name", yaml: "settings: {connect_timeout_seconds: 4}", want: 4 * time.Second},
		{name: "old name in env beats new in file", yaml: "settings: {startup_timeout_seconds: 3}",
			env: map[string]string{"SWITCHBOARD_CONNECT_TIMEOUT_SECONDS": "6"}, want: 6 * time.Second},
		{name: "new name in env beats old in file", yaml: "settings: {connect_timeout_seconds: 4}",
			env: map[string]string{"SWITCHBOARD_STARTUP_TIMEOUT_SECONDS": "7"}, want: 7 * time.Second},
		{name: "new name in file beats nothing in env", yaml: "settings: {startup_timeout_seconds: 3}",
			env: map[string]string{"SWITCHBOARD_CONNECT_TIMEOUT_SECONDS": ""}, want: 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("s.yaml", []byte(tt.yaml), envFunc(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			got := []time.Duration{cfg.Settings.StartupTimeout, cfg.Settings.ConnectTimeout}
			if diff := cmp.Diff([]time.Duration{tt.want, tt.want}, got); diff != "" {
				t.Errorf("StartupTimeout, ConnectTimeout (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrecedence(t *testing.T) {
	const yaml = `settings:
  listen: 0.0.0.0:9000
  log_level: debug
  retry_max_attempts: 7
  retry_factor: 3
  shutdown_timeout_seconds: 2
  outbound_deny_private: true
  outbound_allow: [10.1.0.0/16]
`
	env := map[string]string{
		"SWITCHBOARD_LISTEN":                   "127.0.0.1:7000", // overrides the file
		"MCP_RETRY_BASE_MS":                    "250",            // overrides a default
		"SWITCHBOARD_AUTO_START_DEFAULT":       "yes",
		"SWITCHBOARD_CONNECT_TIMEOUT_SECONDS":  "1.5",
		"SWITCHBOARD_SHUTDOWN_TIMEOUT_SECONDS": "", // empty = unset: the file wins
		"MCP_CIRCUIT_COOLDOWN":                 "10",
		"SWITCHBOARD_STORE":                    "postgres://u:p@db/switchboard",
		"SWITCHBOARD_OUTBOUND_ALLOW":           " 169.254.169.254 ,, *.corp.example", // overrides the file's list
		"SWITCHBOARD_OUTBOUND_DENY_LOOPBACK":   "on",
	}
	cfg, err := Parse("s.yaml", []byte(yaml), envFunc(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := DefaultSettings()
	want.Listen = "127.0.0.1:7000"
	want.LogLevel = "debug"
	want.RetryMaxAttempts = 7
	want.RetryFactor = 3
	want.ShutdownTimeout = 2 * time.Second
	want.RetryBaseMS = 250
	want.AutoStartDefault = true
	want.ConnectTimeout = 1500 * time.Millisecond
	want.StartupTimeout = 1500 * time.Millisecond // from its old name
	want.CircuitCooldownSeconds = 10
	want.Store = "postgres://u:p@db/switchboard"
	want.OutboundDenyPrivate = true
	want.OutboundDenyLoopback = true
	want.OutboundAllow = []string{"169.254.169.254", "*.corp.example"}
	if diff := cmp.Diff(want, cfg.Settings); diff != "" {
		t.Errorf("settings mismatch (-want +got):\n%s", diff)
	}

	// With no file and no environment, every setting is its default.
	cfg, err = Parse("empty.yaml", nil, envFunc(nil))
	if err != nil {
		t.Fatalf("Parse(empty): %v", err)
	}
	if diff := cmp.Diff(DefaultSettings(), cfg.Settings); diff != "" {
		t.Errorf("empty file settings mismatch (-want +got):\n%s", diff)
	}
}

func TestSettingDefsCoverEveryField(t *testing.T) {
	// Each Settings field must be reachable from exactly one YAML key, or it could
	// never be configured.
	var s Settings
	seen := map[any]string{}
	for _, def := range settingDefs {
		p := fmt.Sprintf("%p", def.ptr(&s))
		if other, dup := seen[p]; dup {
			t.Errorf("settings %s and %s share a field", def.key, other)
		}
		seen[p] = def.key
	}
	if got, want := len(seen), reflect.TypeFor[Settings]().NumField(); got != want {
		t.Errorf("%d settings have a YAML key, want %d", got, want)
	}
	if errs := validateSettings("", "settings", &Settings{}, nil); len(errs) == 0 {
		t.Errorf("zero Settings validated without errors")
	}
	d := DefaultSettings()
	if errs := validateSettings("", "settings", &d, nil); len(errs) != 0 {
		t.Errorf("DefaultSettings is invalid: %v", errs)
	}
}

func TestSettingEnvVars(t *testing.T) {
	vars := SettingEnvVars()
	for key, env := range map[string]string{
		"listen":                 "SWITCHBOARD_LISTEN",
		"retry_max_attempts":     "MCP_RETRY_MAX_ATTEMPTS",
		"auth_cache_ttl_minutes": "MCP_AUTH_CACHE_TTL",
	} {
		if got := vars[key]; got != env {
			t.Errorf("SettingEnvVars()[%q] = %q, want %q", key, got, env)
		}
	}
	if got, want := len(vars), len(settingDefs); got != want {
		t.Errorf("SettingEnvVars() has %d entries, want %d", got, want)
	}
}

func TestSecretsNeverLeak(t *testing.T) {
	// Every secret below contains mark, which must appear in no output.
	const mark = "s3cr3t"
	const canary = "CANARY-" + mark + "-value"
	env := map[string]string{"TOKEN": canary, "KEY": canary, "WITH_NEWLINE": canary + "\n"}
	broken := []string{
		// header values with bad references, a line break, and a wrong type
		"servers:\n  a:\n    transport: http\n    url: https://example.com\n    headers:\n      A: \"" + canary + "${NOPE}\"\n      B: \"" + canary + "${\"\n      C: \"" + canary + "${bad name}\"\n      D: \"" + canary + "\\r\\n\"\n      E: {x: " + canary + "}\n      F: [" + canary + "]\n",
		// env values in the wrong place and with bad references
		"servers:\n  a:\n    transport: http\n    url: https://example.com\n    env:\n      X: " + canary + "\n      Y: \"${NOPE}" + canary + "\"\n",
		// headers on a stdio server
		"servers:\n  a:\n    transport: stdio\n    command: x\n    headers:\n      Authorization: Bearer " + canary + "\n",
		// a resolved variable with a line break
		"servers:\n  a:\n    transport: http\n    url: https://example.com\n    headers_from_env: {X-A: WITH_NEWLINE}\n    bearer_token_env_var: WITH_NEWLINE\n",
		// a URL with credentials
		"servers:\n  a:\n    transport: http\n    url: ftp://user:" + canary + "@example.com/\n",
		"servers:\n  a:\n    transport: http\n    url: \"https://user:" + canary + "@exa mple.com/\"\n",
		// syntax errors on a line holding a secret
		"servers:\n  a:\n    headers: {A: \"" + canary + "\n",
		"servers:\n  a:\n    headers:\n      A: " + canary + "\n     B: x\n",
		// a token written where the name of its variable belongs
		"servers:\n  a:\n    transport: http\n    url: https://example.com\n    bearer_token_env_var: ghp_" + mark + "_value\n",
		"servers:\n  a:\n    transport: http\n    url: https://example.com\n    bearer_token_env_var: " + canary + "\n    headers_from_env: {X: \"sk-" + canary + "\"}\n",
		"servers:\n  a:\n    transport: http\n    url: https://example.com\n    headers:\n      X: \"${sk_" + mark + "}\"\n",
		// a secret store DSN failing validation
		"settings:\n  store: \"\"\n",
	}
	for i, src := range broken {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(src), envFunc(env))
			if err == nil {
				t.Fatalf("Parse succeeded, want an error")
			}
			if strings.Contains(err.Error(), mark) {
				t.Errorf("error leaks the secret:\n%v", err)
			}
		})
	}

	t.Run("Redacted", func(t *testing.T) {
		src := "servers:\n  a:\n    transport: http\n    url: https://user:" + canary + "@example.com/mcp\n    headers:\n      X-Key: " + canary + "\n    headers_from_env: {X-Other: KEY}\n    bearer_token_env_var: TOKEN\n  b:\n    transport: stdio\n    command: x\n    env:\n      SECRET: ${TOKEN}\n"
		cfg, err := Parse("s.yaml", []byte(src), envFunc(env))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		for _, s := range cfg.Servers {
			r := s.Redacted()
			js, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			for _, out := range []string{string(js), fmt.Sprintf("%+v", *r), fmt.Sprint(r.ResolvedHeaders())} {
				if strings.Contains(out, mark) {
					t.Errorf("Redacted(%s) leaks the secret: %s", s.Name, out)
				}
			}
		}
		a := cfg.Server("a").Redacted()
		wantHeaders := map[string]string{"X-Key": "***", "X-Other": "***", "Authorization": "***"}
		if diff := cmp.Diff(wantHeaders, a.ResolvedHeaders()); diff != "" {
			t.Errorf("redacted headers mismatch (-want +got):\n%s", diff)
		}
		if want := "https://user:xxxxx@example.com/mcp"; a.URL != want {
			t.Errorf("redacted URL = %q, want %q", a.URL, want)
		}
		if got := cfg.Server("b").Redacted().Env["SECRET"]; got != "***" {
			t.Errorf("redacted env value = %q, want ***", got)
		}
		// The original keeps its secrets: Redacted copies.
		if got := cfg.Server("a").ResolvedHeaders()["X-Key"]; got != canary {
			t.Errorf("original header = %q after Redacted, want the secret", got)
		}
		if got := cfg.Server("b").Env["SECRET"]; got != canary {
			t.Errorf("original env = %q after Redacted, want the secret", got)
		}
	})
}

func TestDefault(t *testing.T) {
	yes := true
	wantDemo := &Server{
		Name:          "demo",
		Transport:     "stdio",
		Description:   "Built-in demo MCP server",
		Command:       SelfCommand,
		Args:          []string{"demo-server"},
		AutoStart:     &yes,
		DefaultAccess: "allow",
	}
	opts := cmp.Options{cmp.AllowUnexported(Server{}), cmpopts.IgnoreFields(Server{}, "Pos")}

	cfg := Default(envFunc(nil))
	if diff := cmp.Diff([]*Server{wantDemo}, cfg.Servers, opts); diff != "" {
		t.Errorf("Default servers mismatch (-want +got):\n%s", diff)
	}
	if cfg.File != "" {
		t.Errorf("Default File = %q, want empty", cfg.File)
	}
	if diff := cmp.Diff(DefaultSettings(), cfg.Settings); diff != "" {
		t.Errorf("Default settings mismatch (-want +got):\n%s", diff)
	}

	// Valid overrides apply; invalid ones are ignored by Default and reported by
	// LoadDefault.
	env := envFunc(map[string]string{"SWITCHBOARD_LISTEN": "127.0.0.1:1234", "MCP_RETRY_MAX_ATTEMPTS": "abc", "SWITCHBOARD_LOG_LEVEL": "loud"})
	cfg = Default(env)
	want := DefaultSettings()
	want.Listen = "127.0.0.1:1234"
	if diff := cmp.Diff(want, cfg.Settings); diff != "" {
		t.Errorf("Default with env settings mismatch (-want +got):\n%s", diff)
	}
	_, err := LoadDefault(env)
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("LoadDefault error = %v, want Errors", err)
	}
	var fields []string
	for _, e := range errs {
		fields = append(fields, e.File+":"+e.Field)
	}
	if diff := cmp.Diff([]string{"environment:MCP_RETRY_MAX_ATTEMPTS", "environment:SWITCHBOARD_LOG_LEVEL"}, fields); diff != "" {
		t.Errorf("LoadDefault errors mismatch (-want +got):\n%s", diff)
	}
	cfg, err = LoadDefault(envFunc(nil))
	if err != nil {
		t.Fatalf("LoadDefault: %v", err)
	}
	if diff := cmp.Diff([]*Server{wantDemo}, cfg.Servers, opts); diff != "" {
		t.Errorf("LoadDefault servers mismatch (-want +got):\n%s", diff)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(path, []byte("servers:\n  a:\n    transport: stdio\n    command: x\n    bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path, envFunc(nil))
	if want := path + ":5:5: servers.a.bogus: unknown field \"bogus\""; err == nil || err.Error() != want {
		t.Errorf("Load error = %v, want %q", err, want)
	}

	if err := os.WriteFile(path, []byte("servers:\n  a:\n    transport: stdio\n    command: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, nil) // nil getenv = os.Getenv
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.File != path || len(cfg.Servers) != 1 || cfg.Servers[0].Name != "a" {
		t.Errorf("Load = %+v, want one server a from %s", cfg, path)
	}

	_, err = Load(filepath.Join(dir, "missing.yaml"), nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) error = %v, want fs.ErrNotExist", err)
	}
}

func TestServersSorted(t *testing.T) {
	src := "servers:\n  zeta: {transport: stdio, command: z}\n  alpha: {transport: stdio, command: a}\n  mid: {transport: stdio, command: m}\n"
	cfg, err := Parse("s.yaml", []byte(src), envFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range cfg.Servers {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"alpha", "mid", "zeta"}, names); diff != "" {
		t.Errorf("server order mismatch (-want +got):\n%s", diff)
	}
	if got := cfg.Server("mid"); got == nil || got.Command != "m" {
		t.Errorf(`Server("mid") = %v, want the mid server`, got)
	}
}

func TestValidateServer(t *testing.T) {
	tests := []struct {
		name   string
		server *Server
		want   []string // Field: Msg substring
	}{
		{
			name:   "valid stdio",
			server: &Server{Name: "a", Transport: "stdio", Command: "x"},
		},
		{
			name:   "valid http",
			server: &Server{Name: "a-b_1", Transport: "http", URL: "http://localhost:3000/mcp", DefaultAccess: "deny"},
		},
		{
			name:   "empty",
			server: &Server{},
			want:   []string{"servers.: server name is required", "servers..transport: transport is required"},
		},
		{
			name:   "dot in name, sse without url",
			server: &Server{Name: "a.b", Transport: "sse"},
			want:   []string{"servers.a.b: contains a dot", "servers.a.b.url: url is required"},
		},
		{
			name:   "double underscore",
			server: &Server{Name: "a__b", Transport: "stdio", Command: "x"},
			want:   []string{"servers.a__b: alternative namespace separator"},
		},
		{
			name:   "duplicate header case-insensitively",
			server: &Server{Name: "a", Transport: "http", URL: "https://e", Headers: map[string]string{"X-Key": "1"}, HeadersFromEnv: map[string]string{"x-key": "K"}},
			want:   []string{"servers.a.headers_from_env.x-key: also set by servers.a.headers.X-Key"},
		},
		{
			name:   "bad header name and value",
			server: &Server{Name: "a", Transport: "http", URL: "https://e", Headers: map[string]string{"Bad Name": "1", "X": "a\nb"}},
			want:   []string{"servers.a.headers.Bad Name: invalid header name", "servers.a.headers.X: line breaks"},
		},
		{
			name: "lifecycle fields set through the API",
			server: &Server{Name: "a", Transport: "sse", URL: "https://e", IdleTimeout: Seconds(-time.Second), StartupTimeout: Seconds(-1),
				HealthCheck: &HealthCheck{Method: "http", Interval: Seconds(time.Second), Timeout: Seconds(2 * time.Second)}},
			want: []string{
				"servers.a.idle_timeout_seconds: only for stdio servers",
				"servers.a.startup_timeout_seconds: must be between 1 and 60 seconds",
				"servers.a.idle_timeout_seconds: greater than 0",
				"servers.a.health_check.timeout_seconds: at most health_check.interval_seconds",
				"servers.a.health_check.method: needs health_check_url",
			},
		},
		{
			name:   "valid lifecycle",
			server: &Server{Name: "a", Transport: "stdio", Command: "x", Package: "left-pad@^1.3.0", HealthCheck: &HealthCheck{Method: "tool_call", Tool: "t", Args: map[string]any{"x": 1}}},
		},
		{
			name:   "env in passthrough and env",
			server: &Server{Name: "a", Transport: "stdio", Command: "x", Env: map[string]string{"HOME": "/"}, EnvPassthrough: []string{"HOME"}},
			want:   []string{"servers.a.env_passthrough[0]: also set in env"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateServer(tt.server)
			var got []string
			if err != nil {
				var errs *Errors
				if !errors.As(err, &errs) {
					t.Fatalf("error is %T, want *Errors", err)
				}
				for _, e := range *errs {
					if e.File != "" || e.Line != 0 || e.Column != 0 {
						t.Errorf("error %v has a position, want none", e)
					}
					got = append(got, e.Error())
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i, w := range tt.want {
				field, msg, _ := strings.Cut(w, ": ")
				if !strings.HasPrefix(got[i], field+": ") || !strings.Contains(got[i], msg) {
					t.Errorf("error %d = %q, want field %q and message containing %q", i, got[i], field, msg)
				}
			}
		})
	}
}

func TestExpand(t *testing.T) {
	env := envFunc(map[string]string{"A": "alpha", "TOK": "t0k", "H": "hv"})
	tests := []struct {
		in, want string
		errs     []string
	}{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "alpha"},
		{in: "x-${A}-${A}", want: "x-alpha-alpha"},
		{in: "$$A and $${A}", want: "$A and ${A}"},
		{in: "cost: $5 $", want: "cost: $5 $"},
		{in: "${NOPE}", errs: []string{"environment variable NOPE is not set"}},
		{in: "${A", errs: []string{`unterminated "${" at offset 0`}},
		{in: "ok ${}", errs: []string{`empty variable name in "${}" at offset 3`}},
		{in: "${A-B} ${C}", errs: []string{"invalid variable name", "environment variable C is not set"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, msgs := expandVars(tt.in, env)
			if len(msgs) != len(tt.errs) {
				t.Fatalf("expandVars(%q) problems = %q, want %d", tt.in, msgs, len(tt.errs))
			}
			for i := range msgs {
				if !strings.Contains(msgs[i], tt.errs[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, msgs[i], tt.errs[i])
				}
			}
			if len(msgs) == 0 && got != tt.want {
				t.Errorf("expandVars(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}

	t.Run("in place", func(t *testing.T) {
		s := &Server{
			Name: "a", Transport: "http", URL: "https://e",
			Headers:           map[string]string{"X-A": "${A}"},
			HeadersFromEnv:    map[string]string{"X-H": "H"},
			BearerTokenEnvVar: "TOK",
		}
		if err := ValidateServer(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Expand(env); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"X-A": "alpha", "X-H": "hv", "Authorization": "Bearer t0k"}
		if diff := cmp.Diff(want, s.ResolvedHeaders()); diff != "" {
			t.Errorf("ResolvedHeaders mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("unchanged on error", func(t *testing.T) {
		s := &Server{
			Name: "a", Transport: "stdio", Command: "x",
			Env:            map[string]string{"GOOD": "${A}", "BAD": "${NOPE}"},
			EnvPassthrough: []string{"ALSO_NOPE"},
		}
		before := s.Clone()
		err := s.Expand(env)
		var errs Errors
		if !errors.As(err, &errs) {
			t.Fatalf("Expand error = %v, want Errors", err)
		}
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		want := []string{
			"servers.a.env.BAD: environment variable NOPE is not set",
			"servers.a.env_passthrough[0]: environment variable ALSO_NOPE is not set",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Expand errors mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(before, s, cmp.AllowUnexported(Server{})); diff != "" {
			t.Errorf("server changed by a failed Expand (-before +after):\n%s", diff)
		}
	})
}

func TestServerJSONRoundTrip(t *testing.T) {
	yes, no, empty, three := true, false, "", 3
	s := &Server{
		Name: "a", Transport: "http", Description: "d", AutoStart: &yes, Prefix: &empty,
		Command: "c", Args: []string{"x"}, Env: map[string]string{"E": "${V}"}, EnvPassthrough: []string{"P"}, Cwd: "/",
		URL: "https://e", Headers: map[string]string{"H": "v"}, HeadersFromEnv: map[string]string{"H2": "V2"},
		BearerTokenEnvVar: "T", HealthCheckURL: "https://e/h", DefaultAccess: "deny", PinDefinitions: &no,
		RestartOnFailure: &yes, MaxRestartAttempts: &three,
		StartupTimeout: Seconds(1500 * time.Millisecond), ShutdownTimeout: Seconds(2 * time.Second),
		StartOnDemand: true, IdleTimeout: Seconds(time.Minute), MaxResultBytes: 1 << 20, ProtocolVersion: "2025-11-25",
		HealthCheck: &HealthCheck{Method: "tool_call", Tool: "status", Args: map[string]any{"deep": map[string]any{"x": "y"}, "n": 1.5},
			Interval: Seconds(10 * time.Second), Timeout: Seconds(250 * time.Millisecond)},
		Package: "@scope/pkg@1.0.0",
		Auth:    &ServerAuth{Type: "oauth", ClientID: "c", ClientSecretEnv: "CS", Scopes: []string{"s"}, RefreshMarginSeconds: 5},
		Pos:     map[string]Pos{"": {1, 1}},
	}
	s.Credentials, s.UserSessionIdle = CredentialsPerUser, Seconds(time.Minute)
	s.Identity = &ServerIdentity{Propagate: PropagateAssertion, Header: "X-Who", Audience: "https://a", TTLSeconds: 30}
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(js, &keys); err != nil {
		t.Fatal(err)
	}
	var gotKeys []string
	for k := range keys {
		gotKeys = append(gotKeys, k)
	}
	wantKeys := append([]string{"name"}, serverFields...)
	if diff := cmp.Diff(wantKeys, gotKeys, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("JSON keys mismatch (-want +got):\n%s", diff)
	}
	var back Server
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, &back, cmp.AllowUnexported(Server{}), cmpopts.IgnoreFields(Server{}, "Pos")); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(js), `"startup_timeout_seconds":1.5`) || !strings.Contains(string(js), `"interval_seconds":10`) {
		t.Errorf("durations are not written as seconds: %s", js)
	}
	// A clone shares nothing with its original.
	c := s.Clone()
	*c.RestartOnFailure, *c.MaxRestartAttempts, *c.PinDefinitions = false, 9, true
	c.HealthCheck.Args["deep"].(map[string]any)["x"] = "changed"
	c.HealthCheck.Tool = "other"
	if diff := cmp.Diff(&back, s, cmp.AllowUnexported(Server{}), cmpopts.IgnoreFields(Server{}, "Pos")); diff != "" {
		t.Errorf("editing a clone changed the original (-want +got):\n%s", diff)
	}
	// A nil prefix (= the server name) must stay nil, distinct from "".
	js, _ = json.Marshal(&Server{Name: "b", Transport: "stdio"})
	if strings.Contains(string(js), "prefix") {
		t.Errorf("nil Prefix marshalled: %s", js)
	}
}

func TestServerHelpers(t *testing.T) {
	yes, no, p := true, false, "p"
	tests := []struct {
		s          *Server
		def        bool
		wantStart  bool
		wantPrefix string
	}{
		{&Server{Name: "n"}, true, true, "n"},
		{&Server{Name: "n"}, false, false, "n"},
		{&Server{Name: "n", AutoStart: &no, Prefix: &p}, true, false, "p"},
		{&Server{Name: "n", AutoStart: &yes, Prefix: new(string)}, false, true, ""},
	}
	for _, tt := range []struct {
		s    *Server
		want bool
	}{{&Server{}, true}, {&Server{PinDefinitions: &yes}, true}, {&Server{PinDefinitions: &no}, false}} {
		if got := tt.s.PinsDefinitions(); got != tt.want {
			t.Errorf("PinsDefinitions() with pin_definitions %v = %v, want %v", tt.s.PinDefinitions, got, tt.want)
		}
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := tt.s.AutoStartOr(tt.def); got != tt.wantStart {
				t.Errorf("AutoStartOr(%v) = %v, want %v", tt.def, got, tt.wantStart)
			}
			if got := tt.s.EffectivePrefix(); got != tt.wantPrefix {
				t.Errorf("EffectivePrefix() = %q, want %q", got, tt.wantPrefix)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{File: "f.yaml", Line: 3, Column: 5, Field: "servers.a.url", Msg: "bad"}, "f.yaml:3:5: servers.a.url: bad"},
		{&Error{File: "environment", Field: "MCP_X", Msg: "bad"}, "environment: MCP_X: bad"},
		{&Error{Field: "servers.a", Msg: "bad"}, "servers.a: bad"},
		{&Error{File: "f.yaml", Line: 1, Column: 1, Msg: "invalid YAML"}, "f.yaml:1:1: invalid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
	errs := Errors{tests[0].err, tests[1].err}
	if got, want := errs.Error(), tests[0].want+"\n"+tests[1].want; got != want {
		t.Errorf("Errors.Error() = %q, want %q", got, want)
	}
	var one *Error
	if !errors.As(error(&errs), &one) || one != tests[0].err {
		t.Errorf("errors.As(*Errors, *Error) = %v, want the first error", one)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(defaultYAML)
	f.Add([]byte("servers:\n  a: &a\n    transport: stdio\n    command: x\n  b:\n    <<: [*a, *a]\n    env: {X: \"${Y}\"}\n"))
	f.Add([]byte("servers:\n  h:\n    transport: http\n    url: https://e/mcp\n    headers: {A: \"${A}$$\"}\n    headers_from_env: {B: B}\n    bearer_token_env_var: T\nsettings:\n  retry_factor: 1.5\n  connect_timeout_seconds: 2\n"))
	f.Add([]byte("servers:\n  s:\n    transport: stdio\n    command: x\n    idle_timeout_seconds: 1.5\n    max_restart_attempts: 2\n    health_check:\n      method: tool_call\n      tool: t\n      args: {a: [1, 2.5, true, ~, {b: c}]}\n      interval_seconds: 3\nsettings:\n  restart_window_seconds: 60\n  degraded_error_rate: 0.5\n"))
	f.Add([]byte("a: &x [*x]\nb: &y *y\n"))
	f.Add([]byte("servers: {x: !!str 1, ? y : z}\n---\n"))
	f.Add([]byte("servers:\n  a: {transport: stdio, command: x, prefix: p}\nauth:\n  mode: jwt\n  jwt:\n    secret: \"${A}$$\"\n    leeway_seconds: 0.5\n    claims: {roles: groups}\n" +
		"authz:\n  role_restrictions:\n    r: {allowed_tools: [p.read_*, \"*\"]}\n    n: {allowed_tools: []}\n  high_risk_tools: []\n  admin_needs_token: true\n" +
		"fallbacks:\n  p.search: [p.find, p.grep]\nsettings:\n  rate_limit_per_second: 0.5\n  audit_redact_pattern: \"(?i)key\"\n"))
	f.Add([]byte("auth: &a\n  mode: keys\nauthz: {high_risk_tools: *a}\nfallbacks: {<<: {x.y: [x.z]}}\n"))
	f.Add([]byte("auth:\n  mode: jwt\n  jwt: {jwks_url: \"https://idp/jwks\", issuer: i}\nsettings: {tool_name_separator: __}\nfallbacks: {a__b: [a__c]}\n"))
	f.Add([]byte("search:\n  embeddings: {url: \"https://e/v1\", model: m, api_key_env: K, batch_size: 8, timeout_seconds: 2}\n" +
		"skills:\n  taxonomy:\n    - &s {id: a_b, name: A, description: d, examples: [x], keywords: [y]}\n    - {<<: *s, id: c}\n" +
		"  classifier: {mode: llm, url: \"http://l:1\", model: m, batch_size: 3, concurrency: 2, timeout_seconds: 9}\nfront: {tool_exposure: search}\n"))
	f.Add([]byte("search: {embeddings: ~}\nskills: {taxonomy: [], classifier: {mode: offline}}\nfront:\n  tool_exposure: all\n"))
	f.Add([]byte("skills:\n  taxonomy: [{id: x}, ~, [1], {id: x, name: n, description: d, examples: [\"\"]}]\n  classifier: {url: u, api_key_env: sk-x}\n"))
	f.Add([]byte("servers:\n  fs: {transport: stdio, command: x}\n  g: {transport: stdio, command: y, prefix: p}\n" +
		"clients:\n  cc:\n    mcp_tools: {required: [fs], recommended: [g, fs], optional: [~, \"\"]}\n" +
		"    role_restrictions:\n      r: {allowed_tools: [fs.a, p.*, bash, .x, g.]}\n      e: {allowed_tools: []}\n  Bad: {mcp_tool: 1}\n"))
	getenv := envFunc(map[string]string{"A": "a", "B": "b", "T": "t", "Y": "y"})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data, getenv)
		if err != nil {
			var errs *Errors
			if !errors.As(err, &errs) || len(*errs) == 0 {
				t.Fatalf("error %T %v is not a non-empty *Errors", err, err)
			}
			for _, e := range *errs {
				if e.File == "" || e.Msg == "" {
					t.Fatalf("error without file or message: %#v", e)
				}
			}
			return
		}
		for i, s := range cfg.Servers {
			if i > 0 && cfg.Servers[i-1].Name >= s.Name {
				t.Fatalf("servers not sorted and unique: %q then %q", cfg.Servers[i-1].Name, s.Name)
			}
			// What Parse accepts, ValidateServer accepts too.
			if err := ValidateServer(s); err != nil {
				t.Fatalf("parsed server fails ValidateServer: %v", err)
			}
		}
		if a := cfg.Auth; a != nil {
			if a.Mode != AuthKeys && a.Mode != AuthJWT && a.Mode != AuthLocal {
				t.Fatalf("accepted auth mode %q", a.Mode)
			}
			if (a.JWT != nil) != (a.Mode == AuthJWT) {
				t.Fatalf("auth mode %q with JWT %v", a.Mode, a.JWT)
			}
			if j := a.JWT; j != nil {
				if (j.Secret == "") == (j.JWKSURL == "") || j.Leeway < 0 {
					t.Fatalf("accepted JWT %+v", j)
				}
				if _, err := j.ExpandSecret(getenv); j.Secret != "" && err != nil {
					t.Fatalf("accepted a secret that does not expand: %v", err)
				}
			}
		}
		if e := cfg.Search.Embeddings; e != nil {
			if checkHTTPURL(e.URL) != "" || e.Model == "" || e.BatchSize < 1 || e.BatchSize > maxEmbeddingsBatchSize ||
				e.TimeoutSeconds < 1 || e.TimeoutSeconds > maxEmbeddingsTimeoutSeconds || (e.APIKeyEnv != "" && !envNameRE.MatchString(e.APIKeyEnv)) {
				t.Fatalf("accepted embeddings %+v", e)
			}
		}
		switch c := cfg.Skills.Classifier; {
		case c.Mode != ClassifierOffline && c.Mode != ClassifierLLM,
			c.BatchSize < 1 || c.BatchSize > maxClassifierBatchSize,
			c.Concurrency < 1 || c.Concurrency > maxClassifierConcurrency,
			c.TimeoutSeconds < 1 || c.TimeoutSeconds > maxClassifierTimeoutSeconds,
			c.Mode == ClassifierLLM && (checkHTTPURL(c.URL) != "" || c.Model == ""),
			c.Mode == ClassifierOffline && (c.URL != "" || c.Model != "" || c.APIKeyEnv != ""):
			t.Fatalf("accepted classifier %+v", c)
		}
		ids := map[string]bool{}
		for _, sk := range cfg.Skills.Taxonomy {
			if !skillIDRE.MatchString(sk.ID) || ids[sk.ID] || strings.TrimSpace(sk.Name) == "" || strings.TrimSpace(sk.Description) == "" {
				t.Fatalf("accepted skill %+v", sk)
			}
			ids[sk.ID] = true
		}
		if x := cfg.Front.ToolExposure; x != ToolExposureAll && x != ToolExposureSearch {
			t.Fatalf("accepted tool exposure %q", x)
		}
		for name, c := range cfg.Clients {
			if !NameRE.MatchString(name) || c.Name != name {
				t.Fatalf("accepted client %q: %+v", name, c)
			}
			seen := map[string]bool{}
			for _, r := range c.MCPTools.Requirements() {
				if seen[r.Server] || cfg.Server(r.Server) == nil {
					t.Fatalf("accepted requirement %+v of client %q", r, name)
				}
				seen[r.Server] = true
			}
			for role, list := range c.RoleRestrictions {
				if len(list) == 0 || slices.Contains(list, "") {
					t.Fatalf("accepted role %q of client %q: %q", role, name, list)
				}
			}
		}
		for key, list := range cfg.Fallbacks {
			if !strings.Contains(key, cfg.Settings.ToolNameSeparator) || len(list) == 0 {
				t.Fatalf("accepted fallbacks %q: %q", key, list)
			}
		}
	})
}

func TestInsecureTransport(t *testing.T) {
	tests := []struct {
		transport, url string
		want           bool
	}{
		{TransportHTTP, "http://10.0.0.5:8080/mcp", true},
		{TransportSSE, "http://mcp.example.com/sse", true},
		{TransportHTTP, "HTTP://mcp.example.com/mcp", true},
		{TransportHTTP, "http://127.0.0.1:8080/mcp", false},
		{TransportHTTP, "http://127.9.9.9/mcp", false},
		{TransportHTTP, "http://[::1]:8080/mcp", false},
		{TransportHTTP, "http://[::ffff:127.0.0.1]/mcp", false},
		{TransportHTTP, "http://localhost:8080/mcp", false},
		{TransportHTTP, "http://LOCALHOST./mcp", false},
		{TransportHTTP, "http://api.localhost/mcp", false},
		{TransportHTTP, "http://localhost.example.com/mcp", true},
		{TransportHTTP, "https://10.0.0.5/mcp", false},
		{TransportStdio, "", false},
	}
	for _, tt := range tests {
		s := &Server{Name: "s", Transport: tt.transport, URL: tt.url}
		if got := s.InsecureTransport(); got != tt.want {
			t.Errorf("InsecureTransport(%s %s) = %v, want %v", tt.transport, tt.url, got, tt.want)
		}
	}
}

// TestServerAuthExpand checks that the OAuth client secret is read from the
// variable auth.client_secret_env names, that the JSON a definition is
// stored as holds the name and never the value, and that Redacted hides it.
func TestServerAuthExpand(t *testing.T) {
	src := "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    auth:\n      type: oauth\n      grant: client_credentials\n" +
		"      client_id: gw\n      client_secret_env: UP_SECRET\n      scopes: [read, write]\n      refresh_margin_seconds: 30\n      max_step_ups: 3\n"
	cfg, err := Parse("switchboard.yaml", []byte(src), envFunc(map[string]string{"UP_SECRET": "s3cr3t-value"}))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Server("a")
	want := &ServerAuth{Type: "oauth", Grant: "client_credentials", ClientID: "gw", ClientSecretEnv: "UP_SECRET",
		Scopes: []string{"read", "write"}, RefreshMarginSeconds: 30, MaxStepUps: 3}
	if diff := cmp.Diff(want, s.Auth); diff != "" {
		t.Errorf("auth (-want +got):\n%s", diff)
	}
	if got := s.AuthClientSecret(); got != "s3cr3t-value" {
		t.Errorf("AuthClientSecret = %q", got)
	}
	if got := s.Clone().AuthClientSecret(); got != "s3cr3t-value" {
		t.Errorf("Clone lost the secret: %q", got)
	}
	if got := s.Redacted().AuthClientSecret(); got == "s3cr3t-value" {
		t.Error("Redacted kept the secret")
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cr3t") || !strings.Contains(string(b), `"client_secret_env":"UP_SECRET"`) {
		t.Errorf("stored JSON = %s", b)
	}
	var back Server
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, back.Auth); diff != "" {
		t.Errorf("auth read back (-want +got):\n%s", diff)
	}
}
