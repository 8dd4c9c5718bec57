package upstream

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/netguard"
)

// TestDefaultClientTLSMinimum checks that the client of sse/http upstreams
// refuses a server that offers only TLS 1.0/1.1 and accepts TLS 1.2 and 1.3.
func TestDefaultClientTLSMinimum(t *testing.T) {
	guard, err := netguard.New(netguard.Policy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		min, max uint16
		wantErr  string
	}{
		{name: "TLS 1.1 only", min: tls.VersionTLS10, max: tls.VersionTLS11, wantErr: "protocol version"},
		{name: "TLS 1.2 only", min: tls.VersionTLS12, max: tls.VersionTLS12},
		{name: "TLS 1.3", min: tls.VersionTLS13, max: tls.VersionTLS13},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
			srv.TLS = &tls.Config{MinVersion: tt.min, MaxVersion: tt.max}
			srv.StartTLS()
			t.Cleanup(srv.Close)

			c := defaultHTTPClient(guard)
			tr := c.Transport.(*http.Transport)
			if tr.TLSClientConfig.MinVersion != tls.VersionTLS12 {
				t.Fatalf("MinVersion = %#x, want TLS 1.2", tr.TLSClientConfig.MinVersion)
			}
			// Trust the test server's certificate, keeping the client's
			// version floor: only the version decides the outcome.
			tr.TLSClientConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
			resp, err := c.Get(srv.URL)
			if resp != nil {
				resp.Body.Close()
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("GET over %s: %v", tt.name, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("GET over %s: err = %v, want one containing %q", tt.name, err, tt.wantErr)
			}
		})
	}
}
