package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// defaultDialTimeout is http.DefaultTransport's connect timeout and
// keep-alive period.
const defaultDialTimeout = 30 * time.Second

// MaxRedirects is how many redirects [Guard.CheckRedirect] follows: fewer
// than net/http's 10, because every hop is a chance to point elsewhere and
// no endpoint the gateway fetches needs a chain.
const MaxRedirects = 5

// Options are the optional dependencies of [New]; nil means all defaults.
type Options struct {
	// Resolver answers the lookups of [Guard.CheckHost] and of the dialer;
	// nil means net.DefaultResolver. Tests inject fixed answers here.
	Resolver Resolver
	// Dialer connects to the checked addresses (timeouts, keep-alive); nil
	// means http.DefaultTransport's settings. Its Resolver is never used:
	// the guard resolves and dials addresses.
	Dialer *net.Dialer
	// Proxy is the proxy function of the transports the guard builds; nil
	// means no proxy, whatever HTTP_PROXY says. With one (the gateway sets
	// http.ProxyFromEnvironment when settings.outbound_proxy_from_env is
	// true), the dial goes to the proxy and the dialer checks the proxy's
	// address; the target is checked before the request by name and, when
	// it resolves here, by address. What the proxy itself resolves is out
	// of the gateway's sight, so a name that resolves only there is let
	// through after the name checks.
	Proxy func(*http.Request) (*url.URL, error)
}

// DialContext is a net.Dialer.DialContext that resolves the host with the
// guard's resolver, refuses it if any answer is refused, and dials the
// checked addresses (never the name, so nothing resolves it again), racing
// the two address families as net.Dialer does. A refusal is a *net.OpError with Op "dial" wrapping the
// [*BlockedError]: net/http and its callers see a dial that failed before
// anything was sent.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	fail := func(err error) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return fail(err)
	}
	lookup := "ip"
	switch network {
	case "tcp4", "udp4":
		lookup = "ip4"
	case "tcp6", "udp6":
		lookup = "ip6"
	}
	addrs, nameAllowed, err := g.resolve(ctx, lookup, host)
	if err != nil {
		return fail(err)
	}
	d := *g.dialer
	d.Resolver = nil
	d.Control = nil
	d.ControlContext = func(_ context.Context, network, address string, _ syscall.RawConn) error {
		return g.control(address, nameAllowed)
	}
	return dialParallel(ctx, &d, network, port, addrs)
}

// fallbackDelay is how long the first address family gets before the other
// one is tried in parallel, as net.Dialer's FallbackDelay default.
const fallbackDelay = 300 * time.Millisecond

// dialParallel dials the addresses of the first one's family in order and,
// after fallbackDelay or their failure, those of the other family in
// parallel: the Happy Eyeballs (RFC 8305) race that net.Dialer runs for a
// name, which the guard takes over by dialling addresses.
func dialParallel(ctx context.Context, d *net.Dialer, network, port string, addrs []netip.Addr) (net.Conn, error) {
	var primaries, fallbacks []netip.Addr
	for _, a := range addrs {
		if a.Unmap().Is4() == addrs[0].Unmap().Is4() {
			primaries = append(primaries, a)
		} else {
			fallbacks = append(fallbacks, a)
		}
	}
	if len(fallbacks) == 0 {
		return dialSerial(ctx, d, network, port, primaries)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		conn net.Conn
		err  error
	}
	results := make(chan result, 2)
	pending := 0
	start := func(list []netip.Addr) {
		pending++
		go func() {
			c, err := dialSerial(ctx, d, network, port, list)
			results <- result{c, err}
		}()
	}
	start(primaries)
	timer := time.NewTimer(fallbackDelay)
	defer timer.Stop()
	fallbackStarted := false
	var errs []error
	for {
		select {
		case <-timer.C:
			if !fallbackStarted {
				fallbackStarted = true
				start(fallbacks)
			}
		case r := <-results:
			pending--
			if r.err == nil {
				// The loser is cancelled; wait for it so that no dial
				// outlives this call, and close what it may have opened.
				cancel()
				for ; pending > 0; pending-- {
					if other := <-results; other.conn != nil {
						other.conn.Close()
					}
				}
				return r.conn, nil
			}
			errs = append(errs, r.err)
			if !fallbackStarted {
				fallbackStarted = true
				start(fallbacks)
			} else if pending == 0 {
				return nil, errors.Join(errs...)
			}
		}
	}
}

// dialSerial dials addrs in order until one connects.
func dialSerial(ctx context.Context, d *net.Dialer, network, port string, addrs []netip.Addr) (net.Conn, error) {
	var errs []error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// Control is a net.Dialer.Control that checks the address actually being
// connected to, for dialers that resolve names themselves. A guarded
// transport does not need it (its dialer connects only to checked
// addresses) but uses it as a second lock.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	return g.control(address, false)
}

func (g *Guard) control(address string, nameAllowed bool) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: connecting to %q: not an address", address)
	}
	if b := g.checkAddr(ap.Addr(), nameAllowed); b != nil {
		b.Host = ap.Addr().String()
		return b
	}
	return nil
}

// Transport returns a clone of base (nil means http.DefaultTransport) that
// dials through [Guard.DialContext] and uses [Options.Proxy] instead of
// base's proxy. base keeps its TLS, HTTP/2 and pool settings.
func (g *Guard) Transport(base *http.Transport) *http.Transport {
	if base == nil {
		base = http.DefaultTransport.(*http.Transport)
	}
	t := base.Clone()
	t.DialContext = g.DialContext
	t.Dial = nil //nolint:staticcheck // cleared so it cannot bypass DialContext
	t.DialTLSContext = nil
	t.DialTLS = nil //nolint:staticcheck // cleared so it cannot bypass DialContext
	t.Proxy = nil
	if g.proxy != nil {
		t.Proxy = g.proxyFor
	}
	return t
}

// proxyFor is the guarded transport's proxy function: the target is checked
// before the request goes to the proxy.
func (g *Guard) proxyFor(req *http.Request) (*url.URL, error) {
	pu, err := g.proxy(req)
	if err != nil || pu == nil {
		return pu, err
	}
	if err := g.checkURL(req.URL); err != nil {
		return nil, err
	}
	_, _, err = g.resolve(req.Context(), "ip", req.URL.Hostname())
	if errors.Is(err, ErrBlocked) {
		return nil, err
	}
	// Not resolvable here: the proxy may know names we do not, and the
	// name checks have passed.
	return pu, nil
}

// CheckRedirect is an http.Client.CheckRedirect that refuses a hop to a
// URL the guard refuses by scheme, literal address or name, and stops after
// [MaxRedirects] hops. Names are resolved and checked when the hop is
// dialled.
func (g *Guard) CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= MaxRedirects {
		return fmt.Errorf("stopped after %d redirects", MaxRedirects)
	}
	if err := g.checkURL(req.URL); err != nil {
		return err
	}
	_, err := g.checkHost(req.URL.Hostname())
	return err
}

// Client returns a client with a guarded transport, [Guard.CheckRedirect]
// and the given overall timeout (0 = none).
func (g *Guard) Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: g.Transport(nil), CheckRedirect: g.CheckRedirect, Timeout: timeout}
}
