package config

import (
	"errors"
	"strings"
	"testing"
)

// TestServerIdentityErrors: every problem of `servers.NAME.identity` is
// reported at its file:line with its field.
func TestServerIdentityErrors(t *testing.T) {
	const file = "switchboard.yaml"
	tests := []struct {
		name string
		yaml string
		want []wantErr
	}{
		{
			name: "unknown mode, bad header, ttl too long",
			yaml: "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    identity:\n      propagate: saml\n      header: \"bad header\"\n      ttl_seconds: 600\n",
			want: []wantErr{
				{Line: 6, Field: "servers.a.identity.propagate", Msg: `unknown mode "saml"`},
				{Line: 7, Field: "servers.a.identity.header", Msg: "not a valid header name"},
				{Line: 8, Field: "servers.a.identity.ttl_seconds", Msg: "must be between 0 and 300"},
			},
		},
		{
			name: "token exchange without its endpoint and client, with assertion fields",
			yaml: "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    identity:\n      propagate: token_exchange\n      ttl_seconds: 30\n      scopes: [\"a b\"]\n      resource: nope\n",
			want: []wantErr{
				{Line: 5, Field: "servers.a.identity.token_endpoint", Msg: "needs the authorization server's token endpoint"},
				{Line: 5, Field: "servers.a.identity.client_id", Msg: "needs the gateway's client"},
				{Line: 5, Field: "servers.a.identity.client_secret_env", Msg: "needs the client's secret"},
				{Line: 7, Field: "servers.a.identity.ttl_seconds", Msg: "only for propagate: assertion"},
				{Line: 8, Field: "servers.a.identity.scopes[0]", Msg: "is not a scope token"},
				{Line: 9, Field: "servers.a.identity.resource", Msg: "absolute http"},
			},
		},
		{
			name: "token exchange in Authorization next to auth; exchange fields on an assertion",
			yaml: "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    auth: {type: oauth}\n    identity: {propagate: token_exchange, token_endpoint: https://as.example/token, client_id: gw, client_secret_env: S}\n" +
				"  b:\n    transport: http\n    url: https://example.com/mcp\n    identity: {propagate: assertion, client_id: gw}\n",
			want: []wantErr{
				{Line: 6, Field: "servers.a.identity", Msg: "remove auth"},
				{Line: 6, Field: "servers.a.identity.client_secret_env", Msg: "S is not set"},
				{Line: 10, Field: "servers.b.identity.client_id", Msg: "only for propagate: token_exchange"},
			},
		},
		{
			name: "token exchange secret not set",
			yaml: "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    identity: {propagate: token_exchange, token_endpoint: https://as.example/token, client_id: gw, client_secret_env: NOPE_UNSET}\n",
			want: []wantErr{{Line: 5, Field: "servers.a.identity.client_secret_env", Msg: "NOPE_UNSET is not set"}},
		},
		{
			name: "missing mode, on an sse server",
			yaml: "servers:\n  a:\n    transport: sse\n    url: https://example.com/sse\n    identity:\n      header: X-Who\n",
			want: []wantErr{
				{Line: 5, Field: "servers.a.identity.propagate", Msg: "propagate is required"},
				{Line: 5, Field: "servers.a.identity", Msg: "only for http"},
			},
		},
		{
			name: "a header the transport or the credential uses, or a configured one",
			yaml: "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    identity: {propagate: assertion, header: authorization}\n" +
				"  b:\n    transport: http\n    url: https://example.com/mcp\n    headers: {x-switchboard-identity: forged}\n    identity: {propagate: assertion}\n",
			want: []wantErr{
				{Line: 5, Field: "servers.a.identity.header", Msg: "the transport or the server's credential uses"},
				{Line: 10, Field: "servers.b.identity.header", Msg: "headers.x-switchboard-identity is the same header"},
			},
		},
		{
			name: "unknown key",
			yaml: "servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    identity: {propagate: assertion, audiense: x}\n",
			want: []wantErr{{Line: 5, Field: "servers.a.identity.audiense", Msg: "unknown field"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(file, []byte(tt.yaml), envFunc(nil))
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want *Errors: %v", err, err)
			}
			if len(*errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(*errs), len(tt.want), err)
			}
			for i, w := range tt.want {
				e := (*errs)[i]
				if e.Line != w.Line || e.Field != w.Field || !strings.Contains(e.Msg, w.Msg) || e.File != file {
					t.Errorf("error %d = %s:%d %s: %s; want line %d %s: %s", i, e.File, e.Line, e.Field, e.Msg, w.Line, w.Field, w.Msg)
				}
			}
		})
	}
}

// TestServerIdentityValid: a valid section parses, with its defaults.
func TestServerIdentityValid(t *testing.T) {
	cfg, err := Parse("s.yaml", []byte("servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n    identity: {propagate: assertion}\n"), envFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	id := cfg.Servers[0].Identity
	if id == nil || id.IdentityHeader() != DefaultIdentityHeader || cfg.Servers[0].Clone().Identity == id {
		t.Fatalf("identity = %+v", id)
	}
}

// TestServerIdentityExchangeSecret: Expand reads the exchange client's
// secret; Redacted hides it.
func TestServerIdentityExchangeSecret(t *testing.T) {
	cfg, err := Parse("s.yaml", []byte("servers:\n  a:\n    transport: http\n    url: https://example.com/mcp\n"+
		"    identity: {propagate: token_exchange, token_endpoint: https://as.example/token, client_id: gw, client_secret_env: TX}\n"),
		envFunc(map[string]string{"TX": "exchange-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Servers[0]
	if s.IdentityClientSecret() != "exchange-secret" || s.Identity.IdentityHeader() != "Authorization" {
		t.Errorf("secret %q header %q", s.IdentityClientSecret(), s.Identity.IdentityHeader())
	}
	if r := s.Redacted(); r.IdentityClientSecret() == "exchange-secret" {
		t.Error("Redacted keeps the exchange secret")
	}
}
