package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseOAuth(t *testing.T) {
	src := `auth:
  mode: oauth
  oauth:
    resource: https://gw.example.com
    issuer: https://idp.example.com/realms/acme
    jwks_url: https://idp.example.com/realms/acme/certs
    introspection:
      url: https://idp.example.com/realms/acme/introspect
      client_id: switchboard
      client_secret: ${INTRO_SECRET}
      cache_seconds: 10
    scopes: [mcp]
    scope_roles: {"mcp:admin": operator}
    leeway_seconds: 5
    claims: {roles: groups}
`
	cfg, err := Parse("s.yaml", []byte(src), envFunc(map[string]string{"INTRO_SECRET": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	claims := DefaultJWT().Claims
	claims.Roles = "groups"
	want := &Auth{Mode: AuthOAuth, Pos: Pos{1, 1}, OAuth: &OAuth{
		Resource: "https://gw.example.com", Issuer: "https://idp.example.com/realms/acme",
		JWKSURL: "https://idp.example.com/realms/acme/certs",
		Introspection: &Introspection{URL: "https://idp.example.com/realms/acme/introspect", ClientID: "switchboard",
			ClientSecret: "${INTRO_SECRET}", Cache: 10 * time.Second},
		Scopes: []string{"mcp"}, ScopeRoles: map[string]string{"mcp:admin": "operator"},
		Leeway: 5 * time.Second, Claims: claims,
	}}
	if diff := cmp.Diff(want, cfg.Auth); diff != "" {
		t.Errorf("Auth mismatch (-want +got):\n%s", diff)
	}
	if s, err := cfg.Auth.OAuth.Introspection.ExpandSecret(envFunc(map[string]string{"INTRO_SECRET": "v"})); err != nil || s != "v" {
		t.Errorf("ExpandSecret = %q, %v", s, err)
	}
}

func TestOAuthErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []wantErr
	}{
		// No section, or no issuer, runs the built-in authorization server
		// (TestOAuthBuiltIn); its section is checked like any other.
		{"built-in server settings", "auth:\n  mode: oauth\n  oauth:\n    server:\n      registration: maybe\n      access_token_ttl_seconds: -1\n      upstream: {client_secret: \"${NOPE}\"}\n",
			[]wantErr{
				{Line: 5, Field: "auth.oauth.server.registration", Msg: `must be one of "open", "token" or "off"`},
				{Line: 6, Field: "auth.oauth.server.access_token_ttl_seconds", Msg: "from 0 to"},
				{Line: 7, Field: "auth.oauth.server.upstream", Msg: "needs issuer"},
				{Line: 7, Field: "auth.oauth.server.upstream", Msg: "needs client_id"},
				{Line: 7, Field: "auth.oauth.server.upstream.client_secret", Msg: "NOPE is not set"},
			}},
		{"built-in server settings with an issuer", "auth:\n  mode: oauth\n  oauth:\n    issuer: https://idp.example\n    jwks_url: https://idp.example/keys\n    server: {max_clients: 5}\n",
			[]wantErr{{Line: 6, Field: "auth.oauth.server", Msg: "runs only without an issuer"}}},
		{"nothing to check with", "auth:\n  mode: oauth\n  oauth:\n    issuer: https://idp.example\n",
			[]wantErr{{Line: 3, Field: "auth.oauth", Msg: "needs jwks_url (JWT access tokens) or introspection"}}},
		{"no issuer", "auth:\n  mode: oauth\n  oauth:\n    jwks_url: https://idp.example/keys\n",
			[]wantErr{{Line: 3, Field: "auth.oauth", Msg: "needs issuer"}}},
		{"resource with a path", "auth:\n  mode: oauth\n  oauth:\n    issuer: https://idp.example\n    jwks_url: https://idp.example/keys\n    resource: https://gw.example/mcp\n",
			[]wantErr{{Line: 6, Field: "auth.oauth.resource", Msg: "without a path"}}},
		{"bad urls", "auth:\n  mode: oauth\n  oauth:\n    issuer: idp\n    jwks_url: ftp://idp/keys\n    introspection: {url: x, client_secret: \"${NOPE}\"}\n",
			[]wantErr{
				{Line: 4, Field: "auth.oauth.issuer", Msg: "must be an absolute http:// or https:// URL"},
				{Line: 5, Field: "auth.oauth.jwks_url", Msg: `scheme "ftp" is not supported`},
				{Line: 6, Field: "auth.oauth.introspection", Msg: "client_secret needs client_id"},
				{Line: 6, Field: "auth.oauth.introspection.url", Msg: "must be an absolute"},
				{Line: 6, Field: "auth.oauth.introspection.client_secret", Msg: "NOPE is not set"},
			}},
		{"unknown fields and bad values", "auth:\n  mode: oauth\n  oauth:\n    issuer: https://idp.example\n    jwks_url: https://idp.example/keys\n    scope: [mcp]\n    scopes: [\"a b\"]\n    introspection: {url: https://idp.example/i, cache_seconds: 9999}\n",
			[]wantErr{
				{Line: 6, Field: "auth.oauth.scope", Msg: `unknown field "scope"`},
				{Line: 7, Field: "auth.oauth.scopes[0]", Msg: "must not contain spaces"},
				{Line: 8, Field: "auth.oauth.introspection.cache_seconds", Msg: "from 0 to 300"},
			}},
		{"oauth under keys", "auth:\n  mode: keys\n  oauth: {issuer: https://idp.example}\n",
			[]wantErr{{Line: 3, Field: "auth.oauth", Msg: `only used with mode: oauth (the mode is "keys")`}}},
		{"jwt under oauth", "auth:\n  mode: oauth\n  jwt: {jwks_url: https://idp.example/keys}\n  oauth: {issuer: https://idp.example, jwks_url: https://idp.example/keys}\n",
			[]wantErr{{Line: 3, Field: "auth.jwt", Msg: "only used with mode: jwt"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(tt.yaml), envFunc(nil))
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse: %v, want *Errors", err)
			}
			if len(*errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(*errs), len(tt.want), err)
			}
			for i, w := range tt.want {
				e := (*errs)[i]
				prefix := fmt.Sprintf("s.yaml:%d:", w.Line)
				if e.Field != w.Field || !strings.HasPrefix(e.Error(), prefix) || !strings.Contains(e.Msg, w.Msg) {
					t.Errorf("error %d = %q (field %s), want %s…%s: …%s", i, e.Error(), e.Field, prefix, w.Field, w.Msg)
				}
			}
		})
	}
}

func TestIntrospectionNeverPrintsSecret(t *testing.T) {
	const mark = "s3cr3t"
	in := &Introspection{URL: "https://u:" + mark + "@idp.example/i", ClientID: "gw", ClientSecret: "lit-" + mark}
	js, err := json.Marshal(&OAuth{Issuer: "i", Introspection: in})
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{string(js), fmt.Sprint(in), fmt.Sprintf("%+v", *in), fmt.Sprintf("%#v", in)} {
		if strings.Contains(out, mark) {
			t.Errorf("output leaks the secret: %s", out)
		}
	}
	_, err = Parse("s.yaml", []byte("auth:\n  mode: oauth\n  oauth:\n    issuer: https://idp.example\n    introspection: {url: \"ftp://u:"+mark+"@x/\", client_id: a, client_secret: \""+mark+"${NOPE}\"}\n"), envFunc(nil))
	if err == nil || strings.Contains(err.Error(), mark) {
		t.Errorf("Parse error %v: want an error that does not show the secret", err)
	}
}

// TestOAuthBuiltIn: mode oauth with no oauth section, or one without an
// issuer, runs the built-in authorization server.
func TestOAuthBuiltIn(t *testing.T) {
	for _, yaml := range []string{
		"auth:\n  mode: oauth\n",
		"auth:\n  mode: oauth\n  oauth:\n    resource: https://gw.example\n    scopes: [mcp]\n",
		"auth:\n  mode: oauth\n  oauth:\n    server:\n      registration: token\n      registration_token: \"${REG}\"\n      upstream: {issuer: https://idp.example, client_id: gw}\n",
	} {
		cfg, err := Parse("s.yaml", []byte(yaml), envFunc(map[string]string{"REG": "0123456789abcdef"}))
		if err != nil {
			t.Errorf("%q: %v", yaml, err)
			continue
		}
		if !cfg.Auth.OAuth.BuiltIn() {
			t.Errorf("%q: not the built-in server", yaml)
		}
	}
	cfg, err := Parse("s.yaml", []byte("auth:\n  mode: oauth\n  oauth:\n    server:\n      registration: token\n"), envFunc(nil))
	if err == nil || !strings.Contains(err.Error(), "needs registration_token") {
		t.Errorf("registration token mode without a token: %v %v", cfg, err)
	}
}
