package catalog

import (
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Entry is what one upstream server currently offers, as discovered. The
// definitions carry the upstream's ORIGINAL names and URIs; the catalog
// never mutates them, it works on deep copies.
type Entry struct {
	// Server is the server name (^[a-z0-9][a-z0-9_-]*$).
	Server string
	// Prefix is the namespace prefix: nil means Server, "" means unprefixed
	// (original names are exposed as is, so collisions become possible).
	Prefix *string
	// Available reports whether the server is connected. Items of an
	// unavailable server stay in the catalog, marked unavailable, so a call
	// can say "server X is down" instead of "unknown tool".
	Available bool
	Tools     []*mcp.Tool
	// Held names (by original name) the tools to hold back: they are
	// validated and namespaced like the others, and keep their names, but
	// are not listed or resolved; [Snapshot.HeldTool] finds them, so a call
	// can be told why the tool is not served (tool pinning quarantines a
	// tool whose definition changed this way).
	Held      map[string]bool
	Resources []*mcp.Resource
	Templates []*mcp.ResourceTemplate
	Prompts   []*mcp.Prompt
}

// Tool is one catalog tool.
type Tool struct {
	Name         string // namespaced (what clients see), e.g. "demo.echo"
	OriginalName string // as the upstream named it
	Server       string
	Available    bool
	// Def is a deep copy of the upstream definition with Name set to the
	// namespaced name and schemas decoded to plain JSON values
	// (map[string]any), as a client session would see them. It is shared by
	// every snapshot holding the tool: do not mutate it.
	Def *mcp.Tool
	// Hash is the hex SHA-256 of the canonical JSON of Def (object keys
	// sorted): it changes exactly when the definition clients see changes.
	Hash string
}

// Destructive reports the tool's explicit destructiveHint (a read-only
// tool is never destructive), which makes it high-risk for authorization.
// Per the MCP spec an absent hint means "may be destructive", but treating
// every unannotated tool as high-risk would demand an approval for nearly
// all of them: only an explicit true counts; names are matched by authz.
func (t Tool) Destructive() bool {
	a := t.Def
	if a == nil || a.Annotations == nil || a.Annotations.DestructiveHint == nil {
		return false
	}
	return *a.Annotations.DestructiveHint && !a.Annotations.ReadOnlyHint
}

// Kind says what sort of item a [Rejected] is.
type Kind string

// The kinds of catalog items.
const (
	KindTool     Kind = "tool"
	KindResource Kind = "resource"
	KindTemplate Kind = "template"
	KindPrompt   Kind = "prompt"
)

// Rejected is an item the catalog refused, with why, so the API can show an
// operator what an upstream offered but clients do not see.
type Rejected struct {
	Server string
	// OriginalName is the upstream's name for the item (the URI or URI
	// template for resources and templates).
	OriginalName string
	// Reason is human-readable and specific, e.g.
	// `inputSchema: type must be "object", got "string"`.
	Reason string
	// Kind is what was rejected (an addition to the original API, so that
	// rejected resources and prompts are reported rather than dropped).
	Kind Kind
}

// Resource is one catalog resource. Def.URI is URI and Def.Name is
// namespaced like a tool name. Def is shared between snapshots: do not
// mutate it.
type Resource struct {
	URI, OriginalURI, Server string
	// OriginalName is the upstream's name of the resource (Def.Name is
	// namespaced).
	OriginalName string
	Available    bool
	Def          *mcp.Resource
}

// Template is one catalog resource template. Def.URITemplate is
// URITemplate and Def.Name is namespaced like a tool name. Def is shared
// between snapshots: do not mutate it.
type Template struct {
	URITemplate, OriginalURITemplate, Server string
	// OriginalName is the upstream's name of the template.
	OriginalName string
	Available    bool
	Def          *mcp.ResourceTemplate
}

// Prompt is one catalog prompt. Def.Name is Name. Def is shared between
// snapshots: do not mutate it.
type Prompt struct {
	Name, OriginalName, Server string
	Available                  bool
	Def                        *mcp.Prompt
}

// ErrCollision is what every [RegistrationError] matches with errors.Is.
var ErrCollision = errors.New("name collision")

// RegistrationError is returned by [Catalog.Set] when a server's names
// collide with another server's (only possible with an empty or shared
// prefix). The catalog refuses the whole server rather than silently
// letting one definition shadow another.
type RegistrationError struct {
	Server string // the server being set
	Other  string // the server already holding the names
	// Names are the colliding namespaced names (tool and prompt names,
	// resource URIs and URI templates), sorted.
	Names []string
}

// Error names both servers and the colliding names.
func (e *RegistrationError) Error() string {
	return fmt.Sprintf("registering server %q: %v with server %q: %s",
		e.Server, ErrCollision, e.Other, strings.Join(e.Names, ", "))
}

// Is makes errors.Is(err, ErrCollision) true.
func (e *RegistrationError) Is(target error) bool { return target == ErrCollision }
