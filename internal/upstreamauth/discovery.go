package upstreamauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// maxMetadataBytes is what the go-sdk reads of a metadata document; a
// longer one is cut there and fails to decode, which recorder turns into
// an error that says why.
const maxMetadataBytes = 1 << 20

// metadata is what discovery found for a server.
type metadata struct {
	prmURL   string // "" when the server publishes none (2025-03-26 servers)
	prm      *oauthex.ProtectedResourceMetadata
	asm      *oauthex.AuthServerMeta
	legacy   bool   // no authorization server metadata: the 2025-03-26 default endpoints
	resource string // the resource to name in authorization and token requests
}

func (m *metadata) issuer() string { return m.asm.Issuer }

// challenge is what a server's 401 or 403 said.
type challenge struct {
	status     int
	challenges []oauthex.Challenge
}

func (c challenge) param(name string) string {
	for _, ch := range c.challenges {
		if ch.Scheme == "bearer" && ch.Params[name] != "" {
			return ch.Params[name]
		}
	}
	return ""
}

func (c challenge) resourceMetadata() string {
	for _, ch := range c.challenges {
		if u := ch.Params["resource_metadata"]; u != "" {
			return u
		}
	}
	return ""
}

func (c challenge) scopes() []string { return strings.Fields(c.param("scope")) }

// stepUp reports whether the challenge asks for more scope.
func (c challenge) stepUp() bool {
	return c.status == http.StatusForbidden && c.param("error") == "insufficient_scope"
}

// prmCandidate is one place protected-resource metadata may be, and the
// resource it must then name (RFC 9728 §3.3).
type prmCandidate struct{ url, resource string }

// prmCandidates lists where to look for a server's protected-resource
// metadata, in the order of the MCP specification (and of the go-sdk's own
// flow, which must find the same document): the URL of the challenge,
// then the well-known URL with the endpoint's path, then at the root.
func prmCandidates(fromChallenge, serverURL string) []prmCandidate {
	var out []prmCandidate
	if fromChallenge != "" {
		out = append(out, prmCandidate{fromChallenge, serverURL})
	}
	ru, err := url.Parse(serverURL)
	if err != nil {
		return out
	}
	mu := *ru
	mu.RawQuery, mu.Fragment = "", ""
	mu.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(ru.Path, "/")
	out = append(out, prmCandidate{mu.String(), serverURL})
	root := *ru
	root.Path, root.RawPath, root.RawQuery, root.Fragment = "", "", "", ""
	mu.Path = "/.well-known/oauth-protected-resource"
	out = append(out, prmCandidate{mu.String(), root.String()})
	return out
}

// discover finds the server's protected-resource metadata and its
// authorization server's metadata. Unlike the go-sdk's flow, which tries
// the next place after any failure, a document that exists but cannot be
// used is an error here: guessing endpoints past a broken or tampered
// document would send the user's authorization somewhere else. Only when
// no place has a document (4xx everywhere) does it fall back to the
// 2025-03-26 convention, as the go-sdk does.
func (a *Authorizer) discover(ctx context.Context, ch challenge) (*metadata, error) {
	var firstErr error
	var md *metadata
	for _, c := range prmCandidates(ch.resourceMetadata(), a.serverURL) {
		rec := &recorder{}
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, c.url, c.resource, a.discoveryClient(rec))
		if err == nil {
			md = &metadata{prmURL: c.url, prm: prm, resource: prm.Resource}
			a.progress("protected resource metadata %s: resource %s, authorization servers %s, scopes_supported %s",
				c.url, prm.Resource, orNone(prm.AuthorizationServers), orNone(prm.ScopesSupported))
			break
		}
		if rec.absent() {
			continue
		}
		if firstErr == nil {
			firstErr = rec.explain(c.url, err)
		}
	}
	if md == nil {
		if firstErr != nil {
			return nil, fmt.Errorf("protected resource metadata: %w", firstErr)
		}
		// A 2025-03-26 server: it is its own authorization server.
		u, err := url.Parse(a.serverURL)
		if err != nil {
			return nil, fmt.Errorf("server URL: %w", err)
		}
		u.Path, u.RawPath, u.RawQuery, u.Fragment = "", "", "", ""
		md = &metadata{prm: &oauthex.ProtectedResourceMetadata{Resource: a.serverURL, AuthorizationServers: []string{u.String()}}, resource: a.serverURL}
		a.progress("no protected resource metadata: %s is taken as its own authorization server (2025-03-26)", u)
	}
	if len(md.prm.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("protected resource metadata %s names no authorization server", md.prmURL)
	}
	issuer := md.prm.AuthorizationServers[0]
	if a.spec.Issuer != "" && strings.TrimSuffix(issuer, "/") != strings.TrimSuffix(a.spec.Issuer, "/") {
		return nil, fmt.Errorf("the server's authorization server is %s, not the configured issuer %s", issuer, a.spec.Issuer)
	}
	rec := &recorder{}
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, a.discoveryClient(rec))
	if err != nil {
		return nil, fmt.Errorf("authorization server metadata of %s: %w", issuer, rec.explain("", err))
	}
	if asm == nil {
		asm = &oauthex.AuthServerMeta{
			Issuer:                issuer,
			AuthorizationEndpoint: strings.TrimSuffix(issuer, "/") + "/authorize",
			TokenEndpoint:         strings.TrimSuffix(issuer, "/") + "/token",
			RegistrationEndpoint:  strings.TrimSuffix(issuer, "/") + "/register",
		}
		md.legacy = true
		a.progress("no authorization server metadata at %s: using the default endpoints /authorize, /token, /register", issuer)
	} else {
		a.progress("authorization server %s: authorization %s, token %s, registration %s, scopes_supported %s",
			asm.Issuer, asm.AuthorizationEndpoint, asm.TokenEndpoint, orNone([]string{asm.RegistrationEndpoint}), orNone(asm.ScopesSupported))
	}
	md.asm = asm
	return md, nil
}

func orNone(list []string) string {
	var kept []string
	for _, s := range list {
		if s != "" {
			kept = append(kept, s)
		}
	}
	if len(kept) == 0 {
		return "(none)"
	}
	return strings.Join(kept, " ")
}

// discoveryClient is the client of one metadata fetch: the Authorizer's,
// recording what it gets in rec, and refusing a redirect to another host.
// The go-sdk uses a client's CheckRedirect and transport as they are.
func (a *Authorizer) discoveryClient(rec *recorder) *http.Client {
	c := *a.client
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	rec.base = base
	c.Transport = rec
	check := a.client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if from := via[0].URL; !strings.EqualFold(from.Host, req.URL.Host) {
			return fmt.Errorf("redirect from %s to another host (%s) refused: a metadata document must come from the host it is asked of", from.Host, req.URL.Host)
		}
		if check != nil {
			return check(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

// recorder is the transport of one metadata fetch. It remembers the status
// of the last answer and how much of its body was read, which the go-sdk's
// errors do not tell: whether a document is absent (a 4xx: look elsewhere)
// or there but unusable, and whether it was cut at the size limit.
type recorder struct {
	base http.RoundTripper

	mu     sync.Mutex
	status int   // of the last response; 0 when none came
	read   int64 // bytes of its body read
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.read = 0, 0
	if err != nil {
		return nil, err
	}
	r.status = resp.StatusCode
	resp.Body = &countingBody{ReadCloser: resp.Body, r: r}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	r *recorder
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.r.mu.Lock()
	b.r.read += int64(n)
	b.r.mu.Unlock()
	return n, err
}

// absent reports whether the last fetch found no document: a 4xx answer.
func (r *recorder) absent() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status >= 400 && r.status < 500
}

// explain turns the go-sdk's error about the document at u into one that
// says what was wrong with it.
func (r *recorder) explain(u string, err error) error {
	r.mu.Lock()
	status, read := r.status, r.read
	r.mu.Unlock()
	where := ""
	if u != "" {
		where = u + ": "
	}
	switch {
	case status == http.StatusOK && read >= maxMetadataBytes:
		return fmt.Errorf("%sthe document is larger than %d bytes", where, maxMetadataBytes)
	case status != 0 && status != http.StatusOK:
		return fmt.Errorf("%sHTTP %d: %w", where, status, err)
	}
	return err
}
