// Package apiclient is a typed client of the gateway's REST API, used by the
// operator commands of internal/cli and by end-to-end tests. Response types
// are the API's own (package api) wherever it exports them, so the client
// cannot drift from the server's wire format.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ErrUnreachable marks a request that never got an HTTP answer: the gateway
// is down, the URL is wrong, or the network is in the way. The CLI turns it
// into one line and exit status 1.
var ErrUnreachable = errors.New("gateway unreachable")

// Error is a failure the gateway answered with, in the API's one error shape
// ({"error": {"code", "message", "details"}}).
type Error struct {
	Status  int
	Code    string
	Message string
	Details map[string]any
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("gateway answered HTTP %d", e.Status)
	}
	return e.Message
}

// Unsupported reports whether the gateway lacks the route or the component
// behind it (an older gateway, or one run without a store): callers say so
// plainly instead of showing a bare 404.
func (e *Error) Unsupported() bool {
	if e.Status == http.StatusNotImplemented {
		return true
	}
	return e.Status == http.StatusNotFound && e.Code == "not_found" && strings.HasPrefix(e.Message, "no route ")
}

// unreachableError is a transport failure; it matches ErrUnreachable and
// the underlying cause with errors.Is.
type unreachableError struct {
	url string
	err error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach the gateway at %s: %s (is it running? set --url or SWITCHBOARD_URL)", e.url, reason(e.err))
}

func (e *unreachableError) Unwrap() []error { return []error{ErrUnreachable, e.err} }

// reason is the innermost useful text of a transport error: *url.Error
// repeats the method and URL, which the message already names.
func reason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// Options configure a Client; the zero value is valid.
type Options struct {
	// APIKey is sent as a bearer token; empty sends none (local mode).
	APIKey string
	// HTTPClient defaults to a client without a timeout: bound calls with
	// their ctx (the events stream lives as long as its ctx).
	HTTPClient *http.Client
	// UserAgent defaults to "switchboard-apiclient".
	UserAgent string
}

// Client talks to one gateway. Safe for concurrent use.
type Client struct {
	base *url.URL
	key  string
	hc   *http.Client
	ua   string
}

// New returns a client of the gateway at baseURL (scheme and host, e.g.
// http://127.0.0.1:8080; a path prefix is kept for gateways behind a proxy).
func New(baseURL string, opts *Options) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return nil, fmt.Errorf("gateway url %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gateway url %q: want http://host:port or https://host", baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.UserAgent == "" {
		o.UserAgent = "switchboard-apiclient"
	}
	return &Client{base: u, key: o.APIKey, hc: o.HTTPClient, ua: o.UserAgent}, nil
}

// URL is the gateway's base URL, for messages.
func (c *Client) URL() string { return c.base.String() }

// newRequest builds a request for path (with its query) and a JSON body.
func (c *Client) newRequest(ctx context.Context, method, path string, q url.Values, body any) (*http.Request, error) {
	u := *c.base
	u.Path += path
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil || (method != http.MethodGet && method != http.MethodHead) {
		// The gateway takes state-changing requests only as JSON (its
		// guard against cross-site forms), bodyless ones included.
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	return req, nil
}

// send does req and classifies a transport failure.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ctxErr)
		}
		return nil, &unreachableError{url: c.URL(), err: err}
	}
	return resp, nil
}

// do sends a JSON request and decodes a 2xx answer into out (nil: discard).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	req, err := c.newRequest(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return readError(resp)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding the answer to %s %s: %w", method, path, err)
	}
	return nil
}

// readError turns a non-2xx answer into *Error. A body that is not the
// API's shape (a proxy's page) still yields the status and a snippet.
func readError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var env struct {
		Error *struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &env) == nil && env.Error != nil {
		return &Error{Status: resp.StatusCode, Code: env.Error.Code, Message: env.Error.Message, Details: env.Error.Details}
	}
	msg := strings.TrimSpace(string(raw))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &Error{Status: resp.StatusCode, Message: fmt.Sprintf("gateway answered HTTP %d: %s", resp.StatusCode, msg)}
}

// esc escapes one path segment (server names are safe, ids may not be).
func esc(s string) string { return url.PathEscape(s) }
