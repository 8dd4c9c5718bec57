package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
)

// TestServersAddAuth: `servers add --auth oauth --auth-*` registers the
// server with its auth section (shown by the API, with the variable's
// name and no secret); a bad field is the API's error naming it; the
// --auth-* flags without --auth, or another --auth, are usage errors.
func TestServersAddAuth(t *testing.T) {
	dir := t.TempDir()
	getenv := func(k string) string {
		if k == "UP_SECRET" {
			return "up-secret-value"
		}
		return ""
	}
	cfg, err := config.Parse("local.yaml", []byte("servers: {}\n"), getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Settings.Store = filepath.Join(dir, "switchboard.db")
	cfg.Settings.LogDirectory = filepath.Join(dir, "logs")
	logs := &logtest.Buffer{}
	a, err := app.New(t.Context(), cfg, &app.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Getenv: getenv, SelfExecutable: os.Args[0]})
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	a.StartAndWait()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		srv.Close()
		a.Close(context.Background())
	})
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Run(t.Context(), args, strings.NewReader(""), &out, &errb, func(k string) string {
			if k == envURL {
				return srv.URL
			}
			return ""
		})
		return code, out.String(), errb.String()
	}

	tests := []struct {
		name    string
		args    []string
		code    int
		wantErr string
	}{
		{"grant needs auth", []string{"servers", "add", "x", "--transport", "http", "--url", "https://mcp.example.com/mcp", "--auth-grant", "client_credentials"},
			ExitUsage, "the --auth-* flags need --auth oauth"},
		{"unknown auth", []string{"servers", "add", "x", "--transport", "http", "--url", "https://mcp.example.com/mcp", "--auth", "saml"},
			ExitUsage, `--auth "saml": want oauth`},
		{"bad grant", []string{"servers", "add", "x", "--transport", "http", "--url", "https://mcp.example.com/mcp", "--auth", "oauth", "--auth-grant", "password"},
			ExitFailure, "servers.x.auth.grant"},
		{"add", []string{"servers", "add", "cc", "--transport", "http", "--url", "https://mcp.example.com/mcp", "--auth", "oauth",
			"--auth-grant", "client_credentials", "--auth-client-id", "gw", "--auth-client-secret-env", "UP_SECRET",
			"--auth-scope", "mcp:read", "--auth-scope", "mcp:write", "--auth-issuer", "https://as.example.com", "--auth-refresh-margin-seconds", "30",
			"-o", "json"},
			ExitOK, ""},
	}
	var out string
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, errOut := run(tt.args...)
			out = stdout
			if code != tt.code || !strings.Contains(errOut, tt.wantErr) {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tt.code, tt.wantErr, out, errOut)
			}
		})
	}
	// The registered server, as the API answered (-o json).
	var view struct {
		Auth *config.ServerAuth `json:"auth"`
	}
	if err := json.Unmarshal([]byte(out), &view); err != nil || view.Auth == nil {
		t.Fatalf("servers add -o json: %v %s", err, out)
	}
	want := config.ServerAuth{Type: "oauth", Grant: "client_credentials", ClientID: "gw", ClientSecretEnv: "UP_SECRET",
		Scopes: []string{"mcp:read", "mcp:write"}, Issuer: "https://as.example.com", RefreshMarginSeconds: 30}
	got, _ := json.Marshal(view.Auth)
	if exp, _ := json.Marshal(want); string(got) != string(exp) {
		t.Errorf("auth = %s, want %s", got, exp)
	}
	if strings.Contains(out, "up-secret-value") || strings.Contains(logs.String(), "up-secret-value") {
		t.Error("the client secret is shown or logged")
	}
}
