package app

import (
	"fmt"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
)

// outboundGuard is the SSRF policy of every URL the gateway fetches for its
// configuration or its callers: upstreams, health checks, JWKS, embeddings
// and the LLM classifier all get clients built from it.
func outboundGuard(s config.Settings) (*netguard.Guard, error) {
	var o netguard.Options
	if s.OutboundProxyFromEnv {
		o.Proxy = http.ProxyFromEnvironment
	}
	g, err := netguard.New(netguard.Policy{
		DenyPrivate:  s.OutboundDenyPrivate,
		DenyLoopback: s.OutboundDenyLoopback,
		Allow:        s.OutboundAllow,
	}, &o)
	if err != nil {
		return nil, fmt.Errorf("settings.outbound_allow: %w", err)
	}
	return g, nil
}
