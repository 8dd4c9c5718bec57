package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// UpstreamConfig is the organisation's OpenID Connect provider, where
// users sign in (authorization code + PKCE). Register the gateway there as
// a confidential web client with the redirect URI Issuer + "/oauth/callback".
type UpstreamConfig struct {
	// Issuer is the provider's issuer URL; its discovery document is read
	// from Issuer + "/.well-known/openid-configuration".
	Issuer       string
	ClientID     string
	ClientSecret string // the value (the app resolves the secret reference); "" for a public client
	// Scopes asked of the provider; nil means openid, profile and email.
	Scopes []string
	// Claim names of the provider's ID token (defaults in parentheses):
	// SubjectClaim ("sub") becomes the user's agent ID, which grants name;
	// RolesClaim ("roles"), WorkspaceClaim ("workspace"), AllowClaim
	// ("mcpServerAllowIds"), DenyClaim ("mcpServerDenyIds") and AdminClaim
	// ("isAdmin") carry over into the access tokens under the names the
	// resource server reads by default.
	SubjectClaim, RolesClaim, WorkspaceClaim, AllowClaim, DenyClaim, AdminClaim string
}

func (u *UpstreamConfig) fill() error {
	if err := checkEndpoint(u.Issuer); err != nil {
		return fmt.Errorf("authserver config: Upstream.Issuer: %w", err)
	}
	u.Issuer = strings.TrimSuffix(u.Issuer, "/")
	if u.ClientID == "" {
		return errors.New("authserver config: Upstream.ClientID is required")
	}
	if u.Scopes == nil {
		u.Scopes = []string{"openid", "profile", "email"}
	}
	if !slices.Contains(u.Scopes, "openid") {
		return errors.New("authserver config: Upstream.Scopes must include openid")
	}
	for _, c := range []struct {
		p   *string
		def string
	}{
		{&u.SubjectClaim, "sub"}, {&u.RolesClaim, "roles"}, {&u.WorkspaceClaim, "workspace"},
		{&u.AllowClaim, "mcpServerAllowIds"}, {&u.DenyClaim, "mcpServerDenyIds"}, {&u.AdminClaim, "isAdmin"},
	} {
		if *c.p == "" {
			*c.p = c.def
		}
	}
	return nil
}

// checkEndpoint accepts https URLs, and http to a loopback address (a
// provider in a test, or on the same machine).
func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("%q is not an http(s) URL", raw)
	case u.Scheme == "http" && !isLoopbackHost(u.Hostname()):
		return fmt.Errorf("%q must be https (http only to a loopback address)", raw)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("%q must have no query, fragment or credentials", raw)
	}
	return nil
}

// discoveryTTL is how long the provider's discovery document is reused.
const discoveryTTL = time.Hour

// upstream signs users in at the provider.
type upstream struct {
	cfg UpstreamConfig
	s   *Server

	mu     sync.Mutex
	disc   discovery
	discAt time.Time
}

type discovery struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
}

// discover reads (and caches) the provider's endpoints.
func (u *upstream) discover(ctx context.Context) (discovery, error) {
	now := u.s.clock()
	u.mu.Lock()
	if !u.discAt.IsZero() && now.Sub(u.discAt) < discoveryTTL {
		d := u.disc
		u.mu.Unlock()
		return d, nil
	}
	u.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.cfg.Issuer+"/.well-known/openid-configuration", nil)
	if err != nil {
		return discovery{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := u.s.httpc.Do(req)
	if err != nil {
		return discovery{}, fmt.Errorf("identity provider discovery: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return discovery{}, fmt.Errorf("identity provider discovery: status %s", resp.Status)
	}
	var d discovery
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&d); err != nil {
		return discovery{}, fmt.Errorf("identity provider discovery: %w", err)
	}
	if strings.TrimSuffix(d.Issuer, "/") != u.cfg.Issuer {
		return discovery{}, fmt.Errorf("identity provider discovery: issuer %q is not the configured %q", d.Issuer, u.cfg.Issuer)
	}
	for _, e := range []string{d.AuthorizationEndpoint, d.TokenEndpoint} {
		if err := checkEndpoint(e); err != nil {
			return discovery{}, fmt.Errorf("identity provider discovery: endpoint %w", err)
		}
	}
	u.mu.Lock()
	u.disc, u.discAt = d, now
	u.mu.Unlock()
	return d, nil
}

func (u *upstream) oauth2(d discovery) *oauth2.Config {
	return &oauth2.Config{
		ClientID: u.cfg.ClientID, ClientSecret: u.cfg.ClientSecret, Scopes: u.cfg.Scopes,
		RedirectURL: u.s.url(PathCallback),
		Endpoint:    oauth2.Endpoint{AuthURL: d.AuthorizationEndpoint, TokenURL: d.TokenEndpoint},
	}
}

// upstreamSecret is what a request keeps, sealed, for its sign-in at the
// provider.
type upstreamSecret struct {
	Verifier string `json:"verifier"`
	Nonce    string `json:"nonce"`
}

// begin prepares req's sign-in at the provider and returns the URL to send
// the browser to.
func (u *upstream) begin(ctx context.Context, req *store.OAuthRequest) (string, error) {
	d, err := u.discover(ctx)
	if err != nil {
		return "", err
	}
	state, sec := random(32), upstreamSecret{Verifier: oauth2.GenerateVerifier(), Nonce: random(16)}
	raw, err := json.Marshal(sec)
	if err != nil {
		return "", err
	}
	if req.IdPSecret, err = u.s.seal.Seal(string(raw)); err != nil {
		return "", err
	}
	req.IdPStateHash = hash(state)
	return u.oauth2(d).AuthCodeURL(state, oauth2.S256ChallengeOption(sec.Verifier), oauth2.SetAuthURLParam("nonce", sec.Nonce)), nil
}

// serveCallback is where the provider sends the browser back.
func (s *Server) serveCallback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if s.upstream == nil {
		s.errorPage(w, http.StatusNotFound, "This gateway signs users in with API keys, not at an identity provider.")
		return
	}
	if r.Method != http.MethodGet {
		s.errorPage(w, http.StatusMethodNotAllowed, "The identity provider's answer comes as a GET.")
		return
	}
	q := r.URL.Query()
	row, err := s.db.OAuthRequestByIdPState(ctx, hash(q.Get("state")))
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("OAuth callback: store failed", "err", err)
		}
		s.errorPage(w, http.StatusBadRequest, "This sign-in has expired or was already completed. Start again from your application.")
		return
	}
	p, ok := s.pending(w, r, row.ID)
	if !ok {
		return
	}
	if e := q.Get("error"); e != "" {
		if _, err := s.db.TakeOAuthRequest(ctx, row.ID); err != nil {
			s.errorPage(w, http.StatusBadRequest, "This sign-in was already answered.")
			return
		}
		s.log.Info("OAuth sign-in refused by the identity provider", "client_id", p.client.ID, "error", truncate(e))
		code := errAccessDenied
		if e != "access_denied" && e != "login_required" && e != "consent_required" {
			code = errServerError
		}
		s.redirectError(w, r, p.params, code, "the identity provider did not sign the user in")
		return
	}
	id, err := s.upstream.finish(ctx, row, q.Get("code"))
	if err != nil {
		s.log.Warn("OAuth sign-in at the identity provider failed", "client_id", p.client.ID, "err", err)
		s.errorPage(w, http.StatusBadGateway, "Signing in at the identity provider failed. Start again from your application.")
		return
	}
	s.signedIn(w, r, p, id)
}

// finish exchanges the provider's code and reads who signed in from its
// ID token.
func (u *upstream) finish(ctx context.Context, row store.OAuthRequest, code string) (authz.Identity, error) {
	if code == "" {
		return authz.Identity{}, errors.New("no code in the answer")
	}
	plain, _, err := u.s.seal.Open(row.IdPSecret)
	if err != nil {
		return authz.Identity{}, fmt.Errorf("opening the sign-in's verifier: %w", err)
	}
	var sec upstreamSecret
	if err := json.Unmarshal([]byte(plain), &sec); err != nil {
		return authz.Identity{}, fmt.Errorf("decoding the sign-in's verifier: %w", err)
	}
	d, err := u.discover(ctx)
	if err != nil {
		return authz.Identity{}, err
	}
	tok, err := u.oauth2(d).Exchange(context.WithValue(ctx, oauth2.HTTPClient, u.s.httpc), code, oauth2.VerifierOption(sec.Verifier))
	if err != nil {
		return authz.Identity{}, fmt.Errorf("exchanging the code: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return authz.Identity{}, errors.New("the token response has no id_token (is the openid scope allowed?)")
	}
	return u.identity(raw, d, sec.Nonce)
}

// identity checks the ID token's claims and maps them to an identity. Its
// signature is not checked: it came straight from the provider's token
// endpoint over TLS (or loopback), which OpenID Connect Core §3.1.3.7
// (6) accepts in place of the signature, and which spares a second JWKS
// client. Issuer, audience, expiry and nonce are checked (§3.1.3.7 2-3,
// 9, 11).
func (u *upstream) identity(raw string, d discovery, nonce string) (authz.Identity, error) {
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(raw, claims); err != nil {
		return authz.Identity{}, fmt.Errorf("id_token: %w", err)
	}
	str := func(name string) string { v, _ := claims[name].(string); return v }
	aud, err := claims.GetAudience()
	if err != nil {
		return authz.Identity{}, errors.New("id_token: aud is malformed")
	}
	exp, err := claims.GetExpirationTime()
	switch {
	case str("iss") != d.Issuer:
		return authz.Identity{}, errors.New("id_token: wrong issuer")
	case !slices.Contains(aud, u.cfg.ClientID):
		return authz.Identity{}, errors.New("id_token: not issued to this gateway")
	case len(aud) > 1 && str("azp") != u.cfg.ClientID:
		return authz.Identity{}, errors.New("id_token: azp is not this gateway")
	case err != nil || exp == nil || !u.s.clock().Before(exp.Add(time.Minute)):
		return authz.Identity{}, errors.New("id_token: expired or without exp")
	case nonce == "" || str("nonce") != nonce:
		return authz.Identity{}, errors.New("id_token: wrong nonce")
	case str("sub") == "":
		return authz.Identity{}, errors.New("id_token: no sub")
	}
	c := u.cfg
	agent := str(c.SubjectClaim)
	if agent == "" {
		return authz.Identity{}, fmt.Errorf("id_token: no %s claim to name the user by", c.SubjectClaim)
	}
	id := authz.Identity{
		ID: "oidc:" + d.Issuer + "|" + str("sub"), AgentID: agent, Method: "oidc",
		Roles: listOf(claims[c.RolesClaim]), Workspace: str(c.WorkspaceClaim),
		AllowServers: listOf(claims[c.AllowClaim]), DenyServers: listOf(claims[c.DenyClaim]),
	}
	switch v := claims[c.AdminClaim].(type) {
	case bool:
		id.Admin = v
	case string:
		id.Admin = strings.EqualFold(v, "true")
	}
	for _, name := range []string{c.AllowClaim, c.DenyClaim, c.AdminClaim} {
		if _, ok := claims[name]; ok {
			id.WorkspacePolicy = true
		}
	}
	return id, nil
}

// listOf reads a claim that is a list of strings or one separated string,
// as providers emit both.
func listOf(v any) []string {
	var out []string
	switch v := v.(type) {
	case string:
		out = strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && strings.TrimSpace(s) != "" {
				out = append(out, strings.TrimSpace(s))
			}
		}
	}
	return out
}
