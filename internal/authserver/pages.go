package authserver

import (
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"slices"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// pageStyle is the pages' only style; the Content-Security-Policy allows
// it by hash, and nothing else (no script at all).
const pageStyle = `body{font:15px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#222}
h1{font-size:1.3rem}.box{border:1px solid #ccc;border-radius:6px;padding:1rem;margin:1rem 0}
.err{color:#a00}.muted{color:#666;font-size:.9rem}code{word-break:break-all}
input[type=password]{width:100%;padding:.4rem;margin:.4rem 0 .8rem;box-sizing:border-box}
button{padding:.45rem 1.1rem;margin-right:.6rem;font-size:1rem}ul{padding-left:1.2rem}`

// pageCSP keeps the pages to themselves: no script, no framing (a consent
// page in a frame could be clickjacked). It sets no form-action: browsers
// apply it to the redirect that follows the consent, which goes to the
// client's own redirect URI.
var pageCSP = func() string {
	sum := sha256.Sum256([]byte(pageStyle))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; base-uri 'none'; frame-ancestors 'none'"
}()

var pages = template.Must(template.New("pages").Parse(`
{{define "head"}}<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1"><meta name="referrer" content="no-referrer">
<title>{{.}} · switchboard</title><style>` + pageStyle + `</style></head><body>{{end}}

{{define "error"}}{{template "head" "Sign-in problem"}}<h1>Sign-in problem</h1>
<p class="err">{{.}}</p></body></html>{{end}}

{{define "client"}}<div class="box"><strong>{{.Name}}</strong>
<div class="muted">client ID <code>{{.ID}}</code></div>
{{if .Document}}<div class="muted">identified by its metadata document on <strong>{{.Host}}</strong></div>
{{else}}<div class="muted">registered itself with this gateway: make sure you started this sign-in</div>{{end}}
<div class="muted">will receive the answer at <code>{{.Redirect}}</code></div></div>{{end}}

{{define "signin"}}{{template "head" "Sign in"}}<h1>Sign in to switchboard</h1>
<p>An application asks to use this gateway on your behalf:</p>{{template "client" .Client}}
{{if .Error}}<p class="err">{{.Error}}</p>{{end}}
<form method="post" action="{{.Action}}"><label for="key">Your API key</label>
<input type="password" id="key" name="key" autocomplete="current-password" autofocus required>
<input type="hidden" name="request" value="{{.Request}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit">Sign in</button></form>
<p class="muted">The key is checked here and never given to the application.</p></body></html>{{end}}

{{define "consent"}}{{template "head" "Allow access"}}<h1>Allow access?</h1>
{{template "client" .Client}}
<p>It asks to act as <strong>{{.User}}</strong>{{if .UserID}} <span class="muted">({{.UserID}})</span>{{end}} on
<code>{{.Resource}}</code>{{if .Scopes}} with the scopes{{end}}:</p>
{{if .Scopes}}<ul>{{range .Scopes}}<li><code>{{.}}</code></li>{{end}}</ul>{{else}}<p class="err">You may not grant any of the scopes it asks for.</p>{{end}}
{{if .Dropped}}<p class="muted">Not granted (your account lacks the role): {{range .Dropped}}<code>{{.}}</code> {{end}}</p>{{end}}
<form method="post" action="{{.Action}}"><input type="hidden" name="request" value="{{.Request}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
{{if .Scopes}}<button type="submit" name="decision" value="approve">Allow</button>{{end}}
<button type="submit" name="decision" value="deny">Deny</button></form>
<p class="muted">You can revoke this later; the application then has to ask again.</p></body></html>{{end}}
`))

type clientView struct {
	Name, ID, Host, Redirect string
	Document                 bool
}

func viewClient(c store.OAuthClient, redirect string) clientView {
	v := clientView{Name: c.Name, ID: c.ID, Redirect: redirect, Document: c.Kind == store.OAuthClientDocument}
	if v.Name == "" {
		v.Name = defaultClientName
	}
	if u, err := url.Parse(c.ID); err == nil && v.Document {
		v.Host = u.Host
	}
	return v
}

func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	noStore(w)
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, name, data); err != nil {
		s.log.Debug("OAuth page not written", "page", name, "err", err)
	}
}

func (s *Server) errorPage(w http.ResponseWriter, status int, msg string) {
	s.render(w, status, "error", msg)
}

func (s *Server) signInPage(w http.ResponseWriter, status int, p pending, msg string) {
	s.render(w, status, "signin", map[string]any{
		"Client": viewClient(p.client, p.params.RedirectURI), "Error": msg, "Action": PathSignIn,
		"Request": p.row.ID, "CSRF": csrfToken(p.browser, p.row.ID),
	})
}

func (s *Server) consentPage(w http.ResponseWriter, p pending, id authz.Identity, scopes []string) {
	var dropped []string
	for _, sc := range p.params.Scopes {
		if !slices.Contains(scopes, sc) {
			dropped = append(dropped, sc)
		}
	}
	user := id.AgentID
	if user == "" {
		user = id.ID
	}
	s.render(w, http.StatusOK, "consent", map[string]any{
		"Client": viewClient(p.client, p.params.RedirectURI), "User": user, "UserID": id.ID,
		"Resource": p.params.Resource, "Scopes": scopes, "Dropped": dropped, "Action": PathConsent,
		"Request": p.row.ID, "CSRF": csrfToken(p.browser, p.row.ID),
	})
}
