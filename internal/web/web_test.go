package web

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func TestHandlerServesAssets(t *testing.T) {
	index, err := assets.ReadFile("assets/index.html")
	if err != nil {
		t.Fatal(err)
	}
	appJS, err := assets.ReadFile("assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	h := Handler()
	tests := []struct {
		name        string
		path        string
		contentType string
		body        []byte // nil: not checked
	}{
		{"index at the prefix", "/ui/", "text/html; charset=utf-8", index},
		{"index by name", "/ui/index.html", "text/html; charset=utf-8", index},
		{"script", "/ui/app.js", "text/javascript; charset=utf-8", appJS},
		{"module", "/ui/api.js", "text/javascript; charset=utf-8", nil},
		{"stylesheet", "/ui/app.css", "text/css; charset=utf-8", nil},
		{"unknown page falls back to the app", "/ui/servers/demo", "text/html; charset=utf-8", index},
		{"unknown file falls back to the app", "/ui/nope.png", "text/html; charset=utf-8", index},
		{"no path escapes the assets", "/ui/../web.go", "text/html; charset=utf-8", index},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := get(t, h, http.MethodGet, tt.path, nil)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", resp.StatusCode)
			}
			if diff := cmp.Diff(tt.contentType, resp.Header.Get("Content-Type")); diff != "" {
				t.Errorf("Content-Type (-want +got):\n%s", diff)
			}
			if tt.body != nil && string(body) != string(tt.body) {
				t.Errorf("body is not the embedded file (%d bytes, want %d)", len(body), len(tt.body))
			}
			if len(body) == 0 {
				t.Error("empty body")
			}
			for _, k := range []string{"Content-Security-Policy", "X-Content-Type-Options", "ETag"} {
				if resp.Header.Get(k) == "" {
					t.Errorf("no %s header", k)
				}
			}
		})
	}
}

func TestHandlerRequests(t *testing.T) {
	h := Handler()
	etag := get(t, h, http.MethodGet, "/ui/app.js", nil).Header.Get("ETag")
	tests := []struct {
		name     string
		method   string
		path     string
		hdr      map[string]string
		status   int
		location string
	}{
		{"prefix without slash redirects", http.MethodGet, "/ui", nil, http.StatusMovedPermanently, "/ui/"},
		{"head", http.MethodHead, "/ui/", nil, http.StatusOK, ""},
		{"post refused", http.MethodPost, "/ui/", nil, http.StatusMethodNotAllowed, ""},
		{"unchanged asset revalidates", http.MethodGet, "/ui/app.js", map[string]string{"If-None-Match": etag}, http.StatusNotModified, ""},
		{"stale etag gets the asset", http.MethodGet, "/ui/app.js", map[string]string{"If-None-Match": `"stale"`}, http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := get(t, h, tt.method, tt.path, tt.hdr)
			got := []any{resp.StatusCode, resp.Header.Get("Location")}
			if diff := cmp.Diff([]any{tt.status, tt.location}, got); diff != "" {
				t.Errorf("status, Location (-want +got):\n%s", diff)
			}
		})
	}
}

// The dashboard must work offline and leak nothing to third parties: no
// asset may name an external URL (CDN, web font, analytics).
func TestAssetsHaveNoExternalURLs(t *testing.T) {
	external := regexp.MustCompile(`(?i)https?://|//[a-z0-9-]+\.[a-z]{2,}/`)
	n := 0
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := external.FindString(line); m != "" {
				t.Errorf("%s:%d names an external URL (%q): %s", p, i+1, m, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Fatalf("only %d embedded assets", n)
	}
}

// Every module the app imports must be embedded, or the page is blank.
func TestModuleImportsAreEmbedded(t *testing.T) {
	imp := regexp.MustCompile(`(?m)^import .* from '\./([^']+)';`)
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		b, _ := assets.ReadFile(p)
		for _, m := range imp.FindAllStringSubmatch(string(b), -1) {
			if _, err := fs.Stat(assets, "assets/"+m[1]); err != nil {
				t.Errorf("%s imports %s, which is not embedded", p, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
