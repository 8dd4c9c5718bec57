package upstreamauth_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/upstreamauth"
)

// TestPersonalCredentials: a caller's static credential is validated
// without echoing it, sealed in the store, sent as the header it is, listed
// by kind only (to its owner and to admins alike), and unlinked; a caller
// with nothing linked gets a NotLinkedError saying how to link; a server
// without per_user has no accounts; the server's own session uses the most
// recently linked account; `servers auth` is refused on a per_user server.
func TestPersonalCredentials(t *testing.T) {
	defs := map[string]*config.Server{
		"crm":    {Name: "crm", Transport: "http", URL: "https://crm.example/mcp", Credentials: config.CredentialsPerUser},
		"shared": {Name: "shared", Transport: "http", URL: "https://shared.example/mcp", Auth: &config.ServerAuth{Type: "oauth"}},
	}
	mem := upstreamauth.NewMemoryStore()
	var mu sync.Mutex
	var linked []string
	set := upstreamauth.NewSet(upstreamauth.SetOptions{
		PublicURL:  "https://gw.example",
		Authorizer: upstreamauth.Options{Keyring: testKeyring(t), Store: mem},
		Definition: func(n string) (*config.Server, error) { return defs[n], nil },
		OnUserLinked: func(server, subject string) {
			mu.Lock()
			linked = append(linked, server+"/"+subject)
			mu.Unlock()
		},
	})
	t.Cleanup(set.Close)
	ctx := t.Context()
	const secret = "s3cret-personal-value-0123456789"

	bad := []struct {
		name string
		c    api.PersonalCredential
	}{
		{"unknown type", api.PersonalCredential{Type: "digest", Token: secret}},
		{"bearer without token", api.PersonalCredential{Type: "bearer"}},
		{"bearer with a line break", api.PersonalCredential{Type: "bearer", Token: secret + "\r\nX-Evil: 1"}},
		{"bearer with a password", api.PersonalCredential{Type: "bearer", Token: secret, Password: secret}},
		{"basic user with a colon", api.PersonalCredential{Type: "basic", Username: "a:b", Password: secret}},
		{"header without a name", api.PersonalCredential{Type: "header", Value: secret}},
		{"header with a bad name", api.PersonalCredential{Type: "header", Header: "X Key", Value: secret}},
		{"protocol header", api.PersonalCredential{Type: "header", Header: "mcp-session-id", Value: secret}},
	}
	for _, c := range bad {
		err := set.PutPersonalCredential(ctx, "crm", "alice", c.c)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != api.CodeValidation || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error %v, want a validation error without the value", c.name, err)
		}
	}
	if err := set.PutPersonalCredential(ctx, "shared", "alice", api.PersonalCredential{Type: "bearer", Token: secret}); !errors.Is(err, api.ErrNotPerUser) {
		t.Errorf("a credential for a shared server: %v, want ErrNotPerUser", err)
	}

	// Nothing linked yet.
	_, err := set.UserCredential(ctx, defs["crm"], "alice")
	var nl *upstreamauth.NotLinkedError
	if !errors.As(err, &nl) || !strings.Contains(nl.Reason, "switchboard connect-account crm") {
		t.Fatalf("UserCredential before linking: %v", err)
	}
	if _, err := set.DiscoveryCredential(ctx, defs["crm"]); !errors.As(err, &nl) || !strings.Contains(nl.Reason, "no user has linked") {
		t.Fatalf("DiscoveryCredential before linking: %v", err)
	}

	for _, c := range []struct {
		subject string
		cred    api.PersonalCredential
		header  string
		value   string
	}{
		{"alice", api.PersonalCredential{Type: "bearer", Token: secret}, "Authorization", "Bearer " + secret},
		{"bob", api.PersonalCredential{Type: "basic", Username: "bob", Password: secret}, "Authorization",
			"Basic " + base64.StdEncoding.EncodeToString([]byte("bob:"+secret))},
		{"carol", api.PersonalCredential{Type: "header", Header: "X-API-Key", Value: secret}, "X-API-Key", secret},
	} {
		if err := set.PutPersonalCredential(ctx, "crm", c.subject, c.cred); err != nil {
			t.Fatalf("%s: %v", c.subject, err)
		}
		got, err := set.UserCredential(ctx, defs["crm"], c.subject)
		if err != nil || got.Subject != c.subject || got.OAuth != nil || len(got.Headers) != 1 || got.Headers[c.header] != c.value {
			t.Errorf("%s's credential = %+v, %v; want %s: %s", c.subject, got, err, c.header, c.value)
		}
	}
	if d, err := set.DiscoveryCredential(ctx, defs["crm"]); err != nil || d.Subject != "carol" {
		t.Errorf("DiscoveryCredential = %q, %v; want the newest, carol", d.Subject, err)
	}

	// Sealed in the store; listed by kind only.
	rows, err := mem.UserUpstreamTokens(ctx, "crm", "")
	if err != nil || len(rows) != 3 {
		t.Fatalf("rows: %d, %v", len(rows), err)
	}
	for _, r := range rows {
		if strings.Contains(r.Sealed, secret) || strings.Contains(r.Sealed, base64.StdEncoding.EncodeToString([]byte("bob:"+secret))) {
			t.Errorf("%s's row holds the credential in clear", r.Subject)
		}
	}
	accts, err := set.LinkedAccounts(ctx, "", "")
	if err != nil || len(accts) != 3 {
		t.Fatalf("LinkedAccounts: %+v, %v", accts, err)
	}
	js, _ := json.Marshal(accts)
	if strings.Contains(string(js), secret) || !strings.Contains(string(js), `"kind":"header","header":"X-API-Key"`) {
		t.Errorf("LinkedAccounts = %s", js)
	}
	st, err := set.UserAuthStatus(ctx, "crm", "bob")
	if err != nil || !st.Grant.Authorized || st.Grant.Type != "basic" || st.State != api.FlowNone {
		t.Errorf("UserAuthStatus(bob) = %+v, %v", st, err)
	}

	// Unlinked: nothing again.
	if err := set.Unlink(ctx, "crm", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := set.UserCredential(ctx, defs["crm"], "alice"); !errors.As(err, &nl) {
		t.Errorf("after Unlink: %v, want NotLinkedError", err)
	}
	if _, err := set.UserCredential(ctx, defs["crm"], ""); !errors.As(err, &nl) {
		t.Errorf("no subject: %v, want NotLinkedError", err)
	}
	mu.Lock()
	if want := "crm/alice crm/bob crm/carol crm/alice"; strings.Join(linked, " ") != want {
		t.Errorf("OnUserLinked calls %v, want %s", linked, want)
	}
	mu.Unlock()

	// The operator's flow is not for per_user servers.
	defs["crm"].Auth = &config.ServerAuth{Type: "oauth"}
	if _, err := set.StartAuth(ctx, "crm"); err == nil || !strings.Contains(err.Error(), "connect-account crm") {
		t.Errorf("StartAuth on a per_user server: %v", err)
	}
}

// FuzzPersonalCredential: whatever a caller sends as a personal
// credential, it is refused with a message that does not echo its secret
// parts, or it is sent as headers with a valid name and no line break or
// NUL in the value (no header injection upstream).
func FuzzPersonalCredential(f *testing.F) {
	f.Add("bearer", "tok", "", "", "", "")
	f.Add("basic", "", "bob", "pw", "", "")
	f.Add("header", "", "", "", "X-API-Key", "v")
	f.Add("header", "", "", "", "X-A\r\nB", "v\n")
	f.Add("bearer", "a\r\nX-Evil: 1", "", "", "", "")
	f.Fuzz(func(t *testing.T, typ, token, user, pass, header, value string) {
		def := &config.Server{Name: "crm", Transport: "http", URL: "https://crm.example/mcp", Credentials: config.CredentialsPerUser}
		set := upstreamauth.NewSet(upstreamauth.SetOptions{
			PublicURL:  "https://gw.example",
			Authorizer: upstreamauth.Options{Keyring: testKeyring(t), Store: upstreamauth.NewMemoryStore()},
			Definition: func(string) (*config.Server, error) { return def, nil },
		})
		defer set.Close()
		c := api.PersonalCredential{Type: typ, Token: token, Username: user, Password: pass, Header: header, Value: value}
		if err := set.PutPersonalCredential(t.Context(), "crm", "alice", c); err != nil {
			for _, secret := range []string{token, pass, value} {
				if len(secret) >= 4 && strings.Contains(err.Error(), secret) {
					t.Fatalf("the refusal %q echoes a secret", err)
				}
			}
			return
		}
		got, err := set.UserCredential(t.Context(), def, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Headers) != 1 {
			t.Fatalf("headers %v", got.Headers)
		}
		for k, v := range got.Headers {
			if k == "" || strings.ContainsAny(k, " \t\r\n:\x00") || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Fatalf("header %q: %q would inject", k, v)
			}
		}
	})
}

// TestCallersGrantsApart: the Authorizers of two callers and of the server
// itself, on one store, hold three grants: each its own tokens, each
// refreshed on its own (one caller's refresh leaves the others' rows
// alone), and a caller without a grant is told to run connect-account.
func TestCallersGrantsApart(t *testing.T) {
	as := newFakeAS(t)
	as.expiresIn = 20
	rs := newResourceServer(t, as)
	cb := newCallbackServer(t)
	clk := newClock()
	start := clk.Now()
	mem := upstreamauth.NewMemoryStore()
	kr := testKeyring(t)
	authz := map[string]*upstreamauth.Authorizer{}
	tokens := map[string]string{}
	for _, subject := range []string{"", "alice", "bob"} {
		a := newAuthorizer(t, rs.URL(), upstreamauth.Spec{RefreshMargin: 5 * time.Second},
			&upstreamauth.Options{RedirectURL: cb.redirect, Now: clk.Now, Store: mem, Keyring: kr, Subject: subject})
		if err := a.Reauthorize(t.Context(), cb.fetcher()); err != nil {
			t.Fatalf("%q: %v", subject, err)
		}
		tok, err := a.Token()
		if err != nil {
			t.Fatal(err)
		}
		authz[subject], tokens[subject] = a, tok.AccessToken
	}
	if tokens[""] == tokens["alice"] || tokens["alice"] == tokens["bob"] {
		t.Fatalf("the grants share tokens: %v", tokens)
	}
	rows, err := mem.UserUpstreamTokens(t.Context(), "srv", "")
	if err != nil || len(rows) != 2 {
		t.Fatalf("the callers' rows: %d, %v", len(rows), err)
	}
	version := func(subject string) int64 {
		row, err := mem.UpstreamToken(t.Context(), "srv", subject)
		if err != nil {
			t.Fatal(err)
		}
		return row.Version
	}
	before := map[string]int64{"": version(""), "alice": version("alice"), "bob": version("bob")}

	// 16 s on, within the margin: alice's Token refreshes alice's grant only.
	clk.set(start, 16*time.Second)
	tok, err := authz["alice"].Token()
	if err != nil || tok.AccessToken == tokens["alice"] {
		t.Fatalf("alice's token after the margin: %v (same: %v)", err, tok != nil && tok.AccessToken == tokens["alice"])
	}
	if version("alice") != before["alice"]+1 || version("bob") != before["bob"] || version("") != before[""] {
		t.Errorf("versions after alice's refresh: %d %d %d, before %v", version(""), version("alice"), version("bob"), before)
	}

	// A caller who never linked.
	carol := newAuthorizer(t, rs.URL(), upstreamauth.Spec{}, &upstreamauth.Options{RedirectURL: cb.redirect, Store: mem, Keyring: kr, Subject: "carol"})
	if _, err := carol.Token(); !upstreamauth.IsNeedsAuth(err) || !strings.Contains(err.Error(), "switchboard connect-account srv") {
		t.Errorf("carol's token: %v, want NeedsAuth naming connect-account", err)
	}
}
