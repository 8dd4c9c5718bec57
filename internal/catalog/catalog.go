// Package catalog is the gateway's aggregated namespace: every upstream
// server's tools, resources, resource templates and prompts, namespaced,
// validated, and published as an immutable [Snapshot].
//
// Reads are hot (every tools/call resolves a name) and writes are rare
// (discovery, status changes), so the current snapshot sits behind an
// atomic pointer: readers never lock, writers build a complete new snapshot
// and swap it in. The package is pure logic: no I/O and no goroutines.
//
// # Naming
//
// A tool or prompt is exposed as prefix + separator + original name, where
// the prefix defaults to the server name and the separator is "." (or "__"
// for clients whose LLM API rejects dots). An empty prefix exposes the
// original name unchanged. Lookups accept both separator forms, so a caller
// configured for the other form still resolves.
//
// A namespaced tool name longer than [Options.MaxNameLen] is shortened
// deterministically: its first MaxNameLen-9 bytes are kept and "_" plus the
// first 8 hex digits of the SHA-256 of the full name are appended, so the
// result is exactly MaxNameLen bytes long. The result depends only on the
// full name, never on the order in which servers were registered, so a name
// stays stable across restarts and replicas. Lookups also accept the full,
// unshortened name.
//
// Resource URIs are namespaced as prefix + "+" + original URI (for example
// "demo+demo://readme"), which keeps them valid URIs (the prefix becomes
// part of the scheme) and reversible (see [Snapshot.ResolveURI]).
package catalog

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
)

// Options configure naming. A nil *Options means the defaults.
type Options struct {
	// Separator joins prefix and original name: "." (default) or "__".
	Separator string
	// MaxNameLen is the longest namespaced tool name handed to clients
	// (default 64, the limit of several LLM APIs); longer names are shortened
	// as described in the package documentation. It must be at least
	// [MinNameLen].
	MaxNameLen int
}

const (
	// DefaultMaxNameLen is the default [Options.MaxNameLen].
	DefaultMaxNameLen = 64
	// MinNameLen is the smallest accepted [Options.MaxNameLen]: the hash
	// suffix of a shortened name takes 9 bytes and the rest must still say
	// something.
	MinNameLen = 16
	// MaxToolNameLen is the longest original tool name accepted from an
	// upstream (the MCP specification's limit).
	MaxToolNameLen = 128
)

// Catalog holds the current [Snapshot]. It is safe for concurrent use:
// readers load the snapshot without locking, writers are serialized.
type Catalog struct {
	sep, altSep string
	maxLen      int

	mu      sync.Mutex // serializes writers; guards schemas
	cur     atomic.Pointer[Snapshot]
	schemas schemaCache

	subMu   sync.Mutex
	subs    []subscriber
	nextSub uint64
}

type subscriber struct {
	id uint64
	fn func(old, new *Snapshot)
}

// New returns an empty catalog. It panics if opts hold an unknown separator
// or a MaxNameLen below [MinNameLen]: config validation must catch those
// before a catalog is built.
func New(opts *Options) *Catalog {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Separator == "" {
		o.Separator = "."
	}
	if o.MaxNameLen == 0 {
		o.MaxNameLen = DefaultMaxNameLen
	}
	c := &Catalog{sep: o.Separator, maxLen: o.MaxNameLen, schemas: schemaCache{}}
	switch o.Separator {
	case ".":
		c.altSep = "__"
	case "__":
		c.altSep = "."
	default:
		panic(fmt.Sprintf("catalog: separator must be \".\" or \"__\", got %q", o.Separator))
	}
	if o.MaxNameLen < MinNameLen {
		panic(fmt.Sprintf("catalog: MaxNameLen must be at least %d, got %d", MinNameLen, o.MaxNameLen))
	}
	c.cur.Store(newSnapshot(0, c.sep, map[string]*serverItems{}))
	return c
}

// Snapshot returns the current immutable snapshot (never nil). Hold on to
// it for the duration of one operation to get a consistent view.
func (c *Catalog) Snapshot() *Snapshot { return c.cur.Load() }

// Set replaces everything the catalog holds for entry.Server and returns the
// items it rejected (tools with Kind [KindTool], and any resource, template
// or prompt that could not be served). Rejected items do not stop the rest
// of the server's items from registering.
//
// A name collision with another server leaves the catalog unchanged and
// returns a *[RegistrationError]. An invalid server name or prefix is an
// error too. Setting an entry identical to the current one (same
// definitions, same availability) is not a change: no new version, no
// notification.
func (c *Catalog) Set(entry Entry) ([]Rejected, error) {
	if !validServerName(entry.Server) {
		return nil, fmt.Errorf("setting server %q: invalid server name (want ^[a-z0-9][a-z0-9_-]*$)", entry.Server)
	}
	prefix := entry.Server
	if entry.Prefix != nil {
		prefix = *entry.Prefix
	}
	if prefix != "" && !validPrefix(prefix) {
		return nil, fmt.Errorf("setting server %q: invalid prefix %q (want empty or ^[A-Za-z0-9][A-Za-z0-9_.-]*$)", entry.Server, prefix)
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	items := c.build(entry, prefix)
	old := c.cur.Load()
	if err := old.checkCollisions(items); err != nil {
		return nil, err
	}
	if prev, ok := old.servers[entry.Server]; ok && prev.fingerprint == items.fingerprint && prev.available == items.available {
		return slices.Clone(prev.rejected), nil
	}
	servers := maps.Clone(old.servers)
	servers[entry.Server] = items
	c.swap(old, newSnapshot(old.version+1, c.sep, servers))
	return slices.Clone(items.rejected), nil
}

// SetAvailable flips the availability of a server's items without
// re-validating them: status changes are frequent and do not change
// definitions. Unknown servers and unchanged availability are no-ops.
func (c *Catalog) SetAvailable(server string, available bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.cur.Load()
	prev, ok := old.servers[server]
	if !ok || prev.available == available {
		return
	}
	servers := maps.Clone(old.servers)
	servers[server] = prev.withAvailable(available)
	c.swap(old, newSnapshot(old.version+1, c.sep, servers))
}

// Remove drops a server and everything it offered. It is a no-op if the
// server is unknown.
func (c *Catalog) Remove(server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.cur.Load()
	if _, ok := old.servers[server]; !ok {
		return
	}
	servers := maps.Clone(old.servers)
	delete(servers, server)
	c.swap(old, newSnapshot(old.version+1, c.sep, servers))
}

// Subscribe registers fn to be called with the old and new snapshot after
// every change. Calls are synchronous, in subscription order, under the
// writer lock and after the swap, so subscribers see changes in version
// order; fn must therefore be quick and must not call the catalog's writers
// (Set, SetAvailable, Remove), which would deadlock. Reading
// [Catalog.Snapshot] and calling cancel are fine. cancel is idempotent.
func (c *Catalog) Subscribe(fn func(old, new *Snapshot)) (cancel func()) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	c.nextSub++
	id := c.nextSub
	c.subs = append(c.subs, subscriber{id: id, fn: fn})
	return func() {
		c.subMu.Lock()
		defer c.subMu.Unlock()
		c.subs = slices.DeleteFunc(c.subs, func(s subscriber) bool { return s.id == id })
	}
}

// swap publishes next and notifies subscribers. Callers hold c.mu.
func (c *Catalog) swap(old, next *Snapshot) {
	c.cur.Store(next)
	c.subMu.Lock()
	subs := slices.Clone(c.subs)
	c.subMu.Unlock()
	for _, s := range subs {
		s.fn(old, next)
	}
}

var (
	serverNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	prefixRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
)

func validServerName(s string) bool { return serverNameRE.MatchString(s) }

// validPrefix keeps prefixes inside the tool-name alphabet and free of "+",
// which [Snapshot.ResolveURI] splits on.
func validPrefix(s string) bool { return prefixRE.MatchString(s) }
