package httpguard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// request builds r as if it arrived on a listener bound to local.
func request(method, host, local string, header map[string]string) *http.Request {
	r := httptest.NewRequest(method, "http://"+host+"/api/v1/x", strings.NewReader("{}"))
	r.Host = host
	for k, v := range header {
		r.Header.Set(k, v)
	}
	if local != "" {
		addr, _ := net.ResolveTCPAddr("tcp", local)
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
	}
	return r
}

func TestCheck(t *testing.T) {
	g, err := New(Options{AllowedHosts: []string{"gw.example.com"}, AllowedOrigins: []string{"https://app.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	open, _ := New(Options{})
	const lo = "127.0.0.1:8080"
	tests := []struct {
		name   string
		g      *Guard
		host   string
		local  string
		header map[string]string
		want   string // "" = allowed, else the refusal code
	}{
		{"loopback ip", g, "127.0.0.1:8080", lo, nil, ""},
		{"localhost", g, "localhost:8080", lo, nil, ""},
		{"sub.localhost", g, "app.localhost:8080", lo, nil, ""},
		{"ipv6 loopback", g, "[::1]:8080", "[::1]:8080", nil, ""},
		{"allowed host any port", g, "GW.example.com:9443", lo, nil, ""},
		{"rebound name", g, "evil.example:8080", lo, nil, CodeInvalidHost},
		{"rebound name no port", g, "evil.example", lo, nil, CodeInvalidHost},
		{"empty host", g, "", lo, nil, CodeInvalidHost},
		{"public listener, no list: any host", open, "whatever.example", "10.0.0.5:8080", nil, ""},
		{"public listener, list set: other host", g, "whatever.example", "10.0.0.5:8080", nil, CodeInvalidHost},
		{"public listener, list set: its own IP", g, "10.0.0.5:8080", "10.0.0.5:8080", nil, ""},
		{"public listener, list set: listed", g, "gw.example.com", "10.0.0.5:8080", nil, ""},
		{"same origin", g, "127.0.0.1:8080", lo, map[string]string{"Origin": "http://127.0.0.1:8080"}, ""},
		{"same origin default port", g, "gw.example.com", lo, map[string]string{"Origin": "https://gw.example.com"}, ""},
		{"configured origin", g, "127.0.0.1:8080", lo, map[string]string{"Origin": "https://APP.example.com:443"}, ""},
		{"other local port", g, "127.0.0.1:8080", lo, map[string]string{"Origin": "http://127.0.0.1:3000"}, CodeCrossOrigin},
		{"other loopback name", g, "127.0.0.1:8080", lo, map[string]string{"Origin": "http://localhost:8080"}, CodeCrossOrigin},
		{"foreign", g, "127.0.0.1:8080", lo, map[string]string{"Origin": "https://evil.example"}, CodeCrossOrigin},
		{"null", g, "127.0.0.1:8080", lo, map[string]string{"Origin": "null"}, CodeCrossOrigin},
		{"garbage origin", g, "127.0.0.1:8080", lo, map[string]string{"Origin": "http://%zz"}, CodeCrossOrigin},
		{"origin with path", g, "127.0.0.1:8080", lo, map[string]string{"Origin": "http://127.0.0.1:8080/x"}, CodeCrossOrigin},
		{"no origin, same-origin fetch", g, "127.0.0.1:8080", lo, map[string]string{"Sec-Fetch-Site": "same-origin"}, ""},
		{"no origin, typed in address bar", g, "127.0.0.1:8080", lo, map[string]string{"Sec-Fetch-Site": "none"}, ""},
		{"no origin, cross-site no-cors", g, "127.0.0.1:8080", lo, map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, CodeCrossOrigin},
		{"no origin, same-site", g, "127.0.0.1:8080", lo, map[string]string{"Sec-Fetch-Site": "same-site"}, CodeCrossOrigin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := tt.g.Check(request("GET", tt.host, tt.local, tt.header))
			got := ""
			if ref != nil {
				got = ref.Code
			}
			if got != tt.want {
				t.Errorf("Check = %q, want %q", got, tt.want)
			}
		})
	}
	// A navigation is allowed only as a GET of a document.
	nav := map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
	if ref := g.Check(request("GET", "127.0.0.1:8080", lo, nav)); ref != nil {
		t.Errorf("GET navigation refused: %+v", ref)
	}
	if ref := g.Check(request("POST", "127.0.0.1:8080", lo, nav)); ref == nil {
		t.Error("POST navigation (a form) allowed")
	}
}

func TestCheckBody(t *testing.T) {
	tests := []struct {
		method, ct string
		length     int64
		ok         bool
	}{
		{"POST", "application/json", 2, true},
		{"POST", "application/json; charset=utf-8", 2, true},
		{"POST", "Application/JSON", 2, true},
		{"POST", "application/json", 0, true},
		{"POST", "", 0, false},
		{"POST", "text/plain;charset=UTF-8", 2, false},
		{"POST", "application/x-www-form-urlencoded", 2, false},
		{"POST", "multipart/form-data; boundary=x", 2, false},
		{"POST", "application/jsonx", 2, false},
		{"PUT", "", 0, true},
		{"DELETE", "", 0, true},
		{"DELETE", "text/plain", 3, false},
		{"PATCH", "application/json", 3, true},
		{"GET", "text/plain", 3, true},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, "/x", strings.NewReader(strings.Repeat("x", int(tt.length))))
		r.ContentLength = tt.length
		if tt.ct != "" {
			r.Header.Set("Content-Type", tt.ct)
		}
		if got := CheckBody(r) == nil; got != tt.ok {
			t.Errorf("%s %q (%d bytes): allowed = %v, want %v", tt.method, tt.ct, tt.length, got, tt.ok)
		}
	}
}

func TestNewRejectsBadLists(t *testing.T) {
	for _, o := range []Options{
		{AllowedOrigins: []string{"app.example.com"}},
		{AllowedOrigins: []string{"https://app.example.com/path"}},
		{AllowedHosts: []string{""}},
		{AllowedHosts: []string{"https://x/y"}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) = nil error", o)
		}
	}
}

// FuzzCheck feeds arbitrary Host and Origin headers: the guard never
// panics, and whatever it lets through from a loopback listener has a
// loopback Host and no Origin or its own.
func FuzzCheck(f *testing.F) {
	f.Add("127.0.0.1:8080", "http://127.0.0.1:8080", "")
	f.Add("evil.example", "https://evil.example", "cross-site")
	f.Add("[::1]:80", "null", "same-site")
	f.Add("localhost", "http://localhost", "none")
	f.Add("127.0.0.1:8080", "http://127.0.0.1:8080/", "same-origin")
	g, _ := New(Options{})
	f.Fuzz(func(t *testing.T, host, origin, site string) {
		r := request("GET", "127.0.0.1:8080", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": site})
		r.Host = host
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if g.Check(r) != nil {
			return
		}
		if !IsLoopbackHost(HostOnly(host)) && HostOnly(host) != "127.0.0.1" {
			t.Fatalf("allowed Host %q on a loopback listener", host)
		}
		if origin == "" {
			return
		}
		o, ok := NormalizeOrigin(origin)
		if !ok {
			t.Fatalf("allowed Origin %q, which is not an origin", origin)
		}
		u, _ := url.Parse(o)
		if !strings.EqualFold(u.Host, stripDefaultPort(u.Scheme, host)) {
			t.Fatalf("allowed Origin %q for Host %q", origin, host)
		}
	})
}
