package app

import (
	"log/slog"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/propagate"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// newPropagate is the signer of the identity assertions sent to servers
// with an `identity` section; issuer is the gateway's public URL, httpc
// reaches the authorization servers of token exchange. Without
// a secret key it signs nothing, and says why on each call that needs it.
func newPropagate(db *store.DB, keys *secrets.Keyring, issuer string, httpc *http.Client, log *slog.Logger) *propagate.Signer {
	o := propagate.Options{Store: db, Issuer: issuer, Logger: log, HTTPClient: httpc}
	if keys != nil { // a nil *Keyring in the interface would not be nil
		o.Keyring = keys
	}
	return propagate.New(o)
}

// identityHeader is upstream.Options.Identity.
func (a *App) identityHeader(srv *config.Server) upstream.IdentityHeader {
	if f := a.propagate.For(srv); f != nil {
		return f
	}
	return nil
}
