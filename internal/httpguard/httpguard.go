// Package httpguard keeps browsers that the user did not mean to point at
// the gateway from driving it. A gateway on a loopback port with no
// credentials (local mode) trusts whoever can reach the port, and every web
// page the user opens can: through a cross-site request (an Origin that is
// not ours), a DNS-rebound host name (a Host that is not ours), or a "simple"
// request a browser sends without a CORS preflight (text/plain or form
// bodies). The guard refuses all three on every route, before any handler
// runs.
package httpguard

import (
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/httperr"
)

// Stable error codes of a refusal, in the REST API's error shape.
const (
	CodeInvalidHost      = "invalid_host"
	CodeCrossOrigin      = "cross_origin"
	CodeUnsupportedMedia = "unsupported_media_type"
)

// Options configure a [Guard].
type Options struct {
	// AllowedHosts are Host header values (host names or IPs, any port)
	// accepted besides the listener's own: its loopback names on a loopback
	// listener ("localhost", 127.0.0.1, [::1]) and the IP address the
	// connection came in on. Set them to the names a reverse proxy or a DNS
	// name forwards. When empty, a non-loopback listener accepts any Host:
	// it cannot know the names it is reached by, and it runs with
	// credentials that a browser does not send on its own.
	AllowedHosts []string
	// AllowedOrigins are browser origins (scheme://host[:port]) allowed to
	// drive the gateway besides its own origin, e.g. a web client served
	// from another host. Every other Origin gets 403, including other ports
	// of localhost: another local web server is another site.
	AllowedOrigins []string
	// Logger receives refusals at debug level (a page hammering the port
	// must not flood the log). nil discards.
	Logger *slog.Logger
}

// Guard checks the Host, the Origin and the body type of requests. Build it
// with [New]; it is safe for concurrent use.
type Guard struct {
	hosts   map[string]bool // lower-case host names and IPs, no port
	origins map[string]bool // normalized scheme://host[:port]
	logger  *slog.Logger
}

// New builds a Guard. It fails on an allowed origin that is not an origin
// (scheme://host[:port], no path) or an empty allowed host, so that a typo
// does not silently open or close the door.
func New(o Options) (*Guard, error) {
	g := &Guard{hosts: map[string]bool{}, origins: map[string]bool{}, logger: o.Logger}
	if g.logger == nil {
		g.logger = slog.New(slog.DiscardHandler)
	}
	for _, s := range o.AllowedOrigins {
		n, ok := NormalizeOrigin(s)
		if !ok {
			return nil, fmt.Errorf("allowed origin %q: want scheme://host[:port], e.g. https://app.example.com", s)
		}
		g.origins[n] = true
	}
	for _, s := range o.AllowedHosts {
		h := strings.ToLower(HostOnly(strings.TrimSpace(s)))
		if h == "" || strings.ContainsAny(s, "/ ") {
			return nil, fmt.Errorf("allowed host %q: want a host name or IP, e.g. gateway.example.com", s)
		}
		g.hosts[h] = true
	}
	return g, nil
}

// Refusal is why a request is refused: an HTTP status, a stable code and a
// message for the caller.
type Refusal struct {
	Status  int
	Code    string
	Message string
}

// Check returns nil when r may proceed, or why not. It checks the Host and
// the Origin; the body type is checked by [Guard.CheckBody].
func (g *Guard) Check(r *http.Request) *Refusal {
	local, loopback := localAddr(r)
	if !g.hostAllowed(r.Host, local, loopback) {
		return &Refusal{http.StatusForbidden, CodeInvalidHost, fmt.Sprintf("invalid Host header %q: not an address of this gateway (see allowed_hosts in docs/security.md)", r.Host)}
	}
	if !g.originAllowed(r) {
		return &Refusal{http.StatusForbidden, CodeCrossOrigin, "cross-origin request refused: the Origin is not this gateway's own (see allowed_origins in docs/security.md)"}
	}
	return nil
}

// CheckBody refuses a state-changing request whose body a browser could send
// cross-site without a preflight: a POST must be application/json; a PUT,
// PATCH or DELETE with a body too (browsers preflight those methods anyway,
// but a body of another type is a mistake worth naming).
func CheckBody(r *http.Request) *Refusal {
	switch r.Method {
	case http.MethodPost:
	case http.MethodPut, http.MethodPatch, http.MethodDelete:
		if r.ContentLength == 0 && r.Header.Get("Content-Type") == "" {
			return nil
		}
	default:
		return nil
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return &Refusal{http.StatusUnsupportedMediaType, CodeUnsupportedMedia,
			fmt.Sprintf("Content-Type must be application/json, got %q", r.Header.Get("Content-Type"))}
	}
	return nil
}

// Handler runs [Guard.Check] and [CheckBody] before next, answering a
// refusal in the REST API's error shape.
func (g *Guard) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ref := g.Check(r)
		if ref == nil {
			ref = CheckBody(r)
		}
		if ref != nil {
			g.Refuse(w, r, ref)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Refuse writes ref in the gateway's one error shape ([httperr.Write]) and
// logs it at debug level.
func (g *Guard) Refuse(w http.ResponseWriter, r *http.Request, ref *Refusal) {
	g.logger.Debug("http request refused", "status", ref.Status, "code", ref.Code,
		"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr,
		"origin", r.Header.Get("Origin"), "host", r.Host)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	httperr.Write(w, &httperr.Error{Status: ref.Status, Code: ref.Code, Message: ref.Message})
}

// hostAllowed accepts the listener's own names and the allow list. local is
// the address the connection came in on (invalid when unknown).
func (g *Guard) hostAllowed(hostport string, local netip.Addr, loopback bool) bool {
	h := strings.ToLower(HostOnly(hostport))
	if g.hosts[h] {
		return true
	}
	if ip, err := netip.ParseAddr(h); err == nil && local.IsValid() && ip.Unmap() == local {
		return true // the address the client dialled: a kubelet probe, curl by IP
	}
	if loopback {
		return IsLoopbackHost(h)
	}
	return len(g.hosts) == 0
}

// originAllowed follows http.CrossOriginProtection, but for every method:
// a GET reads the audit log or opens an SSE session, and the MCP spec asks
// for Origin validation on all incoming connections.
func (g *Guard) originAllowed(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	origin := r.Header.Get("Origin")
	if origin == "" {
		// Non-browser clients send neither header. A browser that says
		// cross-site or same-site without an Origin is either following a
		// link (a top-level navigation, whose answer the linking page
		// cannot read: let the dashboard be linked to) or loading a no-cors
		// resource (<img src>, <script src>) from us, which has no
		// business here.
		if site == "" || site == "same-origin" || site == "none" {
			return true
		}
		return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
			r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document"
	}
	o, ok := NormalizeOrigin(origin)
	if !ok {
		return false // "null" (sandboxed frames, file://) or garbage
	}
	if g.origins[o] {
		return true
	}
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	// Same origin: the page was served by this gateway under the name the
	// request is addressed to. The scheme is not compared: behind a TLS
	// terminating proxy the gateway sees http while the page is https.
	return strings.EqualFold(u.Host, stripDefaultPort(u.Scheme, r.Host))
}

// localAddr returns the IP the connection came in on and whether it is a
// loopback address, where DNS rebinding is the threat.
func localAddr(r *http.Request) (netip.Addr, bool) {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || a == nil {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(HostOnly(a.String()))
	if err != nil {
		return netip.Addr{}, false
	}
	ip = ip.Unmap()
	return ip, ip.IsLoopback()
}

// IsLoopbackHost reports whether host ("localhost" or an IP, brackets
// optional) names this machine's loopback interface.
func IsLoopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// HostOnly strips the port from host[:port] and the brackets of an IPv6
// literal.
func HostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

// NormalizeOrigin returns scheme://host[:port] in lower case without the
// scheme's default port, or false if s is not an origin.
func NormalizeOrigin(s string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	return scheme + "://" + strings.ToLower(stripDefaultPort(scheme, u.Host)), true
}

// stripDefaultPort drops ":80" for http and ":443" for https from hostport,
// so "example.com" and "example.com:443" compare equal under https.
func stripDefaultPort(scheme, hostport string) string {
	h, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return hostport
}
