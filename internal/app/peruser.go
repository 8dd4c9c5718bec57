package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
	"github.com/switchboard-mcp/switchboard/internal/upstreamauth"
)

// Per-user credentials (credentials: per_user; docs/auth.md): the glue
// between the callers' accounts (upstreamauth.Set) and the per-user
// sessions of the upstream manager.

// accountSubject is whose account a caller uses: the agent, so that the
// keys and tokens of one agent share what it linked.
func accountSubject(id authz.Identity) string {
	if id.AgentID != "" {
		return id.AgentID
	}
	return id.ID
}

// userCredential is upstream.Options.UserCredential. A caller with nothing
// linked whose client declared URL-mode elicitation (MCP 2025-11-25) is
// asked, on the call, to open the authorization URL of their account; the
// call goes on once they approved. Anyone else gets
// upstream_auth_required, saying how to link.
func (a *App) userCredential(ctx context.Context, srv *config.Server) (upstream.UserCredential, error) {
	id, _ := authz.IdentityFrom(ctx)
	subject := accountSubject(id)
	c, err := a.upAuth.UserCredential(ctx, srv, subject)
	var nl *upstreamauth.NotLinkedError
	if errors.As(err, &nl) && subject != "" && c.Subject == "" {
		if peer, ok := upstream.PeerFrom(ctx); ok && elicitsURL(peer) {
			if eerr := a.elicitLink(ctx, peer, srv.Name, subject); eerr == nil {
				c, err = a.upAuth.UserCredential(ctx, srv, subject)
			} else {
				a.logger.Info("per-user account not linked through elicitation", "server", srv.Name, "subject", subject, "why", eerr.Error())
				nl = &upstreamauth.NotLinkedError{Server: srv.Name, Subject: subject, Reason: eerr.Error() + "; " + nl.Reason}
				err = nl
			}
		}
	}
	if errors.As(err, &nl) {
		return upstream.UserCredential{Subject: subject}, &upstream.UserAuthRequiredError{Server: srv.Name, Subject: subject, Reason: nl.Reason}
	}
	if err != nil {
		return upstream.UserCredential{Subject: subject}, err
	}
	return upstream.UserCredential{Subject: c.Subject, OAuth: c.OAuth, Headers: c.Headers}, nil
}

// discoveryCredential is upstream.Options.DiscoveryCredential.
func (a *App) discoveryCredential(ctx context.Context, srv *config.Server) (upstream.UserCredential, error) {
	c, err := a.upAuth.DiscoveryCredential(ctx, srv)
	var nl *upstreamauth.NotLinkedError
	if errors.As(err, &nl) {
		// The server's status says why, in the reason alone.
		return upstream.UserCredential{}, &upstream.UserAuthRequiredError{Server: srv.Name, Reason: nl.Reason}
	}
	if err != nil {
		return upstream.UserCredential{}, err
	}
	return upstream.UserCredential{Subject: c.Subject, OAuth: c.OAuth, Headers: c.Headers}, nil
}

// userLinked is upstreamauth.SetOptions.OnUserLinked: the caller's pooled
// sessions go (their next call uses the new credential), a server that
// waited for its first account connects, and a server whose own session
// went as this caller's account reconnects, as the account now most
// recently linked (the caller may have unlinked it).
func (a *App) userLinked(server, subject string) {
	if a.ups == nil {
		return
	}
	a.ups.DropUserSessions(server, subject)
	st, err := a.ups.Status(server)
	switch {
	case err != nil:
	case st.State != upstream.StateConnected && st.State != upstream.StateDegraded:
		_, _ = a.reg.Connect(a.ctx, server, false)
	case a.upAuth.DiscoverySubject(server) == subject:
		a.group.Go(func() error {
			a.logger.Info("per-user server reconnects: the account its own session used changed", "server", server, "subject", subject)
			if _, _, err := a.reg.Disconnect(a.ctx, server); err != nil {
				a.logger.Warn("per-user server reconnect", "server", server, "error", err)
				return nil
			}
			_, _ = a.reg.Connect(a.ctx, server, false)
			return nil
		})
	}
}

// elicitsURL reports whether the caller's client declared URL-mode
// elicitation.
func elicitsURL(p upstream.Peer) bool {
	c := p.Capabilities()
	return c != nil && c.Elicitation != nil && c.Elicitation.URL != nil
}

// elicitLink sends the caller the authorization URL of their account on
// server in a URL-mode elicitation and waits, as long as the call may, for
// the flow to end. nil: the account is linked.
func (a *App) elicitLink(ctx context.Context, peer upstream.Peer, server, subject string) error {
	f, err := a.upAuth.UserFlow(ctx, server, subject)
	if err != nil {
		return fmt.Errorf("starting the authorization of your account: %w", err)
	}
	res, err := peer.Elicit(ctx, &mcp.ElicitParams{
		Mode: "url", URL: f.URL, ElicitationID: rand.Text(),
		Message: fmt.Sprintf("Server %q acts as you: sign in to link your account, then the call goes on.", server),
	})
	if err != nil {
		return fmt.Errorf("the client did not take the authorization URL: %w", err)
	}
	switch res.Action {
	case "accept":
	case "decline":
		return errors.New("you declined to open the authorization URL")
	default:
		return fmt.Errorf("the authorization URL was not opened (%s)", res.Action)
	}
	if err := f.Wait(ctx); err != nil {
		return fmt.Errorf("the authorization of your account did not finish: %w", err)
	}
	return nil
}
