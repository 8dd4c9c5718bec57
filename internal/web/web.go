// Package web is the operator dashboard: a small single-page app embedded in
// the binary, served at /ui/. It has no logic of its own and no privileges:
// the page calls the REST API from the browser with the key the operator
// signs in with, so everything it shows or does goes through the same
// authentication, authorization and audit as any other API caller.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is where the dashboard is mounted: mux.Handle(web.Prefix, web.Handler()).
const Prefix = "/ui/"

//go:embed assets
var assets embed.FS

// contentTypes are set explicitly rather than from the system's MIME tables,
// which vary between machines (a missing text/javascript breaks modules).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".json": "application/json",
}

// securityHeaders keep the page to its own origin: no inline script, no
// third-party anything, not framable (the page holds an API key).
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
}

type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the dashboard under [Prefix]. Paths that name no asset
// get index.html, so a bookmarked or reloaded deep link still opens the app.
// It needs no authentication: the assets hold no data, and the API calls
// the page makes carry the operator's key.
func Handler() http.Handler {
	files := map[string]asset{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := contentTypes[path.Ext(p)]
		if ct == "" {
			ct = http.DetectContentType(b)
		}
		files[strings.TrimPrefix(p, "assets/")] = asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("web: embedded assets unreadable: " + err.Error()) // a build problem, not a runtime one
	}
	index, ok := files["index.html"]
	if !ok {
		panic("web: index.html is not embedded")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		a, ok := files[name]
		if !ok {
			a = index
		}
		h := w.Header()
		for k, v := range securityHeaders {
			h.Set(k, v)
		}
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", a.etag)
		// Revalidate every time: the assets change with the binary, and the
		// ETag makes an unchanged one a cheap 304.
		h.Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}
