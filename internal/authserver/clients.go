package authserver

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// Token endpoint authentication methods the server accepts.
const (
	authNone        = "none"
	authSecretBasic = "client_secret_basic"
	authSecretPost  = "client_secret_post"
)

// Limits on a client's metadata, so that a registration cannot make the
// consent page or the store carry megabytes.
const (
	maxRedirectURIs = 20
	maxURILen       = 2000
	maxTextLen      = 200
)

// registration is the client metadata of RFC 7591 §2 that the server
// reads; other members are ignored, as §2 requires. Encoded (the
// registration response, RFC 7591 §3.2.1), the members a client did not
// send are left out: clients validate the response, and the TypeScript
// SDK's refuses a null list or an empty URL.
type registration struct {
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	ClientName              string   `json:"client_name,omitempty"`
	ClientURI               string   `json:"client_uri,omitempty"`
	LogoURI                 string   `json:"logo_uri,omitempty"`
	Scope                   string   `json:"scope,omitempty"`
	Contacts                []string `json:"contacts,omitempty"`
	TosURI                  string   `json:"tos_uri,omitempty"`
	PolicyURI               string   `json:"policy_uri,omitempty"`
	SoftwareID              string   `json:"software_id,omitempty"`
	SoftwareVersion         string   `json:"software_version,omitempty"`
	// Only in client ID metadata documents.
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
}

// parseRegistration decodes and checks a client metadata document (an
// RFC 7591 registration request, or a client ID metadata document), and
// fills the defaults: grant_types [authorization_code], response_types
// [code], token_endpoint_auth_method client_secret_basic (RFC 7591 §2) or
// none for a metadata document. Every problem is an error response of RFC
// 7591 §3.2.2 (invalid_redirect_uri or invalid_client_metadata).
func parseRegistration(body []byte, document bool) (registration, *oauthError) {
	var m registration
	meta := func(format string, args ...any) (registration, *oauthError) {
		return registration{}, badRequest(errInvalidClientMetadata, format, args...)
	}
	if !utf8.Valid(body) {
		return meta("the document is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return meta("%s must be %s", te.Field, jsonKind(te.Type.String()))
		}
		return meta("the body is not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return meta("the body holds more than one JSON value")
	}
	if len(m.RedirectURIs) == 0 {
		return registration{}, badRequest(errInvalidRedirectURI, "redirect_uris is required")
	}
	if len(m.RedirectURIs) > maxRedirectURIs {
		return registration{}, badRequest(errInvalidRedirectURI, "at most %d redirect_uris", maxRedirectURIs)
	}
	for _, u := range m.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return registration{}, badRequest(errInvalidRedirectURI, "redirect_uri %q: %v", truncate(u), err)
		}
	}
	if m.GrantTypes == nil {
		m.GrantTypes = []string{"authorization_code"}
	}
	for _, g := range m.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return meta("grant_type %q is not supported (authorization_code and refresh_token are)", truncate(g))
		}
	}
	if !slices.Contains(m.GrantTypes, "authorization_code") {
		return meta("grant_types must include authorization_code")
	}
	if m.ResponseTypes == nil {
		m.ResponseTypes = []string{"code"}
	}
	for _, rt := range m.ResponseTypes {
		if rt != "code" {
			return meta("response_type %q is not supported (code is)", truncate(rt))
		}
	}
	switch {
	case m.TokenEndpointAuthMethod == "" && document:
		m.TokenEndpointAuthMethod = authNone
	case m.TokenEndpointAuthMethod == "":
		m.TokenEndpointAuthMethod = authSecretBasic
	case m.TokenEndpointAuthMethod == authNone:
	case !document && (m.TokenEndpointAuthMethod == authSecretBasic || m.TokenEndpointAuthMethod == authSecretPost):
	default:
		return meta("token_endpoint_auth_method %q is not supported", truncate(m.TokenEndpointAuthMethod))
	}
	for name, v := range map[string]string{
		"client_name": m.ClientName, "software_id": m.SoftwareID, "software_version": m.SoftwareVersion,
	} {
		if utf8.RuneCountInString(v) > maxTextLen || strings.ContainsFunc(v, isControl) {
			return meta("%s must be at most %d printable characters", name, maxTextLen)
		}
	}
	for name, v := range map[string]string{
		"client_uri": m.ClientURI, "logo_uri": m.LogoURI, "tos_uri": m.TosURI, "policy_uri": m.PolicyURI,
	} {
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || len(v) > maxURILen || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return meta("%s must be an http(s) URL", name)
		}
	}
	if len(m.Contacts) > 10 {
		return meta("at most 10 contacts")
	}
	for _, c := range m.Contacts {
		if len(c) > maxTextLen || strings.ContainsFunc(c, isControl) {
			return meta("contacts must be at most %d printable characters each", maxTextLen)
		}
	}
	if len(m.Scope) > maxURILen {
		return meta("scope is too long")
	}
	for sc := range strings.FieldsSeq(m.Scope) {
		if !validScopeToken(sc) {
			return meta("scope %q is not a valid scope token", truncate(sc))
		}
	}
	if document && m.ClientSecret != "" {
		return meta("a client ID metadata document must not carry a client_secret")
	}
	if !document && (m.ClientID != "" || m.ClientSecret != "") {
		// The server issues these; a client that sends its own is confused.
		return meta("client_id and client_secret are issued by the server, not registered")
	}
	return m, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// jsonKind names a Go type the way a JSON author would.
func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array of strings"
	case goType == "string":
		return "a string"
	}
	return "of another type"
}

func truncate(s string) string {
	if len(s) <= 100 {
		return s
	}
	return s[:100] + "…"
}

// checkRedirectURI applies OAuth 2.1's rules for a registered redirect URI
// (§2.3, §8.4): absolute, no fragment; https, or http to a loopback
// address (native apps on an ephemeral port), or a private-use scheme of a
// native app; never a scheme a browser would run or read (javascript:,
// data:, file:, ...). http://localhost counts as loopback: OAuth 2.1
// §8.4.2 only recommends the IP literal (the name could resolve
// elsewhere, and PKCE keeps a code that went astray useless), while the
// MCP authorization spec names "localhost URLs" and the clients register
// them (mcp-remote's default http://localhost:PORT/oauth/callback).
func checkRedirectURI(raw string) error {
	if len(raw) > maxURILen {
		return errors.New("too long")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URI")
	case !u.IsAbs():
		return errors.New("not an absolute URI")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("must not have a fragment")
	case u.User != nil:
		return errors.New("must not carry credentials")
	}
	switch scheme := strings.ToLower(u.Scheme); scheme {
	case "https":
		if u.Host == "" {
			return errors.New("https needs a host")
		}
	case "http":
		if !isLoopbackHost(u.Hostname()) {
			return errors.New("http is allowed only to a loopback address")
		}
	case "javascript", "data", "vbscript", "file", "about", "blob", "ftp", "ws", "wss", "mailto", "tel", "sms":
		return fmt.Errorf("scheme %s is not allowed", scheme)
	default:
		// A native app's private-use scheme (com.example.app:/cb, cursor://...).
	}
	return nil
}

// redirectMatches compares a requested redirect URI with a registered one:
// exactly, except that for http to a loopback address the port is ignored
// (OAuth 2.1 §8.4.2: a native app listens on whatever port it got).
func redirectMatches(registered, requested string) bool {
	if registered == requested {
		return true
	}
	ru, err1 := url.Parse(registered)
	qu, err2 := url.Parse(requested)
	if err1 != nil || err2 != nil || ru.Scheme != "http" || qu.Scheme != "http" || !isLoopbackHost(ru.Hostname()) {
		return false
	}
	return ru.Hostname() == qu.Hostname() && ru.EscapedPath() == qu.EscapedPath() && ru.RawQuery == qu.RawQuery &&
		qu.User == nil && qu.Fragment == "" && !strings.Contains(requested, "#")
}

// serveRegister is dynamic client registration (RFC 7591).
func (s *Server) serveRegister(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	reg := s.cfg.Registration
	switch {
	case reg.Mode == RegistrationOff:
		writeError(w, newError(http.StatusForbidden, errAccessDenied, "dynamic client registration is disabled; use a client ID metadata document"))
		return
	case r.Method != http.MethodPost:
		writeError(w, newError(http.StatusMethodNotAllowed, errInvalidRequest, "use POST"))
		return
	case reg.Mode == RegistrationToken && !bearerIs(r, reg.InitialAccessToken):
		// RFC 7591 §3: the initial access token is an OAuth bearer token.
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", error_description="registration needs the initial access token"`)
		writeError(w, newError(http.StatusUnauthorized, "invalid_token", "registration needs the initial access token"))
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, badRequest(errInvalidClientMetadata, "the body must be application/json"))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRegistrationBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, badRequest(errInvalidClientMetadata, "request body larger than %d bytes", maxRegistrationBytes))
			return
		}
		writeError(w, badRequest(errInvalidClientMetadata, "reading the body: %v", err))
		return
	}
	m, oerr := parseRegistration(body, false)
	if oerr != nil {
		writeError(w, oerr)
		return
	}
	n, err := s.db.CountOAuthClients(ctx, store.OAuthClientDynamic)
	if err != nil {
		s.log.Warn("OAuth registration: store failed", "err", err)
		writeError(w, unavailable())
		return
	}
	if n >= reg.MaxClients {
		writeError(w, newError(http.StatusForbidden, errAccessDenied, "the server holds its maximum of %d registered clients", reg.MaxClients))
		return
	}
	now := s.clock().UTC().Truncate(time.Second)
	id := prefixClient + random(16)
	var secret string
	c := store.OAuthClient{
		ID: id, Kind: store.OAuthClientDynamic, AuthMethod: m.TokenEndpointAuthMethod, Name: m.ClientName,
		RedirectURIs: m.RedirectURIs, GrantTypes: m.GrantTypes, Scope: m.Scope, CreatedAt: now,
	}
	if m.TokenEndpointAuthMethod != authNone {
		secret = prefixSecret + random(32)
		c.SecretHash = hash(secret)
	}
	if c.Metadata, err = json.Marshal(m); err != nil {
		writeError(w, unavailable())
		return
	}
	if err := s.db.CreateOAuthClient(ctx, c); err != nil {
		s.log.Warn("OAuth registration: store failed", "err", err)
		writeError(w, unavailable())
		return
	}
	s.log.Info("OAuth client registered", "client_id", id, "client_name", m.ClientName, "auth_method", m.TokenEndpointAuthMethod)
	resp := map[string]any{}
	_ = json.Unmarshal(c.Metadata, &resp) // just marshalled
	resp["client_id"] = id
	resp["client_id_issued_at"] = now.Unix()
	if secret != "" {
		resp["client_secret"] = secret
		resp["client_secret_expires_at"] = 0
	}
	noStore(w)
	writeJSON(w, http.StatusCreated, resp)
}

// bearerIs reports whether r carries want as its bearer token, comparing
// in constant time.
func bearerIs(r *http.Request, want string) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	a, b := hash(strings.TrimSpace(tok)), hash(want)
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// isDocumentID reports whether a client ID is the URL of a client ID
// metadata document: https with a path (draft-ietf-oauth-client-id-metadata-document §3).
func isDocumentID(id string) bool {
	u, err := url.Parse(id)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.Path != "" && u.Path != "/"
}

// errUnknownClient is returned by client for an ID the server does not
// know and cannot fetch.
var errUnknownClient = errors.New("unknown client")

// client returns the client with this ID: a registered one, or a metadata
// document, fetched (or fetched again when stale) with the guarded HTTP
// client and cached in the store. The error is errUnknownClient, an
// *oauthError about the document, or a store failure.
func (s *Server) client(ctx context.Context, id string) (store.OAuthClient, error) {
	c, err := s.db.OAuthClient(ctx, id)
	switch {
	case err == nil && (c.Kind != store.OAuthClientDocument || s.clock().Before(c.FreshUntil)):
		return c, nil
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return store.OAuthClient{}, err
	case !isDocumentID(id) || s.cfg.DisableMetadataDocuments:
		return store.OAuthClient{}, errUnknownClient
	}
	fetched, ferr := s.fetchDocument(ctx, id)
	if ferr != nil {
		if err == nil {
			// Stale but known: a passing outage of the client's host must
			// not lock its users out; the cached document still speaks.
			s.log.Warn("OAuth client metadata document refetch failed; using the cached one", "client_id", id, "err", ferr)
			return c, nil
		}
		return store.OAuthClient{}, ferr
	}
	return fetched, nil
}

// docCall is one fetch of a metadata document that concurrent requests
// share.
type docCall struct {
	done chan struct{}
	c    store.OAuthClient
	err  error
}

func (s *Server) fetchDocument(ctx context.Context, id string) (store.OAuthClient, error) {
	s.mu.Lock()
	call, ok := s.docFetch[id]
	if !ok {
		call = &docCall{done: make(chan struct{})}
		s.docFetch[id] = call
		s.mu.Unlock()
		// The fetch is bounded by the HTTP client's timeout and belongs to
		// this request; others wait for it.
		call.c, call.err = s.fetchDocumentNow(ctx, id)
		s.mu.Lock()
		delete(s.docFetch, id)
		s.mu.Unlock()
		close(call.done)
		return call.c, call.err
	}
	s.mu.Unlock()
	select {
	case <-call.done:
		return call.c, call.err
	case <-ctx.Done():
		return store.OAuthClient{}, ctx.Err()
	}
}

// fetchDocumentNow fetches, checks and stores a client ID metadata
// document.
func (s *Server) fetchDocumentNow(ctx context.Context, id string) (store.OAuthClient, error) {
	bad := func(format string, args ...any) (store.OAuthClient, error) {
		return store.OAuthClient{}, badRequest(errInvalidClient, "client metadata document %s: %s", id, fmt.Sprintf(format, args...))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return bad("not a URL")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.httpc.Do(req)
	if err != nil {
		return bad("cannot be fetched: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return bad("fetch answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return bad("reading it: %v", err)
	}
	if len(body) > maxDocumentBytes {
		return bad("larger than %d bytes", maxDocumentBytes)
	}
	m, oerr := parseRegistration(body, true)
	if oerr != nil {
		return bad("%s", oerr.Description)
	}
	if m.ClientID != id {
		return bad("its client_id %q is not its URL", truncate(m.ClientID))
	}
	now := s.clock().UTC()
	ttl := s.cfg.DocumentTTL
	if age, ok := maxAge(resp.Header.Get("Cache-Control")); ok && age < ttl {
		// At least a minute: a client that says no-cache would otherwise
		// be fetched on every step of every flow.
		ttl = max(age, time.Minute)
	}
	md, err := json.Marshal(m)
	if err != nil {
		return store.OAuthClient{}, err
	}
	c := store.OAuthClient{
		ID: id, Kind: store.OAuthClientDocument, AuthMethod: m.TokenEndpointAuthMethod, Name: m.ClientName,
		RedirectURIs: m.RedirectURIs, GrantTypes: m.GrantTypes, Scope: m.Scope, Metadata: md,
		CreatedAt: now, FetchedAt: now, FreshUntil: now.Add(ttl),
	}
	if err := s.db.PutOAuthClient(ctx, c); err != nil {
		return store.OAuthClient{}, err
	}
	s.log.Info("OAuth client metadata document fetched", "client_id", id, "client_name", m.ClientName)
	return c, nil
}

// maxAge reads max-age (or no-store/no-cache as 0) from Cache-Control.
func maxAge(cc string) (time.Duration, bool) {
	for d := range strings.SplitSeq(cc, ",") {
		d = strings.TrimSpace(strings.ToLower(d))
		if d == "no-store" || d == "no-cache" {
			return 0, true
		}
		if v, ok := strings.CutPrefix(d, "max-age="); ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				return time.Duration(n) * time.Second, true
			}
		}
	}
	return 0, false
}
