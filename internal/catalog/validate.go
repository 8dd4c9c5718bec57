package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/yosida95/uritemplate/v3"
)

// checkToolName reports why name cannot be a tool name, or "". The rules are
// the MCP specification's, which the SDK enforces when the front serves the
// tool.
func checkToolName(name string) string {
	if name == "" {
		return "name is empty"
	}
	if len(name) > MaxToolNameLen {
		return fmt.Sprintf("name is %d characters long; the limit is %d", len(name), MaxToolNameLen)
	}
	var bad []string
	for _, r := range name {
		if !validToolNameRune(r) {
			if q := fmt.Sprintf("%q", string(r)); !slices.Contains(bad, q) {
				bad = append(bad, q)
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Sprintf("name contains invalid characters %s (allowed: A-Z a-z 0-9 _ . -)", strings.Join(bad, ", "))
	}
	return ""
}

func validToolNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-'
}

// copyTool deep-copies t through JSON (which is also what a client session
// would hand us) and checks its schemas. It returns the copy and its
// canonical encoding, or why the tool is rejected.
func (c *Catalog) copyTool(t *mcp.Tool) (def *mcp.Tool, reason string) {
	data, err := json.Marshal(t)
	if err != nil {
		// Point at the field that does not encode, when it is a schema.
		if _, err := json.Marshal(t.InputSchema); err != nil {
			return nil, fmt.Sprintf("inputSchema: not valid JSON: %v", err)
		}
		if _, err := json.Marshal(t.OutputSchema); err != nil {
			return nil, fmt.Sprintf("outputSchema: not valid JSON: %v", err)
		}
		return nil, fmt.Sprintf("definition does not encode as JSON: %v", err)
	}
	def = new(mcp.Tool)
	if err := json.Unmarshal(data, def); err != nil {
		return nil, fmt.Sprintf("definition does not decode as an MCP tool: %v", err)
	}
	if def.InputSchema == nil {
		return nil, "inputSchema is missing"
	}
	if r := c.checkSchema(def.InputSchema, true); r != "" {
		return nil, "inputSchema: " + r
	}
	if r := checkHeaderAnnotations(def.InputSchema); r != "" {
		return nil, "inputSchema: " + r
	}
	if def.OutputSchema != nil {
		if r := c.checkSchema(def.OutputSchema, false); r != "" {
			return nil, "outputSchema: " + r
		}
	}
	return def, ""
}

// checkSchema reports why schema (a decoded JSON value) is not an
// acceptable tool schema, or "". Input schemas must have "type": "object",
// as the MCP specification and the SDK's Server.AddTool require.
func (c *Catalog) checkSchema(schema any, input bool) string {
	m, ok := schema.(map[string]any)
	if !ok {
		return fmt.Sprintf("must be a JSON object, got %s", jsonType(schema))
	}
	if input {
		typ, ok := m["type"]
		if !ok {
			return `type must be "object", got none`
		}
		if typ != "object" {
			b, _ := json.Marshal(typ)
			return fmt.Sprintf(`type must be "object", got %s`, b)
		}
	}
	if s, ok := m["$schema"]; ok {
		str, isStr := s.(string)
		if !isStr {
			return fmt.Sprintf("$schema must be a string, got %s", jsonType(s))
		}
		if !knownDraft(str) {
			return fmt.Sprintf("unsupported $schema %q (supported: draft-04, draft-06, draft-07, 2019-09, 2020-12)", str)
		}
	}
	return c.schemas.check(m)
}

// knownDraft reports whether the jsonschema library has the meta-schema of
// the draft at u built in. Any other meta-schema would have to be fetched,
// and the catalog does no I/O.
func knownDraft(u string) bool {
	u = strings.TrimSuffix(u, "#")
	u, ok := strings.CutPrefix(u, "http://")
	if !ok {
		u, ok = strings.CutPrefix(u, "https://")
	}
	if !ok {
		return false
	}
	switch u {
	case "json-schema.org/schema",
		"json-schema.org/draft/2020-12/schema",
		"json-schema.org/draft/2019-09/schema",
		"json-schema.org/draft-07/schema",
		"json-schema.org/draft-06/schema",
		"json-schema.org/draft-04/schema":
		return true
	}
	return false
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64, json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// maxCachedSchemas bounds the schema cache; when full it starts over, which
// only costs recompiling what is still in use.
const maxCachedSchemas = 8192

// schemaCache remembers compile results by schema hash: rediscovery after a
// reconnect sees the same schemas again, and many tools share one.
type schemaCache map[[32]byte]string

// schemaURL names the schema document being compiled; it only appears in
// library errors, and is stripped from our messages.
const schemaURL = "urn:switchboard:schema"

// check compiles m against its meta-schema ($schema, default 2020-12) and
// returns why it fails, or "".
func (sc schemaCache) check(m map[string]any) string {
	canon, err := json.Marshal(m)
	if err != nil {
		return fmt.Sprintf("not valid JSON: %v", err)
	}
	key := sha256.Sum256(canon)
	if r, ok := sc[key]; ok {
		return r
	}
	r := compileSchema(m)
	if len(sc) >= maxCachedSchemas {
		clear(sc)
	}
	sc[key] = r
	return r
}

func compileSchema(doc map[string]any) string {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// The default loader reads files: a tool schema must never make the
	// gateway read its disk or fetch a URL.
	c.UseLoader(refusingLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return fmt.Sprintf("not a valid JSON Schema: %v", err)
	}
	if _, err := c.Compile(schemaURL); err != nil {
		return "not a valid JSON Schema: " + describeSchemaError(err)
	}
	return ""
}

type refusingLoader struct{}

func (refusingLoader) Load(u string) (any, error) {
	return nil, errors.New("external references are not resolved by the gateway")
}

// maxSchemaErrors caps how many problems a reason lists.
const maxSchemaErrors = 3

// describeSchemaError turns a compile error into one line: for meta-schema
// violations, the first message at each failing location (the library's
// tree repeats itself for anyOf/allOf branches).
func describeSchemaError(err error) string {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if !errors.As(err, &sve) || !errors.As(sve.Err, &ve) {
		return cleanSchemaMessage(err.Error())
	}
	var msgs []string
	seen := map[string]bool{}
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			if !seen[loc] {
				seen[loc] = true
				msgs = append(msgs, cleanSchemaMessage(e.Error()))
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	more := ""
	if len(msgs) > maxSchemaErrors {
		more = fmt.Sprintf(" (and %d more)", len(msgs)-maxSchemaErrors)
		msgs = msgs[:maxSchemaErrors]
	}
	return strings.Join(msgs, "; ") + more
}

func cleanSchemaMessage(s string) string {
	s = strings.ReplaceAll(s, schemaURL, "")
	return strings.Join(strings.Fields(s), " ")
}

// checkHeaderAnnotations mirrors the SDK's check of "x-mcp-header" property
// annotations, whose failure makes Server.AddTool panic: a tool the front
// cannot serve must be rejected here, not crash the gateway. Like the SDK,
// it only looks at schemas whose "properties" tree decodes into its
// (case-sensitive) shape, and skips the check otherwise.
func checkHeaderAnnotations(schema any) string {
	root, ok := decodeHeaderProp(schema)
	if !ok {
		return ""
	}
	seen := map[string]bool{}
	return root.check("", seen)
}

type headerProp struct {
	typ        string
	header     any
	hasHeader  bool
	properties map[string]headerProp
}

func decodeHeaderProp(v any) (headerProp, bool) {
	var p headerProp
	if v == nil {
		return p, true
	}
	m, ok := v.(map[string]any)
	if !ok {
		return p, false
	}
	switch t := m["type"].(type) {
	case nil:
	case string:
		p.typ = t
	default:
		return p, false
	}
	p.header, p.hasHeader = m["x-mcp-header"]
	switch props := m["properties"].(type) {
	case nil:
	case map[string]any:
		p.properties = make(map[string]headerProp, len(props))
		for k, pv := range props {
			child, ok := decodeHeaderProp(pv)
			if !ok {
				return p, false
			}
			p.properties[k] = child
		}
	default:
		return p, false
	}
	return p, true
}

func (p headerProp) check(prefix string, seen map[string]bool) string {
	names := make([]string, 0, len(p.properties))
	for k := range p.properties {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		prop := p.properties[name]
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if prop.hasHeader { // even null: the SDK rejects that too
			if prop.typ != "string" && prop.typ != "integer" && prop.typ != "boolean" {
				return fmt.Sprintf("property %q: x-mcp-header can only be applied to primitive types (integer, string, boolean), got %q", path, prop.typ)
			}
			h, ok := prop.header.(string)
			if !ok || h == "" {
				return fmt.Sprintf("property %q: x-mcp-header must be a non-empty string", path)
			}
			for _, r := range h {
				if !isTChar(r) {
					return fmt.Sprintf("property %q: x-mcp-header value %q contains invalid character %q", path, h, r)
				}
			}
			lower := strings.ToLower(h)
			if seen[lower] {
				return fmt.Sprintf("property %q: duplicate x-mcp-header value %q (case-insensitive)", path, h)
			}
			seen[lower] = true
		}
		if r := prop.check(path, seen); r != "" {
			return r
		}
	}
	return ""
}

// isTChar reports whether r is an HTTP token character (RFC 9110 tchar).
func isTChar(r rune) bool {
	switch {
	case r >= '0' && r <= '9', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		return true
	}
	return strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// copyJSON deep-copies v (a resource, template or prompt definition)
// through JSON into dst and returns the canonical encoding.
func copyJSON(v, dst any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("definition does not encode as JSON: %w", err)
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return fmt.Errorf("definition does not decode: %w", err)
	}
	return nil
}

// hashJSON is the hex SHA-256 of v's JSON encoding, which is canonical for
// values decoded into SDK structs and maps (struct fields in declaration
// order, map keys sorted).
func hashJSON(v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// checkResourceURI reports why a namespaced resource URI cannot be served
// (Server.AddResource panics on what url.Parse rejects), or "".
func checkResourceURI(original, namespaced string) string {
	if original == "" {
		return "uri is empty"
	}
	if _, err := url.Parse(namespaced); err != nil {
		return fmt.Sprintf("namespaced uri %q is not a valid URI: %v", namespaced, unwrapURLError(err))
	}
	return ""
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// compileTemplate parses a namespaced URI template the way the SDK's
// Server.AddResourceTemplate does, and returns a matcher for the original
// template. The uritemplate library builds its matcher with MustCompile;
// a template it cannot turn into a regexp is rejected rather than allowed
// to panic later.
func compileTemplate(original, namespaced string) (re *regexp.Regexp, reason string) {
	if original == "" {
		return nil, "uriTemplate is empty"
	}
	if _, err := uritemplate.New(namespaced); err != nil {
		return nil, fmt.Sprintf("namespaced uriTemplate %q is not a valid URI template: %v", namespaced, err)
	}
	t, err := uritemplate.New(original)
	if err != nil {
		return nil, fmt.Sprintf("uriTemplate is not a valid URI template: %v", err)
	}
	defer func() {
		if p := recover(); p != nil {
			re, reason = nil, fmt.Sprintf("uriTemplate cannot be matched: %v", p)
		}
	}()
	return t.Regexp(), ""
}

// CheckInputSchema reports why raw (JSON) is not an acceptable tool input
// schema, or "" — the check discovered tools pass, for schemas that arrive
// another way (a registered manifest).
func (c *Catalog) CheckInputSchema(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "schema is missing"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "schema is not valid JSON: " + err.Error()
	}
	return c.checkSchema(v, true)
}
