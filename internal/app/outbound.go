package app

import (
	"context"
	"errors"
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

// checkConfiguredURL refuses at start a URL of the config file that the
// guard refuses by scheme, address literal or name. It does not resolve
// names, so that a slow or absent DNS cannot hold the start; the dialer
// checks every address it connects to anyway.
func checkConfiguredURL(g *netguard.Guard, field, rawURL string) error {
	if rawURL == "" {
		return nil
	}
	if err := g.CheckURLLiteral(rawURL); errors.Is(err, netguard.ErrBlocked) {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

// checkOutbound refuses a server definition registered at runtime whose url
// or health_check_url the guard refuses, before anything is stored or
// started. A host that does not resolve (yet) is accepted: the connect
// checks again, and so does every dial.
func (r *registry) checkOutbound(ctx context.Context, def *config.Server) error {
	if r.guard == nil || def.Transport == config.TransportStdio {
		return nil
	}
	for _, f := range []struct{ field, url string }{{"url", def.URL}, {"health_check_url", def.HealthCheckURL}} {
		if f.url == "" {
			continue
		}
		if err := r.guard.CheckURL(ctx, f.url); errors.Is(err, netguard.ErrBlocked) {
			return fmt.Errorf("servers.%s.%s: %w", def.Name, f.field, err)
		}
	}
	return nil
}
