package upstreamauth

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// TokenStore keeps the grants, shared by the replicas of a gateway.
// *store.DB implements it; [MemoryStore] is the one of a single process
// (the probe command, tests). Errors wrap [store.ErrNotFound] and
// [store.ErrConflict] as the store's do.
type TokenStore interface {
	UpstreamToken(ctx context.Context, server, subject string) (store.UpstreamToken, error)
	PutUpstreamToken(ctx context.Context, t store.UpstreamToken) (store.UpstreamToken, error)
	ReplaceUpstreamToken(ctx context.Context, t store.UpstreamToken) (store.UpstreamToken, error)
	LeaseUpstreamToken(ctx context.Context, server, subject string, version int64, holder string, now, until time.Time) (bool, error)
	ReleaseUpstreamToken(ctx context.Context, server, subject, holder string) error
}

// Options configures an [Authorizer]. A nil *Options gives the defaults
// documented on each field.
type Options struct {
	// Store keeps the grant; nil keeps it in memory ([NewMemoryStore]).
	Store TokenStore
	// Keyring seals the grant before it reaches the Store. Nil is allowed
	// only without a Store: the grant is then sealed with a key made for
	// the process, and dies with it.
	Keyring *secrets.Keyring
	// HTTPClient carries discovery, registration and token requests. It
	// should dial through the gateway's SSRF guard (the go-sdk's own
	// checks apply only to a plain *http.Transport). Default: a client
	// with a 30 s timeout.
	HTTPClient *http.Client
	// RedirectURL is the callback URL the authorization server sends the
	// browser back to: the gateway's public URL + [CallbackPath]. Needed
	// for the authorization-code grant.
	RedirectURL string
	// ClientName names the gateway to authorization servers (dynamic
	// registration); default "switchboard".
	ClientName string
	// Fetcher, if set, makes Authorize run the authorization-code flow by
	// itself when a server answers 401 (the probe command). Without it,
	// Authorize reports a [NeedsAuthError] and an operator starts the flow
	// with [Authorizer.Reauthorize].
	Fetcher auth.AuthorizationCodeFetcher
	// Subject, if set, makes the Authorizer hold the grant of one caller
	// (`credentials: per_user`): the account that caller linked, stored
	// under (server, Subject). "" is the server's own grant.
	Subject string
	// Holder names this replica in refresh leases; default a random id.
	Holder string
	// LeaseDuration bounds how long one replica may take to refresh a
	// grant before another may try; default 30 s.
	LeaseDuration time.Duration
	// Logger receives the package's logs, with a "server" attribute; nil
	// discards them.
	Logger *slog.Logger
	// Progress, if set, is told each step of discovery and authorization
	// in a sentence (the probe command prints them).
	Progress func(string)
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Authorizer holds the OAuth grant of one upstream server and obtains,
// refreshes and stores it. It implements [auth.OAuthHandler] for the
// server's transports (every session of the server shares it). It is safe
// for concurrent use. Close it when the server is removed.
type Authorizer struct {
	server    string
	subject   string // "" for the server's own grant
	serverURL string
	spec      Spec
	store     TokenStore
	keyring   *secrets.Keyring
	client    *http.Client
	redirect  string
	name      string
	fetcher   auth.AuthorizationCodeFetcher
	holder    string
	lease     time.Duration
	log       *slog.Logger
	onStep    func(string)
	now       func() time.Time

	ctx    context.Context // ends with Close: bounds waits and refreshes
	cancel context.CancelFunc

	mu        sync.Mutex
	cur       *grant     // the grant last read or written; nil before
	last      *challenge // the last 401/403, for Reauthorize
	lastURL   *url.URL
	stepUps   map[string]int // authorizations per challenged scope set, reset by Reauthorize
	flow      *flowInfo      // the authorization-code flow in progress
	failed    *failure       // the last authorization, if it failed
	secretsMu sync.RWMutex
	known     []string // secrets to scrub from messages

	authSem      chan struct{} // capacity 1: one authorization at a time
	operatorFlow atomic.Bool   // the authorization in progress is Reauthorize's
	refreshMu    sync.Mutex    // one refresh at a time in this process
	sdkOnce      sync.Once
	sdk          *auth.AuthorizationCodeHandler
	sdkErr       error
}

// New returns the Authorizer of server, whose MCP endpoint is serverURL.
func New(server, serverURL string, spec Spec, opts *Options) (*Authorizer, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if u, err := url.Parse(serverURL); err != nil || u.Host == "" {
		return nil, errors.New("server url: not an absolute URL")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Store == nil {
		o.Store = NewMemoryStore()
		if o.Keyring == nil {
			k := make([]byte, secrets.KeySize)
			if _, err := rand.Read(k); err != nil {
				return nil, fmt.Errorf("making a key for the grant: %w", err)
			}
			kr, err := secrets.NewKeyring(k)
			if err != nil {
				return nil, err
			}
			o.Keyring = kr
		}
	}
	if o.Keyring == nil {
		return nil, fmt.Errorf("server %q: an OAuth grant is stored sealed: %w", server, secrets.ErrNoKey)
	}
	if spec.grant() == GrantAuthorizationCode && o.RedirectURL == "" {
		return nil, errors.New("the authorization_code grant needs the gateway's callback URL (RedirectURL)")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if o.ClientName == "" {
		o.ClientName = "switchboard"
	}
	if o.Holder == "" {
		o.Holder = rand.Text()
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &Authorizer{
		server: server, subject: o.Subject, serverURL: serverURL, spec: spec,
		store: o.Store, keyring: o.Keyring, client: o.HTTPClient, redirect: o.RedirectURL, name: o.ClientName,
		fetcher: o.Fetcher, holder: o.Holder, lease: o.LeaseDuration,
		log: withSubject(o.Logger.With("server", server), o.Subject), onStep: o.Progress, now: o.Now,
		stepUps: map[string]int{}, authSem: make(chan struct{}, 1),
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	return a, nil
}

// Close ends the waits and refreshes in progress. The grant stays stored.
func (a *Authorizer) Close() { a.cancel() }

// Subject is the caller whose grant a holds; "" for the server's own.
func (a *Authorizer) Subject() string { return a.subject }

// command is what a person runs to authorize a's grant again.
func (a *Authorizer) command() string {
	if a.subject != "" {
		return "`switchboard connect-account " + a.server + "`"
	}
	return "`switchboard servers auth " + a.server + "`"
}

// Server is the name of the server a is for.
func (a *Authorizer) Server() string { return a.server }

// Grant is the grant a obtains.
func (a *Authorizer) Grant() Grant { return a.spec.grant() }

var _ auth.OAuthHandler = (*Authorizer)(nil)

// grant is what is sealed in the store: the tokens, and what refreshing
// them needs, so that any replica (or the gateway after a restart) can.
type grant struct {
	AccessToken  string    `json:"access_token"`
	TokenType    string    `json:"token_type,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	Scopes       []string  `json:"scopes,omitempty"`

	Grant    Grant  `json:"grant"`
	Issuer   string `json:"issuer"`
	TokenURL string `json:"token_url"`
	ClientID string `json:"client_id"`
	// ClientSecret is a dynamically registered client's secret; a
	// configured one (Spec.ClientSecret) is not stored, but read from the
	// configuration at each use, so that rotating it takes effect.
	ClientSecret string `json:"client_secret,omitempty"`
	AuthStyle    int    `json:"auth_style,omitempty"`
	Resource     string `json:"resource,omitempty"`

	version int64  // of the stored row
	problem string // of the stored row
}

// fresh reports whether the access token is good beyond margin from now.
func (g *grant) fresh(now time.Time, margin time.Duration) bool {
	return g.AccessToken != "" && (g.Expiry.IsZero() || now.Add(margin).Before(g.Expiry))
}

// valid reports whether the access token has not expired at now.
func (g *grant) valid(now time.Time) bool {
	return g.AccessToken != "" && (g.Expiry.IsZero() || now.Before(g.Expiry))
}

// renewable reports whether a new access token can be had without a person.
func (g *grant) renewable() bool {
	return g.RefreshToken != "" || g.Grant == GrantClientCredentials
}

func (g *grant) token() *oauth2.Token {
	t := &oauth2.Token{AccessToken: g.AccessToken, TokenType: g.TokenType, Expiry: g.Expiry}
	return t
}

// clientSecret is the secret g's client authenticates with.
func (a *Authorizer) clientSecret(g *grant) string {
	if g.ClientSecret == "" && g.ClientID == a.spec.ClientID {
		return a.spec.ClientSecret
	}
	return g.ClientSecret
}

func (a *Authorizer) oauthConfig(g *grant) *oauth2.Config {
	return &oauth2.Config{
		ClientID: g.ClientID, ClientSecret: a.clientSecret(g), Scopes: g.Scopes,
		Endpoint: oauth2.Endpoint{TokenURL: g.TokenURL, AuthStyle: oauth2.AuthStyle(g.AuthStyle)},
	}
}

// progress reports a step, scrubbed of secrets.
func (a *Authorizer) progress(format string, args ...any) {
	if a.onStep != nil {
		a.onStep(a.scrub(fmt.Sprintf(format, args...)))
	}
}

// maxKnown bounds the tokens remembered for scrubbing: the latest ones are
// those an error could echo.
const maxKnown = 32

// remember adds secrets that must never appear in a message.
func (a *Authorizer) remember(values ...string) {
	a.secretsMu.Lock()
	defer a.secretsMu.Unlock()
	for _, v := range values {
		if len(v) >= 4 && !slices.Contains(a.known, v) {
			a.known = append(a.known, v)
		}
	}
	if len(a.known) > maxKnown {
		a.known = slices.Delete(a.known, 0, len(a.known)-maxKnown)
	}
}

// scrub removes every secret a knows from s.
func (a *Authorizer) scrub(s string) string {
	if v := a.spec.ClientSecret; len(v) >= 4 {
		s = strings.ReplaceAll(s, v, "[REDACTED]")
	}
	a.secretsMu.RLock()
	defer a.secretsMu.RUnlock()
	for _, v := range a.known {
		s = strings.ReplaceAll(s, v, "[REDACTED]")
	}
	return s
}

func (a *Authorizer) needsAuth(format string, args ...any) *NeedsAuthError {
	return &NeedsAuthError{Server: a.server, Reason: a.scrub(fmt.Sprintf(format, args...))}
}

// --- the grant in the store -------------------------------------------------

// load reads the stored grant into the cache; nil when there is none.
func (a *Authorizer) load(ctx context.Context) (*grant, error) {
	row, err := a.store.UpstreamToken(ctx, a.server, a.subject)
	if errors.Is(err, store.ErrNotFound) {
		a.mu.Lock()
		a.cur = nil
		a.mu.Unlock()
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the grant of server %q: %w", a.server, err)
	}
	g, err := a.open(row)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.cur = g
	a.mu.Unlock()
	return g, nil
}

func (a *Authorizer) open(row store.UpstreamToken) (*grant, error) {
	plain, _, err := a.keyring.Open(row.Sealed)
	if err != nil {
		return nil, fmt.Errorf("opening the grant of server %q: %w", a.server, err)
	}
	var g grant
	if err := json.Unmarshal([]byte(plain), &g); err != nil {
		return nil, fmt.Errorf("decoding the grant of server %q: %w", a.server, err)
	}
	g.version, g.problem = row.Version, row.Problem
	a.remember(g.AccessToken, g.RefreshToken, g.ClientSecret)
	return &g, nil
}

func (a *Authorizer) seal(g *grant) (store.UpstreamToken, error) {
	raw, err := json.Marshal(g)
	if err != nil {
		return store.UpstreamToken{}, err
	}
	sealed, err := a.keyring.Seal(string(raw))
	if err != nil {
		return store.UpstreamToken{}, fmt.Errorf("sealing the grant of server %q: %w", a.server, err)
	}
	return store.UpstreamToken{Server: a.server, Subject: a.subject, Sealed: sealed, ExpiresAt: g.Expiry, Problem: g.problem,
		Version: g.version, UpdatedAt: a.now()}, nil
}

// put stores a new grant over whatever was stored.
func (a *Authorizer) put(ctx context.Context, g *grant) error {
	row, err := a.save(ctx, g, a.store.PutUpstreamToken)
	if err != nil {
		return err
	}
	a.log.Info("upstream authorized", "grant", g.Grant, "issuer", g.Issuer, "expires_at", g.Expiry,
		"refresh_token", g.RefreshToken != "", "version", row.Version)
	return nil
}

// replace stores g over the version it was read as (a refresh, or a
// refused one recorded as a problem).
func (a *Authorizer) replace(ctx context.Context, g *grant) error {
	_, err := a.save(ctx, g, a.store.ReplaceUpstreamToken)
	return err
}

// save seals g, stores it with write (put's or replace's rule) and makes
// it the current grant, at the version the store gave it.
func (a *Authorizer) save(ctx context.Context, g *grant, write func(context.Context, store.UpstreamToken) (store.UpstreamToken, error)) (store.UpstreamToken, error) {
	a.remember(g.AccessToken, g.RefreshToken, g.ClientSecret)
	row, err := a.seal(g)
	if err != nil {
		return store.UpstreamToken{}, err
	}
	row, err = write(ctx, row)
	if err != nil {
		return store.UpstreamToken{}, err
	}
	g.version = row.Version
	a.mu.Lock()
	a.cur = g
	a.mu.Unlock()
	return row, nil
}

// Status describes the stored grant for an operator: never a token.
type Status struct {
	Authorized  bool      // a grant is stored
	Grant       Grant     // how it was obtained
	Issuer      string    // the authorization server that issued it
	ExpiresAt   time.Time // of the access token; zero when unknown
	Refreshable bool      // a refresh token (or client credentials) is held
	Scopes      []string
	Problem     string // why it cannot be used; "" when it can
}

// Status reads the stored grant.
func (a *Authorizer) Status(ctx context.Context) (Status, error) {
	g, err := a.load(ctx)
	if err != nil || g == nil {
		return Status{}, err
	}
	return Status{Authorized: true, Grant: g.Grant, Issuer: g.Issuer, ExpiresAt: g.Expiry,
		Refreshable: g.renewable(), Scopes: g.Scopes, Problem: g.problem}, nil
}

// --- the token source -----------------------------------------------------

// TokenSource is the source of the server's access token, or nil before
// the server was ever authorized (the first request then goes without, and
// its 401 starts the authorization). A grant whose refresh was refused
// fails at once with a [NeedsAuthError].
func (a *Authorizer) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	a.mu.Lock()
	g := a.cur
	a.mu.Unlock()
	if g == nil || g.problem != "" {
		// Not usable as known here: another replica may have authorized
		// since.
		var err error
		if g, err = a.load(ctx); err != nil {
			return nil, err
		}
		if g == nil {
			return nil, nil
		}
		if g.problem != "" {
			return nil, a.needsAuth("%s", g.problem)
		}
	}
	return tokenSource{a}, nil
}

type tokenSource struct{ a *Authorizer }

func (t tokenSource) Token() (*oauth2.Token, error) { return t.a.Token() }

// Token returns an access token good for at least the refresh margin,
// refreshing the grant first when it is not. Another replica may be
// refreshing it: the current token is used meanwhile if it has not
// expired, else Token waits for the refresh.
func (a *Authorizer) Token() (*oauth2.Token, error) {
	a.mu.Lock()
	g := a.cur
	a.mu.Unlock()
	if g != nil && g.problem == "" && g.fresh(a.now(), a.spec.margin()) {
		return g.token(), nil
	}
	g, err := a.renew(0)
	if err != nil {
		return nil, err
	}
	return g.token(), nil
}

// renew returns a grant whose token is fresh, or still valid while another
// replica refreshes it. refused, if not 0, is the version whose token the
// server refused: it is renewed even though it looks fresh.
func (a *Authorizer) renew(refused int64) (*grant, error) {
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	ctx, cancel := context.WithTimeout(a.ctx, a.lease)
	defer cancel()
	margin := a.spec.margin()
	for {
		g, err := a.load(ctx)
		switch {
		case err != nil:
			return nil, err
		case g == nil:
			return nil, a.needsAuth("not authorized yet: run %s", a.command())
		case g.problem != "":
			return nil, a.needsAuth("%s", g.problem)
		}
		now := a.now()
		if refused == 0 && g.fresh(now, margin) || refused != 0 && g.version != refused {
			return g, nil // fresh, or replaced since the refused one
		}
		if !g.renewable() {
			if refused == 0 && g.valid(now) {
				return g, nil // no way to renew it: use it while it lasts
			}
			return nil, a.needsAuth("the access token expired and the authorization server gave no refresh token: authorize again (%s)", a.command())
		}
		ok, err := a.store.LeaseUpstreamToken(ctx, a.server, a.subject, g.version, a.holder, now, now.Add(a.lease))
		if err != nil {
			return nil, err
		}
		if !ok {
			// Another replica is renewing this version.
			if refused == 0 && g.valid(now) {
				return g, nil
			}
			if err := a.sleep(ctx, 50*time.Millisecond); err != nil {
				return nil, fmt.Errorf("waiting for another replica to refresh the grant of server %q: %w", a.server, err)
			}
			continue
		}
		next, err := a.exchange(ctx, g)
		if err != nil {
			var re *oauth2.RetrieveError
			if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500 {
				reason := fmt.Sprintf("the authorization server %s refused to renew the grant: %s", g.Issuer, describe(re))
				bad := *g
				bad.problem = reason
				if rerr := a.replace(context.WithoutCancel(ctx), &bad); rerr != nil {
					a.log.Warn("recording a refused refresh", "error", a.scrub(rerr.Error()))
				}
				a.log.Warn("upstream grant refused", "issuer", g.Issuer, "reason", a.scrub(reason))
				return nil, a.needsAuth("%s", reason)
			}
			if rerr := a.store.ReleaseUpstreamToken(context.WithoutCancel(ctx), a.server, a.subject, a.holder); rerr != nil {
				a.log.Warn("releasing the refresh lease", "error", a.scrub(rerr.Error()))
			}
			if refused == 0 && g.valid(now) {
				a.log.Warn("upstream token refresh failed; using the current token until it expires", "error", a.scrub(err.Error()), "expires_at", g.Expiry)
				return g, nil
			}
			return nil, fmt.Errorf("refreshing the grant of server %q: %s", a.server, a.scrub(err.Error()))
		}
		next.version = g.version
		if err := a.replace(ctx, next); err != nil {
			if errors.Is(err, store.ErrConflict) {
				continue // replaced meanwhile (a new authorization): read it
			}
			return nil, err
		}
		a.log.Info("upstream token refreshed", "grant", next.Grant, "expires_at", next.Expiry,
			"previous_expiry", g.Expiry, "version", next.version)
		a.progress("token renewed (%s): expires %s", next.Grant, expiry(next.Expiry, a.now()))
		return next, nil
	}
}

func (a *Authorizer) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// exchange gets a new access token for g: by refresh token, or by client
// credentials.
func (a *Authorizer) exchange(ctx context.Context, g *grant) (*grant, error) {
	var tok *oauth2.Token
	var err error
	if g.Grant == GrantClientCredentials {
		tok, err = a.clientCredentialsConfig(g).Token(a.tokenContext(ctx, g.TokenURL, g.Resource))
	} else {
		// A token with only the refresh token is invalid, so the source
		// refreshes it at once.
		tok, err = a.oauthConfig(g).TokenSource(a.tokenContext(ctx, g.TokenURL, g.Resource), &oauth2.Token{RefreshToken: g.RefreshToken}).Token()
	}
	if err != nil {
		return nil, err
	}
	next := *g
	next.AccessToken, next.TokenType, next.Expiry = tok.AccessToken, tok.Type(), a.expiry(tok)
	if tok.RefreshToken != "" {
		next.RefreshToken = tok.RefreshToken // rotated
	}
	if scopes := scopesOf(tok); scopes != nil {
		next.Scopes = scopes
	}
	next.problem = ""
	a.remember(next.AccessToken, next.RefreshToken)
	return &next, nil
}

// describe is an authorization server's refusal, without the response
// body (which oauth2's message includes).
func describe(re *oauth2.RetrieveError) string {
	s := re.ErrorCode
	if s == "" && re.Response != nil {
		s = "HTTP " + re.Response.Status
	}
	if re.ErrorDescription != "" {
		s += ": " + re.ErrorDescription
	}
	return s
}

// expiry is when tok expires on a's clock: expires_in from now, as
// received (oauth2 counts it on the wall clock).
func (a *Authorizer) expiry(tok *oauth2.Token) time.Time {
	if tok.ExpiresIn > 0 {
		return a.now().Add(time.Duration(tok.ExpiresIn) * time.Second)
	}
	return tok.Expiry
}

func scopesOf(tok *oauth2.Token) []string {
	if s, ok := tok.Extra("scope").(string); ok {
		return strings.Fields(s)
	}
	return nil
}

func expiry(t, now time.Time) string {
	if t.IsZero() {
		return "never said"
	}
	return fmt.Sprintf("in %s", t.Sub(now).Round(time.Second))
}

// tokenContext carries the client token requests use: a's, adding the
// resource parameter (RFC 8707) to requests to the token endpoint that
// lack it, as oauth2's refresh does.
func (a *Authorizer) tokenContext(ctx context.Context, tokenURL, resource string) context.Context {
	c := *a.client
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = &resourceTransport{base: base, tokenURL: tokenURL, resource: resource}
	return context.WithValue(ctx, oauth2.HTTPClient, &c)
}

// resourceTransport adds resource to form posts to the token endpoint.
type resourceTransport struct {
	base               http.RoundTripper
	tokenURL, resource string
}

func (t *resourceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.resource == "" || req.Method != http.MethodPost || req.URL.String() != t.tokenURL ||
		!strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") || req.Body == nil {
		return t.base.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, err
	}
	if form.Get("resource") == "" {
		form.Set("resource", t.resource)
	}
	enc := form.Encode()
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(strings.NewReader(enc))
	r.ContentLength = int64(len(enc))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(enc)), nil }
	return t.base.RoundTrip(r)
}

// --- authorization --------------------------------------------------------

// Authorize is called by the transport when the server answers 401 or 403.
// A 403 that is not insufficient_scope is left to fail as it is. Otherwise
// the server's metadata is discovered afresh (it may have moved to another
// authorization server), then a token the server refused is renewed if it
// can be, and failing that a new grant is obtained: by client credentials,
// or by the authorization-code flow with Options.Fetcher. Without a
// Fetcher, an authorization code needs an operator: the error is a
// [NeedsAuthError] saying so.
func (a *Authorizer) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	defer resp.Body.Close()
	defer io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16)) //nolint:errcheck // draining for reuse; failure is harmless
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return a.needsAuth("the server's WWW-Authenticate header is malformed: %v", err)
	}
	ch := challenge{status: resp.StatusCode, challenges: cs}
	if resp.StatusCode == http.StatusForbidden && !ch.stepUp() {
		return nil // not ours to fix: the retry fails as the server says
	}
	if a.fetcher == nil && a.operatorFlow.Load() {
		// Not worth waiting for: the person may take minutes.
		return a.needsAuth("an authorization is in progress: finish it in the browser")
	}
	if err := a.lockAuth(ctx); err != nil {
		return err
	}
	defer a.unlockAuth()
	a.mu.Lock()
	a.last, a.lastURL = &ch, req.URL
	a.mu.Unlock()
	// The token the server refused, "" when the request had none.
	sent := ""
	if scheme, tok, ok := strings.Cut(req.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "bearer") {
		sent = tok
	}
	g, err := a.load(ctx)
	if err != nil {
		return err
	}
	if g != nil && g.problem == "" && g.AccessToken != sent {
		// Replaced since the request left (another request's
		// authorization, another replica's refresh): try that one.
		return nil
	}
	// One connect may ask twice (the go-sdk falls back from the new
	// revision's handshake to the old one): an authorization that just
	// failed for the same token is not run again, a person is not sent
	// to the browser twice.
	now := a.now()
	a.mu.Lock()
	if f := a.failed; f != nil && f.sent == sent && f.status == ch.status && now.Sub(f.at) < failureMemo {
		a.mu.Unlock()
		return f.err
	}
	a.mu.Unlock()
	a.progress("the server answered %d %s%s", ch.status, http.StatusText(ch.status), describeChallenge(ch))
	err = a.authorize(ctx, ch, g, a.fetcher)
	a.mu.Lock()
	a.failed = nil
	if err != nil && ctx.Err() == nil {
		a.failed = &failure{sent: sent, status: ch.status, at: now, err: err}
	}
	a.mu.Unlock()
	return err
}

// failureMemo is how long a failed authorization answers for the same
// refused token without being run again.
const failureMemo = 5 * time.Second

// failure is an authorization that failed.
type failure struct {
	sent   string // the token the server refused
	status int
	at     time.Time
	err    error
}

func (a *Authorizer) lockAuth(ctx context.Context) error {
	select {
	case a.authSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the authorization in progress: %w", ctx.Err())
	}
}

func (a *Authorizer) unlockAuth() { <-a.authSem }

// authorize obtains a grant after ch; cur is the stored grant, whose token
// the server refused, if any.
func (a *Authorizer) authorize(ctx context.Context, ch challenge, cur *grant, fetcher auth.AuthorizationCodeFetcher) error {
	md, err := a.discover(ctx, ch)
	if err != nil {
		return a.needsAuth("%s", err.Error())
	}
	if ch.stepUp() {
		key := strings.Join(slices.Sorted(slices.Values(ch.scopes())), " ")
		a.mu.Lock()
		a.stepUps[key]++
		n := a.stepUps[key]
		a.mu.Unlock()
		if n > a.spec.maxStepUps() {
			return a.needsAuth("the server still answers insufficient_scope for %q after %d authorizations", key, n-1)
		}
	} else if cur != nil && cur.problem == "" && cur.renewable() && cur.Issuer == md.issuer() {
		// The token was refused: renew it, unless it is from an
		// authorization server the server no longer names (credentials
		// are bound to the server that issued them).
		_, err := a.renew(cur.version)
		if err == nil {
			return nil
		}
		if !IsNeedsAuth(err) || fetcher == nil || a.spec.grant() == GrantClientCredentials {
			return err // with the authorization server's reason
		}
		// A person is here: a new authorization replaces the refused grant.
	}
	if a.spec.grant() == GrantClientCredentials {
		return a.clientCredentials(ctx, md, ch)
	}
	if fetcher == nil {
		switch {
		case ch.stepUp():
			return a.needsAuth("the server asks for scope %q (insufficient_scope): authorize again with %s", ch.param("scope"), a.command())
		case cur != nil && cur.problem != "":
			return a.needsAuth("%s", cur.problem)
		case cur != nil:
			return a.needsAuth("the server refused the gateway's token: authorize again with %s", a.command())
		}
		return a.needsAuth("not authorized yet: run %s", a.command())
	}
	return a.authorizationCode(ctx, md, ch, fetcher)
}

func describeChallenge(ch challenge) string {
	var parts []string
	for _, k := range []string{"error", "scope", "resource_metadata"} {
		if v := ch.param(k); v != "" {
			parts = append(parts, k+"="+v)
		} else if k == "resource_metadata" && ch.resourceMetadata() != "" {
			parts = append(parts, k+"="+ch.resourceMetadata())
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ": Bearer " + strings.Join(parts, ", ")
}

// Reauthorize obtains a new grant now, replacing the stored one: by client
// credentials, or by the authorization-code flow with fetcher, which is
// handed the URL the person must open. It starts from the server's last
// challenge (so a step-up asks for the scope it named), or from discovery
// alone. The operator's `servers auth` and the probe command run it.
func (a *Authorizer) Reauthorize(ctx context.Context, fetcher auth.AuthorizationCodeFetcher) error {
	if err := a.lockAuth(ctx); err != nil {
		return err
	}
	defer a.unlockAuth()
	a.operatorFlow.Store(true)
	defer a.operatorFlow.Store(false)
	a.mu.Lock()
	ch := challenge{status: http.StatusUnauthorized}
	if a.last != nil {
		ch = *a.last
	}
	clear(a.stepUps)
	a.failed = nil
	a.mu.Unlock()
	if a.spec.grant() == GrantAuthorizationCode && fetcher == nil {
		return errors.New("the authorization_code grant needs a browser (a fetcher)")
	}
	md, err := a.discover(ctx, ch)
	if err != nil {
		return a.needsAuth("%s", err.Error())
	}
	if a.spec.grant() == GrantClientCredentials {
		return a.clientCredentials(ctx, md, ch)
	}
	return a.authorizationCode(ctx, md, ch, fetcher)
}

// fetcherKey carries the fetcher of one authorization to the go-sdk's flow,
// which takes one fetcher for the lifetime of its handler.
type fetcherKey struct{}

// authorizationCode runs the go-sdk's authorization-code flow and stores
// the grant it gets.
func (a *Authorizer) authorizationCode(ctx context.Context, md *metadata, ch challenge, fetcher auth.AuthorizationCodeFetcher) error {
	h, err := a.sdkHandler()
	if err != nil {
		return err
	}
	ctx = context.WithValue(ctx, fetcherKey{}, fetcher)
	// Flows are one at a time (authSem): the go-sdk's hooks find this one
	// here, as they are not given our context.
	a.mu.Lock()
	a.flow = &flowInfo{md: md, ch: ch}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.flow = nil
		a.mu.Unlock()
	}()
	u, _ := url.Parse(a.serverURL)
	a.mu.Lock()
	if a.lastURL != nil {
		u = a.lastURL
	}
	a.mu.Unlock()
	req := &http.Request{Method: http.MethodPost, URL: u, Header: http.Header{}}
	hdr := http.Header{}
	for _, c := range ch.challenges {
		hdr.Add("WWW-Authenticate", formatChallenge(c))
	}
	resp := &http.Response{StatusCode: ch.status, Header: hdr, Body: http.NoBody}
	if err := h.Authorize(ctx, req, resp); err != nil {
		return fmt.Errorf("authorization of server %q failed: %s", a.server, a.scrub(err.Error()))
	}
	return nil
}

// formatChallenge writes c back as a WWW-Authenticate value for the
// go-sdk's flow, which reads the header itself.
func formatChallenge(c oauthex.Challenge) string {
	var params []string
	for _, k := range slices.Sorted(maps.Keys(c.Params)) {
		params = append(params, fmt.Sprintf("%s=%q", k, c.Params[k]))
	}
	if len(params) == 0 {
		return c.Scheme
	}
	return c.Scheme + " " + strings.Join(params, ", ")
}

// flowInfo is what the go-sdk's hooks need to know of the flow in
// progress: what this package's discovery found and the challenge.
type flowInfo struct {
	md *metadata
	ch challenge
}

// sdkHandler is the go-sdk's authorization-code handler, one per
// Authorizer so that it remembers the scopes granted (a step-up asks for
// them and the new ones).
func (a *Authorizer) sdkHandler() (*auth.AuthorizationCodeHandler, error) {
	a.sdkOnce.Do(func() {
		cfg := &auth.AuthorizationCodeHandlerConfig{
			RedirectURL:              a.redirect,
			AuthorizationCodeFetcher: a.fetch,
			RequestRefreshToken:      true,
			Client:                   a.client,
			ScopeFilter:              a.scopeFilter,
			NewTokenSource:           a.newTokenSource,
		}
		if a.spec.ClientMetadataURL != "" {
			cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: a.spec.ClientMetadataURL}
		}
		if a.spec.ClientID != "" {
			cc := &oauthex.ClientCredentials{ClientID: a.spec.ClientID, Issuer: a.spec.Issuer}
			if a.spec.ClientSecret != "" {
				cc.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: a.spec.ClientSecret}
			}
			cfg.PreregisteredClient = cc
		} else {
			method := a.spec.TokenEndpointAuthMethod
			cfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
				RedirectURIs:            []string{a.redirect},
				ClientName:              a.name,
				GrantTypes:              []string{"authorization_code", "refresh_token"},
				ResponseTypes:           []string{"code"},
				TokenEndpointAuthMethod: method,
			}}
		}
		a.sdk, a.sdkErr = auth.NewAuthorizationCodeHandler(cfg)
	})
	return a.sdk, a.sdkErr
}

// fetch is the go-sdk's fetcher: the one of the authorization in progress.
func (a *Authorizer) fetch(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	f, _ := ctx.Value(fetcherKey{}).(auth.AuthorizationCodeFetcher)
	if f == nil {
		return nil, errors.New("no browser to authorize with")
	}
	if u, err := url.Parse(args.URL); err == nil {
		q := u.Query()
		a.progress("authorization request to %s: client_id %s, scope %q, resource %s, PKCE %s",
			u.Scheme+"://"+u.Host+u.Path, q.Get("client_id"), q.Get("scope"), q.Get("resource"), q.Get("code_challenge_method"))
	}
	res, err := f(ctx, args)
	if err != nil {
		return nil, err
	}
	a.progress("authorization code received (iss %q)", res.Iss)
	return res, nil
}

// scopeFilter replaces the discovered scopes with the configured ones,
// keeping those a challenge names, and adds the stored grant's own on a
// step-up (a restart forgets what the go-sdk remembers).
func (a *Authorizer) scopeFilter(discovered []string) []string {
	a.mu.Lock()
	g, flow := a.cur, a.flow
	a.mu.Unlock()
	var ch challenge
	if flow != nil {
		ch = flow.ch
	}
	scopes := discovered
	if len(a.spec.Scopes) > 0 {
		// The challenge's scopes are what the server needs now.
		scopes = unionScopes(a.spec.Scopes, ch.scopes())
	}
	if g != nil && ch.stepUp() && flow != nil && g.Issuer == flow.md.issuer() {
		scopes = unionScopes(g.Scopes, scopes)
	}
	return scopes
}

// newTokenSource is the go-sdk's hook after the code exchange: the grant
// is stored, and the token source is the Authorizer's, which refreshes it
// from the store.
func (a *Authorizer) newTokenSource(ctx context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
	a.remember(tok.AccessToken, tok.RefreshToken, cfg.ClientSecret)
	secret := cfg.ClientSecret
	if cfg.ClientID == a.spec.ClientID {
		secret = "" // the configured one: read at each use
	}
	g := &grant{
		AccessToken: tok.AccessToken, TokenType: tok.Type(), RefreshToken: tok.RefreshToken, Expiry: a.expiry(tok),
		Scopes: scopesOf(tok), Grant: GrantAuthorizationCode,
		TokenURL: cfg.Endpoint.TokenURL, ClientID: cfg.ClientID, ClientSecret: secret, AuthStyle: int(cfg.Endpoint.AuthStyle),
	}
	if g.Scopes == nil {
		g.Scopes = cfg.Scopes
	}
	a.mu.Lock()
	if a.flow != nil {
		g.Issuer, g.Resource = a.flow.md.issuer(), a.flow.md.resource
	}
	a.mu.Unlock()
	if err := a.put(context.WithoutCancel(a.ctx), g); err != nil {
		return nil, err
	}
	a.progress("token received: %s, expires %s, scopes %s, refresh token %s, client_id %s",
		orDefault(g.TokenType, "Bearer"), expiry(g.Expiry, a.now()), orNone(g.Scopes), yesNo(g.RefreshToken != ""), g.ClientID)
	return tokenSource{a}, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// clientCredentials obtains a grant with the client's own credentials.
func (a *Authorizer) clientCredentials(ctx context.Context, md *metadata, ch challenge) error {
	scopes := ch.scopes()
	if len(scopes) == 0 {
		scopes = md.prm.ScopesSupported
	}
	if len(a.spec.Scopes) > 0 {
		scopes = unionScopes(a.spec.Scopes, ch.scopes())
	}
	g := &grant{
		Grant: GrantClientCredentials, Issuer: md.issuer(), TokenURL: md.asm.TokenEndpoint,
		ClientID: a.spec.ClientID, Scopes: scopes, Resource: md.resource,
		AuthStyle: int(authStyle(a.spec.TokenEndpointAuthMethod, md.asm.TokenEndpointAuthMethodsSupported)),
	}
	tok, err := a.clientCredentialsConfig(g).Token(a.tokenContext(ctx, g.TokenURL, g.Resource))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return a.needsAuth("the authorization server %s refused the client credentials: %s", g.Issuer, describe(re))
		}
		return fmt.Errorf("client credentials token request to %s: %s", g.TokenURL, a.scrub(err.Error()))
	}
	g.AccessToken, g.TokenType, g.Expiry = tok.AccessToken, tok.Type(), a.expiry(tok)
	if s := scopesOf(tok); s != nil {
		g.Scopes = s
	}
	if err := a.put(context.WithoutCancel(ctx), g); err != nil {
		return err
	}
	a.progress("token received (client credentials): %s, expires %s, scopes %s",
		orDefault(g.TokenType, "Bearer"), expiry(g.Expiry, a.now()), orNone(g.Scopes))
	return nil
}

func (a *Authorizer) clientCredentialsConfig(g *grant) *clientcredentials.Config {
	c := &clientcredentials.Config{
		ClientID: g.ClientID, ClientSecret: a.clientSecret(g), TokenURL: g.TokenURL, Scopes: g.Scopes,
		AuthStyle: oauth2.AuthStyle(g.AuthStyle),
	}
	if g.Resource != "" {
		c.EndpointParams = url.Values{"resource": {g.Resource}}
	}
	return c
}

// authStyle is how to authenticate at the token endpoint: as configured,
// else what the authorization server supports (post first, as the go-sdk
// prefers), else both in turn (oauth2's auto-detection).
func authStyle(method string, supported []string) oauth2.AuthStyle {
	if method == "" {
		switch {
		case slices.Contains(supported, AuthMethodPost):
			method = AuthMethodPost
		case slices.Contains(supported, AuthMethodBasic):
			method = AuthMethodBasic
		}
	}
	switch method {
	case AuthMethodBasic:
		return oauth2.AuthStyleInHeader
	case AuthMethodPost, AuthMethodNone:
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleAutoDetect
}

// withSubject names the caller in a per-user Authorizer's logs: who, never
// what they hold.
func withSubject(l *slog.Logger, subject string) *slog.Logger {
	if subject == "" {
		return l
	}
	return l.With("subject", subject)
}
