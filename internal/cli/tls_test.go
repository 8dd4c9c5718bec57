package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeTLSFlags: the flags reach the gateway, whose start reads the
// files (a missing one fails naming the field), and they go in pairs.
func TestServeTLSFlags(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfg, []byte("servers: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "switchboard.db")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--tls-cert", "/x.crt"}, "--tls-cert and --tls-key go together"},
		{"missing files", []string{"--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", filepath.Join(dir, "none.key")},
			"settings.listen_tls.cert_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"serve", "-c", cfg, "--store", store, "--listen", "127.0.0.1:0"}, tt.args...)
			code, _, stderr := run(t, args...)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want a failure naming %q", code, stderr, tt.want)
			}
		})
	}
}
