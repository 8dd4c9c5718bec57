package authserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/identity"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// authParams is a validated authorization request, kept in the store
// between the authorization endpoint and the consent.
type authParams struct {
	ClientID    string   `json:"client_id"`
	RedirectURI string   `json:"redirect_uri"`
	State       string   `json:"state,omitempty"`
	Scopes      []string `json:"scopes"`
	Resource    string   `json:"resource"`
	Challenge   string   `json:"code_challenge"`
}

// serveAuthorize is the authorization endpoint. Until the client and its
// redirect URI are known to be right, problems are shown to the user on a
// page; after that they go back to the client on its redirect URI (RFC
// 6749 §4.1.2.1), so that an attacker cannot use the server as an open
// redirector.
func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if r.Method != http.MethodGet {
		s.errorPage(w, http.StatusMethodNotAllowed, "The authorization endpoint takes GET requests.")
		return
	}
	q := r.URL.Query()
	for _, p := range []string{"client_id", "redirect_uri"} {
		if len(q[p]) > 1 {
			s.errorPage(w, http.StatusBadRequest, fmt.Sprintf("The request names %s more than once.", p))
			return
		}
	}
	clientID := q.Get("client_id")
	if clientID == "" {
		s.errorPage(w, http.StatusBadRequest, "The request names no client (client_id is missing).")
		return
	}
	c, err := s.client(ctx, clientID)
	if err != nil {
		var oe *oauthError
		switch {
		case errors.Is(err, errUnknownClient):
			s.errorPage(w, http.StatusBadRequest, "The application that sent you here is not registered with this gateway (unknown client_id).")
		case errors.As(err, &oe):
			s.errorPage(w, http.StatusBadRequest, "The application that sent you here could not be verified: "+oe.Description)
		default:
			s.log.Warn("OAuth authorize: client lookup failed", "err", err)
			s.errorPage(w, http.StatusServiceUnavailable, "The gateway cannot answer now; try again in a moment.")
		}
		return
	}
	redirect := q.Get("redirect_uri")
	switch {
	case redirect == "" && len(c.RedirectURIs) == 1:
		redirect = c.RedirectURIs[0]
	case redirect == "":
		s.errorPage(w, http.StatusBadRequest, "The request names no redirect_uri, and the application registered several.")
		return
	case !slices.ContainsFunc(c.RedirectURIs, func(reg string) bool { return redirectMatches(reg, redirect) }):
		s.errorPage(w, http.StatusBadRequest, "The redirect_uri of the request is not one the application registered.")
		return
	}
	p := authParams{ClientID: c.ID, RedirectURI: redirect, State: q.Get("state")}
	fail := func(code, desc string) { s.redirectError(w, r, p, code, desc) }
	for k, v := range q {
		if len(v) > 1 && k != "resource" {
			fail(errInvalidRequest, "parameter "+k+" is repeated")
			return
		}
	}
	switch {
	case q.Get("response_type") != "code":
		fail(errUnsupportedResponseType, "response_type must be code")
		return
	case q.Get("code_challenge") == "":
		fail(errInvalidRequest, "code_challenge is required (PKCE with S256)")
		return
	case q.Get("code_challenge_method") != "S256":
		fail(errInvalidRequest, "code_challenge_method must be S256")
		return
	case !validChallenge(q.Get("code_challenge")):
		fail(errInvalidRequest, "code_challenge must be the 43-character base64url SHA-256 of the verifier")
		return
	case q.Has("request") || q.Has("request_uri"):
		fail("request_not_supported", "request objects are not supported")
		return
	case len(q["resource"]) > 1:
		fail(errInvalidTarget, "one resource per authorization")
		return
	}
	p.Challenge = q.Get("code_challenge")
	res, ok := s.resourceFor(q.Get("resource"))
	if !ok {
		fail(errInvalidTarget, "resource must be this gateway ("+s.cfg.Issuer+") or one of its MCP endpoints")
		return
	}
	p.Resource = res
	p.Scopes = s.requestedScopes(q.Get("scope"), c)

	params, err := json.Marshal(p)
	if err != nil {
		fail(errServerError, "encoding the request")
		return
	}
	browser := random(32)
	req := store.OAuthRequest{
		ID: random(16), BrowserHash: hash(browser), ClientID: c.ID, Params: params,
		CreatedAt: s.clock(), ExpiresAt: s.clock().Add(s.cfg.RequestTTL),
	}
	var next string
	if s.upstream != nil {
		next, err = s.upstream.begin(ctx, &req)
		if err != nil {
			s.log.Warn("OAuth authorize: upstream identity provider unavailable", "err", err)
			fail(errTemporarilyUnavailable, "the identity provider cannot be reached")
			return
		}
	} else {
		next = s.url(PathSignIn) + "?request=" + req.ID
	}
	if err := s.db.CreateOAuthRequest(ctx, req); err != nil {
		s.log.Warn("OAuth authorize: store failed", "err", err)
		fail(errTemporarilyUnavailable, "the authorization server cannot answer now")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: s.cookieName(req.ID), Value: browser, Path: "/", HttpOnly: true, Secure: s.secure,
		SameSite: http.SameSiteLaxMode, MaxAge: int(s.cfg.RequestTTL.Seconds()),
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// validChallenge: an S256 challenge is 32 bytes in unpadded base64url.
func validChallenge(c string) bool {
	b, err := base64.RawURLEncoding.DecodeString(c)
	return err == nil && len(b) == sha256.Size
}

// resourceFor checks an RFC 8707 resource indicator and returns the
// audience tokens get: the gateway (no resource named) or one of its MCP
// endpoints, as package identity accepts them.
func (s *Server) resourceFor(raw string) (string, bool) {
	if raw == "" {
		return s.cfg.Issuer, true
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != s.origin.Scheme || !strings.EqualFold(u.Host, s.origin.Host) ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", false
	}
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	switch {
	case p == "":
		return s.cfg.Issuer, true
	case identity.ResourcePath(p) == p:
		return s.cfg.Issuer + p, true
	}
	return "", false
}

// requestedScopes are the scopes of a request that the server grants, in
// the order of Config.Scopes, limited to the client's registered scope when
// it has one. Scopes the server does not know are dropped (RFC 6749 §3.3
// lets it); when none is left, or none was asked, the defaults apply.
func (s *Server) requestedScopes(raw string, c store.OAuthClient) []string {
	asked := strings.Fields(raw)
	allowed := func(sc string) bool {
		return c.Scope == "" || slices.Contains(strings.Fields(c.Scope), sc)
	}
	var out []string
	for _, sc := range s.cfg.Scopes {
		if slices.Contains(asked, sc) && allowed(sc) {
			out = append(out, sc)
		}
	}
	if len(out) == 0 {
		for _, sc := range s.cfg.DefaultScopes {
			if allowed(sc) {
				out = append(out, sc)
			}
		}
	}
	return out
}

// grantable keeps the scopes this user may grant: a scope that gives a
// role needs the role already, or an admin.
func (s *Server) grantable(scopes []string, id authz.Identity) []string {
	var out []string
	for _, sc := range scopes {
		role, mapped := s.cfg.ScopeRoles[sc]
		if !mapped || id.Admin || slices.Contains(id.Roles, role) {
			out = append(out, sc)
		}
	}
	return out
}

// redirectError sends the user back to the client with an error (RFC
// 6749 §4.1.2.1) and the issuer (RFC 9207).
func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, p authParams, code, desc string) {
	v := url.Values{"error": {code}, "error_description": {desc}}
	s.redirectBack(w, r, p, v)
}

func (s *Server) redirectBack(w http.ResponseWriter, r *http.Request, p authParams, v url.Values) {
	u, err := url.Parse(p.RedirectURI)
	if err != nil { // checked at registration
		s.errorPage(w, http.StatusBadRequest, "The application's redirect URI is not a URI.")
		return
	}
	q := u.Query()
	for k, vs := range v {
		q[k] = vs
	}
	if p.State != "" {
		q.Set("state", p.State)
	}
	q.Set("iss", s.cfg.Issuer)
	u.RawQuery = q.Encode()
	noStore(w)
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// cookieName is the cookie that binds a request to the browser that
// started it. One per request, so that two flows in one browser do not
// overwrite each other; __Host- on https pins it to this origin.
func (s *Server) cookieName(requestID string) string {
	if s.secure {
		return "__Host-sbauth-" + requestID
	}
	return "sbauth-" + requestID
}

// csrfToken is the token the sign-in and consent forms carry: an HMAC of
// the request ID under the browser's cookie, which a cross-site page can
// neither read nor compute.
func csrfToken(browser, requestID string) string {
	m := hmac.New(sha256.New, []byte(browser))
	m.Write([]byte("csrf:" + requestID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// pending is a request being signed in or consented to, checked to belong
// to this browser.
type pending struct {
	row     store.OAuthRequest
	params  authParams
	browser string // the cookie's value
	client  store.OAuthClient
}

// pending loads the request named by id and checks the browser's cookie;
// it writes the error page itself and returns false on failure.
func (s *Server) pending(w http.ResponseWriter, r *http.Request, id string) (pending, bool) {
	ctx := r.Context()
	expired := "This sign-in has expired or was already completed. Start again from your application."
	if id == "" {
		s.errorPage(w, http.StatusBadRequest, expired)
		return pending{}, false
	}
	row, err := s.db.OAuthRequest(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.errorPage(w, http.StatusBadRequest, expired)
		return pending{}, false
	case err != nil:
		s.log.Warn("OAuth sign-in: store failed", "err", err)
		s.errorPage(w, http.StatusServiceUnavailable, "The gateway cannot answer now; try again in a moment.")
		return pending{}, false
	case !s.clock().Before(row.ExpiresAt):
		s.errorPage(w, http.StatusBadRequest, expired)
		return pending{}, false
	}
	ck, err := r.Cookie(s.cookieName(id))
	if err != nil || subtle.ConstantTimeCompare([]byte(hash(ck.Value)), []byte(row.BrowserHash)) != 1 {
		s.errorPage(w, http.StatusForbidden, "This sign-in was started in another browser (or its cookie was blocked). Start again from your application.")
		return pending{}, false
	}
	var p authParams
	if err := json.Unmarshal(row.Params, &p); err != nil {
		s.errorPage(w, http.StatusBadRequest, expired)
		return pending{}, false
	}
	c, err := s.db.OAuthClient(ctx, p.ClientID)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "The application of this sign-in is no longer registered.")
		return pending{}, false
	}
	return pending{row: row, params: p, browser: ck.Value, client: c}, true
}

// readPageForm reads a POST from one of the pages and checks that it came
// from the page: same origin when the browser says, and the CSRF token.
func (s *Server) readPageForm(w http.ResponseWriter, r *http.Request) (url.Values, pending, bool) {
	form, oerr := readForm(w, r)
	if oerr != nil {
		s.errorPage(w, oerr.status, "The form could not be read: "+oerr.Description)
		return nil, pending{}, false
	}
	if o := r.Header.Get("Origin"); o != "" && o != s.cfg.Issuer {
		s.errorPage(w, http.StatusForbidden, "The form was sent from another site.")
		return nil, pending{}, false
	}
	p, ok := s.pending(w, r, form.Get("request"))
	if !ok {
		return nil, pending{}, false
	}
	want := csrfToken(p.browser, p.row.ID)
	if !hmac.Equal([]byte(form.Get("csrf")), []byte(want)) {
		s.errorPage(w, http.StatusForbidden, "The form's security token is wrong. Start again from your application.")
		return nil, pending{}, false
	}
	return form, p, true
}

// serveSignIn is the sign-in with an API key, used when no upstream
// identity provider is configured: the same key an operator signs in to
// the dashboard with.
func (s *Server) serveSignIn(w http.ResponseWriter, r *http.Request) {
	if s.upstream != nil || s.signIn == nil {
		s.errorPage(w, http.StatusNotFound, "Sign-in here is disabled: this gateway signs users in at its identity provider.")
		return
	}
	switch r.Method {
	case http.MethodGet:
		p, ok := s.pending(w, r, r.URL.Query().Get("request"))
		if !ok {
			return
		}
		s.signInPage(w, http.StatusOK, p, "")
	case http.MethodPost:
		form, p, ok := s.readPageForm(w, r)
		if !ok {
			return
		}
		key := strings.TrimSpace(form.Get("key"))
		if key == "" || strings.Count(key, ".") == 2 {
			// An access token is not a sign-in credential: it would turn a
			// leaked hour-long token into a grant that lasts.
			s.signInPage(w, http.StatusUnauthorized, p, "Enter an API key (sbk_…).")
			return
		}
		id, err := s.signIn(r.Context(), key)
		if err != nil {
			if errors.Is(err, identity.ErrUnavailable) {
				s.log.Warn("OAuth sign-in: key check failed", "err", err)
				s.errorPage(w, http.StatusServiceUnavailable, "The gateway cannot check keys now; try again in a moment.")
				return
			}
			s.log.Debug("OAuth sign-in refused", "client_id", p.client.ID, "reason", err)
			s.signInPage(w, http.StatusUnauthorized, p, "That key was not accepted.")
			return
		}
		s.signedIn(w, r, p, id)
	default:
		s.errorPage(w, http.StatusMethodNotAllowed, "Use the sign-in form.")
	}
}

// signedIn records who signed in for the request and shows the consent.
func (s *Server) signedIn(w http.ResponseWriter, r *http.Request, p pending, id authz.Identity) {
	subject, err := json.Marshal(id)
	if err == nil {
		err = s.db.SetOAuthRequestSubject(r.Context(), p.row.ID, subject)
	}
	if err != nil {
		s.log.Warn("OAuth sign-in: store failed", "err", err)
		s.errorPage(w, http.StatusServiceUnavailable, "The gateway cannot answer now; try again in a moment.")
		return
	}
	s.log.Info("OAuth user signed in", "client_id", p.client.ID, "identity", id.ID, "agent", id.AgentID)
	http.Redirect(w, r, s.url(PathConsent)+"?request="+p.row.ID, http.StatusSeeOther)
}

// serveConsent shows what the client asks for and takes the user's answer.
func (s *Server) serveConsent(w http.ResponseWriter, r *http.Request) {
	var p pending
	var form url.Values
	var ok bool
	switch r.Method {
	case http.MethodGet:
		p, ok = s.pending(w, r, r.URL.Query().Get("request"))
	case http.MethodPost:
		form, p, ok = s.readPageForm(w, r)
	default:
		s.errorPage(w, http.StatusMethodNotAllowed, "Use the consent form.")
		return
	}
	if !ok {
		return
	}
	if len(p.row.Subject) == 0 {
		s.errorPage(w, http.StatusForbidden, "Sign in first. Start again from your application.")
		return
	}
	var id authz.Identity
	if err := json.Unmarshal(p.row.Subject, &id); err != nil {
		s.errorPage(w, http.StatusBadRequest, "This sign-in is damaged. Start again from your application.")
		return
	}
	scopes := s.grantable(p.params.Scopes, id)
	if r.Method == http.MethodGet {
		s.consentPage(w, p, id, scopes)
		return
	}
	decision := form.Get("decision")
	if decision != "approve" && decision != "deny" {
		s.errorPage(w, http.StatusBadRequest, "Choose Allow or Deny.")
		return
	}
	ctx := r.Context()
	// Taking the request makes the answer single-use, on every replica.
	if _, err := s.db.TakeOAuthRequest(ctx, p.row.ID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			s.errorPage(w, http.StatusBadRequest, "This sign-in was already answered.")
			return
		}
		s.log.Warn("OAuth consent: store failed", "err", err)
		s.errorPage(w, http.StatusServiceUnavailable, "The gateway cannot answer now; try again in a moment.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(p.row.ID), Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	if decision == "deny" {
		s.log.Info("OAuth authorization denied by the user", "client_id", p.client.ID, "identity", id.ID)
		s.redirectError(w, r, p.params, errAccessDenied, "the user denied the request")
		return
	}
	if len(scopes) == 0 {
		s.redirectError(w, r, p.params, errInvalidScope, "the user may not grant any of the requested scopes")
		return
	}
	code := prefixCode + random(32)
	now := s.clock()
	err := s.db.CreateOAuthCode(ctx, store.OAuthCode{
		Hash: hash(code), ClientID: p.client.ID, RedirectURI: p.params.RedirectURI, CodeChallenge: p.params.Challenge,
		Scope: strings.Join(scopes, " "), Resource: p.params.Resource, Subject: p.row.Subject,
		CreatedAt: now, ExpiresAt: now.Add(s.cfg.CodeTTL),
	})
	if err != nil {
		s.log.Warn("OAuth consent: store failed", "err", err)
		s.redirectError(w, r, p.params, errTemporarilyUnavailable, "the authorization server cannot answer now")
		return
	}
	s.log.Info("OAuth authorization approved", "client_id", p.client.ID, "identity", id.ID, "scope", strings.Join(scopes, " "),
		"resource", p.params.Resource)
	s.redirectBack(w, r, p.params, url.Values{"code": {code}})
}
