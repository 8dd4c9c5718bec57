package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
)

// defaultBaseEnv is what a stdio child gets from the gateway environment
// without asking: enough for interpreters and package runners (node, npx,
// uvx, python) to work, nothing that is likely to be a credential.
var defaultBaseEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "SHELL", "TERM", "SYSTEMROOT"}

// childEnv builds the complete environment of a stdio child: the base names
// and the passthrough names that are set in the gateway environment, then the
// configured Env, which wins. The result is never nil, because a nil
// exec.Cmd.Env would hand the child the gateway's whole environment.
func childEnv(getenv func(string) string, base, passthrough []string, env map[string]string) []string {
	vars := make(map[string]string)
	for _, names := range [][]string{base, passthrough} {
		for _, name := range names {
			if v := getenv(name); v != "" {
				vars[name] = v
			}
		}
	}
	for k, v := range env {
		vars[k] = v
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// command builds the exec.Cmd of a stdio server. It is deliberately not an
// exec.CommandContext: the process lives until Disconnect or Close, not as
// long as whichever request happened to start it.
func (s *supervisor) command() (*exec.Cmd, error) {
	path := s.cfg.Command
	if path == config.SelfCommand {
		path = s.opts.SelfExecutable
		if path == "" {
			exe, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("locating the switchboard executable: %w", err)
			}
			path = exe
		}
	}
	cmd := exec.Command(path, s.cfg.Args...)
	cmd.Env = childEnv(s.opts.Getenv, s.opts.BaseEnv, s.cfg.EnvPassthrough, s.cfg.Env)
	cmd.Dir = s.cfg.Cwd
	if err := preflight(cmd, s.cfg.Command); err != nil {
		return nil, err
	}
	setProcessGroup(cmd)
	return cmd, nil
}

// MinTLSVersion is the oldest TLS version the gateway accepts from an
// sse/http upstream (NFR-SEC2). Go's client default is the same today; it is
// written down so that neither a toolchain change nor a cloned transport
// can lower it silently.
const MinTLSVersion = tls.VersionTLS12

// defaultHTTPClient has transport-level timeouts only: an overall
// http.Client.Timeout would cut the long-lived SSE streams. It dials and
// follows redirects through guard, and so uses no proxy unless the guard
// has one. It speaks TLS 1.2 or later.
func defaultHTTPClient(guard *netguard.Guard) *http.Client {
	t := guard.Transport(nil)
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{}
	}
	t.TLSClientConfig.MinVersion = max(t.TLSClientConfig.MinVersion, MinTLSVersion)
	t.TLSHandshakeTimeout = 10 * time.Second
	t.IdleConnTimeout = 90 * time.Second
	t.ExpectContinueTimeout = time.Second
	// Every concurrent call to an HTTP upstream is its own POST; with the
	// default of 2 idle connections per host, a burst of calls ends in a
	// connection churn (dial, TIME_WAIT) that costs more than the calls.
	t.MaxIdleConnsPerHost = 256
	t.MaxIdleConns = 1024
	return &http.Client{Transport: t, CheckRedirect: guard.CheckRedirect}
}

// checkDestinations refuses, before a connect, an sse/http server whose url
// or health_check_url the SSRF guard denies: a configuration problem that
// no retry fixes, reported with the setting that would allow it. A name
// that does not resolve now is left to the dial, which checks again.
func (s *supervisor) checkDestinations(ctx context.Context) error {
	if s.cfg.Transport == config.TransportStdio {
		return nil
	}
	for _, f := range []struct{ field, url string }{{"url", s.cfg.URL}, {"health_check_url", s.cfg.HealthCheckURL}} {
		if f.url == "" {
			continue
		}
		if err := s.opts.Guard.CheckURL(ctx, f.url); errors.Is(err, netguard.ErrBlocked) {
			return fmt.Errorf("%s: %w", f.field, err)
		}
	}
	return nil
}

// headerTransport adds the configured headers to requests for the upstream's
// own host. Requests to any other host (a redirect, an absolute message
// endpoint elsewhere) go out without them, so credentials stay with the server
// they were configured for.
type headerTransport struct {
	base    http.RoundTripper
	host    string
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 || !strings.EqualFold(req.URL.Host, t.host) {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not modify the caller's request
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

// bearerTransport gives the SSE transport, which takes no OAuth handler,
// what the Streamable HTTP one does with it: the handler's token on
// requests for the upstream's own host, and on a 401 (or a 403 asking for
// scope) the handler's Authorize, then one retry.
type bearerTransport struct {
	base  http.RoundTripper
	host  string
	oauth auth.OAuthHandler
}

func (t *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.EqualFold(req.URL.Host, t.host) {
		return t.base.RoundTrip(req)
	}
	resp, sent, err := t.send(req)
	if err != nil || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
		return resp, err
	}
	if req.Body != nil && req.GetBody == nil {
		return resp, nil // cannot be sent again
	}
	if err := t.oauth.Authorize(req.Context(), sent, resp); err != nil { // closes resp.Body
		return nil, err
	}
	retry := req.Clone(req.Context())
	if req.GetBody != nil {
		if retry.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	resp, _, err = t.send(retry)
	return resp, err
}

// send sends req with the handler's token, if it has one, and returns the
// request as sent.
func (t *bearerTransport) send(req *http.Request) (*http.Response, *http.Request, error) {
	ts, err := t.oauth.TokenSource(req.Context())
	if err != nil {
		return nil, nil, err
	}
	if ts != nil {
		tok, err := ts.Token()
		if err != nil {
			return nil, nil, err
		}
		req = req.Clone(req.Context()) // a RoundTripper must not modify the caller's request
		tok.SetAuthHeader(req)
	}
	resp, err := t.base.RoundTrip(req)
	return resp, req, err
}

// httpClient clones the base client with the resolved headers added.
func httpClient(base *http.Client, endpoint *url.URL, headers map[string]string) *http.Client {
	if len(headers) == 0 {
		return base
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c := *base
	c.Transport = &headerTransport{base: rt, host: endpoint.Host, headers: headers}
	return &c
}

// lifetimeTransport hands the transport a session-lifetime context instead of
// the connect context: the SSE transport ties its event stream to the context
// given to Connect, and that stream must outlive the connect timeout. The
// connect attempt bounds it separately by cancelling the lifetime context if
// the attempt fails.
type lifetimeTransport struct {
	inner mcp.Transport
	ctx   context.Context
	wrap  func(mcp.Connection) mcp.Connection // if set, applied to the connection
}

func (t *lifetimeTransport) Connect(context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(t.ctx)
	if err == nil && t.wrap != nil {
		conn = t.wrap(conn)
	}
	return conn, err
}

// minSecretLen keeps very short values (flags like "1") out of redaction,
// where they would garble every message without protecting anything.
const minSecretLen = 4

// redactor removes a server's credentials from text before it is logged,
// stored in Status or returned in an error.
type redactor struct{ r *strings.Replacer }

// newRedactor knows the header values (and the token after an auth scheme),
// and the endpoint's userinfo and query; the endpoint itself is replaced by
// its safe form.
func newRedactor(endpoint *url.URL, rawEndpoint string, headers map[string]string) *redactor {
	type pair struct{ old, new string }
	var pairs []pair
	add := func(old, new string) {
		if old != "" && old != new {
			pairs = append(pairs, pair{old, new})
		}
	}
	secret := func(v string) {
		if len(v) >= minSecretLen {
			add(v, "[REDACTED]")
		}
	}
	if endpoint != nil {
		safe := safeURL(endpoint)
		add(rawEndpoint, safe)
		add(endpoint.Redacted(), safe)
		add(endpoint.String(), safe)
		if u := endpoint.User; u != nil {
			// The userinfo as written, and as url.URL.Redacted and net/http's
			// errors (which mask only the password) print it.
			add(u.String()+"@", "")
			add(u.Username()+":xxxxx@", "")
			add(u.Username()+":***@", "")
			if p, ok := u.Password(); ok {
				secret(p)
			}
		}
		for _, vs := range endpoint.Query() {
			for _, v := range vs {
				secret(v)
			}
		}
	}
	for _, v := range headers {
		secret(v)
		if _, tok, ok := strings.Cut(v, " "); ok {
			secret(tok)
		}
	}
	// strings.Replacer tries the pairs in argument order at each position:
	// longest first, so a secret that contains another is removed whole.
	slices.SortStableFunc(pairs, func(a, b pair) int { return len(b.old) - len(a.old) })
	args := make([]string, 0, 2*len(pairs))
	for _, p := range pairs {
		args = append(args, p.old, p.new)
	}
	return &redactor{r: strings.NewReplacer(args...)}
}

func (r *redactor) String(s string) string {
	if r == nil {
		return s
	}
	return r.r.Replace(s)
}

// Error is the redacted text of err.
func (r *redactor) Error(err error) string {
	if err == nil {
		return ""
	}
	return r.String(err.Error())
}

// safeURL is u without userinfo, query or fragment: what may be logged.
func safeURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.ForceQuery = false
	c.Fragment = ""
	c.RawFragment = ""
	return c.String()
}
