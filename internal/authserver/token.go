package authserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/identity"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// claimGrant names the grant an access token was issued under, so that the
// resource server can refuse the tokens of a revoked grant.
const claimGrant = "grant_id"

// tokenResponse is RFC 6749 §5.1's answer.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope"`
}

// serveToken is the token endpoint.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	form, oerr := readForm(w, r)
	if oerr == nil {
		var c store.OAuthClient
		c, oerr = s.authenticateClient(r, form)
		if oerr == nil {
			var resp tokenResponse
			switch gt := form.Get("grant_type"); gt {
			case "authorization_code":
				resp, oerr = s.exchangeCode(r.Context(), c, form)
			case "refresh_token":
				resp, oerr = s.refresh(r.Context(), c, form)
			case "":
				oerr = badRequest(errInvalidRequest, "grant_type is required")
			default:
				oerr = badRequest(errUnsupportedGrantType, "grant_type %q is not supported", truncate(gt))
			}
			if oerr == nil {
				noStore(w)
				writeJSON(w, http.StatusOK, resp)
				return
			}
		}
	}
	writeError(w, oerr)
}

// authenticateClient identifies the client of a token or revocation
// request: HTTP Basic, or client_id (and client_secret) in the body (RFC
// 6749 §2.3.1). A confidential client must prove its secret; a public one
// must not send one.
func (s *Server) authenticateClient(r *http.Request, form url.Values) (store.OAuthClient, *oauthError) {
	id, secret, basic := r.BasicAuth()
	if basic {
		if form.Has("client_secret") {
			return store.OAuthClient{}, badRequest(errInvalidRequest, "use one client authentication method, not two")
		}
		var err1, err2 error
		id, err1 = url.QueryUnescape(id)
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil {
			return store.OAuthClient{}, &oauthError{Code: errInvalidClient, Description: "malformed Basic credentials", status: http.StatusUnauthorized, basic: true}
		}
		if fid := form.Get("client_id"); fid != "" && fid != id {
			return store.OAuthClient{}, badRequest(errInvalidRequest, "client_id differs from the Basic credentials")
		}
	} else {
		id, secret = form.Get("client_id"), form.Get("client_secret")
	}
	refuse := func(desc string) (store.OAuthClient, *oauthError) {
		return store.OAuthClient{}, &oauthError{Code: errInvalidClient, Description: desc, status: http.StatusUnauthorized, basic: basic}
	}
	if id == "" {
		return refuse("client authentication is required (client_id)")
	}
	c, err := s.client(r.Context(), id)
	if err != nil {
		var oe *oauthError
		switch {
		case errors.Is(err, errUnknownClient):
			return refuse("unknown client")
		case errors.As(err, &oe):
			return refuse(oe.Description)
		}
		s.log.Warn("OAuth client lookup failed", "err", err)
		return store.OAuthClient{}, unavailable()
	}
	switch {
	case c.SecretHash == "" && secret != "":
		return refuse("this client is public: it has no secret")
	case c.SecretHash != "" && secret == "":
		return refuse("client secret required")
	case c.SecretHash != "" && subtle.ConstantTimeCompare([]byte(hash(secret)), []byte(c.SecretHash)) != 1:
		return refuse("wrong client secret")
	}
	return c, nil
}

// exchangeCode is the authorization_code grant. The code is spent by the
// first attempt whatever its outcome; a second use of it revokes the grant
// its first use created (OAuth 2.1 §4.1.3), since one of the two users of
// the code is an attacker.
func (s *Server) exchangeCode(ctx context.Context, c store.OAuthClient, form url.Values) (tokenResponse, *oauthError) {
	code, verifier := form.Get("code"), form.Get("code_verifier")
	switch {
	case code == "":
		return tokenResponse{}, badRequest(errInvalidRequest, "code is required")
	case verifier == "":
		return tokenResponse{}, badRequest(errInvalidRequest, "code_verifier is required (PKCE)")
	case !validVerifier(verifier):
		return tokenResponse{}, badRequest(errInvalidRequest, "code_verifier must be 43 to 128 characters of [A-Za-z0-9-._~]")
	}
	now := s.clock()
	row, err := s.db.UseOAuthCode(ctx, hash(code), now)
	invalid := badRequest(errInvalidGrant, "the code is invalid, expired or already used")
	switch {
	case errors.Is(err, store.ErrNotFound):
		return tokenResponse{}, invalid
	case errors.Is(err, store.ErrTokenUsed):
		if row.GrantID != "" {
			s.revoke(ctx, row.GrantID, "authorization code used twice")
		}
		s.log.Warn("OAuth authorization code reused", "client_id", row.ClientID, "grant", row.GrantID)
		return tokenResponse{}, invalid
	case err != nil:
		s.log.Warn("OAuth token: store failed", "err", err)
		return tokenResponse{}, unavailable()
	}
	if row.ClientID != c.ID || !now.Before(row.ExpiresAt) {
		return tokenResponse{}, invalid
	}
	if ru := form.Get("redirect_uri"); ru != "" && ru != row.RedirectURI {
		return tokenResponse{}, badRequest(errInvalidGrant, "redirect_uri differs from the authorization request's")
	}
	sum := sha256.Sum256([]byte(verifier))
	if subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(row.CodeChallenge)) != 1 {
		return tokenResponse{}, badRequest(errInvalidGrant, "code_verifier does not match the code_challenge")
	}
	if res := form.Get("resource"); res != "" {
		if got, ok := s.resourceFor(res); !ok || got != row.Resource {
			return tokenResponse{}, badRequest(errInvalidTarget, "resource differs from the authorization request's")
		}
	}
	var id authz.Identity
	if err := json.Unmarshal(row.Subject, &id); err != nil {
		return tokenResponse{}, invalid
	}
	g := store.OAuthGrant{
		ID: "g_" + random(12), ClientID: c.ID, Subject: id.AgentID, Identity: row.Subject,
		Scope: row.Scope, Resource: row.Resource, CreatedAt: now, ExpiresAt: now.Add(s.cfg.AccessTokenTTL),
	}
	refresh := ""
	if slices.Contains(c.GrantTypes, "refresh_token") {
		refresh = prefixRefresh + random(32)
		g.ExpiresAt = now.Add(s.cfg.RefreshTokenTTL)
	}
	err = s.db.Transact(ctx, func(tx *store.DB) error {
		if err := tx.CreateOAuthGrant(ctx, g); err != nil {
			return err
		}
		if err := tx.SetOAuthCodeGrant(ctx, row.Hash, g.ID); err != nil {
			return err
		}
		if refresh == "" {
			return nil
		}
		return tx.CreateOAuthRefreshToken(ctx, store.OAuthRefreshToken{Hash: hash(refresh), GrantID: g.ID, CreatedAt: now, ExpiresAt: g.ExpiresAt})
	})
	if err != nil {
		s.log.Warn("OAuth token: store failed", "err", err)
		return tokenResponse{}, unavailable()
	}
	resp, oerr := s.issue(ctx, g, id, g.Scope, g.Resource)
	if oerr != nil {
		return tokenResponse{}, oerr
	}
	resp.RefreshToken = refresh
	s.log.Info("OAuth tokens issued", "client_id", c.ID, "grant", g.ID, "agent", id.AgentID, "refresh", refresh != "")
	return resp, nil
}

// validVerifier is RFC 7636 §4.1's code_verifier.
func validVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for _, r := range v {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r)) {
			return false
		}
	}
	return true
}

// refresh is the refresh_token grant with rotation: each refresh token is
// good once, and presenting a spent one (a copy used by an attacker, or by
// the client after the attacker) revokes the whole grant.
func (s *Server) refresh(ctx context.Context, c store.OAuthClient, form url.Values) (tokenResponse, *oauthError) {
	rt := form.Get("refresh_token")
	if rt == "" {
		return tokenResponse{}, badRequest(errInvalidRequest, "refresh_token is required")
	}
	if !slices.Contains(c.GrantTypes, "refresh_token") {
		return tokenResponse{}, badRequest(errUnauthorizedClient, "this client did not register the refresh_token grant")
	}
	now := s.clock()
	invalid := badRequest(errInvalidGrant, "the refresh token is invalid, expired, revoked or already used")
	tok, err := s.db.UseOAuthRefreshToken(ctx, hash(rt), now)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return tokenResponse{}, invalid
	case errors.Is(err, store.ErrTokenUsed):
		s.revoke(ctx, tok.GrantID, "refresh token reused")
		s.log.Warn("OAuth refresh token reused: grant revoked", "client_id", c.ID, "grant", tok.GrantID)
		return tokenResponse{}, invalid
	case err != nil:
		s.log.Warn("OAuth refresh: store failed", "err", err)
		return tokenResponse{}, unavailable()
	}
	g, err := s.db.OAuthGrant(ctx, tok.GrantID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return tokenResponse{}, invalid
	case err != nil:
		return tokenResponse{}, unavailable()
	case g.ClientID != c.ID:
		// Another client's token: as good as stolen.
		s.revoke(ctx, g.ID, "refresh token presented by another client")
		return tokenResponse{}, invalid
	case g.RevokedAt != nil || !now.Before(tok.ExpiresAt):
		return tokenResponse{}, invalid
	}
	scope := g.Scope
	if asked := form.Get("scope"); asked != "" {
		granted := strings.Fields(g.Scope)
		for sc := range strings.FieldsSeq(asked) {
			if !slices.Contains(granted, sc) {
				return tokenResponse{}, badRequest(errInvalidScope, "scope %q was not granted", truncate(sc))
			}
		}
		scope = strings.Join(strings.Fields(asked), " ")
	}
	resource := g.Resource
	if res := form.Get("resource"); res != "" {
		got, ok := s.resourceFor(res)
		if !ok || (got != g.Resource && g.Resource != s.cfg.Issuer) {
			return tokenResponse{}, badRequest(errInvalidTarget, "resource is not within the grant's")
		}
		resource = got
	}
	var id authz.Identity
	if err := json.Unmarshal(g.Identity, &id); err != nil {
		return tokenResponse{}, invalid
	}
	next := prefixRefresh + random(32)
	expires := now.Add(s.cfg.RefreshTokenTTL)
	err = s.db.Transact(ctx, func(tx *store.DB) error {
		if err := tx.CreateOAuthRefreshToken(ctx, store.OAuthRefreshToken{Hash: hash(next), GrantID: g.ID, CreatedAt: now, ExpiresAt: expires}); err != nil {
			return err
		}
		return tx.RefreshOAuthGrant(ctx, g.ID, now, expires)
	})
	if err != nil {
		s.log.Warn("OAuth refresh: store failed", "err", err)
		return tokenResponse{}, unavailable()
	}
	resp, oerr := s.issue(ctx, g, id, scope, resource)
	if oerr != nil {
		return tokenResponse{}, oerr
	}
	resp.RefreshToken = next
	s.log.Debug("OAuth tokens refreshed", "client_id", c.ID, "grant", g.ID)
	return resp, nil
}

// issue signs an access token for the grant's user: the claims package
// identity maps to an identity (sub is the agent; roles, workspace and seed
// 003's workspace policy as the user's credential carried them).
func (s *Server) issue(ctx context.Context, g store.OAuthGrant, id authz.Identity, scope, resource string) (tokenResponse, *oauthError) {
	now := s.clock()
	exp := now.Add(s.cfg.AccessTokenTTL)
	claims := jwt.MapClaims{
		"iss": s.cfg.Issuer, "sub": id.AgentID, "aud": resource, "iat": now.Unix(), "nbf": now.Unix(),
		"exp": exp.Unix(), "jti": random(16), "client_id": g.ClientID, "scope": scope, claimGrant: g.ID,
	}
	if len(id.Roles) > 0 {
		claims["roles"] = id.Roles
	}
	if id.Workspace != "" {
		claims["workspace"] = id.Workspace
	}
	switch {
	case id.WorkspacePolicy:
		claims["isAdmin"] = id.Admin
		claims["mcpServerAllowIds"] = nonNil(id.AllowServers)
		claims["mcpServerDenyIds"] = nonNil(id.DenyServers)
	case id.Admin:
		// An admin is authorized to everything under either rule.
		claims["isAdmin"] = true
	}
	at, err := s.sign(ctx, claims)
	if err != nil {
		s.log.Warn("OAuth token: signing failed", "err", err)
		return tokenResponse{}, unavailable()
	}
	return tokenResponse{AccessToken: at, TokenType: "Bearer", ExpiresIn: int64(s.cfg.AccessTokenTTL.Seconds()), Scope: scope}, nil
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// serveRevoke is token revocation (RFC 7009). Revoking either token of a
// grant revokes the grant: its refresh tokens and, through
// [Server.CheckToken], its access tokens. An unknown or foreign token is
// answered 200 like a revoked one (§2.2), so the endpoint tells nothing.
func (s *Server) serveRevoke(w http.ResponseWriter, r *http.Request) {
	form, oerr := readForm(w, r)
	if oerr != nil {
		writeError(w, oerr)
		return
	}
	c, oerr := s.authenticateClient(r, form)
	if oerr != nil {
		writeError(w, oerr)
		return
	}
	tok := form.Get("token")
	if tok == "" {
		writeError(w, badRequest(errInvalidRequest, "token is required"))
		return
	}
	ctx := r.Context()
	grant := ""
	if strings.HasPrefix(tok, prefixRefresh) {
		if g, err := s.grantOfRefreshToken(ctx, tok); err == nil {
			grant = g
		}
	} else if claims, err := s.parseOwn(ctx, tok); err == nil {
		if cid, _ := claims["client_id"].(string); cid == c.ID {
			grant, _ = claims[claimGrant].(string)
		}
	}
	if grant != "" {
		g, err := s.db.OAuthGrant(ctx, grant)
		if err == nil && g.ClientID == c.ID {
			s.revoke(ctx, g.ID, "revoked by the client")
		}
	}
	noStore(w)
	w.WriteHeader(http.StatusOK)
}

// grantOfRefreshToken spends a refresh token presented for revocation
// and returns its grant, which the caller then revokes: spent or not, the
// token names its grant.
func (s *Server) grantOfRefreshToken(ctx context.Context, tok string) (string, error) {
	t, err := s.db.UseOAuthRefreshToken(ctx, hash(tok), s.clock())
	if err != nil && !errors.Is(err, store.ErrTokenUsed) {
		return "", err
	}
	return t.GrantID, nil
}

// revoke revokes a grant, tells the other replicas, and forgets it here.
// Failures are logged: the caller's answer does not change.
func (s *Server) revoke(ctx context.Context, grantID, reason string) {
	ctx = context.WithoutCancel(ctx) // a revocation must not stop halfway because the client left
	revoked, err := s.db.RevokeOAuthGrant(ctx, grantID, reason, s.clock())
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Error("OAuth grant revocation failed", "grant", grantID, "reason", reason, "err", err)
		}
		return
	}
	s.grants.set(grantID, false, time.Time{})
	if err := s.db.Notify(ctx, notifyGrants, grantID); err != nil {
		s.log.Warn("OAuth grant revocation not announced to other replicas; they notice within the cache TTL", "grant", grantID, "err", err)
	}
	if revoked {
		s.log.Info("OAuth grant revoked", "grant", grantID, "reason", reason)
	}
}

// grantCacheTTL is how long this replica trusts that a grant stands
// without asking the store; a revocation on another replica reaches it
// sooner through the store's notifications, or at the latest after this.
const grantCacheTTL = 30 * time.Second

// maxGrantCache bounds the cache; past it, it starts over.
const maxGrantCache = 10000

type grantEntry struct {
	active bool
	until  time.Time // for active entries; revoked ones stay
}

type grantCache struct {
	mu      sync.Mutex
	entries map[string]grantEntry
}

func (c *grantCache) get(id string, now time.Time) (grantEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if ok && e.active && !now.Before(e.until) {
		return grantEntry{}, false
	}
	return e, ok
}

func (c *grantCache) set(id string, active bool, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxGrantCache {
		clear(c.entries)
	}
	c.entries[id] = grantEntry{active: active, until: until}
}

func (c *grantCache) forget(id string) {
	c.mu.Lock()
	delete(c.entries, id)
	c.mu.Unlock()
}

func (c *grantCache) clear() {
	c.mu.Lock()
	clear(c.entries)
	c.mu.Unlock()
}

// CheckToken is the resource server's question about an access token this
// server signed (identity.OAuthConfig.Check): does the grant it names still
// stand? It answers an *identity.Error for a revoked or unknown grant, and
// an error wrapping identity.ErrUnavailable when the store cannot tell.
func (s *Server) CheckToken(ctx context.Context, claims map[string]any) error {
	id, _ := claims[claimGrant].(string)
	if id == "" {
		return &identity.Error{Code: identity.CodeInvalid, Reason: "token names no grant"}
	}
	now := s.clock()
	if e, ok := s.grants.get(id, now); ok {
		if e.active {
			return nil
		}
		return &identity.Error{Code: identity.CodeInvalid, Reason: "token's grant was revoked"}
	}
	g, err := s.db.OAuthGrant(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.grants.set(id, false, time.Time{})
		return &identity.Error{Code: identity.CodeInvalid, Reason: "token's grant was revoked"}
	case err != nil:
		return errors.Join(identity.ErrUnavailable, err)
	case g.RevokedAt != nil:
		s.grants.set(id, false, time.Time{})
		return &identity.Error{Code: identity.CodeInvalid, Reason: "token's grant was revoked"}
	}
	s.grants.set(id, true, now.Add(grantCacheTTL))
	return nil
}
