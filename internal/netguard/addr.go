package netguard

import (
	"net/netip"
	"strings"
)

// Reason says why a destination is refused. The values are stable: they are
// part of the API's error details.
type Reason string

// The reasons a destination is refused.
const (
	// ReasonScheme: the URL is not http or https.
	ReasonScheme Reason = "scheme"
	// ReasonUnspecified: 0.0.0.0/8 or ::, which the kernel treats as "this
	// host" and so reaches loopback services by another name.
	ReasonUnspecified Reason = "unspecified"
	// ReasonMulticast: multicast or the IPv4 limited broadcast address.
	ReasonMulticast Reason = "multicast"
	// ReasonMetadata: a cloud instance metadata service, by address or host name.
	ReasonMetadata Reason = "metadata"
	// ReasonLinkLocal: 169.254.0.0/16 or fe80::/10.
	ReasonLinkLocal Reason = "link_local"
	// ReasonLoopback: 127.0.0.0/8, ::1 or a localhost name, with
	// Policy.DenyLoopback.
	ReasonLoopback Reason = "loopback"
	// ReasonPrivate: RFC 1918, shared (100.64.0.0/10) or IPv6 unique and
	// site-local addresses, with Policy.DenyPrivate.
	ReasonPrivate Reason = "private"
	// ReasonAmbiguousLiteral: a host that is not a standard IP literal but
	// that some resolvers read as one ("2852039166", "0251.0376.0251.0376",
	// "0xa9fea9fe", "127.1"): what it reaches depends on who parses it.
	ReasonAmbiguousLiteral Reason = "ambiguous_ip_literal"
)

// always reports whether r cannot be allowed by any setting.
func (r Reason) always() bool {
	switch r {
	case ReasonScheme, ReasonUnspecified, ReasonMulticast, ReasonAmbiguousLiteral:
		return true
	}
	return false
}

// describe is r as a noun phrase for messages.
func (r Reason) describe() string {
	switch r {
	case ReasonScheme:
		return "not an http or https URL"
	case ReasonUnspecified:
		return "an unspecified address (it reaches this host)"
	case ReasonMulticast:
		return "a multicast or broadcast address"
	case ReasonMetadata:
		return "a cloud metadata endpoint (it hands out instance credentials)"
	case ReasonLinkLocal:
		return "a link-local address (where cloud metadata services live)"
	case ReasonLoopback:
		return "a loopback address"
	case ReasonPrivate:
		return "a private network address"
	case ReasonAmbiguousLiteral:
		return "a non-standard IP address literal (write it as a.b.c.d or in IPv6 notation)"
	}
	return string(r)
}

// metadataAddrs are instance metadata services that are not link-local,
// or are link-local but deserve the clearer reason.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean, ...
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata and credentials
	netip.MustParseAddr("fd00:ec2::254"),   // AWS IMDS over IPv6 (Nitro)
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("168.63.129.16"),   // Azure WireServer
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud (legacy)
}

// metadataNames are host names of metadata services, compared after
// lower-casing and dropping a trailing dot. Their addresses are checked as
// well; the names give a clear error before any resolution and cover
// resolvers that map them to addresses not listed above.
var metadataNames = []string{
	"metadata",
	"metadata.google.internal",
	"metadata.goog",
	"metadata.azure.internal",
	"instance-data",
	"instance-data.ec2.internal",
	"metadata.tencentyun.com",
	"metadata.platformequinix.com",
}

// privatePrefixes extend netip.Addr.IsPrivate (RFC 1918 and fc00::/7).
var privatePrefixes = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space (carrier NAT, Tailscale, some clusters)
	netip.MustParsePrefix("fec0::/10"),     // deprecated IPv6 site-local
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	broadcast   = netip.MustParseAddr("255.255.255.255")

	// IPv6 ranges that carry an IPv4 address, which is what they reach.
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215
	sixToFour      = netip.MustParsePrefix("2002::/16")      // RFC 3056
	teredo         = netip.MustParsePrefix("2001::/32")      // RFC 4380
	v4Compatible   = netip.MustParsePrefix("::/96")          // deprecated RFC 4291 2.5.5.1
	v4Translated   = netip.MustParsePrefix("::ffff:0:0:0/96")
)

// normalize strips a zone and unmaps an IPv4-mapped IPv6 address, so that
// ::ffff:169.254.169.254 is judged as 169.254.169.254.
func normalize(a netip.Addr) netip.Addr {
	return a.WithZone("").Unmap()
}

// classify returns why a is refused by the rules that do not depend on the
// allow list's host names, or "" when a is acceptable. It does not look at
// embedded IPv4 addresses; see embedded.
func (g *Guard) classify(a netip.Addr) Reason {
	switch {
	case a.IsUnspecified() || (a.Is4() && thisNetwork.Contains(a)):
		return ReasonUnspecified
	case a.IsMulticast() || a == broadcast:
		return ReasonMulticast
	case g.allowedAddr(a):
		return ""
	}
	for _, m := range metadataAddrs {
		if a == m {
			return ReasonMetadata
		}
	}
	switch {
	case a.IsLinkLocalUnicast():
		return ReasonLinkLocal
	case a.IsLoopback():
		if g.p.DenyLoopback {
			return ReasonLoopback
		}
		return ""
	case isPrivate(a):
		if g.p.DenyPrivate {
			return ReasonPrivate
		}
		return ""
	}
	return ""
}

func isPrivate(a netip.Addr) bool {
	if a.IsPrivate() {
		return true
	}
	for _, p := range privatePrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// embedded returns the IPv4 addresses an IPv6 address carries and would
// reach through a translator or tunnel: NAT64 (well-known and local-use
// prefixes), 6to4, Teredo (server and client), IPv4-compatible and
// IPv4-translated forms. IPv4-mapped addresses are unmapped by normalize.
func embedded(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(i, j, k, l int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[j], b[k], b[l]}) }
	switch {
	case nat64WellKnown.Contains(a), v4Translated.Contains(a):
		return []netip.Addr{v4(12, 13, 14, 15)}
	case nat64Local.Contains(a):
		// RFC 6052 2.2 for a /48 prefix: bits 48-63, then the u octet
		// (64-71), then bits 72-87.
		return []netip.Addr{v4(6, 7, 9, 10)}
	case sixToFour.Contains(a):
		return []netip.Addr{v4(2, 3, 4, 5)}
	case teredo.Contains(a):
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{v4(4, 5, 6, 7), client}
	case v4Compatible.Contains(a) && !a.IsLoopback() && !a.IsUnspecified():
		return []netip.Addr{v4(12, 13, 14, 15)}
	}
	return nil
}

// endsInNumber reports a host whose last label is a number (decimal, or
// hexadecimal with 0x), which the WHATWG URL standard, and with it browsers
// and many URL libraries, parse as an IPv4 address: "2852039166",
// "0xa9fea9fe", "0251.0376.0251.0376", "127.1". No top-level domain is
// numeric, so such a host is never a real name; standard dotted quads are
// parsed by netip before this is asked.
func endsInNumber(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if hex, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// canonicalHost lower-cases host and drops one trailing dot, the forms
// under which resolvers treat names alike.
func canonicalHost(host string) string {
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// isLocalhostName reports a name that RFC 6761 reserves for loopback.
func isLocalhostName(host string) bool {
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}
