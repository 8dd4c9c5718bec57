package netguard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/netguard"
)

// fakeResolver answers from a table, so no test depends on real DNS. A
// host with several answers gets them in turn (the last repeats): a DNS
// server that rebinds between two lookups.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

func newResolver(answers map[string][]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]netip.Addr{}, calls: map[string]int{}}
	for host, addrs := range answers {
		r.add(host, addrs...)
	}
	return r
}

// add appends one answer (a set of addresses) for host.
func (r *fakeResolver) add(host string, addrs ...string) {
	var as []netip.Addr
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	r.answers[host] = append(r.answers[host], as)
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	n := r.calls[host]
	r.calls[host]++
	return seq[min(n, len(seq)-1)], nil
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

func mustGuard(t testing.TB, p netguard.Policy, r netguard.Resolver) *netguard.Guard {
	t.Helper()
	g, err := netguard.New(p, &netguard.Options{Resolver: r})
	if err != nil {
		t.Fatalf("New(%+v): %v", p, err)
	}
	return g
}

func reasonOf(err error) netguard.Reason {
	var b *netguard.BlockedError
	if errors.As(err, &b) {
		return b.Reason
	}
	return ""
}

func TestCheckAddr(t *testing.T) {
	var (
		def      = netguard.Policy{}
		noLoop   = netguard.Policy{DenyLoopback: true}
		noPriv   = netguard.Policy{DenyPrivate: true}
		strict   = netguard.Policy{DenyLoopback: true, DenyPrivate: true}
		allowing = netguard.Policy{DenyLoopback: true, DenyPrivate: true,
			Allow: []string{"169.254.169.254", "10.1.0.0/16", "127.0.0.1", "fd00:ec2::/112", "::ffff:192.168.7.0/120"}}
		allowAll = netguard.Policy{Allow: []string{"0.0.0.0/0", "::/0"}}
	)
	const ok = netguard.Reason("")
	for _, tc := range []struct {
		policy netguard.Policy
		addr   string
		want   netguard.Reason
	}{
		// Metadata and link-local, refused by default.
		{def, "169.254.169.254", netguard.ReasonMetadata},
		{def, "169.254.170.2", netguard.ReasonMetadata},
		{def, "100.100.100.200", netguard.ReasonMetadata},
		{def, "168.63.129.16", netguard.ReasonMetadata},
		{def, "192.0.0.192", netguard.ReasonMetadata},
		{def, "fd00:ec2::254", netguard.ReasonMetadata},
		{def, "169.254.1.1", netguard.ReasonLinkLocal},
		{def, "169.254.255.255", netguard.ReasonLinkLocal},
		{def, "fe80::1", netguard.ReasonLinkLocal},
		{def, "fe80::1%eth0", netguard.ReasonLinkLocal},
		{def, "febf:ffff::1", netguard.ReasonLinkLocal},
		// IPv4 inside IPv6: mapped, NAT64, 6to4, Teredo, compatible, translated.
		{def, "::ffff:169.254.169.254", netguard.ReasonMetadata},
		{def, "::ffff:a9fe:a9fe", netguard.ReasonMetadata},
		{def, "::ffff:169.254.3.4", netguard.ReasonLinkLocal},
		{def, "64:ff9b::a9fe:a9fe", netguard.ReasonMetadata},
		{def, "64:ff9b::169.254.169.254", netguard.ReasonMetadata},
		{def, "64:ff9b:1:a9fe:a9:fe00::", netguard.ReasonMetadata},
		{def, "2002:a9fe:a9fe::1", netguard.ReasonMetadata},
		{def, "2001:0:a9fe:a9fe::1", netguard.ReasonMetadata},                  // Teredo server
		{def, "2001:0:4136:e378:8000:63bf:5601:5601", netguard.ReasonMetadata}, // Teredo client, obfuscated
		{def, "::169.254.169.254", netguard.ReasonMetadata},
		{def, "::ffff:0:169.254.169.254", netguard.ReasonMetadata},
		{def, "64:ff9b::0.0.0.0", netguard.ReasonUnspecified},
		// Always refused.
		{def, "0.0.0.0", netguard.ReasonUnspecified},
		{def, "0.1.2.3", netguard.ReasonUnspecified},
		{def, "::", netguard.ReasonUnspecified},
		{def, "::ffff:0.0.0.0", netguard.ReasonUnspecified},
		{def, "224.0.0.1", netguard.ReasonMulticast},
		{def, "239.255.255.250", netguard.ReasonMulticast},
		{def, "ff02::1", netguard.ReasonMulticast},
		{def, "255.255.255.255", netguard.ReasonMulticast},
		{allowAll, "0.0.0.0", netguard.ReasonUnspecified},
		{allowAll, "224.0.0.1", netguard.ReasonMulticast},
		{allowAll, "169.254.169.254", ok},
		// Loopback and private: allowed by default.
		{def, "127.0.0.1", ok},
		{def, "127.255.0.9", ok},
		{def, "::1", ok},
		{def, "10.0.0.1", ok},
		{def, "172.16.5.4", ok},
		{def, "192.168.1.1", ok},
		{def, "100.64.0.1", ok},
		{def, "fd12:3456::1", ok},
		{def, "8.8.8.8", ok},
		{def, "2606:4700:4700::1111", ok},
		{def, "64:ff9b::7f00:1", ok},
		{def, "172.32.0.1", ok},
		// ... and refused by the settings.
		{noLoop, "127.0.0.1", netguard.ReasonLoopback},
		{noLoop, "127.1.2.3", netguard.ReasonLoopback},
		{noLoop, "::1", netguard.ReasonLoopback},
		{noLoop, "::ffff:127.0.0.1", netguard.ReasonLoopback},
		{noLoop, "64:ff9b::7f00:1", netguard.ReasonLoopback},
		{noLoop, "2002:7f00:1::", netguard.ReasonLoopback},
		{noLoop, "10.0.0.1", ok},
		{noPriv, "10.0.0.1", netguard.ReasonPrivate},
		{noPriv, "172.16.0.1", netguard.ReasonPrivate},
		{noPriv, "172.31.255.255", netguard.ReasonPrivate},
		{noPriv, "192.168.0.1", netguard.ReasonPrivate},
		{noPriv, "100.64.0.1", netguard.ReasonPrivate},
		{noPriv, "100.127.255.255", netguard.ReasonPrivate},
		{noPriv, "fd12::1", netguard.ReasonPrivate},
		{noPriv, "fec0::1", netguard.ReasonPrivate},
		{noPriv, "::ffff:10.1.2.3", netguard.ReasonPrivate},
		{noPriv, "2002:a00:1::", netguard.ReasonPrivate},
		{noPriv, "127.0.0.1", ok},
		{noPriv, "172.32.0.1", ok},
		{noPriv, "100.128.0.1", ok},
		{strict, "8.8.8.8", ok},
		{strict, "fd00:ec2::254", netguard.ReasonMetadata},
		// The allow list wins over everything a setting can change.
		{allowing, "169.254.169.254", ok},
		{allowing, "::ffff:169.254.169.254", ok},
		{allowing, "64:ff9b::a9fe:a9fe", ok}, // it reaches an allowed address
		{allowing, "169.254.169.253", netguard.ReasonLinkLocal},
		{allowing, "10.1.200.3", ok},
		{allowing, "10.2.0.1", netguard.ReasonPrivate},
		{allowing, "127.0.0.1", ok},
		{allowing, "127.0.0.2", netguard.ReasonLoopback},
		{allowing, "fd00:ec2::254", ok},
		{allowing, "192.168.7.9", ok},
		{allowing, "192.168.8.9", netguard.ReasonPrivate},
		{allowing, "0.0.0.0", netguard.ReasonUnspecified},
	} {
		t.Run(fmt.Sprintf("%+v/%s", tc.policy, tc.addr), func(t *testing.T) {
			g := mustGuard(t, tc.policy, newResolver(nil))
			err := g.CheckAddr(netip.MustParseAddr(tc.addr))
			if got := reasonOf(err); got != tc.want {
				t.Fatalf("CheckAddr(%s) = %v (reason %q), want reason %q", tc.addr, err, got, tc.want)
			}
			if err != nil && !errors.Is(err, netguard.ErrBlocked) {
				t.Errorf("errors.Is(%v, ErrBlocked) = false", err)
			}
		})
	}
}

func TestCheckURL(t *testing.T) {
	res := newResolver(map[string][]string{
		"good.example":             {"93.184.216.34", "2606:2800:220:1::248"},
		"meta.nip.example":         {"169.254.169.254"},
		"mapped.example":           {"::ffff:169.254.169.254"},
		"mixed.example":            {"93.184.216.34", "169.254.169.254"},
		"localhost":                {"127.0.0.1", "::1"},
		"lan.example":              {"10.0.0.7"},
		"metadata.google.internal": {"169.254.169.254"},
		"vault.corp.example":       {"169.254.10.10"},
		"corp.example":             {"169.254.10.10"},
	})
	def := netguard.Policy{}
	strict := netguard.Policy{DenyLoopback: true, DenyPrivate: true}
	allowNames := netguard.Policy{Allow: []string{"metadata.google.internal", "*.corp.example"}}
	const ok = netguard.Reason("")
	for _, tc := range []struct {
		policy  netguard.Policy
		url     string
		want    netguard.Reason
		otherEr bool // an error that is not a refusal
	}{
		{def, "http://169.254.169.254/latest/meta-data/", netguard.ReasonMetadata, false},
		{def, "https://169.254.169.254:8443/x", netguard.ReasonMetadata, false},
		{def, "http://[fd00:ec2::254]/latest/meta-data/", netguard.ReasonMetadata, false},
		{def, "http://[::ffff:169.254.169.254]/", netguard.ReasonMetadata, false},
		{def, "http://[::ffff:a9fe:a9fe]/", netguard.ReasonMetadata, false},
		{def, "http://[fe80::1%25eth0]:8080/", netguard.ReasonLinkLocal, false},
		{def, "http://169.254.169.254./", netguard.ReasonMetadata, false},
		{def, "http://metadata.google.internal/computeMetadata/v1/", netguard.ReasonMetadata, false},
		{def, "http://METADATA.Google.Internal./", netguard.ReasonMetadata, false},
		{def, "http://metadata/", netguard.ReasonMetadata, false},
		{def, "http://instance-data/latest/", netguard.ReasonMetadata, false},
		{def, "http://meta.nip.example/", netguard.ReasonMetadata, false},
		{def, "http://mapped.example/", netguard.ReasonMetadata, false},
		{def, "http://mixed.example/", netguard.ReasonMetadata, false},
		// Numeric forms that netip refuses and inet_aton accepts.
		{def, "http://2852039166/", netguard.ReasonAmbiguousLiteral, false},
		{def, "http://0251.0376.0251.0376/", netguard.ReasonAmbiguousLiteral, false},
		{def, "http://0xa9fea9fe/", netguard.ReasonAmbiguousLiteral, false},
		{def, "http://0xA9.0xFE.0xA9.0xFE/", netguard.ReasonAmbiguousLiteral, false},
		{def, "http://169.254.43518/", netguard.ReasonAmbiguousLiteral, false},
		{def, "http://127.1/", netguard.ReasonAmbiguousLiteral, false},
		{def, "http://0/", netguard.ReasonAmbiguousLiteral, false},
		{def, "http://0.0.0.0:8080/", netguard.ReasonUnspecified, false},
		{def, "http://[::]:8080/", netguard.ReasonUnspecified, false},
		// Schemes.
		{def, "file:///etc/passwd", netguard.ReasonScheme, false},
		{def, "gopher://169.254.169.254:70/", netguard.ReasonScheme, false},
		{def, "ftp://good.example/", netguard.ReasonScheme, false},
		{def, "//good.example/", netguard.ReasonScheme, false},
		{def, "HTTP://good.example/", ok, false},
		// Allowed by default.
		{def, "http://good.example/mcp", ok, false},
		{def, "http://127.0.0.1:8080/mcp", ok, false},
		{def, "http://localhost:8080/mcp", ok, false},
		{def, "http://[::1]:8080/mcp", ok, false},
		{def, "http://lan.example/mcp", ok, false},
		{def, "http://10.0.0.1/mcp", ok, false},
		// Strict settings.
		{strict, "http://127.0.0.1:8080/mcp", netguard.ReasonLoopback, false},
		{strict, "http://localhost:8080/mcp", netguard.ReasonLoopback, false},
		{strict, "http://app.localhost/", netguard.ReasonLoopback, false},
		{strict, "http://lan.example/mcp", netguard.ReasonPrivate, false},
		{strict, "http://good.example/mcp", ok, false},
		// Names on the allow list win.
		{allowNames, "http://metadata.google.internal/computeMetadata/v1/", ok, false},
		{allowNames, "http://vault.corp.example/", ok, false},
		{allowNames, "http://corp.example/", netguard.ReasonLinkLocal, false},
		// Not refusals: the destination is unknown.
		{def, "http://nxdomain.example/", ok, true},
		{def, "http:///nohost", ok, true},
		{def, "http://%zz/", ok, true},
	} {
		t.Run(fmt.Sprintf("%+v/%s", tc.policy, tc.url), func(t *testing.T) {
			g := mustGuard(t, tc.policy, res)
			err := g.CheckURL(t.Context(), tc.url)
			got := reasonOf(err)
			if got != tc.want {
				t.Fatalf("CheckURL(%q) = %v (reason %q), want reason %q", tc.url, err, got, tc.want)
			}
			if tc.otherEr != (err != nil && got == "") {
				t.Fatalf("CheckURL(%q) = %v; want a non-refusal error: %v", tc.url, err, tc.otherEr)
			}
			if tc.otherEr && errors.Is(err, netguard.ErrBlocked) {
				t.Errorf("errors.Is(%v, ErrBlocked) = true for an unknown destination", err)
			}
			// The literal check never resolves, and never allows what the
			// full check refuses by name or literal.
			if lit := g.CheckURLLiteral(tc.url); lit != nil && reasonOf(lit) != "" && reasonOf(lit) != got {
				t.Errorf("CheckURLLiteral(%q) = %v, CheckURL refused for %q", tc.url, lit, got)
			}
		})
	}
}

func TestBlockedErrorMessage(t *testing.T) {
	res := newResolver(map[string][]string{"evil.example": {"169.254.169.254"}, "lan.example": {"10.0.0.7"}})
	for _, tc := range []struct {
		policy netguard.Policy
		url    string
		want   []string
	}{
		{netguard.Policy{}, "http://user:hunter2pass@169.254.169.254/latest/meta-data/?token=qs-secret",
			[]string{`"169.254.169.254"`, "cloud metadata", "settings.outbound_allow"}},
		{netguard.Policy{}, "http://evil.example/", []string{`"evil.example"`, "resolves to 169.254.169.254", "settings.outbound_allow"}},
		{netguard.Policy{}, "http://[64:ff9b::a9fe:a9fe]/", []string{"64:ff9b::a9fe:a9fe carries 169.254.169.254"}},
		{netguard.Policy{}, "http://[::ffff:169.254.169.254]/", []string{`"::ffff:169.254.169.254" refused: it is 169.254.169.254, a cloud metadata`}},
		{netguard.Policy{DenyLoopback: true}, "http://127.0.0.1:9/", []string{"loopback", "outbound_deny_loopback", "outbound_allow"}},
		{netguard.Policy{DenyPrivate: true}, "http://lan.example/", []string{"resolves to 10.0.0.7", "private", "outbound_deny_private"}},
		{netguard.Policy{}, "http://0.0.0.0/", []string{"unspecified", "no setting allows it"}},
		{netguard.Policy{}, "file:///etc/passwd", []string{`scheme "file"`, "only http and https"}},
		{netguard.Policy{}, "http://2852039166/", []string{"non-standard IP address literal"}},
	} {
		g := mustGuard(t, tc.policy, res)
		err := g.CheckURL(t.Context(), tc.url)
		if err == nil {
			t.Errorf("CheckURL(%q) = nil, want a refusal", tc.url)
			continue
		}
		msg := err.Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("CheckURL(%q) = %q, want it to contain %q", tc.url, msg, w)
			}
		}
		for _, secret := range []string{"hunter2pass", "qs-secret", "meta-data"} {
			if strings.Contains(msg, secret) {
				t.Errorf("CheckURL(%q) = %q: it leaks %q", tc.url, msg, secret)
			}
		}
	}
}

func TestValidateAllow(t *testing.T) {
	for _, tc := range []struct {
		entry string
		ok    bool
	}{
		{"169.254.169.254", true},
		{"10.0.0.0/8", true},
		{"fd00::/8", true},
		{"[fd00:ec2::254]", true},
		{"::ffff:10.0.0.0/104", true},
		{"vault.internal", true},
		{"*.corp.example", true},
		{"Metadata.Google.Internal.", true},
		{"", false},
		{"  ", false},
		{"10.0.0.0/33", false},
		{"10.0.0.1/8/9", false},
		{"not a host", false},
		{"*", false},
		{"*.", false},
		{"a..b", false},
		{"http://x.example", false},
		{"2852039166", false},
		{"0x7f.1", false},
		{"host:8080", false},
	} {
		err := netguard.ValidateAllow(tc.entry)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateAllow(%q) = %v, want ok=%v", tc.entry, err, tc.ok)
		}
		_, newErr := netguard.New(netguard.Policy{Allow: []string{tc.entry}}, nil)
		if (newErr == nil) != tc.ok {
			t.Errorf("New(Allow: [%q]) = %v, want ok=%v", tc.entry, newErr, tc.ok)
		}
	}
}
