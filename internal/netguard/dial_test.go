package netguard_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/netguard"
)

// countingServer is an httptest server on loopback that counts requests.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func get(t *testing.T, c *http.Client, u string) error {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	return nil
}

func TestClientLoopback(t *testing.T) {
	srv, hits := countingServer(t, nil)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res := newResolver(map[string][]string{"svc.example": {"127.0.0.1"}})
	named := "http://svc.example:" + strconv.Itoa(port) + "/"
	for _, tc := range []struct {
		name   string
		policy netguard.Policy
		url    string
		want   netguard.Reason
	}{
		{"default allows loopback", netguard.Policy{}, srv.URL, ""},
		{"default allows a name resolving to loopback", netguard.Policy{}, named, ""},
		{"deny_loopback refuses the literal", netguard.Policy{DenyLoopback: true}, srv.URL, netguard.ReasonLoopback},
		{"deny_loopback refuses the name at dial", netguard.Policy{DenyLoopback: true}, named, netguard.ReasonLoopback},
		{"allow list wins over deny_loopback", netguard.Policy{DenyLoopback: true, Allow: []string{"127.0.0.1"}}, srv.URL, ""},
		{"allowed name wins over deny_loopback", netguard.Policy{DenyLoopback: true, Allow: []string{"svc.example"}}, named, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := hits.Load()
			c := mustGuard(t, tc.policy, res).Client(0)
			defer c.CloseIdleConnections()
			err := get(t, c, tc.url)
			if got := reasonOf(err); got != tc.want {
				t.Fatalf("GET %s = %v (reason %q), want reason %q", tc.url, err, got, tc.want)
			}
			served := hits.Load() - before
			if tc.want != "" {
				if !errors.Is(err, netguard.ErrBlocked) {
					t.Errorf("errors.Is(%v, ErrBlocked) = false", err)
				}
				if served != 0 {
					t.Errorf("the server saw %d requests, want none", served)
				}
			} else if served != 1 {
				t.Errorf("the server saw %d requests, want 1", served)
			}
		})
	}
}

func TestDialRechecksDNS(t *testing.T) {
	srv, hits := countingServer(t, nil)
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	res := newResolver(nil)
	// The first answer passes CheckURL, the next one is what a rebinding
	// DNS server gives the dialer.
	res.add("rebind.example", "127.0.0.1")
	res.add("rebind.example", "169.254.169.254")
	res.add("meta.example", "169.254.169.254")
	res.add("mixed.example", "127.0.0.1", "169.254.169.254")
	g := mustGuard(t, netguard.Policy{}, res)
	if err := g.CheckURL(t.Context(), "http://rebind.example:"+port+"/"); err != nil {
		t.Fatalf("CheckURL at registration: %v", err)
	}
	c := g.Client(0)
	for _, host := range []string{"rebind.example", "meta.example", "mixed.example"} {
		err := get(t, c, "http://"+host+":"+port+"/")
		if reasonOf(err) != netguard.ReasonMetadata {
			t.Errorf("GET %s = %v, want refused at dial as metadata", host, err)
		}
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			t.Errorf("GET %s = %v, want a *net.OpError from the dial", host, err)
		}
		if !strings.Contains(err.Error(), "resolves to 169.254.169.254") {
			t.Errorf("GET %s = %q, want the refused answer named", host, err)
		}
	}
	if res.count("rebind.example") != 2 {
		t.Errorf("rebind.example resolved %d times, want 2 (check, then dial)", res.count("rebind.example"))
	}
	if hits.Load() != 0 {
		t.Errorf("the server saw %d requests, want none", hits.Load())
	}
}

func TestRedirects(t *testing.T) {
	res := newResolver(map[string][]string{"evil.example": {"169.254.169.254"}})
	redirectTo := func(target string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target, http.StatusFound) }
	}
	g := mustGuard(t, netguard.Policy{}, res)
	for _, tc := range []struct {
		name, target string
		want         netguard.Reason
	}{
		{"to a metadata literal", "http://169.254.169.254/latest/meta-data/", netguard.ReasonMetadata},
		{"to a mapped literal", "http://[::ffff:169.254.169.254]/", netguard.ReasonMetadata},
		{"to a metadata name", "http://metadata.google.internal/computeMetadata/v1/", netguard.ReasonMetadata},
		{"to a name resolving to metadata", "http://evil.example/", netguard.ReasonMetadata},
		{"to another scheme", "file:///etc/passwd", ""}, // net/http refuses it itself
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, hits := countingServer(t, redirectTo(tc.target))
			for _, c := range []struct {
				what   string
				client *http.Client
			}{
				{"guarded client", g.Client(0)},
				// Without CheckRedirect the hop is still a guarded dial.
				{"guarded transport alone", &http.Client{Transport: g.Transport(nil)}},
			} {
				err := get(t, c.client, srv.URL)
				if err == nil {
					t.Fatalf("%s: the redirect %s was followed", c.what, tc.target)
				}
				if tc.want != "" && reasonOf(err) != tc.want {
					t.Errorf("%s: GET = %v, want reason %q", c.what, err, tc.want)
				}
			}
			if hits.Load() != 2 {
				t.Errorf("the allowed server saw %d requests, want 2 (one per client)", hits.Load())
			}
		})
	}

	t.Run("hops are capped", func(t *testing.T) {
		var srv *httptest.Server
		srv, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, srv.URL+"/again", http.StatusFound)
		})
		err := get(t, g.Client(0), srv.URL)
		if err == nil || !strings.Contains(err.Error(), "stopped after 5 redirects") {
			t.Errorf("GET = %v, want stopped after %d redirects", err, netguard.MaxRedirects)
		}
		if hits.Load() != netguard.MaxRedirects {
			t.Errorf("the server saw %d requests, want %d", hits.Load(), netguard.MaxRedirects)
		}
	})
}

func TestControl(t *testing.T) {
	g := mustGuard(t, netguard.Policy{DenyLoopback: true}, newResolver(nil))
	d := &net.Dialer{Control: g.Control}
	for _, addr := range []string{"169.254.169.254:80", "[fd00:ec2::254]:80", "127.0.0.1:1"} {
		_, err := d.DialContext(t.Context(), "tcp", addr)
		if !errors.Is(err, netguard.ErrBlocked) {
			t.Errorf("dial %s with Control = %v, want refused before connecting", addr, err)
		}
	}
}

func TestProxy(t *testing.T) {
	// A forward proxy that answers every request itself.
	proxy, proxied := countingServer(t, nil)
	pu, _ := url.Parse(proxy.URL)
	res := newResolver(map[string][]string{"evil.example": {"169.254.169.254"}, "good.example": {"93.184.216.34"}})
	g, err := netguard.New(netguard.Policy{}, &netguard.Options{Resolver: res,
		Proxy: func(*http.Request) (*url.URL, error) { return pu, nil }})
	if err != nil {
		t.Fatal(err)
	}
	c := g.Client(0)
	for _, tc := range []struct {
		url  string
		want netguard.Reason
	}{
		{"http://169.254.169.254/latest/meta-data/", netguard.ReasonMetadata},
		{"http://metadata.google.internal/", netguard.ReasonMetadata},
		{"http://evil.example/", netguard.ReasonMetadata},
		{"http://good.example/", ""},
		{"http://only-the-proxy-knows.example/", ""},
	} {
		before := proxied.Load()
		err := get(t, c, tc.url)
		if reasonOf(err) != tc.want {
			t.Errorf("GET %s through the proxy = %v, want reason %q", tc.url, err, tc.want)
		}
		if want := int64(map[bool]int{true: 1, false: 0}[tc.want == ""]); proxied.Load()-before != want {
			t.Errorf("GET %s: the proxy saw %d requests, want %d", tc.url, proxied.Load()-before, want)
		}
	}

	// Without Options.Proxy the environment's proxy is ignored.
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = http.ProxyFromEnvironment
	if mustGuard(t, netguard.Policy{}, res).Transport(base).Proxy != nil {
		t.Errorf("a guarded transport kept the base transport's proxy")
	}
}

// TestUnicodeHosts: net/http maps a host to ASCII (IDNA) before it dials,
// so full-width forms of a refused name or address arrive at the dialer in
// their plain form and are refused there.
func TestUnicodeHosts(t *testing.T) {
	c := mustGuard(t, netguard.Policy{}, newResolver(nil)).Client(0)
	for _, u := range []string{
		"http://ｍｅｔａｄａｔａ.google.internal/computeMetadata/v1/",
		"http://１６９.２５４.１６９.２５４/latest/meta-data/",
		"http://METADATA.goog/",
	} {
		if err := get(t, c, u); reasonOf(err) != netguard.ReasonMetadata {
			t.Errorf("GET %s = %v, want refused as metadata", u, err)
		}
	}
}

// TestDialFallsBackAcrossFamilies: a name with answers in both families
// connects through whichever family works, as net.Dialer would.
func TestDialFallsBackAcrossFamilies(t *testing.T) {
	srv, hits := countingServer(t, nil) // listens on 127.0.0.1 only
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	res := newResolver(map[string][]string{
		"v6first.example": {"::1", "127.0.0.1"},
		"v4first.example": {"127.0.0.1", "::1"},
		"v6only.example":  {"::1"},
	})
	c := mustGuard(t, netguard.Policy{}, res).Client(0)
	for _, host := range []string{"v6first.example", "v4first.example"} {
		if err := get(t, c, "http://"+host+":"+port+"/"); err != nil {
			t.Errorf("GET %s: %v", host, err)
		}
	}
	if err := get(t, c, "http://v6only.example:"+port+"/"); err == nil || errors.Is(err, netguard.ErrBlocked) {
		t.Errorf("GET v6only.example = %v, want a connection failure (nothing listens on ::1)", err)
	}
	if hits.Load() != 2 {
		t.Errorf("the server saw %d requests, want 2", hits.Load())
	}
}
