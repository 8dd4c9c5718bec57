package upstreamauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// Callbacks receives the authorization server's redirects at the end of
// authorization-code flows ([CallbackPath]) and hands each to the flow
// waiting for it, matched by the state parameter. Mount it on the
// gateway's listener (the probe command serves it on a loopback port). It
// is safe for concurrent use.
type Callbacks struct {
	mu      sync.Mutex
	pending map[string]chan callbackResult // by state
}

type callbackResult struct {
	res *auth.AuthorizationResult
	err error
}

// NewCallbacks returns a Callbacks with no flow waiting.
func NewCallbacks() *Callbacks {
	return &Callbacks{pending: map[string]chan callbackResult{}}
}

// ServeHTTP answers the redirect: code and state (and iss) go to the flow
// that sent the person to the authorization server; an error the
// authorization server reports ends it. The page tells the person whether
// they may close it.
func (c *Callbacks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	c.mu.Lock()
	ch, ok := c.pending[state]
	if ok {
		delete(c.pending, state) // a state is good once
	}
	c.mu.Unlock()
	if state == "" || !ok {
		page(w, http.StatusBadRequest, "Unknown authorization request",
			"This link does not belong to an authorization in progress: it was used already, expired, or was started elsewhere. Start again with `switchboard servers auth` (or `switchboard connect-account` for your own account).")
		return
	}
	if e := q.Get("error"); e != "" {
		msg := e
		if d := q.Get("error_description"); d != "" {
			msg += ": " + d
		}
		ch <- callbackResult{err: fmt.Errorf("the authorization server refused: %s", msg)}
		page(w, http.StatusOK, "Authorization refused", "The authorization server said: "+msg)
		return
	}
	if q.Get("code") == "" {
		ch <- callbackResult{err: errors.New("the authorization server's redirect has no code")}
		page(w, http.StatusBadRequest, "Authorization failed", "The redirect carried no authorization code.")
		return
	}
	ch <- callbackResult{res: &auth.AuthorizationResult{Code: q.Get("code"), State: state, Iss: q.Get("iss")}}
	page(w, http.StatusOK, "Authorization received", "switchboard is completing the authorization. You can close this window.")
}

func page(w http.ResponseWriter, status int, title, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer") // the URL holds the code
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>%s</title><h1>%s</h1><p>%s</p>\n",
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(body))
}

// Fetcher returns the go-sdk fetcher of a flow whose redirect comes back
// here: it registers the flow's state, has open send the person (or a
// headless client) to the authorization URL, and waits for the redirect or
// the end of ctx.
func (c *Callbacks) Fetcher(open func(ctx context.Context, authURL string) error) auth.AuthorizationCodeFetcher {
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		u, err := url.Parse(args.URL)
		if err != nil {
			return nil, fmt.Errorf("authorization URL: %w", err)
		}
		state := u.Query().Get("state")
		if state == "" {
			return nil, errors.New("authorization URL has no state")
		}
		ch := make(chan callbackResult, 1)
		c.mu.Lock()
		c.pending[state] = ch
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			delete(c.pending, state)
			c.mu.Unlock()
		}()
		if err := open(ctx, args.URL); err != nil {
			return nil, err
		}
		select {
		case r := <-ch:
			return r.res, r.err
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the authorization server's redirect: %w", ctx.Err())
		}
	}
}

// Headless returns an opener for [Callbacks.Fetcher] that follows the
// authorization URL's redirects itself, as a browser would, for
// authorization servers that approve without a person (test servers,
// pre-approved clients): the last redirect reaches the callback. An
// authorization server that shows a page instead is an error saying that
// it needs a person.
func Headless(client *http.Client, redirectURL string) func(ctx context.Context, authURL string) error {
	callback, _ := url.Parse(redirectURL)
	return func(ctx context.Context, authURL string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("following the authorization redirects: %w", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)) // only for the message
		if callback == nil || resp.Request.URL.Host != callback.Host || resp.Request.URL.Path != callback.Path {
			return fmt.Errorf("the authorization server answered %s at %s instead of redirecting back: it wants a person (run without --headless)",
				resp.Status, resp.Request.URL.Redacted())
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("the callback answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

// ClientMetadataHandler serves the gateway's client ID metadata document:
// clientID is its own URL (Spec.ClientMetadataURL, HTTPS, where this
// handler is mounted), redirectURI the gateway's callback. Authorization
// servers that support such documents fetch it to learn the client.
func ClientMetadataHandler(clientID, clientName, redirectURI string) http.Handler {
	doc, _ := json.Marshal(map[string]any{ // a map of strings and slices cannot fail to marshal
		"client_id":                  clientID,
		"client_name":                clientName,
		"redirect_uris":              []string{redirectURI},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": AuthMethodNone,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		w.Write(doc) //nolint:errcheck // the client went away
	})
}

// Flows runs the authorization flows operators start on a gateway (the
// `servers auth` command, the API, the dashboard's Connect button): one
// per server at a time, each in a goroutine Flows owns, bounded by a
// timeout. It is safe for concurrent use; Close ends the flows in
// progress and waits for them.
type Flows struct {
	cb      *Callbacks
	timeout time.Duration
	onDone  func(server string, err error)
	// onDoneFlow, if set, is called with each flow that ended, after onDone.
	onDoneFlow func(f *Flow)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	flows map[string]*Flow
}

// DefaultFlowTimeout bounds an operator's authorization flow when
// NewFlows is given 0.
const DefaultFlowTimeout = 10 * time.Minute

// NewFlows returns a Flows whose redirects come back through cb. onDone,
// if set, is called when a flow ends (err nil: the grant is stored, and
// the app reconnects the server), from the flow's goroutine.
func NewFlows(cb *Callbacks, timeout time.Duration, onDone func(server string, err error)) *Flows {
	if timeout <= 0 {
		timeout = DefaultFlowTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Flows{cb: cb, timeout: timeout, onDone: onDone, ctx: ctx, cancel: cancel, flows: map[string]*Flow{}}
}

// Flow is one authorization in progress or ended.
type Flow struct {
	Server  string
	Subject string // the caller whose account is linked; "" for the server's own grant
	// URL is where the person must go to approve; "" for the client
	// credentials grant, which needs nobody.
	URL     string
	Started time.Time

	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Done is closed when the flow ends.
func (f *Flow) Done() <-chan struct{} { return f.done }

// Err is why the flow failed, after Done; nil when the grant is stored.
func (f *Flow) Err() error {
	select {
	case <-f.done:
		return f.err
	default:
		return nil
	}
}

// Start begins a new authorization of a's server, cancelling one in
// progress for it, and returns once the flow has the URL the person must
// open, or has ended (client credentials, or a failure before the URL:
// discovery, registration). ctx bounds only that wait; the flow runs until
// it ends, times out or Flows closes.
func (fl *Flows) Start(ctx context.Context, a *Authorizer) (*Flow, error) {
	fctx, cancel := context.WithTimeout(fl.ctx, fl.timeout)
	f := &Flow{Server: a.Server(), Subject: a.Subject(), Started: time.Now(), cancel: cancel, done: make(chan struct{})}
	urlc := make(chan string, 1)
	fl.mu.Lock()
	if fl.ctx.Err() != nil {
		fl.mu.Unlock()
		cancel()
		return nil, errors.New("shutting down")
	}
	key := FlowKey(a.Server(), a.Subject())
	if old := fl.flows[key]; old != nil {
		old.cancel()
	}
	fl.flows[key] = f
	fl.wg.Add(1)
	fl.mu.Unlock()
	fetcher := fl.cb.Fetcher(func(_ context.Context, u string) error {
		urlc <- u
		return nil
	})
	go func() {
		defer fl.wg.Done()
		defer cancel()
		f.err = a.Reauthorize(fctx, fetcher)
		if fl.onDoneFlow != nil {
			// Before Done: whoever waits for the flow finds the
			// gateway told of the new grant (old sessions gone).
			fl.onDoneFlow(f)
		}
		close(f.done)
		if fl.onDone != nil {
			fl.onDone(f.Server, f.err)
		}
	}()
	select {
	case u := <-urlc:
		f.URL = u
		return f, nil
	case <-f.done:
		return f, f.err
	case <-ctx.Done():
		return f, ctx.Err()
	}
}

// Wait waits until the flow ends or ctx does, and returns why it failed
// (nil: the grant is stored), or ctx's error.
func (f *Flow) Wait(ctx context.Context) error {
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// FlowKey names the flows of server for subject ("" for the server's own
// grant) in [Flows.Get].
func FlowKey(server, subject string) string {
	if subject == "" {
		return server
	}
	return server + "\x00" + subject
}

// Get returns the last flow started for key: a server's name for its own
// grant, [FlowKey] for a caller's.
func (fl *Flows) Get(server string) (*Flow, bool) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	f, ok := fl.flows[server]
	return f, ok
}

// Close cancels the flows in progress and waits for them to end.
func (fl *Flows) Close() {
	fl.mu.Lock()
	fl.cancel()
	fl.mu.Unlock()
	fl.wg.Wait()
}
