package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/authserver"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/identity"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// newAuthServer builds the built-in authorization server of auth.mode
// oauth without an issuer (docs/auth.md) and points the resource server
// (oc) at it: its issuer, its keys in process, its revocation check. signIn
// checks the API key a user signs in with when no OpenID provider is
// configured. It returns nil when the config asks for no such server.
func newAuthServer(cfg *config.Config, listen, scheme string, oc *identity.OAuthConfig, keys *secrets.Keyring, db *store.DB,
	guard *netguard.Guard, getenv func(string) string, logger *slog.Logger,
	signIn func(context.Context, string) (authz.Identity, error)) (*authserver.Server, error) {
	if cfg.Auth == nil || cfg.Auth.Mode != config.AuthOAuth || !cfg.Auth.OAuth.BuiltIn() || listen == "" || oc == nil {
		return nil, nil
	}
	if keys == nil {
		return nil, config.Errors{{File: cfg.File, Field: "auth.oauth", Msg: "the built-in authorization server keeps its signing keys sealed: " +
			"configure a secret key (SWITCHBOARD_SECRET_KEY or SWITCHBOARD_SECRET_KEY_FILE), or give an external issuer"}}
	}
	issuer := oc.Resource
	if issuer == "" {
		// Loopback only (identity.FromConfig requires resource elsewhere).
		issuer = scheme + "://" + listen
	}
	c, err := authserver.FromConfig(cfg.Auth.OAuth, issuer, getenv)
	if err != nil {
		return nil, err
	}
	if u := c.Upstream; u != nil {
		if err := guard.CheckConfigured("auth.oauth.server.upstream.issuer", u.Issuer); err != nil {
			return nil, err
		}
	}
	srv, err := authserver.New(db, keys, c, &authserver.Options{Logger: logger.With("component", "authserver"),
		HTTPClient: guard.Client(10 * time.Second), SignIn: signIn})
	if err != nil {
		return nil, fmt.Errorf("auth.oauth (built-in authorization server): %w", err)
	}
	oc.Token.Issuer, oc.Token.KeySet, oc.Check = issuer, srv.KeySet, srv.CheckToken
	logger.Info("built-in OAuth authorization server", "issuer", issuer, "sign_in", map[bool]string{true: "OpenID provider", false: "API key"}[c.Upstream != nil])
	return srv, nil
}
