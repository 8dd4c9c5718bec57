package catalog

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"regexp"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serverItems is everything one server contributes to a snapshot. It is
// immutable once built: snapshots share it until the server changes.
type serverItems struct {
	name, prefix string
	available    bool

	tools      []Tool         // sorted by Name
	toolKeys   map[string]int // every name a tool answers to → index in tools
	byOriginal map[string]int // original tool name → index in tools

	held           []Tool         // tools held back (Entry.Held), sorted by Name
	heldKeys       map[string]int // every name a held tool answers to → index in held
	heldByOriginal map[string]int // original tool name → index in held

	resources  []Resource       // sorted by URI
	templates  []Template       // sorted by URITemplate
	templateRE []*regexp.Regexp // matchers of the ORIGINAL templates, parallel to templates
	prompts    []Prompt         // sorted by Name
	promptKeys map[string]int   // every name a prompt answers to → index in prompts
	rejected   []Rejected       // in upstream order: tools, resources, templates, prompts

	// fingerprint covers everything but availability, so that rediscovering
	// an unchanged server is not a change.
	fingerprint [32]byte
}

// build validates and namespaces everything e offers. Callers hold c.mu
// (the schema cache is not otherwise synchronized).
func (c *Catalog) build(e Entry, prefix string) *serverItems {
	it := &serverItems{name: e.Server, prefix: prefix, available: e.Available}
	reject := func(kind Kind, name, reason string) {
		it.rejected = append(it.rejected, Rejected{Server: e.Server, OriginalName: name, Reason: reason, Kind: kind})
	}
	c.buildTools(it, e.Tools, e.Held, reject)
	buildResources(it, e.Resources, reject, c.sep)
	buildTemplates(it, e.Templates, reject, c.sep)
	c.buildPrompts(it, e.Prompts, reject)
	it.fingerprint = it.computeFingerprint()
	return it
}

type rejectFunc func(kind Kind, name, reason string)

func (c *Catalog) buildTools(it *serverItems, tools []*mcp.Tool, held map[string]bool, reject rejectFunc) {
	type accepted struct {
		tool    Tool
		aliases []string
	}
	var ok []accepted
	seen := map[string]bool{}
	claimed := map[string]string{} // lookup name → original name holding it
	for _, t := range tools {
		if t == nil {
			reject(KindTool, "", "definition is null")
			continue
		}
		if r := checkToolName(t.Name); r != "" {
			reject(KindTool, t.Name, r)
			continue
		}
		if seen[t.Name] {
			reject(KindTool, t.Name, "duplicate name: the server lists it more than once")
			continue
		}
		seen[t.Name] = true
		def, r := c.copyTool(t)
		if r != "" {
			reject(KindTool, t.Name, r)
			continue
		}
		canonical, aliases := c.toolNames(it.prefix, t.Name)
		if other := firstClaimed(claimed, canonical, aliases); other != "" {
			reject(KindTool, t.Name, fmt.Sprintf("namespaced name %q collides with tool %q of the same server", canonical, other))
			continue
		}
		claimed[canonical] = t.Name
		for _, a := range aliases {
			claimed[a] = t.Name
		}
		def.Name = canonical
		h, err := hashJSON(def)
		if err != nil {
			reject(KindTool, t.Name, fmt.Sprintf("definition does not encode as JSON: %v", err))
			continue
		}
		ok = append(ok, accepted{
			tool:    Tool{Name: canonical, OriginalName: t.Name, Server: it.name, Available: it.available, Def: def, Hash: h},
			aliases: aliases,
		})
	}
	slices.SortFunc(ok, func(a, b accepted) int { return cmp.Compare(a.tool.Name, b.tool.Name) })
	it.toolKeys = make(map[string]int, 3*len(ok))
	it.byOriginal = make(map[string]int, len(ok))
	it.heldKeys = map[string]int{}
	it.heldByOriginal = map[string]int{}
	for _, a := range ok {
		list, keys, byOriginal := &it.tools, it.toolKeys, it.byOriginal
		if held[a.tool.OriginalName] {
			list, keys, byOriginal = &it.held, it.heldKeys, it.heldByOriginal
		}
		i := len(*list)
		*list = append(*list, a.tool)
		keys[a.tool.Name] = i
		for _, alias := range a.aliases {
			keys[alias] = i
		}
		byOriginal[a.tool.OriginalName] = i
	}
	if it.tools == nil {
		it.tools = []Tool{}
	}
}

func firstClaimed(claimed map[string]string, canonical string, aliases []string) string {
	if o, ok := claimed[canonical]; ok {
		return o
	}
	for _, a := range aliases {
		if o, ok := claimed[a]; ok {
			return o
		}
	}
	return ""
}

func buildResources(it *serverItems, resources []*mcp.Resource, reject rejectFunc, sep string) {
	seen := map[string]bool{}
	for _, r := range resources {
		if r == nil {
			reject(KindResource, "", "definition is null")
			continue
		}
		ns := namespaceURI(it.prefix, r.URI)
		if reason := checkResourceURI(r.URI, ns); reason != "" {
			reject(KindResource, r.URI, reason)
			continue
		}
		if seen[r.URI] {
			reject(KindResource, r.URI, "duplicate uri: the server lists it more than once")
			continue
		}
		seen[r.URI] = true
		def := new(mcp.Resource)
		if err := copyJSON(r, def); err != nil {
			reject(KindResource, r.URI, err.Error())
			continue
		}
		def.URI = ns
		if def.Name != "" {
			def.Name = join(it.prefix, sep, def.Name)
		}
		it.resources = append(it.resources, Resource{URI: ns, OriginalURI: r.URI, OriginalName: r.Name, Server: it.name, Available: it.available, Def: def})
	}
	slices.SortFunc(it.resources, func(a, b Resource) int { return cmp.Compare(a.URI, b.URI) })
}

func buildTemplates(it *serverItems, templates []*mcp.ResourceTemplate, reject rejectFunc, sep string) {
	type accepted struct {
		t  Template
		re *regexp.Regexp
	}
	var ok []accepted
	seen := map[string]bool{}
	for _, t := range templates {
		if t == nil {
			reject(KindTemplate, "", "definition is null")
			continue
		}
		ns := namespaceURI(it.prefix, t.URITemplate)
		re, reason := compileTemplate(t.URITemplate, ns)
		if reason != "" {
			reject(KindTemplate, t.URITemplate, reason)
			continue
		}
		if seen[t.URITemplate] {
			reject(KindTemplate, t.URITemplate, "duplicate uriTemplate: the server lists it more than once")
			continue
		}
		seen[t.URITemplate] = true
		def := new(mcp.ResourceTemplate)
		if err := copyJSON(t, def); err != nil {
			reject(KindTemplate, t.URITemplate, err.Error())
			continue
		}
		def.URITemplate = ns
		if def.Name != "" {
			def.Name = join(it.prefix, sep, def.Name)
		}
		ok = append(ok, accepted{
			t:  Template{URITemplate: ns, OriginalURITemplate: t.URITemplate, OriginalName: t.Name, Server: it.name, Available: it.available, Def: def},
			re: re,
		})
	}
	slices.SortFunc(ok, func(a, b accepted) int { return cmp.Compare(a.t.URITemplate, b.t.URITemplate) })
	for _, a := range ok {
		it.templates = append(it.templates, a.t)
		it.templateRE = append(it.templateRE, a.re)
	}
}

func (c *Catalog) buildPrompts(it *serverItems, prompts []*mcp.Prompt, reject rejectFunc) {
	type accepted struct {
		p       Prompt
		aliases []string
	}
	var ok []accepted
	seen := map[string]bool{}
	for _, p := range prompts {
		if p == nil {
			reject(KindPrompt, "", "definition is null")
			continue
		}
		if p.Name == "" {
			reject(KindPrompt, "", "name is empty")
			continue
		}
		if seen[p.Name] {
			reject(KindPrompt, p.Name, "duplicate name: the server lists it more than once")
			continue
		}
		seen[p.Name] = true
		def := new(mcp.Prompt)
		if err := copyJSON(p, def); err != nil {
			reject(KindPrompt, p.Name, err.Error())
			continue
		}
		canonical, aliases := c.promptNames(it.prefix, p.Name)
		def.Name = canonical
		ok = append(ok, accepted{
			p:       Prompt{Name: canonical, OriginalName: p.Name, Server: it.name, Available: it.available, Def: def},
			aliases: aliases,
		})
	}
	slices.SortFunc(ok, func(a, b accepted) int { return cmp.Compare(a.p.Name, b.p.Name) })
	it.promptKeys = make(map[string]int, 2*len(ok))
	for i, a := range ok {
		it.prompts = append(it.prompts, a.p)
		// Within one server these never overlap: canonical names are
		// distinct, and the character after the shared prefix tells the
		// two separator forms apart.
		it.promptKeys[a.p.Name] = i
		for _, alias := range a.aliases {
			it.promptKeys[alias] = i
		}
	}
}

func (it *serverItems) computeFingerprint() [32]byte {
	h := sha256.New()
	field := func(s ...string) {
		for _, v := range s {
			fmt.Fprintf(h, "%d:%s", len(v), v)
		}
	}
	field("prefix", it.prefix)
	for _, t := range it.tools {
		field("tool", t.Hash)
	}
	for _, t := range it.held {
		field("held", t.Hash)
	}
	for _, r := range it.resources {
		field("resource", mustHash(r.Def))
	}
	for _, t := range it.templates {
		field("template", mustHash(t.Def))
	}
	for _, p := range it.prompts {
		field("prompt", mustHash(p.Def))
	}
	// Sorted, so that an upstream listing the same items in another order
	// is not a change.
	rejected := slices.Clone(it.rejected)
	slices.SortFunc(rejected, func(a, b Rejected) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.OriginalName, b.OriginalName), cmp.Compare(a.Reason, b.Reason))
	})
	for _, r := range rejected {
		field("rejected", string(r.Kind), r.OriginalName, r.Reason)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// mustHash hashes a definition that was just decoded from JSON, so encoding
// it again cannot fail.
func mustHash(v any) string {
	h, err := hashJSON(v)
	if err != nil {
		panic(fmt.Sprintf("catalog: re-encoding a decoded definition: %v", err))
	}
	return h
}

// withAvailable returns a copy of it with every item's availability set.
func (it *serverItems) withAvailable(available bool) *serverItems {
	n := *it
	n.available = available
	n.tools = slices.Clone(it.tools)
	for i := range n.tools {
		n.tools[i].Available = available
	}
	n.held = slices.Clone(it.held)
	for i := range n.held {
		n.held[i].Available = available
	}
	n.resources = slices.Clone(it.resources)
	for i := range n.resources {
		n.resources[i].Available = available
	}
	n.templates = slices.Clone(it.templates)
	for i := range n.templates {
		n.templates[i].Available = available
	}
	n.prompts = slices.Clone(it.prompts)
	for i := range n.prompts {
		n.prompts[i].Available = available
	}
	return &n
}
