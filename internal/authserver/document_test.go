package authserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/netguard"
)

// docServer serves client ID metadata documents over TLS.
type docServer struct {
	*httptest.Server
	mu   sync.Mutex
	docs map[string]map[string]any // path -> document
	hits map[string]int
}

func newDocServer(t *testing.T) *docServer {
	d := &docServer{docs: map[string]map[string]any{}, hits: map[string]int{}}
	d.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.hits[r.URL.Path]++
		doc, ok := d.docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *docServer) put(path string, doc map[string]any) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.docs[path] = doc
	return d.URL + path
}

func (d *docServer) hitsOf(path string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hits[path]
}

// guardedClient is the client the app passes: the gateway's SSRF guard,
// here trusting the test server's certificate.
func guardedClient(t *testing.T, p netguard.Policy, d *docServer) *http.Client {
	g, err := netguard.New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: g.Transport(d.Client().Transport.(*http.Transport)), CheckRedirect: g.CheckRedirect, Timeout: 10 * time.Second}
}

// TestClientMetadataDocument: a client whose ID is the URL of its metadata
// document needs no registration: the document is fetched through the SSRF
// guard, checked, cached in the store until it goes stale, and the flow
// runs as for a registered public client.
func TestClientMetadataDocument(t *testing.T) {
	d := newDocServer(t)
	h := newHarness(t, &harnessOpts{
		cfg:  func(c *Config) { c.DocumentTTL = time.Hour },
		opts: func(o *Options) { o.HTTPClient = guardedClient(t, netguard.Policy{}, d) },
	})
	key := h.keys.add(t, "alice", nil)
	id := d.URL + "/client.json"
	d.put("/client.json", map[string]any{"client_id": id, "client_name": "Doc Client",
		"redirect_uris": []string{"http://127.0.0.1/callback"}, "grant_types": []string{"authorization_code", "refresh_token"}})
	c := client{ID: id, Redirect: "http://127.0.0.1:40000/callback"}
	tk := h.flow(t, c, key)
	if r := h.call(t, "/mcp", tk.AccessToken); r.status != http.StatusOK {
		t.Fatalf("/mcp: %d %s", r.status, r.body)
	}
	h.flow(t, c, key)
	if n := d.hitsOf("/client.json"); n != 1 {
		t.Errorf("document fetched %d times in two fresh flows, want 1 (cached)", n)
	}
	h.clock.Advance(time.Hour + time.Second)
	h.flow(t, c, key)
	if n := d.hitsOf("/client.json"); n != 2 {
		t.Errorf("document fetched %d times after it went stale, want 2", n)
	}
	// A stale document whose host is down keeps working from the cache.
	d.mu.Lock()
	delete(d.docs, "/client.json")
	d.mu.Unlock()
	h.clock.Advance(time.Hour + time.Second)
	h.flow(t, c, key)

	_, challenge := pkce()
	for _, tc := range []struct {
		name string
		doc  map[string]any // served at /<name>.json; nil = 404
		id   string         // instead of the served URL
	}{
		{name: "wrong-id", doc: map[string]any{"client_id": "https://elsewhere.example/c.json", "redirect_uris": []string{"http://127.0.0.1/callback"}}},
		{name: "secret", doc: map[string]any{"client_id": "SELF", "client_secret": "x", "redirect_uris": []string{"http://127.0.0.1/callback"}}},
		{name: "bad-redirect", doc: map[string]any{"client_id": "SELF", "redirect_uris": []string{"javascript:x"}}},
		{name: "confidential", doc: map[string]any{"client_id": "SELF", "token_endpoint_auth_method": "client_secret_basic", "redirect_uris": []string{"http://127.0.0.1/callback"}}},
		{name: "missing"},
		{name: "http", id: "http://127.0.0.1:1/client.json"},
		{name: "no-path", id: d.URL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.id
			if u == "" {
				u = d.URL + "/" + tc.name + ".json"
				if tc.doc != nil {
					if tc.doc["client_id"] == "SELF" {
						tc.doc["client_id"] = u
					}
					d.put("/"+tc.name+".json", tc.doc)
				}
			}
			r := h.browser(t).get(t, h.authorizeURL(client{ID: u, Redirect: "http://127.0.0.1/callback"}, challenge, nil))
			if r.status != http.StatusBadRequest || r.header.Get("Location") != "" {
				t.Errorf("got %d %q, want an error page", r.status, r.header.Get("Location"))
			}
			if _, err := h.db.OAuthClient(t.Context(), u); err == nil {
				t.Error("a refused document was stored")
			}
		})
	}
}

// TestClientMetadataDocumentGuard: the fetch goes through the gateway's
// SSRF rules, and the documents can be switched off.
func TestClientMetadataDocumentGuard(t *testing.T) {
	d := newDocServer(t)
	id := d.put("/client.json", map[string]any{"client_id": d.URL + "/client.json", "redirect_uris": []string{"http://127.0.0.1/callback"}})
	_, challenge := pkce()
	for name, ho := range map[string]*harnessOpts{
		"loopback refused": {opts: func(o *Options) { o.HTTPClient = guardedClient(t, netguard.Policy{DenyLoopback: true}, d) }},
		"documents off": {cfg: func(c *Config) { c.DisableMetadataDocuments = true },
			opts: func(o *Options) { o.HTTPClient = guardedClient(t, netguard.Policy{}, d) }},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, ho)
			r := h.browser(t).get(t, h.authorizeURL(client{ID: id, Redirect: "http://127.0.0.1/callback"}, challenge, nil))
			if r.status != http.StatusBadRequest {
				t.Errorf("got %d, want an error page", r.status)
			}
			if name == "loopback refused" && !strings.Contains(r.body, "refused") {
				t.Errorf("the page does not say the guard refused it:\n%s", r.body)
			}
			if d.hitsOf("/client.json") != 0 {
				t.Error("the document was fetched")
			}
			var m map[string]any
			json.Unmarshal([]byte(h.do(t, mustGet(t, h.issuer+PathMetadata)).body), &m)
			if adv := m["client_id_metadata_document_supported"] == true; adv != (name != "documents off") {
				t.Errorf("client_id_metadata_document_supported advertised = %v", adv)
			}
		})
	}
}
