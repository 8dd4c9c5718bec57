package upstreamauth_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/upstreamauth"
)

const (
	ccClient = "svc-client"
	ccSecret = "svc-secret-9f3b2c71"
)

// ccSpec is a client credentials grant with as's client.
func ccSpec(as *fakeAS) upstreamauth.Spec {
	as.mu.Lock()
	as.clientSecret = ccSecret
	as.mu.Unlock()
	return upstreamauth.Spec{Grant: upstreamauth.GrantClientCredentials, ClientID: ccClient, ClientSecret: ccSecret}
}

func newAuthorizer(t *testing.T, serverURL string, spec upstreamauth.Spec, opts *upstreamauth.Options) *upstreamauth.Authorizer {
	t.Helper()
	a, err := upstreamauth.New("srv", serverURL, spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// unauthorized is the 401 of a request to serverURL, with challenge as its
// WWW-Authenticate (none when "").
func unauthorized(serverURL, challenge string, token string) (*http.Request, *http.Response) {
	req := httptest.NewRequest(http.MethodPost, serverURL, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp := &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("no"))}
	if challenge != "" {
		resp.Header.Set("WWW-Authenticate", challenge)
	}
	return req, resp
}

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name string
		spec upstreamauth.Spec
		want []string // substrings of the error; none: valid
	}{
		{"zero value", upstreamauth.Spec{}, nil},
		{"pre-registered", upstreamauth.Spec{ClientID: "a", ClientSecret: "b", Scopes: []string{"repo"}, TokenEndpointAuthMethod: "client_secret_post"}, nil},
		{"public client", upstreamauth.Spec{ClientID: "a", TokenEndpointAuthMethod: "none"}, nil},
		{"client metadata", upstreamauth.Spec{ClientMetadataURL: "https://gw.example.com/oauth/upstream/client-metadata.json"}, nil},
		{"client credentials", upstreamauth.Spec{Grant: upstreamauth.GrantClientCredentials, ClientID: "a", ClientSecret: "b"}, nil},
		{"unknown grant", upstreamauth.Spec{Grant: "password"}, []string{"grant:"}},
		{"client credentials without client", upstreamauth.Spec{Grant: upstreamauth.GrantClientCredentials}, []string{"client_id:", "client_secret_env:"}},
		{"unknown method", upstreamauth.Spec{TokenEndpointAuthMethod: "private_key_jwt"}, []string{"token_endpoint_auth_method:"}},
		{"none with a secret", upstreamauth.Spec{ClientID: "a", ClientSecret: "b", TokenEndpointAuthMethod: "none"}, []string{"none sends no secret"}},
		{"secret without id", upstreamauth.Spec{ClientSecret: "b"}, []string{"without client_id"}},
		{"metadata URL not https", upstreamauth.Spec{ClientMetadataURL: "http://gw.example.com/cimd.json"}, []string{"client_metadata_url:"}},
		{"metadata URL at the root", upstreamauth.Spec{ClientMetadataURL: "https://gw.example.com/"}, []string{"client_metadata_url:"}},
		{"bad scope", upstreamauth.Spec{Scopes: []string{"a b"}}, []string{"scopes:"}},
		{"negative margin", upstreamauth.Spec{RefreshMargin: -time.Second}, []string{"refresh_margin:"}},
		{"bad issuer", upstreamauth.Spec{Issuer: "ftp://x"}, []string{"issuer:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to say %q", err, w)
				}
			}
		})
	}
}

// TestDiscoveryFallbacks authorizes with client credentials against
// servers that publish their metadata in each place the specification
// allows, and checks where the Authorizer looked, in which order, and
// which resource it named.
func TestDiscoveryFallbacks(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(rs *resourceServer, as *fakeAS)
		challenge func(rs *resourceServer) string
		wantPaths []string // requested of the resource server
		resource  func(rs *resourceServer) string
		issuer    func(rs *resourceServer, as *fakeAS) string
	}{
		{
			name: "metadata URL in WWW-Authenticate",
			setup: func(rs *resourceServer, as *fakeAS) {
				rs.serve("/custom/prm", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
					Resource: rs.URL(), AuthorizationServers: []string{as.URL()}}))
			},
			challenge: func(rs *resourceServer) string {
				return fmt.Sprintf(`Bearer resource_metadata="%s/custom/prm"`, rs.srv.URL)
			},
			wantPaths: []string{"/custom/prm"},
		},
		{
			name:      "path-suffixed well-known URL",
			wantPaths: []string{"/.well-known/oauth-protected-resource/mcp"},
		},
		{
			name: "well-known URL at the root",
			setup: func(rs *resourceServer, as *fakeAS) {
				rs.serve("/.well-known/oauth-protected-resource/mcp", http.NotFoundHandler())
				rs.serve("/.well-known/oauth-protected-resource", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
					Resource: rs.srv.URL, AuthorizationServers: []string{as.URL()}}))
			},
			wantPaths: []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"},
			resource:  func(rs *resourceServer) string { return rs.srv.URL },
		},
		{
			name: "no protected resource metadata (2025-03-26): the server is its own authorization server",
			setup: func(rs *resourceServer, as *fakeAS) {
				rs.serve("/.well-known/oauth-protected-resource/mcp", http.NotFoundHandler())
				rs.serve("/.well-known/oauth-protected-resource", http.NotFoundHandler())
				rs.serve("/.well-known/oauth-authorization-server", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					writeJSON(w, http.StatusOK, oauthex.AuthServerMeta{Issuer: rs.srv.URL, AuthorizationEndpoint: as.URL() + "/authorize",
						TokenEndpoint: as.URL() + "/token", CodeChallengeMethodsSupported: []string{"S256"},
						TokenEndpointAuthMethodsSupported: []string{"client_secret_basic"}})
				}))
			},
			wantPaths: []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server"},
			issuer:    func(rs *resourceServer, _ *fakeAS) string { return rs.srv.URL },
		},
		{
			name:      "authorization server metadata by OpenID Connect discovery",
			setup:     func(_ *resourceServer, as *fakeAS) { as.oidcOnly = true },
			wantPaths: []string{"/.well-known/oauth-protected-resource/mcp"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			as := newFakeAS(t)
			rs := newResourceServer(t, as)
			if tt.setup != nil {
				tt.setup(rs, as)
			}
			var steps []string
			a := newAuthorizer(t, rs.URL(), ccSpec(as), &upstreamauth.Options{Progress: func(s string) { steps = append(steps, s) }})
			challenge := ""
			if tt.challenge != nil {
				challenge = tt.challenge(rs)
			}
			req, resp := unauthorized(rs.URL(), challenge, "")
			if err := a.Authorize(t.Context(), req, resp); err != nil {
				t.Fatalf("Authorize: %v\nsteps:\n%s", err, strings.Join(steps, "\n"))
			}
			if diff := cmp.Diff(tt.wantPaths, rs.requested()); diff != "" {
				t.Errorf("requests to the resource server (-want +got):\n%s", diff)
			}
			wantResource := rs.URL()
			if tt.resource != nil {
				wantResource = tt.resource(rs)
			}
			form := as.lastTokenForm()
			if got := form.Get("resource"); got != wantResource {
				t.Errorf("token request resource = %q, want %q", got, wantResource)
			}
			if form.Get("grant_type") != "client_credentials" {
				t.Errorf("grant_type = %q", form.Get("grant_type"))
			}
			st, err := a.Status(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			wantIssuer := as.URL()
			if tt.issuer != nil {
				wantIssuer = tt.issuer(rs, as)
			}
			if !st.Authorized || st.Issuer != wantIssuer || st.Grant != upstreamauth.GrantClientCredentials {
				t.Errorf("Status = %+v, want authorized by %s", st, wantIssuer)
			}
			tok, err := a.Token()
			if err != nil || tok.AccessToken == "" {
				t.Fatalf("Token() = %v, %v", tok, err)
			}
		})
	}
}

// TestBadMetadata checks that a metadata document that is malformed, too
// large, redirected to another host, or names another resource or issuer
// ends discovery with an error that says so, and that nothing is stored
// and no token requested.
func TestBadMetadata(t *testing.T) {
	big := func(prefix string) string {
		return prefix + `"pad":"` + strings.Repeat("a", 2<<20) + `"}`
	}
	tests := []struct {
		name  string
		spec  func(*fakeAS) upstreamauth.Spec
		setup func(rs *resourceServer, as *fakeAS)
		want  string
	}{
		{
			name: "malformed protected resource metadata",
			setup: func(rs *resourceServer, _ *fakeAS) {
				rs.serve("/.well-known/oauth-protected-resource/mcp", jsonBody(`{"resource": "x",`))
			},
			want: "/.well-known/oauth-protected-resource/mcp",
		},
		{
			name: "protected resource metadata over 1 MiB",
			setup: func(rs *resourceServer, as *fakeAS) {
				rs.serve("/.well-known/oauth-protected-resource/mcp",
					jsonBody(big(fmt.Sprintf(`{"resource":%q,"authorization_servers":[%q],`, rs.URL(), as.URL()))))
			},
			want: "larger than 1048576 bytes",
		},
		{
			name: "protected resource metadata redirected to another host",
			setup: func(rs *resourceServer, as *fakeAS) {
				rs.serve("/.well-known/oauth-protected-resource/mcp", http.RedirectHandler(as.URL()+"/prm", http.StatusFound))
			},
			want: "another host",
		},
		{
			name: "protected resource metadata of another resource",
			setup: func(rs *resourceServer, as *fakeAS) {
				rs.serve("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
					Resource: "https://evil.example.com/mcp", AuthorizationServers: []string{as.URL()}}))
			},
			want: `got metadata resource "https://evil.example.com/mcp"`,
		},
		{
			name: "protected resource metadata without authorization server",
			setup: func(rs *resourceServer, _ *fakeAS) {
				rs.serve("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: rs.URL()}))
			},
			want: "names no authorization server",
		},
		{
			name:  "malformed authorization server metadata",
			setup: func(_ *resourceServer, as *fakeAS) { as.metadataH = jsonBody(`{"issuer":`) },
			want:  "authorization server metadata of",
		},
		{
			name: "authorization server metadata over 1 MiB",
			setup: func(_ *resourceServer, as *fakeAS) {
				as.metadataH = jsonBody(big(fmt.Sprintf(`{"issuer":%q,`, as.URL())))
			},
			want: "larger than 1048576 bytes",
		},
		{
			name: "authorization server metadata redirected to another host",
			setup: func(rs *resourceServer, as *fakeAS) {
				as.metadataH = http.RedirectHandler(rs.srv.URL+"/.well-known/oauth-authorization-server", http.StatusFound)
			},
			want: "another host",
		},
		{
			name:  "authorization server metadata of another issuer",
			setup: func(_ *resourceServer, as *fakeAS) { as.issuerOver = "https://attacker.example.com" },
			want:  `metadata issuer "https://attacker.example.com" does not match`,
		},
		{
			name: "authorization server other than the configured issuer",
			spec: func(as *fakeAS) upstreamauth.Spec {
				s := ccSpec(as)
				s.Issuer = "https://login.example.com"
				return s
			},
			want: "not the configured issuer https://login.example.com",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			as := newFakeAS(t)
			rs := newResourceServer(t, as)
			if tt.setup != nil {
				tt.setup(rs, as)
			}
			spec := ccSpec(as)
			if tt.spec != nil {
				spec = tt.spec(as)
			}
			tokens := upstreamauth.NewMemoryStore()
			a := newAuthorizer(t, rs.URL(), spec, &upstreamauth.Options{Store: tokens, Keyring: testKeyring(t)})
			req, resp := unauthorized(rs.URL(), "", "")
			err := a.Authorize(t.Context(), req, resp)
			var na *upstreamauth.NeedsAuthError
			if !errors.As(err, &na) {
				t.Fatalf("Authorize = %v, want a NeedsAuthError", err)
			}
			if !strings.Contains(na.Reason, tt.want) {
				t.Errorf("reason %q does not say %q", na.Reason, tt.want)
			}
			if _, err := tokens.UpstreamToken(t.Context(), "srv", ""); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a grant was stored: %v", err)
			}
			if _, _, n := as.counts(); n != 0 {
				t.Errorf("%d token requests after bad metadata", n)
			}
			// The transport finds it in its chain, as the supervisor does.
			if !upstreamauth.IsNeedsAuth(fmt.Errorf("calling: %w", err)) {
				t.Error("IsNeedsAuth(wrapped) = false")
			}
		})
	}
}

// TestRefreshBeforeExpiry follows an authorization-code grant through the
// clock: the token is used as it is until the refresh margin, refreshed
// (with the refresh token and the resource) once inside it, before it
// expires, and refreshed when it has expired.
func TestRefreshBeforeExpiry(t *testing.T) {
	as := newFakeAS(t)
	as.expiresIn = 20
	rs := newResourceServer(t, as)
	cb := newCallbackServer(t)
	clk := newClock()
	start := clk.Now()
	a := newAuthorizer(t, rs.URL(), upstreamauth.Spec{RefreshMargin: 5 * time.Second},
		&upstreamauth.Options{RedirectURL: cb.redirect, Now: clk.Now})
	if err := a.Reauthorize(t.Context(), cb.fetcher()); err != nil {
		t.Fatal(err)
	}
	first, err := a.Token()
	if err != nil {
		t.Fatal(err)
	}
	form := as.lastTokenForm()
	if form.Get("grant_type") != "authorization_code" || form.Get("resource") != rs.URL() || form.Get("code_verifier") == "" {
		t.Errorf("code exchange form = %v", form)
	}
	steps := []struct {
		at        time.Duration
		refreshes int
		same      bool // the token of the step before
	}{
		{10 * time.Second, 0, true},  // 10 s left: fresh
		{14 * time.Second, 0, true},  // 6 s left: still beyond the margin
		{16 * time.Second, 1, false}, // 4 s left: refreshed before expiry
		{17 * time.Second, 1, true},  // the new one is fresh
		{45 * time.Second, 2, false}, // the new one expired at ~36 s: refreshed
	}
	prev := first.AccessToken
	for _, st := range steps {
		clk.set(start, st.at)
		tok, err := a.Token()
		if err != nil {
			t.Fatalf("at %s: %v", st.at, err)
		}
		_, refreshes, _ := as.counts()
		if refreshes != st.refreshes || (tok.AccessToken == prev) != st.same {
			t.Fatalf("at %s: %d refreshes, token changed %v; want %d, changed %v", st.at, refreshes, tok.AccessToken != prev, st.refreshes, !st.same)
		}
		if !st.same {
			form := as.lastTokenForm()
			if form.Get("grant_type") != "refresh_token" || form.Get("resource") != rs.URL() || form.Get("refresh_token") == "" {
				t.Errorf("at %s: refresh form = %v", st.at, form)
			}
			if st.at < 20*time.Second && !clk.Now().Before(first.Expiry) {
				t.Errorf("at %s: refreshed after the old token expired (%v)", st.at, first.Expiry)
			}
		}
		prev = tok.AccessToken
	}
	st, err := a.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Refreshable || st.Problem != "" || st.Issuer != as.URL() {
		t.Errorf("Status = %+v", st)
	}
}

// TestRefreshRefused revokes the grant at the authorization server: the
// refresh is refused, the error says why (the server's own words), the
// refusal is stored so that another replica does not try again, and
// nothing else is asked of the authorization server.
func TestRefreshRefused(t *testing.T) {
	as := newFakeAS(t)
	as.expiresIn = 20
	rs := newResourceServer(t, as)
	cb := newCallbackServer(t)
	clk := newClock()
	start := clk.Now()
	tokens := upstreamauth.NewMemoryStore()
	kr := testKeyring(t)
	opts := &upstreamauth.Options{Store: tokens, Keyring: kr, RedirectURL: cb.redirect, Now: clk.Now}
	a := newAuthorizer(t, rs.URL(), upstreamauth.Spec{RefreshMargin: 5 * time.Second}, opts)
	if err := a.Reauthorize(t.Context(), cb.fetcher()); err != nil {
		t.Fatal(err)
	}
	as.revoke("grant revoked by an administrator")
	clk.set(start, 16*time.Second)
	_, err := a.Token()
	var na *upstreamauth.NeedsAuthError
	if !errors.As(err, &na) {
		t.Fatalf("Token() = %v, want a NeedsAuthError", err)
	}
	for _, want := range []string{"invalid_grant", "grant revoked by an administrator", as.URL()} {
		if !strings.Contains(na.Reason, want) {
			t.Errorf("reason %q does not say %q", na.Reason, want)
		}
	}
	row, err := tokens.UpstreamToken(t.Context(), "srv", "")
	if err != nil {
		t.Fatal(err)
	}
	if row.Problem != na.Reason {
		t.Errorf("stored problem %q, want %q", row.Problem, na.Reason)
	}
	_, _, before := as.counts()
	b := newAuthorizer(t, rs.URL(), upstreamauth.Spec{RefreshMargin: 5 * time.Second}, opts)
	if _, err := b.TokenSource(t.Context()); !upstreamauth.IsNeedsAuth(err) {
		t.Errorf("another replica's TokenSource = %v, want a NeedsAuthError", err)
	}
	if _, err := a.Token(); !upstreamauth.IsNeedsAuth(err) {
		t.Errorf("Token() again = %v, want a NeedsAuthError", err)
	}
	if _, _, after := as.counts(); after != before {
		t.Errorf("%d more token requests after the refusal", after-before)
	}
	// An operator authorizes again (on any replica): the problem is gone
	// for every replica.
	if err := b.Reauthorize(t.Context(), cb.fetcher()); err != nil {
		t.Fatal(err)
	}
	if ts, err := a.TokenSource(t.Context()); ts == nil || err != nil {
		t.Errorf("TokenSource after the new authorization on another replica = %v, %v", ts, err)
	}
	if tok, err := a.Token(); err != nil || tok.AccessToken == "" {
		t.Errorf("Token() after the new authorization = %v, %v", tok, err)
	}
	if st, err := a.Status(t.Context()); err != nil || st.Problem != "" {
		t.Errorf("Status after the new authorization = %+v, %v", st, err)
	}
}

// TestStepUpLimit has a server answer insufficient_scope to every token:
// the Authorizer asks for the scope a bounded number of times, then gives
// up with a NeedsAuthError.
func TestStepUpLimit(t *testing.T) {
	as := newFakeAS(t)
	rs := newResourceServer(t, as)
	cb := newCallbackServer(t)
	a := newAuthorizer(t, rs.URL(), upstreamauth.Spec{MaxStepUps: 2},
		&upstreamauth.Options{RedirectURL: cb.redirect, Fetcher: cb.fetcher()})
	challenge := `Bearer error="insufficient_scope", scope="mcp:admin", resource_metadata="` + rs.srv.URL + `/.well-known/oauth-protected-resource/mcp"`
	for i := 1; i <= 3; i++ {
		tok := ""
		if t, err := a.Token(); err == nil {
			tok = t.AccessToken
		}
		req, resp := unauthorized(rs.URL(), challenge, tok)
		resp.StatusCode = http.StatusForbidden
		err := a.Authorize(t.Context(), req, resp)
		authorizes, _, _ := as.counts()
		switch {
		case i <= 2 && err != nil:
			t.Fatalf("step-up %d: %v", i, err)
		case i <= 2 && authorizes != i:
			t.Fatalf("step-up %d: %d authorization requests", i, authorizes)
		case i == 3 && !upstreamauth.IsNeedsAuth(err):
			t.Fatalf("step-up 3: %v, want a NeedsAuthError", err)
		case i == 3 && authorizes != 2:
			t.Fatalf("step-up 3 sent the person to the authorization server (%d requests)", authorizes)
		}
	}
	// A 403 that is not about scope is left alone.
	req, resp := unauthorized(rs.URL(), `Bearer error="invalid_token"`, "x")
	resp.StatusCode = http.StatusForbidden
	if err := a.Authorize(t.Context(), req, resp); err != nil {
		t.Errorf("plain 403: %v", err)
	}
}

// TestGatewayWithoutBrowser checks what the gateway's Authorizer (no
// fetcher) does on a 401: nothing to approve with, so a NeedsAuthError
// that says how to authorize, and the same answer without asking again.
func TestGatewayWithoutBrowser(t *testing.T) {
	as := newFakeAS(t)
	rs := newResourceServer(t, as)
	cb := newCallbackServer(t)
	a := newAuthorizer(t, rs.URL(), upstreamauth.Spec{}, &upstreamauth.Options{RedirectURL: cb.redirect})
	req, resp := unauthorized(rs.URL(), "", "")
	err := a.Authorize(t.Context(), req, resp)
	var na *upstreamauth.NeedsAuthError
	if !errors.As(err, &na) || !strings.Contains(na.Reason, "switchboard servers auth srv") {
		t.Fatalf("Authorize = %v, want a NeedsAuthError naming the command", err)
	}
	if ts, err := a.TokenSource(t.Context()); ts != nil || err != nil {
		t.Errorf("TokenSource before any grant = %v, %v; want nil, nil", ts, err)
	}
	if authorizes, _, _ := as.counts(); authorizes != 0 {
		t.Errorf("%d authorization requests without a person", authorizes)
	}
	if err := a.Reauthorize(t.Context(), nil); err == nil {
		t.Error("Reauthorize without a fetcher succeeded")
	}
}

func TestCallbacks(t *testing.T) {
	cb := upstreamauth.NewCallbacks()
	srv := httptest.NewServer(cb)
	t.Cleanup(srv.Close)
	get := func(q string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + upstreamauth.CallbackPath + "?" + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("code=c&state=nobody"); code != http.StatusBadRequest || !strings.Contains(body, "Unknown authorization request") {
		t.Errorf("unknown state: %d %q", code, body)
	}
	tests := []struct {
		name, query string
		want        *auth.AuthorizationResult
		wantErr     string
	}{
		{"code", "code=the-code&iss=https%3A%2F%2Fas", &auth.AuthorizationResult{Code: "the-code", Iss: "https://as"}, ""},
		{"refused", "error=access_denied&error_description=the+user+said+no", nil, "access_denied: the user said no"},
		{"no code", "", nil, "no code"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := fmt.Sprintf("s-%d", i)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			browser := make(chan struct{})
			fetch := cb.Fetcher(func(_ context.Context, authURL string) error {
				go func() { // the browser
					defer close(browser)
					resp, err := http.Get(srv.URL + upstreamauth.CallbackPath + "?" + tt.query + "&state=" + state)
					if err == nil {
						resp.Body.Close()
					}
				}()
				return nil
			})
			defer func() { <-browser }()
			res, err := fetch(ctx, &auth.AuthorizationArgs{URL: "https://as/authorize?state=" + state})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want.State = state
			if diff := cmp.Diff(tt.want, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
	// A state is good once.
	if code, _ := get("code=again&state=s-0"); code != http.StatusBadRequest {
		t.Errorf("a used state answered %d", code)
	}
	// A flow that gives up stops waiting.
	ctx, cancel := context.WithCancel(t.Context())
	fetch := cb.Fetcher(func(context.Context, string) error { cancel(); return nil })
	if _, err := fetch(ctx, &auth.AuthorizationArgs{URL: "https://as/authorize?state=gone"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled flow: %v", err)
	}
}

func TestClientMetadataHandler(t *testing.T) {
	h := upstreamauth.ClientMetadataHandler("https://gw.example.com/oauth/upstream/client-metadata.json", "switchboard", "https://gw.example.com/oauth/upstream/callback")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/oauth/upstream/client-metadata.json", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	var doc oauthex.ClientRegistrationMetadata
	if err := jsonUnmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(doc.RedirectURIs, []string{"https://gw.example.com/oauth/upstream/callback"}) ||
		!slices.Contains(doc.GrantTypes, "refresh_token") || doc.TokenEndpointAuthMethod != "none" {
		t.Errorf("document = %+v", doc)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/oauth/upstream/client-metadata.json", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST answered %d", rec.Code)
	}
}
