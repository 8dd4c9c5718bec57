package identity

import (
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// TestFromConfigLeeway: leeway_seconds 0 in the file means no leeway, not
// the default.
func TestFromConfigLeeway(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want time.Duration
	}{
		{"auth:\n  mode: oauth\n  oauth: {issuer: https://idp.example, jwks_url: https://idp.example/k, leeway_seconds: 0}\n", time.Nanosecond},
		{"auth:\n  mode: oauth\n  oauth: {issuer: https://idp.example, jwks_url: https://idp.example/k}\n", DefaultLeeway},
		{"auth:\n  mode: oauth\n  oauth: {issuer: https://idp.example, jwks_url: https://idp.example/k, leeway_seconds: 5}\n", 5 * time.Second},
	} {
		cfg, err := config.Parse("s.yaml", []byte(tc.yaml), func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		ic, _, err := FromConfig(cfg, "127.0.0.1:0", func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		if got := ic.OAuth.Token.Leeway; got != tc.want {
			t.Errorf("%q: leeway %v, want %v", tc.yaml, got, tc.want)
		}
	}
}
