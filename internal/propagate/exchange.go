package propagate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/config"
)

// RFC 8693 names.
const (
	grantTokenExchange  = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeJWT        = "urn:ietf:params:oauth:token-type:jwt"
	tokenTypeAccess     = "urn:ietf:params:oauth:token-type:access_token"
	subjectAssertionTTL = time.Minute
	// exchangeMargin is how long before its expiry a cached token is
	// exchanged again, at most; a token that lives less is reused for
	// half its life.
	exchangeMargin = 30 * time.Second
	// maxCachedTokens bounds the cache of one server: past it, expired
	// tokens are dropped, then the whole cache.
	maxCachedTokens = 10000
	// maxTokenResponse bounds the authorization server's answer.
	maxTokenResponse = 1 << 20
)

// exchanger gets, per caller, a token for one server from the
// organisation's authorization server by token exchange (RFC 8693): the
// subject token is an assertion the gateway signs for the caller (aud the
// token endpoint), the client authenticates with client_secret_basic, and
// the answer is cached per caller until near its expiry. The caller's own
// credential is never sent.
type exchanger struct {
	s                  *Signer
	endpoint, clientID string
	secret             string
	resource, audience string
	scope              string
	header             string
	bearer             bool // the header is Authorization: "Bearer <token>"
	httpc              *http.Client
	flight             singleflight.Group
	mu                 sync.Mutex
	cache              map[string]cachedToken // by caller identity id
}

type cachedToken struct {
	value string
	renew time.Time // exchange again from then
}

// ExchangeError is a refusal by the authorization server: its error code
// and description, never a token.
type ExchangeError struct {
	Status      int
	Code        string
	Description string
}

func (e *ExchangeError) Error() string {
	msg := fmt.Sprintf("refused (HTTP %d)", e.Status)
	if e.Code != "" {
		msg += ": " + e.Code
	}
	if e.Description != "" {
		msg += ": " + e.Description
	}
	return msg
}

// exchangerFor returns the exchanger of srv, reused while its definition
// is the same so that the cache outlives reconnects.
func (s *Signer) exchangerFor(srv *config.Server) *exchanger {
	id := srv.Identity
	resource := id.Resource
	if resource == "" {
		resource = srv.URL
	}
	header := id.IdentityHeader()
	e := &exchanger{s: s, endpoint: id.TokenEndpoint, clientID: id.ClientID, secret: srv.IdentityClientSecret(),
		resource: resource, audience: id.Audience, scope: strings.Join(id.Scopes, " "), header: header,
		bearer: strings.EqualFold(header, "Authorization"), httpc: s.httpc, cache: map[string]cachedToken{}}
	key := strings.Join([]string{srv.Name, e.endpoint, e.clientID, e.secret, e.resource, e.audience, e.scope, e.header}, "\x00")
	s.exMu.Lock()
	defer s.exMu.Unlock()
	if old, ok := s.exchangers[srv.Name]; ok && old.key == key {
		return old.ex
	}
	s.exchangers[srv.Name] = keyedExchanger{key: key, ex: e}
	return e
}

type keyedExchanger struct {
	key string
	ex  *exchanger
}

// Gateway is the subject of the gateway's own requests to a
// token_exchange server (initialize, lists, pings), which need a token too
// when it is the server's only credential.
var Gateway = authz.Identity{ID: "switchboard", AgentID: "switchboard", Method: "gateway"}

// headerFor returns the header and value carrying the caller's token.
func (e *exchanger) headerFor(ctx context.Context, id authz.Identity) (string, string, error) {
	if id.ID == "" {
		if !e.bearer {
			return "", "", nil // the server has another credential for these
		}
		id = Gateway
	}
	tok, err := e.token(ctx, id)
	if err != nil {
		return "", "", err
	}
	if e.bearer {
		return "Authorization", "Bearer " + tok, nil
	}
	return e.header, tok, nil
}

func (e *exchanger) token(ctx context.Context, id authz.Identity) (string, error) {
	now := e.s.clock()
	e.mu.Lock()
	c, ok := e.cache[id.ID]
	e.mu.Unlock()
	if ok && now.Before(c.renew) {
		return c.value, nil
	}
	// One exchange per caller at a time: the calls that arrive meanwhile
	// wait for its token.
	v, err, _ := e.flight.Do(id.ID, func() (any, error) {
		return e.exchange(context.WithoutCancel(ctx), id)
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

func (e *exchanger) exchange(ctx context.Context, id authz.Identity) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	subject, err := e.s.Assertion(ctx, id, e.endpoint, subjectAssertionTTL)
	if err != nil {
		return "", err
	}
	form := url.Values{
		"grant_type":           {grantTokenExchange},
		"subject_token":        {subject},
		"subject_token_type":   {tokenTypeJWT},
		"requested_token_type": {tokenTypeAccess},
		"resource":             {e.resource},
	}
	if e.audience != "" {
		form.Set("audience", e.audience)
	}
	if e.scope != "" {
		form.Set("scope", e.scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", errors.New("token exchange: invalid token_endpoint")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(e.clientID), url.QueryEscape(e.secret)) // RFC 6749 §2.3.1
	resp, err := e.httpc.Do(req)
	if err != nil {
		return "", fmt.Errorf("token exchange at %s: %w", e.endpoint, scrubURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	if err != nil {
		return "", fmt.Errorf("token exchange at %s: reading the answer: %w", e.endpoint, err)
	}
	if len(body) > maxTokenResponse {
		return "", fmt.Errorf("token exchange at %s: the answer is larger than %d bytes", e.endpoint, maxTokenResponse)
	}
	tok, life, err := parseTokenResponse(resp.StatusCode, body, e.bearer)
	if err != nil {
		return "", fmt.Errorf("token exchange at %s: %w", e.endpoint, err)
	}
	now := e.s.clock()
	renew := now.Add(max(life-exchangeMargin, life/2))
	e.mu.Lock()
	if len(e.cache) >= maxCachedTokens {
		for k, c := range e.cache {
			if !now.Before(c.renew) {
				delete(e.cache, k)
			}
		}
		if len(e.cache) >= maxCachedTokens {
			clear(e.cache)
		}
	}
	e.cache[id.ID] = cachedToken{value: tok, renew: renew}
	e.mu.Unlock()
	return tok, nil
}

// maxTokenLife bounds how long an exchanged token is reused, whatever the
// authorization server says.
const maxTokenLife = 24 * time.Hour

// parseTokenResponse reads the token endpoint's answer (RFC 6749 §5.1,
// RFC 8693 §2.2): the token and how long it lives, or the server's refusal
// as an *ExchangeError. A token must be a bearer token (when bearer) made
// of visible ASCII, fit for a header.
func parseTokenResponse(status int, body []byte, bearer bool) (string, time.Duration, error) {
	var tr struct {
		AccessToken      string `json:"access_token"`
		TokenType        string `json:"token_type"`
		ExpiresIn        int64  `json:"expires_in"`
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &tr); err != nil && status == http.StatusOK {
		return "", 0, errors.New("the answer is not JSON")
	}
	if status != http.StatusOK || tr.AccessToken == "" {
		return "", 0, &ExchangeError{Status: status, Code: clip(tr.Error), Description: clip(tr.ErrorDescription)}
	}
	if bearer && tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "Bearer") {
		return "", 0, fmt.Errorf("token_type %q is not Bearer", clip(tr.TokenType))
	}
	for i := 0; i < len(tr.AccessToken); i++ {
		if c := tr.AccessToken[i]; c <= ' ' || c >= 0x7f {
			return "", 0, errors.New("the access token is not visible ASCII")
		}
	}
	life := time.Minute // no expiry said: ask again soon rather than never
	if tr.ExpiresIn > 0 {
		life = time.Duration(min(tr.ExpiresIn, int64(maxTokenLife/time.Second))) * time.Second
	}
	return tr.AccessToken, life, nil
}

// clip bounds a text the authorization server chose, for an error.
func clip(s string) string {
	const n = 200
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// scrubURLError drops the request's URL and body from a transport error
// (a *url.Error repeats the URL; the body is never in it).
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
