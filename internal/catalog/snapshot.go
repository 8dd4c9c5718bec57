package catalog

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Snapshot is one immutable state of the catalog. All methods are safe for
// concurrent use and never block.
//
// Slices returned by a Snapshot are the snapshot's own storage, shared with
// every other reader: callers must not modify them (or the definitions
// they point to); clone before sorting or filtering in place.
type Snapshot struct {
	version uint64
	sep     string
	servers map[string]*serverItems
	names   []string // sorted server names

	tools     []Tool         // by Server, then Name
	toolIndex map[string]int // every name a tool answers to → index in tools

	held      []Tool         // tools held back (Entry.Held), by Server, then Name
	heldIndex map[string]int // every name a held tool answers to → index in held

	resources          []Resource
	resourceIndex      map[string]int   // namespaced URI → index in resources
	resourceByOriginal map[string][]int // original URI → indexes in resources

	templates     []Template
	templateRE    []*regexp.Regexp // original-template matchers, parallel to templates
	templateIndex map[string]int   // namespaced URI template → index in templates

	prompts     []Prompt
	promptIndex map[string]int // every name a prompt answers to → index in prompts

	prefixServers map[string][]string // non-empty prefix → servers using it, sorted
}

// newSnapshot assembles the global views and indexes from per-server items.
// Collision checks before the swap guarantee that no two servers claim the
// same key, so merging indexes never overwrites.
func newSnapshot(version uint64, sep string, servers map[string]*serverItems) *Snapshot {
	s := &Snapshot{
		version:            version,
		sep:                sep,
		servers:            servers,
		names:              slices.Sorted(maps.Keys(servers)),
		toolIndex:          map[string]int{},
		heldIndex:          map[string]int{},
		resourceIndex:      map[string]int{},
		resourceByOriginal: map[string][]int{},
		templateIndex:      map[string]int{},
		promptIndex:        map[string]int{},
		prefixServers:      map[string][]string{},
	}
	for _, name := range s.names {
		it := servers[name]
		if it.prefix != "" {
			s.prefixServers[it.prefix] = append(s.prefixServers[it.prefix], name)
		}
		base := len(s.tools)
		s.tools = append(s.tools, it.tools...)
		for k, i := range it.toolKeys {
			s.toolIndex[k] = base + i
		}
		base = len(s.held)
		s.held = append(s.held, it.held...)
		for k, i := range it.heldKeys {
			s.heldIndex[k] = base + i
		}
		for _, r := range it.resources {
			s.resourceIndex[r.URI] = len(s.resources)
			s.resourceByOriginal[r.OriginalURI] = append(s.resourceByOriginal[r.OriginalURI], len(s.resources))
			s.resources = append(s.resources, r)
		}
		for i, t := range it.templates {
			s.templateIndex[t.URITemplate] = len(s.templates)
			s.templates = append(s.templates, t)
			s.templateRE = append(s.templateRE, it.templateRE[i])
		}
		base = len(s.prompts)
		s.prompts = append(s.prompts, it.prompts...)
		for k, i := range it.promptKeys {
			s.promptIndex[k] = base + i
		}
	}
	return s
}

// Version increments on every change, so consumers can tell whether what
// they derived from an older snapshot is stale.
func (s *Snapshot) Version() uint64 { return s.version }

// Separator is the canonical separator of namespaced names.
func (s *Snapshot) Separator() string { return s.sep }

// Tools returns every tool served (not the [Snapshot.Held] ones), sorted by
// Server then Name. Do not modify.
func (s *Snapshot) Tools() []Tool { return s.tools }

// Tool finds a tool by the name a client uses: the canonical namespaced
// name, the same name with the other separator ("demo.echo" or
// "demo__echo"), or, for shortened names, the full unshortened name.
func (s *Snapshot) Tool(name string) (Tool, bool) {
	i, ok := s.toolIndex[name]
	if !ok {
		return Tool{}, false
	}
	return s.tools[i], true
}

// ToolByOriginal finds a tool by its server and upstream name, which is
// what an upstream's list_changed or a stored policy refers to.
func (s *Snapshot) ToolByOriginal(server, original string) (Tool, bool) {
	it, ok := s.servers[server]
	if !ok {
		return Tool{}, false
	}
	i, ok := it.byOriginal[original]
	if !ok {
		return Tool{}, false
	}
	return it.tools[i], true
}

// Held returns every tool held back (see [Entry.Held]), sorted by Server
// then Name. Held tools are in no other listing. Do not modify.
func (s *Snapshot) Held() []Tool { return s.held }

// HeldTool finds a held tool by any name [Snapshot.Tool] accepts.
func (s *Snapshot) HeldTool(name string) (Tool, bool) {
	i, ok := s.heldIndex[name]
	if !ok {
		return Tool{}, false
	}
	return s.held[i], true
}

// HeldByOriginal finds a held tool by its server and upstream name.
func (s *Snapshot) HeldByOriginal(server, original string) (Tool, bool) {
	it, ok := s.servers[server]
	if !ok {
		return Tool{}, false
	}
	i, ok := it.heldByOriginal[original]
	if !ok {
		return Tool{}, false
	}
	return it.held[i], true
}

// ServerTools returns a server's tools sorted by Name (nil for an unknown
// server). Do not modify.
func (s *Snapshot) ServerTools(server string) []Tool {
	if it, ok := s.servers[server]; ok {
		return it.tools
	}
	return nil
}

// Servers returns the names of the servers in the catalog, sorted. Do not
// modify.
func (s *Snapshot) Servers() []string { return s.names }

// AvailableServers returns the names of the available servers, sorted.
func (s *Snapshot) AvailableServers() []string {
	var out []string
	for _, n := range s.names {
		if s.servers[n].available {
			out = append(out, n)
		}
	}
	return out
}

// Rejected returns what the catalog refused from a server at its last
// [Catalog.Set], in upstream order. Do not modify.
func (s *Snapshot) Rejected(server string) []Rejected {
	if it, ok := s.servers[server]; ok {
		return it.rejected
	}
	return nil
}

// Resources returns every resource, sorted by Server then URI. Do not
// modify.
func (s *Snapshot) Resources() []Resource { return s.resources }

// Templates returns every resource template, sorted by Server then
// URITemplate. Do not modify.
func (s *Snapshot) Templates() []Template { return s.templates }

// Prompts returns every prompt, sorted by Server then Name. Do not modify.
func (s *Snapshot) Prompts() []Prompt { return s.prompts }

// Prompt finds a prompt by namespaced name in either separator form.
func (s *Snapshot) Prompt(name string) (Prompt, bool) {
	i, ok := s.promptIndex[name]
	if !ok {
		return Prompt{}, false
	}
	return s.prompts[i], true
}

// ResolveURI maps a URI a client asks for back to its server and the
// upstream's original URI. In order of precedence:
//
//  1. a listed resource's namespaced URI;
//  2. prefix + "+" + rest, where prefix (the text before the first "+") is
//     a known server prefix: rest belongs to that server, listed or not
//     (servers may serve resources they do not list). If several servers
//     share the prefix, the one whose resources or templates match rest;
//  3. an original URI that exactly matches a listed resource of exactly
//     one server, or else matches the URI templates of exactly one server.
//     This also covers unprefixed servers, whose URIs are their originals.
//
// Anything else, including an ambiguous match, is not resolved.
func (s *Snapshot) ResolveURI(uri string) (server, original string, ok bool) {
	if i, ok := s.resourceIndex[uri]; ok {
		r := s.resources[i]
		return r.Server, r.OriginalURI, true
	}
	if prefix, rest, found := strings.Cut(uri, "+"); found {
		switch servers := s.prefixServers[prefix]; len(servers) {
		case 0:
		case 1:
			return servers[0], rest, true
		default:
			if server, ok := s.matchOriginal(rest, servers); ok {
				return server, rest, true
			}
		}
	}
	if server, ok := s.matchOriginal(uri, nil); ok {
		return server, uri, true
	}
	return "", "", false
}

// matchOriginal finds the one server (among those in within, or any if
// within is nil) listing original as a resource, or else the one server
// with a template matching it.
func (s *Snapshot) matchOriginal(original string, within []string) (string, bool) {
	allowed := func(server string) bool { return within == nil || slices.Contains(within, server) }
	var found []string
	for _, i := range s.resourceByOriginal[original] {
		if srv := s.resources[i].Server; allowed(srv) && !slices.Contains(found, srv) {
			found = append(found, srv)
		}
	}
	if len(found) == 0 {
		for i, re := range s.templateRE {
			if srv := s.templates[i].Server; allowed(srv) && !slices.Contains(found, srv) && re.MatchString(original) {
				found = append(found, srv)
			}
		}
	}
	if len(found) != 1 {
		return "", false
	}
	return found[0], true
}

// NamespaceURI returns the URI clients see for a server's original URI,
// the inverse of [Snapshot.ResolveURI] (used to rewrite URIs inside
// results, e.g. resources/read contents). An unknown server's URIs are
// returned unchanged.
func (s *Snapshot) NamespaceURI(server, original string) string {
	it, ok := s.servers[server]
	if !ok {
		return original
	}
	return namespaceURI(it.prefix, original)
}

// checkCollisions reports it's names that another server already holds.
// The names of it.name itself are being replaced and do not count.
func (s *Snapshot) checkCollisions(it *serverItems) error {
	clashes := map[string][]string{} // other server → our colliding names
	note := func(other, name string) {
		if other != it.name {
			clashes[other] = append(clashes[other], name)
		}
	}
	// A held tool keeps its names: approving it must not collide.
	for _, own := range []struct {
		keys  map[string]int
		tools []Tool
	}{{it.toolKeys, it.tools}, {it.heldKeys, it.held}} {
		for key, i := range own.keys {
			if j, ok := s.toolIndex[key]; ok {
				note(s.tools[j].Server, own.tools[i].Name)
			}
			if j, ok := s.heldIndex[key]; ok {
				note(s.held[j].Server, own.tools[i].Name)
			}
		}
	}
	for key, i := range it.promptKeys {
		if j, ok := s.promptIndex[key]; ok {
			note(s.prompts[j].Server, it.prompts[i].Name)
		}
	}
	for _, r := range it.resources {
		if j, ok := s.resourceIndex[r.URI]; ok {
			note(s.resources[j].Server, r.URI)
		}
	}
	for _, t := range it.templates {
		if j, ok := s.templateIndex[t.URITemplate]; ok {
			note(s.templates[j].Server, t.URITemplate)
		}
	}
	if len(clashes) == 0 {
		return nil
	}
	other := slices.Min(slices.Collect(maps.Keys(clashes)))
	names := clashes[other]
	slices.Sort(names)
	return &RegistrationError{Server: it.name, Other: other, Names: slices.Compact(names)}
}
