// Package netguard decides which network destinations the gateway may
// reach when it fetches a URL on behalf of its configuration or its callers
// (upstream MCP servers, their health checks, JWKS, embeddings, an LLM
// classifier): a guard against server-side request forgery.
//
// A [Guard] refuses, by default, link-local addresses (169.254.0.0/16,
// fe80::/10) and cloud metadata endpoints by address and by host name;
// always refuses unspecified, multicast and broadcast addresses and
// non-standard IP literals; and refuses loopback and private ranges only
// when the [Policy] says so. An allow list of addresses, prefixes and host
// names wins over every rule that a setting can change.
//
// The checks run twice. [Guard.CheckURL] gives a clear error early, when a
// URL is registered or configured. The transports built by
// [Guard.Transport] check again at connect time: the dialer resolves the
// host itself, refuses it if any answer is refused, and dials the checked
// address, never the name, so a DNS answer that changes between the two
// checks (rebinding) gains nothing. Every redirect hop is a new dial, and
// [Guard.CheckRedirect] also refuses the hop's URL and caps the hops.
//
// A guarded transport uses no proxy unless [Options.Proxy] is set, because
// a proxy makes the dial go to the proxy, not the target; with a proxy the
// target is checked as far as the gateway can resolve it (see
// [Options.Proxy]).
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// ErrBlocked is matched (errors.Is) by every [*BlockedError].
var ErrBlocked = errors.New("outbound request blocked")

// BlockedError is a destination refused by the guard. Its message names
// the host and address and says which setting would allow it; it never
// contains the URL's path, query or credentials.
type BlockedError struct {
	// Host is the host as requested: a name or an IP literal ("" when the
	// URL's scheme was refused).
	Host string
	// Addr is the refused address: the literal, an answer for Host, or the
	// IPv4 address embedded in an IPv6 one (Via is then the IPv6 address).
	// It is the zero Addr when the name itself was refused.
	Addr netip.Addr
	// Via is the IPv6 address that carries Addr (NAT64, 6to4, Teredo);
	// zero otherwise.
	Via    netip.Addr
	Reason Reason
	// Scheme is the refused scheme, for ReasonScheme.
	Scheme string

	resolved bool // Addr is a DNS answer for Host
}

// Error reads like `outbound request to "evil.example" refused: it resolves
// to 169.254.169.254, a link-local address (...); to allow it on purpose,
// add it to settings.outbound_allow`.
func (e *BlockedError) Error() string {
	var b strings.Builder
	b.WriteString("outbound request ")
	if e.Reason == ReasonScheme {
		fmt.Fprintf(&b, "with scheme %q refused: only http and https URLs may be fetched", e.Scheme)
		return b.String()
	}
	fmt.Fprintf(&b, "to %q refused: ", e.Host)
	switch {
	case !e.Addr.IsValid():
		b.WriteString("it is ")
	case e.Via.IsValid():
		fmt.Fprintf(&b, "%s carries %s, ", e.Via, e.Addr)
	case e.resolved:
		fmt.Fprintf(&b, "it resolves to %s, ", e.Addr)
	case e.Addr.String() != e.Host:
		fmt.Fprintf(&b, "it is %s, ", e.Addr) // a mapped or zoned literal
	default:
		b.WriteString("it is ")
	}
	b.WriteString(e.Reason.describe())
	b.WriteString("; ")
	b.WriteString(e.Hint())
	return b.String()
}

// Hint says which setting allows the destination, or that none does.
func (e *BlockedError) Hint() string {
	switch e.Reason {
	case ReasonLoopback:
		return "loopback is refused because settings.outbound_deny_loopback is true; set it to false, or add the address to settings.outbound_allow"
	case ReasonPrivate:
		return "private ranges are refused because settings.outbound_deny_private is true; set it to false, or add the address or range to settings.outbound_allow"
	case ReasonMetadata, ReasonLinkLocal:
		return "to allow it on purpose, add the address or host name to settings.outbound_allow"
	}
	return "no setting allows it"
}

// Is makes errors.Is(err, ErrBlocked) true.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// Policy says which destinations are refused. The zero value is the
// default: link-local and metadata refused, loopback and private allowed
// (local servers and in-cluster services are the common case).
type Policy struct {
	// DenyPrivate refuses 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16,
	// 100.64.0.0/10, fc00::/7 and fec0::/10 (settings.outbound_deny_private).
	DenyPrivate bool
	// DenyLoopback refuses 127.0.0.0/8, ::1 and localhost names
	// (settings.outbound_deny_loopback).
	DenyLoopback bool
	// Allow lists destinations that are allowed even when a rule above or
	// the link-local and metadata defaults refuse them
	// (settings.outbound_allow): IP addresses ("169.254.169.254"), prefixes
	// ("10.1.0.0/16", "fd00::/8"), host names ("vault.internal") and
	// wildcard names ("*.corp.example", which matches every name under
	// corp.example but not corp.example itself). An allowed name is allowed
	// whatever it resolves to. Nothing allows an unspecified, multicast or
	// broadcast address, a non-standard IP literal or a scheme other than
	// http and https.
	Allow []string
}

// Resolver looks up the addresses of a host; *net.Resolver is one.
// network is "ip", "ip4" or "ip6".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard applies a [Policy]. It is immutable and safe for concurrent use.
type Guard struct {
	p        Policy
	nets     []netip.Prefix
	names    []string // exact, canonical
	suffixes []string // ".corp.example" from "*.corp.example"
	resolver Resolver
	dialer   *net.Dialer
	proxy    func(*http.Request) (*url.URL, error)
}

// New compiles p. It fails when an Allow entry is neither an address, a
// prefix nor a host name; [ValidateAllow] gives the same verdict per entry.
// A nil opts means the defaults of [Options].
func New(p Policy, opts *Options) (*Guard, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	g := &Guard{p: p, resolver: o.Resolver, dialer: o.Dialer, proxy: o.Proxy}
	g.p.Allow = slices.Clone(p.Allow)
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.dialer == nil {
		// http.DefaultTransport's dialer settings.
		g.dialer = &net.Dialer{Timeout: defaultDialTimeout, KeepAlive: defaultDialTimeout}
	}
	for i, entry := range p.Allow {
		kind, err := parseAllow(entry)
		if err != nil {
			return nil, fmt.Errorf("allow entry %d: %w", i+1, err)
		}
		switch v := kind.(type) {
		case netip.Prefix:
			g.nets = append(g.nets, v)
		case string:
			if rest, ok := strings.CutPrefix(v, "*."); ok {
				g.suffixes = append(g.suffixes, "."+rest)
			} else {
				g.names = append(g.names, v)
			}
		}
	}
	return g, nil
}

// ValidateAllow checks one Allow entry, for configuration errors that point
// at the entry.
func ValidateAllow(entry string) error {
	_, err := parseAllow(entry)
	return err
}

// parseAllow returns a netip.Prefix (an address is a full-length prefix)
// or a canonical host name pattern.
func parseAllow(entry string) (any, error) {
	s := strings.TrimSpace(entry)
	if s == "" {
		return nil, errors.New("empty entry")
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a valid CIDR prefix (e.g. 10.0.0.0/8, fd00::/8)", entry)
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			// ::ffff:10.0.0.0/104 is 10.0.0.0/8: addresses are unmapped
			// before they are compared.
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	if a, err := netip.ParseAddr(s); err == nil {
		a = normalize(a)
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	name := canonicalHost(s)
	if endsInNumber(name) {
		return nil, fmt.Errorf("%q is not a standard IP address: write it as a.b.c.d", entry)
	}
	pattern := strings.TrimPrefix(name, "*.")
	if !validHostName(pattern) {
		return nil, fmt.Errorf("%q is not an IP address, a CIDR prefix or a host name (\"*.example.com\" for a whole domain)", entry)
	}
	return name, nil
}

// validHostName accepts letters, digits, hyphens and underscores in
// dot-separated labels of at most 63 bytes.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// allowedAddr reports whether a is in an allowed prefix.
func (g *Guard) allowedAddr(a netip.Addr) bool {
	for _, p := range g.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// allowedName reports whether the canonical name host is allowed by name.
func (g *Guard) allowedName(host string) bool {
	if slices.Contains(g.names, host) {
		return true
	}
	for _, s := range g.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// CheckAddr checks one address, as the dialer does before connecting to
// it. A nil result means it may be dialled.
func (g *Guard) CheckAddr(a netip.Addr) error {
	if b := g.checkAddr(a, false); b != nil {
		b.Host = a.String()
		return b
	}
	return nil
}

// checkAddr judges a; nameAllowed says the host name that led to it is on
// the allow list, which then wins over every rule a setting can change.
func (g *Guard) checkAddr(a netip.Addr, nameAllowed bool) *BlockedError {
	a = normalize(a)
	r := g.classify(a)
	if r == "" || (nameAllowed && !r.always()) {
		if nameAllowed || g.allowedAddr(a) {
			return nil
		}
		for _, e := range embedded(a) {
			if b := g.checkAddr(e, false); b != nil {
				b.Via = a
				return b
			}
		}
		return nil
	}
	return &BlockedError{Addr: a, Reason: r}
}

// hostVerdict is what can be said of a host without resolving it.
type hostVerdict struct {
	host        string     // canonical
	addr        netip.Addr // valid when host is an IP literal
	nameAllowed bool       // the name is on the allow list
}

// checkHost judges host without resolving it: IP literals entirely, names
// against the metadata names, localhost and the allow list.
func (g *Guard) checkHost(host string) (hostVerdict, error) {
	h := canonicalHost(host)
	v := hostVerdict{host: h}
	// Parsed from host, not h: a zone name is case-sensitive. Brackets
	// are gone already (url.URL.Hostname, net.SplitHostPort); one left
	// over makes a name that no resolver will answer.
	if a, err := netip.ParseAddr(strings.TrimSuffix(host, ".")); err == nil {
		v.addr = a
		if b := g.checkAddr(a, false); b != nil {
			b.Host = host
			return v, b
		}
		return v, nil
	}
	if endsInNumber(h) {
		return v, &BlockedError{Host: host, Reason: ReasonAmbiguousLiteral}
	}
	if g.allowedName(h) {
		v.nameAllowed = true
		return v, nil
	}
	if slices.Contains(metadataNames, h) {
		return v, &BlockedError{Host: host, Reason: ReasonMetadata}
	}
	if g.p.DenyLoopback && isLocalhostName(h) {
		return v, &BlockedError{Host: host, Reason: ReasonLoopback}
	}
	return v, nil
}

// CheckHost checks a host name or IP literal: a literal by itself, a name
// against the metadata names and the allow list and then every address it
// resolves to. A failed resolution is returned as an error that is not
// [ErrBlocked]: the destination is unknown, not refused.
func (g *Guard) CheckHost(ctx context.Context, host string) error {
	_, _, err := g.resolve(ctx, "ip", host)
	return err
}

// resolve returns the addresses to dial for host, every one of them
// checked, and whether the name is on the allow list. A refused answer
// refuses the host, so that a name cannot smuggle a metadata address among
// harmless ones.
func (g *Guard) resolve(ctx context.Context, network, host string) ([]netip.Addr, bool, error) {
	v, err := g.checkHost(host)
	if err != nil {
		return nil, false, err
	}
	if v.addr.IsValid() {
		return []netip.Addr{v.addr}, false, nil
	}
	if v.host == "" {
		return nil, false, errors.New("empty host")
	}
	addrs, err := g.resolver.LookupNetIP(ctx, network, v.host)
	if err != nil {
		return nil, false, fmt.Errorf("resolving %q: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, false, fmt.Errorf("resolving %q: no addresses", host)
	}
	for _, a := range addrs {
		if b := g.checkAddr(a, v.nameAllowed); b != nil {
			b.Host, b.resolved = host, true
			return nil, false, b
		}
	}
	return addrs, v.nameAllowed, nil
}

// CheckURL checks a URL before it is stored or used: the scheme must be
// http or https, and the host must pass [Guard.CheckHost]. A refusal is a
// [*BlockedError]; a URL that does not parse, has no host or whose host
// does not resolve gives another error (callers that register URLs ahead
// of the DNS records may accept those: the dialer checks again).
func (g *Guard) CheckURL(ctx context.Context, rawURL string) error {
	u, err := g.parseURL(rawURL)
	if err != nil {
		return err
	}
	return g.CheckHost(ctx, u.Hostname())
}

// CheckURLLiteral is [Guard.CheckURL] without resolving: the scheme, IP
// literals, metadata and allowed names. It suits places that must not wait
// for DNS (a config file read at start, a redirect about to be dialled
// through a guarded transport anyway).
func (g *Guard) CheckURLLiteral(rawURL string) error {
	u, err := g.parseURL(rawURL)
	if err != nil {
		return err
	}
	_, err = g.checkHost(u.Hostname())
	return err
}

// CheckConfigured refuses at start a URL of the config file (field names
// it) that the guard refuses by scheme, address literal or name; "" passes.
// It does not resolve names, so that a slow or absent DNS cannot hold the
// start; the dialer checks every address it connects to anyway.
func (g *Guard) CheckConfigured(field, rawURL string) error {
	if rawURL == "" {
		return nil
	}
	if err := g.CheckURLLiteral(rawURL); errors.Is(err, ErrBlocked) {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

func (g *Guard) parseURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse's message repeats the URL, credentials included.
		return nil, errors.New("invalid URL")
	}
	return u, g.checkURL(u)
}

// checkURL checks the scheme and the presence of a host.
func (g *Guard) checkURL(u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return &BlockedError{Reason: ReasonScheme, Scheme: u.Scheme}
	}
	if u.Hostname() == "" {
		return errors.New("URL has no host")
	}
	return nil
}

// LoopbackAddr reports whether a listen address (host:port, or a host)
// only accepts local connections.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
