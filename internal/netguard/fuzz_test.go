package netguard_test

import (
	"context"
	"hash/fnv"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/netguard"
)

// fuzzAnswers are what the fuzz resolver hands out, refused ones included.
var fuzzAnswers = []netip.Addr{
	netip.MustParseAddr("93.184.216.34"),
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("127.0.0.1"),
	netip.MustParseAddr("10.1.2.3"),
	netip.MustParseAddr("::ffff:169.254.169.254"),
	netip.MustParseAddr("64:ff9b::a9fe:a9fe"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("2606:4700::1111"),
	netip.MustParseAddr("0.0.0.0"),
}

// hashResolver answers every name with one or two addresses chosen by a
// hash of the name: deterministic, so the oracle can ask again.
type hashResolver struct{}

func (hashResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	h := fnv.New32a()
	h.Write([]byte(host))
	n := h.Sum32()
	out := []netip.Addr{fuzzAnswers[n%uint32(len(fuzzAnswers))]}
	if n&0x100 != 0 {
		out = append(out, fuzzAnswers[(n>>9)%uint32(len(fuzzAnswers))])
	}
	return out, nil
}

// refusedPrefixes is the oracle, written independently of the package: the
// ranges the policies below must never let through, after unmapping and
// after taking the IPv4 address out of a NAT64 one.
func refusedPrefixes(strict bool) []netip.Prefix {
	ps := []string{"169.254.0.0/16", "fe80::/10", "0.0.0.0/8", "::/128", "224.0.0.0/4", "ff00::/8",
		"255.255.255.255/32", "fd00:ec2::254/128", "100.100.100.200/32", "168.63.129.16/32", "192.0.0.192/32"}
	if strict {
		ps = append(ps, "127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
			"100.64.0.0/10", "fc00::/7", "fec0::/10")
	}
	out := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

func refused(a netip.Addr, prefixes []netip.Prefix) bool {
	a = a.WithZone("").Unmap()
	cands := []netip.Addr{a}
	if b := a.As16(); a.Is6() && netip.MustParsePrefix("64:ff9b::/96").Contains(a) {
		cands = append(cands, netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	for _, c := range cands {
		for _, p := range prefixes {
			if p.Contains(c) {
				return true
			}
		}
	}
	return false
}

var metadataNameSet = []string{"metadata", "metadata.google.internal", "metadata.goog", "instance-data"}

// FuzzCheckURL checks that CheckURL never panics and that a URL it allows
// has an http(s) scheme, a host that is no metadata name nor numeric trick,
// and only addresses outside the refused ranges.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"http://169.254.169.254/latest/meta-data/",
		"http://[::ffff:169.254.169.254]/",
		"http://[64:ff9b::a9fe:a9fe]/",
		"http://2852039166/",
		"http://0xa9.0xfe.0xa9.0xfe/",
		"http://metadata.google.internal./",
		"http://good.example:8080/mcp",
		"https://user:pass@127.0.0.1:1/x?y=z",
		"http://[fe80::1%25eth0]/",
		"file:///etc/passwd",
		"http://%5B::1%5D/",
	} {
		f.Add(s)
	}
	guards := []struct {
		g      *netguard.Guard
		refuse []netip.Prefix
	}{
		{mustGuard(f, netguard.Policy{}, hashResolver{}), refusedPrefixes(false)},
		{mustGuard(f, netguard.Policy{DenyLoopback: true, DenyPrivate: true}, hashResolver{}), refusedPrefixes(true)},
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, gd := range guards {
			err := gd.g.CheckURL(context.Background(), raw)
			litErr := gd.g.CheckURLLiteral(raw)
			if litErr != nil && reasonOf(litErr) != "" && reasonOf(err) == "" {
				t.Fatalf("CheckURLLiteral(%q) refuses (%v) what CheckURL does not (%v)", raw, litErr, err)
			}
			if err != nil {
				if strings.Contains(err.Error(), "@") && strings.Contains(raw, "@") {
					if u, perr := url.Parse(raw); perr == nil && u.User != nil && u.User.String() != "" &&
						strings.Contains(err.Error(), u.User.String()+"@") {
						t.Fatalf("CheckURL(%q) = %q: it repeats the userinfo", raw, err)
					}
				}
				continue
			}
			u, perr := url.Parse(raw)
			if perr != nil {
				t.Fatalf("CheckURL(%q) allowed a URL that does not parse: %v", raw, perr)
			}
			if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
				t.Fatalf("CheckURL(%q) allowed scheme %q", raw, u.Scheme)
			}
			host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
			if host == "" {
				t.Fatalf("CheckURL(%q) allowed an empty host", raw)
			}
			if slices.Contains(metadataNameSet, host) {
				t.Fatalf("CheckURL(%q) allowed the metadata name %q", raw, host)
			}
			var addrs []netip.Addr
			if a, aerr := netip.ParseAddr(strings.TrimSuffix(u.Hostname(), ".")); aerr == nil {
				addrs = []netip.Addr{a}
			} else {
				last := host[strings.LastIndex(host, ".")+1:]
				hex, isHex := strings.CutPrefix(strings.ToLower(last), "0x")
				if last != "" && (strings.Trim(last, "0123456789") == "" || isHex && strings.Trim(hex, "0123456789abcdef") == "") {
					t.Fatalf("CheckURL(%q) allowed the host %q, which URL parsers read as an IPv4 address", raw, host)
				}
				addrs, _ = hashResolver{}.LookupNetIP(context.Background(), "ip", host)
			}
			for _, a := range addrs {
				if refused(a, gd.refuse) {
					t.Fatalf("CheckURL(%q) allowed %s", raw, a)
				}
			}
		}
	})
}
