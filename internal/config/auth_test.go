package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// jwtWith returns DefaultJWT with edit applied.
func jwtWith(edit func(*JWT)) *JWT {
	j := DefaultJWT()
	edit(&j)
	return &j
}

func TestParseAuth(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want *Auth
	}{
		{name: "no section", want: nil},
		{name: "empty section means keys", yaml: "auth:\n", want: &Auth{Mode: AuthKeys, Pos: Pos{1, 1}}},
		{name: "local", yaml: "settings: {}\nauth: {mode: local}\n", want: &Auth{Mode: AuthLocal, Pos: Pos{2, 1}}},
		{
			name: "jwt with secret and defaults",
			yaml: "auth:\n  mode: jwt\n  jwt:\n    secret: ${JWT_KEY}\n",
			env:  map[string]string{"JWT_KEY": "k"},
			want: &Auth{Mode: AuthJWT, Pos: Pos{1, 1}, JWT: jwtWith(func(j *JWT) { j.Secret = "${JWT_KEY}" })},
		},
		{
			name: "jwt with every field",
			yaml: "auth:\n  mode: jwt\n  jwt:\n    jwks_url: https://idp.example/jwks.json\n    issuer: https://idp.example\n    audience: switchboard\n    leeway_seconds: 0\n" +
				"    claims: {agent_id: client_id, roles: groups, workspace: ws, allow_servers: allow, deny_servers: deny, admin: adm}\n",
			want: &Auth{Mode: AuthJWT, Pos: Pos{1, 1}, JWT: &JWT{
				JWKSURL: "https://idp.example/jwks.json", Issuer: "https://idp.example", Audience: "switchboard", Leeway: 0,
				Claims: JWTClaims{AgentID: "client_id", Roles: "groups", Workspace: "ws", AllowServers: "allow", DenyServers: "deny", Admin: "adm"},
			}},
		},
		{
			name: "some claims and a fractional leeway",
			yaml: "auth:\n  mode: jwt\n  jwt: {secret: \"lit$$eral\", leeway_seconds: 1.5, claims: {roles: groups}}\n",
			want: &Auth{Mode: AuthJWT, Pos: Pos{1, 1}, JWT: jwtWith(func(j *JWT) {
				j.Secret, j.Leeway, j.Claims.Roles = "lit$$eral", 1500*time.Millisecond, "groups"
			})},
		},
		{
			name: "env creates the section",
			env:  map[string]string{EnvAuthMode: "jwt", EnvJWTSecret: "from-env"},
			want: &Auth{Mode: AuthJWT, JWT: jwtWith(func(j *JWT) { j.Secret = "${SWITCHBOARD_JWT_SECRET}" })},
		},
		{
			name: "env mode overrides the file",
			yaml: "auth:\n  mode: keys\n",
			env:  map[string]string{EnvAuthMode: "local"},
			want: &Auth{Mode: AuthLocal, Pos: Pos{1, 1}},
		},
		{
			name: "env jwks url replaces the file's secret",
			yaml: "auth:\n  mode: jwt\n  jwt:\n    secret: ${NOT_NEEDED}\n    issuer: i\n",
			env:  map[string]string{EnvJWKSURL: "https://idp.example/keys"},
			want: &Auth{Mode: AuthJWT, Pos: Pos{1, 1}, JWT: jwtWith(func(j *JWT) { j.JWKSURL, j.Issuer = "https://idp.example/keys", "i" })},
		},
		{
			name: "env secret replaces the file's jwks url",
			yaml: "auth:\n  mode: jwt\n  jwt:\n    jwks_url: https://idp.example/keys\n",
			env:  map[string]string{EnvJWTSecret: "k"},
			want: &Auth{Mode: AuthJWT, Pos: Pos{1, 1}, JWT: jwtWith(func(j *JWT) { j.Secret = "${SWITCHBOARD_JWT_SECRET}" })},
		},
		{
			name: "env mode away from jwt drops the file's jwt section",
			yaml: "auth:\n  mode: jwt\n  jwt:\n    jwks_url: https://idp.example/keys\n",
			env:  map[string]string{EnvAuthMode: "keys"},
			want: &Auth{Mode: AuthKeys, Pos: Pos{1, 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("s.yaml", []byte(tt.yaml), envFunc(tt.env))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, cfg.Auth); diff != "" {
				t.Errorf("Auth mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAuthzAndFallbacks(t *testing.T) {
	const yaml = `servers:
  files: {transport: stdio, command: x}
  github: {transport: http, url: "https://e/mcp", prefix: gh}
authz:
  role_restrictions:
    review:
      allowed_tools: [files.read_*, gh.get_issue]
    nobody:
      allowed_tools: []
  high_risk_tools: [push, "*delete*"]
  admin_needs_token: true
fallbacks:
  gh.search_code: [files.search, files.grep]
  files.read: [gh.get_file]
`
	cfg, err := Parse("s.yaml", []byte(yaml), envFunc(nil))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	wantAuthz := Authz{
		RoleRestrictions: map[string][]string{"review": {"files.read_*", "gh.get_issue"}, "nobody": {}},
		HighRiskTools:    []string{"push", "*delete*"},
		AdminNeedsToken:  true,
	}
	if diff := cmp.Diff(wantAuthz, cfg.Authz); diff != "" {
		t.Errorf("Authz mismatch (-want +got):\n%s", diff)
	}
	if cfg.Authz.RoleRestrictions["nobody"] == nil {
		t.Errorf("allowed_tools: [] decoded as nil, want an empty list")
	}
	wantFallbacks := map[string][]string{"gh.search_code": {"files.search", "files.grep"}, "files.read": {"gh.get_file"}}
	if diff := cmp.Diff(wantFallbacks, cfg.Fallbacks); diff != "" {
		t.Errorf("Fallbacks mismatch (-want +got):\n%s", diff)
	}
	if cfg.Auth != nil {
		t.Errorf("Auth = %+v, want nil without an auth section", cfg.Auth)
	}
	wantPos := map[string]Pos{
		"fallbacks":                                       {12, 1},
		"fallbacks.gh.search_code":                        {13, 3},
		"fallbacks.gh.search_code[1]":                     {13, 34},
		"authz.role_restrictions.review.allowed_tools[1]": {7, 37},
		"authz.high_risk_tools":                           {10, 3},
	}
	for k, want := range wantPos {
		if got := cfg.Pos[k]; got != want {
			t.Errorf("Pos[%q] = %v, want %v", k, got, want)
		}
	}
}

func TestHighRiskToolsDefault(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{name: "absent", yaml: "", want: DefaultHighRiskTools()},
		{name: "null", yaml: "authz:\n  high_risk_tools:\n", want: DefaultHighRiskTools()},
		{name: "empty list means none", yaml: "authz:\n  high_risk_tools: []\n", want: []string{}},
		{name: "own list", yaml: "authz:\n  high_risk_tools: [drop]\n", want: []string{"drop"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("s.yaml", []byte(tt.yaml), envFunc(nil))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := cfg.Authz.HighRiskToolsOrDefault()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("HighRiskToolsOrDefault mismatch (-want +got):\n%s", diff)
			}
			if got == nil {
				t.Errorf("HighRiskToolsOrDefault = nil, want a list")
			}
		})
	}
}

func TestFallbacksServerCheck(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // every problem, in order; none = valid
	}{
		{
			name: "prefix, not name, is the server part",
			yaml: "servers:\n  github: {transport: stdio, command: x, prefix: gh}\nfallbacks:\n  github.search: [gh.find]\n",
			want: []string{`s.yaml:4:3: fallbacks.github.search: unknown server "github"`},
		},
		{
			name: "an unprefixed server may own any dotted name",
			yaml: "servers:\n  plain: {transport: stdio, command: x, prefix: \"\"}\nfallbacks:\n  any.search: [other.find]\n",
		},
		{
			name: "no servers section",
			yaml: "fallbacks:\n  a.search: [b.find]\n",
			want: []string{`s.yaml:2:3: fallbacks.a.search: unknown server "a"`, `s.yaml:2:14: fallbacks.a.search[0]: unknown server "b"`},
		},
		{
			name: "a broken server definition does not make names unknown",
			yaml: "servers:\n  a: {transport: stdio, command: x, prefix: [p]}\nfallbacks:\n  p.search: [a.find]\n",
			want: []string{"s.yaml:2:45: servers.a.prefix: must be a string"},
		},
		{
			name: "tool names may contain the separator",
			yaml: "servers:\n  a: {transport: stdio, command: x}\nfallbacks:\n  a.ns.search: [a.ns.find]\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(tt.yaml), envFunc(nil))
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Parse error = %v, want %d problems: %q", err, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %d = %q, want it to start with %q", i, got[i], w)
				}
			}
		})
	}
}

func TestExpandSecret(t *testing.T) {
	env := envFunc(map[string]string{"JWT_KEY": "k$y", "SWITCHBOARD_JWT_SECRET": "from-env"})
	tests := []struct {
		secret, want, wantErr string
	}{
		{secret: "${JWT_KEY}", want: "k$y"},
		{secret: "${SWITCHBOARD_JWT_SECRET}", want: "from-env"},
		{secret: "pre-${JWT_KEY}-$$", want: "pre-k$y-$"},
		{secret: "${MISSING}", wantErr: "auth.jwt.secret: environment variable MISSING is not set"},
		{secret: "${sk_live_abc}", wantErr: "its name is not shown"},
		{secret: "", wantErr: "auth.jwt.secret: no secret is configured"},
	}
	for _, tt := range tests {
		t.Run(tt.secret, func(t *testing.T) {
			j := &JWT{Secret: tt.secret}
			got, err := j.ExpandSecret(env)
			if tt.wantErr != "" {
				var errs *Errors
				if !errors.As(err, &errs) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ExpandSecret error = %v, want *Errors containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "sk_live") || got != "" {
					t.Errorf("ExpandSecret = %q, %v: leaks a name that may be a secret, or returns a value", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ExpandSecret = %q, %v, want %q", got, err, tt.want)
			}
			if j.Secret != tt.secret {
				t.Errorf("ExpandSecret changed Secret to %q", j.Secret)
			}
		})
	}
}

func TestJWTNeverPrintsSecret(t *testing.T) {
	const mark = "s3cr3t"
	tests := []struct {
		name, secret, wantShown string
	}{
		{name: "literal", secret: "literal-" + mark, wantShown: "***"},
		{name: "mixed", secret: mark + "${JWT_KEY}", wantShown: "***"},
		{name: "lower-case reference", secret: "${" + mark + "}", wantShown: "***"},
		{name: "reference", secret: "${JWT_KEY}", wantShown: "${JWT_KEY}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &JWT{Secret: tt.secret, JWKSURL: "https://u:" + mark + "@idp.example/jwks", Issuer: "iss"}
			auth := &Auth{Mode: AuthJWT, JWT: j}
			js, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			var slogOut strings.Builder
			slog.New(slog.NewTextHandler(&slogOut, nil)).Info("cfg", "jwt", j, "val", *j)
			slog.New(slog.NewJSONHandler(&slogOut, nil)).Info("cfg", "jwt", j)
			outs := []string{
				string(js), slogOut.String(),
				fmt.Sprint(j), fmt.Sprintf("%v", *j), fmt.Sprintf("%+v", j), fmt.Sprintf("%#v", j), fmt.Sprintf("%s", j),
				fmt.Sprintf("%+v", *auth), fmt.Sprintf("%#v", *auth),
			}
			for _, out := range outs {
				if strings.Contains(out, mark) {
					t.Errorf("output leaks the secret: %s", out)
				}
			}
			if r := j.Redacted(); r.Secret != tt.wantShown || r.Issuer != "iss" || r == j {
				t.Errorf("Redacted() = %+v, want a copy with Secret %q", r, tt.wantShown)
			}
			if j.Secret != tt.secret {
				t.Errorf("Redacted changed the original's Secret to %q", j.Secret)
			}
			if !strings.Contains(fmt.Sprintf("%#v", j), "config.JWT{") || !strings.Contains(string(js), `"leeway_seconds":0`) {
				t.Errorf("unexpected formats: %#v / %s", j, js)
			}
		})
	}

	// Problems with a literal secret name no value either.
	broken := []string{
		"auth:\n  mode: keys\n  jwt:\n    secret: " + mark + "\n",
		"auth:\n  mode: jwt\n  jwt:\n    secret: \"" + mark + "${NOPE}\"\n",
		"auth:\n  mode: jwt\n  jwt:\n    secret: \"${" + mark + "}\"\n",
		"auth:\n  mode: jwt\n  jwt:\n    secret: [" + mark + "]\n",
		"auth:\n  mode: jwt\n  jwt:\n    secret: " + mark + "\n    jwks_url: \"https://u:" + mark + "@idp/\"\n",
		"auth:\n  mode: jwt\n  jwt:\n    jwks_url: \"ftp://u:" + mark + "@idp/\"\n",
	}
	for i, src := range broken {
		t.Run(fmt.Sprint("error ", i), func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(src), envFunc(nil))
			if err == nil {
				t.Fatalf("Parse succeeded, want an error")
			}
			if strings.Contains(err.Error(), mark) {
				t.Errorf("error leaks the secret:\n%v", err)
			}
		})
	}
}

func TestNewSettings(t *testing.T) {
	const yaml = `settings:
  bulkhead_max_concurrent: 8
  bulkhead_max_queue: 0
  rate_limit_per_second: 2.5
  retry_budget_ratio: 0
  idempotency_ttl_seconds: 60
  audit_redact_pattern: "(?i)api[-_]?key"
`
	env := map[string]string{
		"SWITCHBOARD_BULKHEAD_MAX_CONCURRENT": "16", // env > file
		"SWITCHBOARD_RATE_LIMIT_BURST":        "7",
		"SWITCHBOARD_IDEMPOTENCY_MAX_ENTRIES": "50",
		"SWITCHBOARD_AUDIT_QUEUE_SIZE":        "1",
		"SWITCHBOARD_RETRY_BUDGET_RATIO":      "", // unset: the file wins
	}
	cfg, err := Parse("s.yaml", []byte(yaml), envFunc(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := DefaultSettings()
	want.BulkheadMaxConcurrent = 16
	want.BulkheadMaxQueue = 0
	want.RateLimitPerSecond = 2.5
	want.RateLimitBurst = 7
	want.RetryBudgetRatio = 0
	want.IdempotencyTTL = time.Minute
	want.IdempotencyMaxEntries = 50
	want.AuditQueueSize = 1
	want.AuditRedactPattern = "(?i)api[-_]?key"
	if diff := cmp.Diff(want, cfg.Settings); diff != "" {
		t.Errorf("settings mismatch (-want +got):\n%s", diff)
	}

	d := DefaultSettings()
	got := []any{d.BulkheadMaxConcurrent, d.BulkheadMaxQueue, d.RateLimitPerSecond, d.RateLimitBurst, d.RetryBudgetRatio,
		d.IdempotencyTTL, d.IdempotencyMaxEntries, d.AuditQueueSize, d.AuditRedactPattern}
	wantDefaults := []any{64, 256, 0.0, 0, 0.2, time.Hour, 10000, 10000,
		"password|passwd|token|secret|key|credential|authorization|cookie"}
	if diff := cmp.Diff(wantDefaults, got); diff != "" {
		t.Errorf("defaults mismatch (-want +got):\n%s", diff)
	}
	vars := SettingEnvVars()
	for _, key := range []string{"bulkhead_max_concurrent", "bulkhead_max_queue", "rate_limit_per_second", "rate_limit_burst",
		"retry_budget_ratio", "idempotency_ttl_seconds", "idempotency_max_entries", "audit_queue_size", "audit_redact_pattern"} {
		if want := "SWITCHBOARD_" + strings.ToUpper(key); vars[key] != want {
			t.Errorf("SettingEnvVars()[%q] = %q, want %q", key, vars[key], want)
		}
	}
}

func TestEffectiveRateLimitBurst(t *testing.T) {
	tests := []struct {
		rate  float64
		burst int
		want  int
	}{
		{rate: 0, burst: 0, want: 1},
		{rate: 0.2, burst: 0, want: 1},
		{rate: 2.5, burst: 0, want: 3},
		{rate: 10, burst: 0, want: 10},
		{rate: 10, burst: 4, want: 4},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.rate, "/", tt.burst), func(t *testing.T) {
			s := Settings{RateLimitPerSecond: tt.rate, RateLimitBurst: tt.burst}
			if got := s.EffectiveRateLimitBurst(); got != tt.want {
				t.Errorf("EffectiveRateLimitBurst() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestDefaultIgnoresBadAuthEnv(t *testing.T) {
	// Ignoring SWITCHBOARD_JWKS_URL (a bad URL) leaves mode jwt without a
	// key, so Default must go on to ignore SWITCHBOARD_AUTH_MODE too.
	env := envFunc(map[string]string{EnvAuthMode: "jwt", EnvJWKSURL: "not a url", "SWITCHBOARD_LISTEN": "127.0.0.1:1"})
	cfg := Default(env)
	if cfg.Auth != nil || cfg.Settings.Listen != "127.0.0.1:1" {
		t.Errorf("Default: Auth = %+v, listen %q; want no auth and the valid listen override", cfg.Auth, cfg.Settings.Listen)
	}
	_, err := LoadDefault(env)
	if err == nil || !strings.Contains(err.Error(), "environment: SWITCHBOARD_JWKS_URL:") {
		t.Errorf("LoadDefault error = %v, want one about SWITCHBOARD_JWKS_URL", err)
	}

	cfg = Default(envFunc(map[string]string{EnvAuthMode: "jwt", EnvJWTSecret: "k"}))
	want := &Auth{Mode: AuthJWT, JWT: jwtWith(func(j *JWT) { j.Secret = "${SWITCHBOARD_JWT_SECRET}" })}
	if diff := cmp.Diff(want, cfg.Auth); diff != "" {
		t.Errorf("Default auth from env mismatch (-want +got):\n%s", diff)
	}
}

func TestExampleFileParses(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "switchboard.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(path, data, envFunc(nil)); err != nil {
		t.Errorf("the example does not parse: %v", err)
	}
	// Its commented sections parse once uncommented, so they cannot rot.
	uncommented := uncommentExample(string(data))
	env := envFunc(map[string]string{"JWT_SECRET": "k", "GITHUB_TOKEN": "t"})
	cfg, err := Parse(path, []byte(uncommented), env)
	if err != nil {
		t.Fatalf("the example with its optional sections uncommented does not parse: %v\n%s", err, uncommented)
	}
	if cfg.Auth == nil || cfg.Auth.JWT == nil || len(cfg.Authz.RoleRestrictions) == 0 || len(cfg.Fallbacks) == 0 {
		t.Errorf("uncommented example lacks auth, authz or fallbacks: %+v", cfg)
	}
	if cfg.Search.Embeddings == nil || len(cfg.Skills.Taxonomy) == 0 || cfg.Front.ToolExposure != ToolExposureSearch {
		t.Errorf("uncommented example lacks search, skills or front: %+v %+v %+v", cfg.Search, cfg.Skills, cfg.Front)
	}
	if c := cfg.Clients["claude-code"]; c == nil || len(c.MCPTools.Required) == 0 || len(c.RoleRestrictions) == 0 {
		t.Errorf("uncommented example lacks a clients: declaration: %+v", cfg.Clients)
	}
}

// exampleKeyRE matches a commented-out line of YAML in the example: a
// lower-case key or a list item. Prose comments start with a capital letter.
var exampleKeyRE = regexp.MustCompile(`^ *([a-z_][a-z0-9_.-]*:|- )`)

// uncommentExample removes the "# " of the example's commented-out YAML lines.
func uncommentExample(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		if body, ok := strings.CutPrefix(trimmed, "# "); ok && exampleKeyRE.MatchString(body) {
			lines[i] = l[:len(l)-len(trimmed)] + body
		}
	}
	return strings.Join(lines, "\n")
}
