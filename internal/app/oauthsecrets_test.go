package app_test

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

// TestNoSecretsInPostgres: a full flow of the built-in authorization
// server on PostgreSQL (a confidential client registered, a user's
// authorization with PKCE, the code exchanged, the refresh token rotated,
// the access token used on /mcp) leaves none of its secrets in clear in a
// pg_dump of the database, in the gateway's log, in /metrics or in the
// admin API's answers: the client secret, the code, both refresh tokens,
// both access tokens, the PKCE verifier, the API key the user signed in
// with, and the private part of the signing key (found by unsealing the
// stored key with the gateway's secret key).
func TestNoSecretsInPostgres(t *testing.T) {
	dsn := storetest.StartPostgres(t)
	g := startBuiltinOAuthGatewayStore(t, "", dsn)
	base := g.url()
	ctx := t.Context()

	asm, err := oauthex.GetAuthServerMeta(ctx, base+"/.well-known/oauth-authorization-server", base, nil)
	if err != nil || asm == nil {
		t.Fatalf("authorization server metadata: %v", err)
	}
	const redirect = "http://127.0.0.1:49153/callback"
	reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		ClientName: "confidential app", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "client_secret_post",
		GrantTypes: []string{"authorization_code", "refresh_token"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if reg.ClientSecret == "" {
		t.Fatalf("registration gave no client secret: %+v", reg)
	}
	verifier, challenge := pkce()
	q := url.Values{"response_type": {"code"}, "client_id": {reg.ClientID}, "redirect_uri": {redirect}, "state": {"s"},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "resource": {base + "/mcp"}, "scope": {"mcp"}}
	back := g.signInAndConsent(t, asm.AuthorizationEndpoint+"?"+q.Encode(), oauthAdminKey, "confidential app")
	code := back.Query().Get("code")
	status, tk := postToken(t, asm.TokenEndpoint, url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"code_verifier": {verifier}, "redirect_uri": {redirect}, "client_id": {reg.ClientID}, "client_secret": {reg.ClientSecret}})
	if status != http.StatusOK || tk.RefreshToken == "" {
		t.Fatalf("code exchange: %d %+v", status, tk)
	}
	status, tk2 := postToken(t, asm.TokenEndpoint, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tk.RefreshToken},
		"client_id": {reg.ClientID}, "client_secret": {reg.ClientSecret}})
	if status != http.StatusOK || tk2.RefreshToken == "" || tk2.RefreshToken == tk.RefreshToken {
		t.Fatalf("refresh: %d %+v", status, tk2)
	}
	// The tokens work: a go-sdk client calls demo.echo with each.
	for _, at := range []string{tk.AccessToken, tk2.AccessToken} {
		cs := connectClient(t, &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
			HTTPClient: &http.Client{Transport: bearerTransport{at}}})
		if got, res := callText(t, cs, "demo.echo", map[string]any{"text": "sealed"}); res.IsError || got != "sealed" {
			t.Fatalf("demo.echo = %q (isError %v)", got, res.IsError)
		}
	}

	// The signing key, as the gateway keeps it: sealed in the store. The
	// test unseals it with the gateway's secret key to know what to look for.
	db, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keys, err := db.OAuthSigningKeys(ctx)
	if err != nil || len(keys) == 0 {
		t.Fatalf("signing keys: %d, %v", len(keys), err)
	}
	ring, err := secrets.Load(func(k string) string {
		if k == "SWITCHBOARD_SECRET_KEY" {
			return testSecretKey
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	secretsOf := map[string]string{
		"client secret": reg.ClientSecret, "code": code, "refresh token": tk.RefreshToken, "rotated refresh token": tk2.RefreshToken,
		"access token": tk.AccessToken, "refreshed access token": tk2.AccessToken, "PKCE verifier": verifier, "API key": oauthAdminKey,
	}
	var sealedKeys []string
	for _, k := range keys {
		plain, sealed, err := ring.Open(k.PrivateKey)
		if err != nil || !sealed {
			t.Fatalf("signing key %s: sealed %v, %v", k.ID, sealed, err)
		}
		der, err := base64.StdEncoding.DecodeString(plain)
		if err != nil {
			t.Fatal(err)
		}
		priv, err := x509.ParsePKCS8PrivateKey(der)
		if err != nil {
			t.Fatal(err)
		}
		ec, ok := priv.(*ecdsa.PrivateKey)
		if !ok {
			t.Fatalf("signing key %s is a %T", k.ID, priv)
		}
		d, err := ec.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		secretsOf["signing key "+k.ID+" (PKCS#8, base64)"] = plain
		secretsOf["signing key "+k.ID+" (JWK d)"] = base64.RawURLEncoding.EncodeToString(d)
		secretsOf["signing key "+k.ID+" (d, base64)"] = base64.StdEncoding.EncodeToString(d)
		secretsOf["signing key "+k.ID+" (d, hex)"] = hex.EncodeToString(d)
		sealedKeys = append(sealedKeys, k.PrivateKey)
	}

	dump := storetest.Dump(t, dsn)
	// The dump is of the database the gateway wrote: the hashes of the
	// secrets it keeps and the sealed keys are there.
	for what, s := range map[string]string{"code": code, "refresh token": tk.RefreshToken, "rotated refresh token": tk2.RefreshToken,
		"client secret": reg.ClientSecret} {
		if !strings.Contains(dump, sha256Hex(s)) {
			t.Fatalf("the dump does not hold the %s's hash: it is not the gateway's database", what)
		}
	}
	for _, sk := range sealedKeys {
		if !strings.Contains(dump, sk) {
			t.Fatal("the dump does not hold the sealed signing key")
		}
	}

	// What an operator (or a scraper) is shown.
	answers := map[string]string{}
	for _, path := range []string{"/metrics", "/api/v1/oauth/clients", "/api/v1/oauth/grants", "/api/v1/audit",
		"/api/v1/mcp/metrics", "/oauth/jwks"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+oauthAdminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		answers["GET "+path] = string(b)
	}
	if !strings.Contains(answers["GET /api/v1/oauth/clients"], reg.ClientID) {
		t.Fatalf("the client listing does not show the client: %s", answers["GET /api/v1/oauth/clients"])
	}
	var jwks struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal([]byte(answers["GET /oauth/jwks"]), &jwks); err != nil || len(jwks.Keys) == 0 {
		t.Fatalf("JWKS %s: %v", answers["GET /oauth/jwks"], err)
	}

	places := map[string]string{"the pg_dump": dump, "the gateway log": g.logs.String()}
	for k, v := range answers {
		places[k] = v
	}
	for what, s := range secretsOf {
		if s == "" {
			t.Fatalf("no %s to look for", what)
		}
		for where, text := range places {
			if strings.Contains(text, s) {
				t.Errorf("the %s is in %s in clear", what, where)
			}
		}
	}
	t.Logf("looked for %d secrets in a pg_dump of %d bytes, %d bytes of log and %d API answers", len(secretsOf), len(dump),
		len(g.logs.String()), len(answers))
}

// sha256Hex is how the built-in authorization server keeps its secrets:
// their SHA-256, in hex.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
