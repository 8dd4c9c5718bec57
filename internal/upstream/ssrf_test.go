package upstream_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// seqResolver answers each host with its answers in turn (the last one
// repeats): a DNS server that can rebind between two lookups.
type seqResolver struct {
	mu      sync.Mutex
	answers map[string][]string
	calls   map[string]int
}

func (r *seqResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	n := r.calls[host]
	r.calls[host]++
	return []netip.Addr{netip.MustParseAddr(seq[min(n, len(seq)-1)])}, nil
}

func newGuard(t *testing.T, p netguard.Policy, r netguard.Resolver) *netguard.Guard {
	t.Helper()
	g, err := netguard.New(p, &netguard.Options{Resolver: r})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSSRFRefusedBeforeConnect: a server whose url or health_check_url the
// guard refuses fails its connect with the guard's message, is not retried,
// and nothing is sent anywhere.
func TestSSRFRefusedBeforeConnect(t *testing.T) {
	live, withKey, withoutKey := serveFake(t, config.TransportHTTP)
	for _, tc := range []struct {
		name, transport, url, health string
		want                         []string
	}{
		{"metadata v4 over http", config.TransportHTTP, "http://169.254.169.254/latest/meta-data/", "",
			[]string{`url: outbound request to "169.254.169.254" refused`, "cloud metadata", "settings.outbound_allow"}},
		{"metadata v4 over sse", config.TransportSSE, "http://169.254.169.254/sse", "",
			[]string{`"169.254.169.254"`, "cloud metadata"}},
		{"metadata v6", config.TransportHTTP, "http://[fd00:ec2::254]/mcp", "", []string{`"fd00:ec2::254"`, "cloud metadata"}},
		{"mapped metadata", config.TransportHTTP, "http://[::ffff:169.254.169.254]/mcp", "", []string{"cloud metadata"}},
		{"metadata name", config.TransportSSE, "http://metadata.google.internal/sse", "", []string{`"metadata.google.internal"`}},
		{"link-local", config.TransportHTTP, "http://169.254.7.7:8080/mcp", "", []string{"link-local"}},
		{"health check url", config.TransportHTTP, live + "/mcp", "http://169.254.169.254/health",
			[]string{`health_check_url: outbound request to "169.254.169.254" refused`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			m := newManager(t, rec, nil, &upstream.Options{Restart: fastRestart})
			if err := m.Add(&config.Server{Name: "meta", Transport: tc.transport, URL: tc.url, HealthCheckURL: tc.health}); err != nil {
				t.Fatal(err)
			}
			err := m.Connect(t.Context(), "meta")
			var unavail *upstream.UnavailableError
			if !errors.As(err, &unavail) || !errors.Is(err, netguard.ErrBlocked) {
				t.Fatalf("Connect = %v, want an UnavailableError wrapping netguard.ErrBlocked", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(unavail.Reason, w) {
					t.Errorf("reason %q does not contain %q", unavail.Reason, w)
				}
			}
			st, _ := m.Status("meta")
			if st.State != upstream.StateError || !st.NextRestartAt.IsZero() || st.LastError != unavail.Reason {
				t.Errorf("status %s (%q), next restart %v; want ERROR with the reason and no restart", st.State, st.LastError, st.NextRestartAt)
			}
			if diff := cmp.Diff([]string{"DISCONNECTED>CONNECTING", "CONNECTING>ERROR"}, rec.steps("meta")); diff != "" {
				t.Errorf("transitions (-want +got):\n%s", diff)
			}
		})
	}
	if n := withKey.Load() + withoutKey.Load(); n != 0 {
		t.Errorf("the server behind a refused health_check_url saw %d requests, want none", n)
	}
}

// TestSSRFLoopbackPolicy: loopback upstreams work by default, are refused
// with DenyLoopback, and the allow list wins.
func TestSSRFLoopbackPolicy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		policy    *netguard.Policy // nil: the Manager's default guard
		transport string
		refused   bool
	}{
		{"default http", nil, config.TransportHTTP, false},
		{"default sse", nil, config.TransportSSE, false},
		{"deny loopback http", &netguard.Policy{DenyLoopback: true}, config.TransportHTTP, true},
		{"deny loopback sse", &netguard.Policy{DenyLoopback: true}, config.TransportSSE, true},
		{"allow list wins", &netguard.Policy{DenyLoopback: true, DenyPrivate: true, Allow: []string{"127.0.0.0/8"}}, config.TransportHTTP, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, withKey, withoutKey := serveFake(t, tc.transport)
			o := &upstream.Options{Restart: fastRestart}
			if tc.policy != nil {
				o.Guard = newGuard(t, *tc.policy, nil)
			}
			m := newManager(t, newRecorder(), nil, o)
			if err := m.Add(&config.Server{Name: "local", Transport: tc.transport, URL: u}); err != nil {
				t.Fatal(err)
			}
			err := m.Connect(t.Context(), "local")
			served := withKey.Load() + withoutKey.Load()
			if tc.refused {
				if !errors.Is(err, netguard.ErrBlocked) || !strings.Contains(err.Error(), "outbound_deny_loopback") {
					t.Fatalf("Connect = %v, want refused naming outbound_deny_loopback", err)
				}
				if served != 0 {
					t.Errorf("the refused server saw %d requests", served)
				}
				return
			}
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			if served == 0 {
				t.Errorf("connected without a request to the server")
			}
		})
	}
}

// TestSSRFAtDial: what passes the check before the connect is checked again
// on every dial: a DNS answer that changes (rebinding) and a redirect to a
// metadata address are refused, with the guard's message in the status.
func TestSSRFAtDial(t *testing.T) {
	live, withKey, withoutKey := serveFake(t, config.TransportHTTP)
	lu, _ := url.Parse(live)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	res := &seqResolver{answers: map[string][]string{
		"rebind.example": {"127.0.0.1", "169.254.169.254"},
	}}
	for _, tc := range []struct {
		name, url string
	}{
		{"dns rebinding", "http://rebind.example:" + lu.Port() + "/mcp"},
		{"redirect to metadata", redirector.URL + "/mcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, newRecorder(), nil, &upstream.Options{Guard: newGuard(t, netguard.Policy{}, res),
				Restart: upstream.RestartPolicy{Disabled: true}})
			if err := m.Add(&config.Server{Name: "up", Transport: config.TransportHTTP, URL: tc.url}); err != nil {
				t.Fatal(err)
			}
			err := m.Connect(t.Context(), "up")
			if err == nil {
				t.Fatal("Connect succeeded")
			}
			st, _ := m.Status("up")
			if !strings.Contains(st.LastError, "169.254.169.254") || !strings.Contains(st.LastError, "refused") {
				t.Errorf("LastError = %q, want the guard's refusal of 169.254.169.254", st.LastError)
			}
		})
	}
	if n := withKey.Load() + withoutKey.Load(); n != 0 {
		t.Errorf("the rebinding target saw %d requests, want none", n)
	}
}
