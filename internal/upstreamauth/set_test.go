package upstreamauth_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/upstreamauth"
)

// TestSet checks the gateway's bookkeeping: a server without auth gets a
// true nil handler (the transport then sends no token), a server with
// auth keeps its Authorizer until its definition changes, one whose grant
// cannot be stored is NEEDS_AUTH saying why, and the callback and client
// metadata document are served.
func TestSet(t *testing.T) {
	defs := map[string]*config.Server{
		"plain": {Name: "plain", Transport: "http", URL: "https://plain.example/mcp"},
		"prot":  {Name: "prot", Transport: "http", URL: "https://prot.example/mcp", Auth: &config.ServerAuth{Type: "oauth"}},
	}
	set := upstreamauth.NewSet(upstreamauth.SetOptions{
		PublicURL:  "https://gw.example",
		Authorizer: upstreamauth.Options{Keyring: testKeyring(t), Store: upstreamauth.NewMemoryStore()},
		Definition: func(n string) (*config.Server, error) { return defs[n], nil },
	})
	t.Cleanup(set.Close)

	if h := set.For(defs["plain"]); h != nil {
		t.Errorf("For(plain) = %#v, want a nil interface", h)
	}
	first, ok := set.For(defs["prot"]).(*upstreamauth.Authorizer)
	if !ok {
		t.Fatalf("For(prot) = %T, want *Authorizer", set.For(defs["prot"]))
	}
	if again := set.For(defs["prot"].Clone()); again != first {
		t.Error("the same definition made a new Authorizer")
	}
	// A reload stages the new definition while the old one still runs.
	changed := &config.Server{Name: "prot", Transport: "http", URL: "https://prot.example/mcp",
		Auth: &config.ServerAuth{Type: "oauth", Scopes: []string{"read"}}}
	if h := set.For(changed); h == first {
		t.Error("a changed definition kept the old Authorizer")
	}
	defs["prot"] = changed
	if _, err := set.AuthStatus(t.Context(), "plain"); !errors.Is(err, api.ErrNoUpstreamAuth) {
		t.Errorf("AuthStatus(plain) error = %v, want ErrNoUpstreamAuth", err)
	}
	st, err := set.AuthStatus(t.Context(), "prot")
	if err != nil || st.State != api.FlowNone || st.Grant.Authorized {
		t.Errorf("AuthStatus(prot) = %+v, %v", st, err)
	}

	rec := httptest.NewRecorder()
	set.Handler().ServeHTTP(rec, httptest.NewRequest("GET", upstreamauth.ClientMetadataPath, nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"redirect_uris":["https://gw.example/oauth/upstream/callback"]`) ||
		!strings.Contains(rec.Body.String(), `"client_id":"https://gw.example/oauth/upstream/client-metadata.json"`) {
		t.Errorf("client metadata: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	set.Handler().ServeHTTP(rec, httptest.NewRequest("GET", upstreamauth.CallbackPath+"?state=unknown&code=c", nil))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("callback with an unknown state: %d", rec.Code)
	}

	// A store but no secret key: the grant could not be sealed.
	noKey := upstreamauth.NewSet(upstreamauth.SetOptions{PublicURL: "https://gw.example",
		Authorizer: upstreamauth.Options{Store: upstreamauth.NewMemoryStore()},
		Definition: func(n string) (*config.Server, error) { return defs[n], nil }})
	t.Cleanup(noKey.Close)
	_, err = noKey.For(defs["prot"]).TokenSource(t.Context())
	if !upstreamauth.IsNeedsAuth(err) || !strings.Contains(err.Error(), "sealed") {
		t.Errorf("without a key: %v, want NEEDS_AUTH saying the grant is sealed", err)
	}
}
