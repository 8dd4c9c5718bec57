package cli

import (
	"bytes"
	"context"
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

// TestServersAddEnvLocalMode: on a fresh local-mode gateway with no secret
// key configured, "servers add --env K=V --connect" registers and connects
// the server; --env values are stored as they are, --secret-env values
// sealed (never in clear in the store).
func TestServersAddEnvLocalMode(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse("local.yaml", []byte("servers: {}\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Settings.Store = filepath.Join(dir, "switchboard.db")
	cfg.Settings.LogDirectory = filepath.Join(dir, "logs")
	logs := &logtest.Buffer{}
	a, err := app.New(t.Context(), cfg, &app.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Getenv: func(string) string { return "" }, SelfExecutable: os.Args[0]})
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	a.StartAndWait()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		srv.Close()
		a.Close(context.Background())
		if t.Failed() {
			t.Logf("gateway logs:\n%s", logs.String())
		}
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

	const plain, secret = "/tmp/switchboard-test-memory.jsonl", "s3cr3t-token-value"
	tests := []struct {
		name   string
		args   []string
		code   int
		golden string // of stdout (ExitOK) or stderr
	}{
		{"add", []string{"servers", "add", "mem", "--command", "switchboard", "--arg", "demo-server",
			"--env", demoEnv + "=1", "--env", "MEMORY_FILE_PATH=" + plain, "--secret-env", "API_TOKEN=" + secret, "--connect"},
			ExitOK, "servers_add_env.txt"},
		{"both", []string{"servers", "add", "dup", "--command", "switchboard", "--env", "K=a", "--secret-env", "K=b"},
			ExitUsage, "servers_add_env_both.txt"},
		{"malformed", []string{"servers", "add", "bad", "--command", "switchboard", "--secret-env", "NOVALUE"},
			ExitUsage, "servers_add_env_malformed.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			got := out
			if code != ExitOK {
				got = errOut
			}
			checkGolden(t, tt.golden, normalizeText(got))
		})
	}

	waitFor(t, "mem to connect", func() bool {
		_, out, _ := run("status")
		return strings.Contains(out, "CONNECTED")
	})
	// The store (and its WAL) holds the setting in clear, the secret not.
	var stored []byte
	for _, f := range []string{"switchboard.db", "switchboard.db-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		stored = append(stored, b...)
	}
	if !bytes.Contains(stored, []byte(plain)) {
		t.Errorf("the --env value %q is not stored as it is", plain)
	}
	if bytes.Contains(stored, []byte(secret)) {
		t.Errorf("the --secret-env value is stored in clear")
	}
}
