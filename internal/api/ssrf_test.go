package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/netguard"
)

func TestSSRFBlockedMapping(t *testing.T) {
	g, err := netguard.New(netguard.Policy{DenyLoopback: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url     string
		details map[string]any
	}{
		{"http://169.254.169.254/latest/meta-data/", map[string]any{"host": "169.254.169.254", "address": "169.254.169.254", "reason": "metadata"}},
		{"http://metadata.google.internal/", map[string]any{"host": "metadata.google.internal", "reason": "metadata"}},
		{"http://127.0.0.1:8080/mcp", map[string]any{"host": "127.0.0.1", "address": "127.0.0.1", "reason": "loopback"}},
		{"file:///etc/passwd", map[string]any{"reason": "scheme"}},
	} {
		cerr := g.CheckURL(context.Background(), tc.url)
		if cerr == nil {
			t.Fatalf("CheckURL(%q) = nil", tc.url)
		}
		// The registry wraps the refusal with the field it came from.
		e := toError(fmt.Errorf("servers.x.url: %w", cerr))
		if e.Status != http.StatusBadRequest || e.Code != CodeSSRFBlocked || e.Message != "servers.x.url: "+cerr.Error() {
			t.Errorf("toError(%q) = %d %s %q, want 400 %s with the guard's message", tc.url, e.Status, e.Code, e.Message, CodeSSRFBlocked)
		}
		if diff := cmp.Diff(tc.details, e.Details); diff != "" {
			t.Errorf("details of %q (-want +got):\n%s", tc.url, diff)
		}
	}
}
