package oauthtest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// token asks u's token endpoint for form, with basic credentials when id
// is not "", and returns the status and the decoded answer.
func token(t *testing.T, u *Upstream, form url.Values, id, secret string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, u.Issuer()+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if id != "" {
		req.SetBasicAuth(id, secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// whoami calls the upstream's tool with tok and returns its text.
func whoami(t *testing.T, u *Upstream, tok string) string {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "oauthtest", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: u.MCPURL(),
		HTTPClient: &http.Client{Transport: bearer(tok)}}, nil)
	if err != nil {
		t.Fatalf("connect with a token: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"})
	if err != nil || len(res.Content) != 1 {
		t.Fatalf("whoami: %v %v", res, err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// TestProtectedResource: without a token the resource answers 401 naming
// its metadata, which names the resource and its authorization server.
func TestProtectedResource(t *testing.T) {
	u := NewUpstream(t, "")
	resp, err := http.Post(u.MCPURL(), "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	challenge := resp.Header.Get("WWW-Authenticate")
	metaURL := strings.TrimSuffix(u.MCPURL(), "/mcp") + metadataPath
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(challenge, metaURL) {
		t.Fatalf("no token: %s, WWW-Authenticate %q; want 401 naming %s", resp.Status, challenge, metaURL)
	}
	resp, err = http.Get(metaURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&meta); err != nil || meta.Resource != u.MCPURL() ||
		len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != u.Issuer() {
		t.Fatalf("metadata = %+v, %v", meta, err)
	}
}

// TestClientCredentials: ClientID with the secret gets a token that opens
// the resource; a wrong secret, or any secret where none was set, does not.
func TestClientCredentials(t *testing.T) {
	u := NewUpstream(t, "cc-secret")
	form := url.Values{"grant_type": {"client_credentials"}}
	if code, body := token(t, u, form, ClientID, "wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong secret: %d %v", code, body)
	}
	code, body := token(t, u, form, ClientID, "cc-secret")
	tok, _ := body["access_token"].(string)
	if code != http.StatusOK || tok == "" {
		t.Fatalf("client_credentials: %d %v", code, body)
	}
	if got := whoami(t, u, tok); got != WhoamiText {
		t.Errorf("whoami = %q, want %q", got, WhoamiText)
	}
	if issued := u.Issued(); len(issued) != 1 || issued[0] != tok {
		t.Errorf("Issued = %v, want [%s]", issued, tok)
	}

	none := NewUpstream(t, "")
	if code, body := token(t, none, form, ClientID, ""); code != http.StatusUnauthorized {
		t.Errorf("client_credentials without a secret set: %d %v", code, body)
	}
}

// TestAuthorizationCode: /authorize approves at once and redirects back
// with the state and the issuer; the code is redeemed once, and only with
// the verifier of its S256 challenge.
func TestAuthorizationCode(t *testing.T) {
	u := NewUpstream(t, "")
	authorize := func(verifier string) string {
		t.Helper()
		sum := sha256.Sum256([]byte(verifier))
		q := url.Values{"response_type": {"code"}, "client_id": {"dynamic-client"}, "state": {"st-1"},
			"redirect_uri": {"http://127.0.0.1:1/callback?keep=1"}, "code_challenge_method": {"S256"},
			"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}}
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noFollow.Get(u.Issuer() + "/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		back, err := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusFound || err != nil {
			t.Fatalf("authorize: %s %q", resp.Status, resp.Header.Get("Location"))
		}
		got := back.Query()
		if back.Path != "/callback" || got.Get("keep") != "1" || got.Get("state") != "st-1" || got.Get("iss") != u.Issuer() || got.Get("code") == "" {
			t.Fatalf("redirected to %s", back)
		}
		return got.Get("code")
	}
	redeem := func(code, verifier string) (int, map[string]any) {
		t.Helper()
		return token(t, u, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier}}, "", "")
	}

	code := authorize("the-verifier")
	if status, body := redeem(code, "another-verifier"); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("wrong verifier: %d %v", status, body)
	}
	// A failed attempt spends the code too.
	if status, body := redeem(code, "the-verifier"); status != http.StatusBadRequest {
		t.Errorf("code after a failed attempt: %d %v", status, body)
	}
	code = authorize("the-verifier")
	status, body := redeem(code, "the-verifier")
	tok, _ := body["access_token"].(string)
	if status != http.StatusOK || tok == "" || body["token_type"] != "Bearer" {
		t.Fatalf("redeem: %d %v", status, body)
	}
	if status, body := redeem(code, "the-verifier"); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("replayed code: %d %v", status, body)
	}
	if got := whoami(t, u, tok); got != WhoamiText {
		t.Errorf("whoami = %q", got)
	}
	if status, body := token(t, u, url.Values{"grant_type": {"password"}}, "", ""); status != http.StatusBadRequest ||
		body["error"] != "unsupported_grant_type" {
		t.Errorf("password grant: %d %v", status, body)
	}
}
