package catalog

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestToolValidation(t *testing.T) {
	withOutput := func(t *mcp.Tool, out any) *mcp.Tool { t.OutputSchema = out; return t }
	long := strings.Repeat("l", 129)
	bad := []struct {
		tool     *mcp.Tool
		original string
		reason   string
	}{
		{nil, "", "definition is null"},
		{tool(""), "", "name is empty"},
		{tool("bad name/x y"), "bad name/x y", `name contains invalid characters " ", "/" (allowed: A-Z a-z 0-9 _ . -)`},
		{tool("héllo"), "héllo", `name contains invalid characters "é" (allowed: A-Z a-z 0-9 _ . -)`},
		{tool(long), long, "name is 129 characters long; the limit is 128"},
		{&mcp.Tool{Name: "no_schema"}, "no_schema", "inputSchema is missing"},
		{rawTool("null_schema", `null`), "null_schema", "inputSchema is missing"},
		{rawTool("string_type", `{"type":"string"}`), "string_type", `inputSchema: type must be "object", got "string"`},
		{rawTool("union_type", `{"type":["object","null"]}`), "union_type", `inputSchema: type must be "object", got ["object","null"]`},
		{rawTool("no_type", `{"properties":{}}`), "no_type", `inputSchema: type must be "object", got none`},
		{rawTool("array_schema", `[{"type":"object"}]`), "array_schema", "inputSchema: must be a JSON object, got array"},
		{rawTool("bool_schema", `true`), "bool_schema", "inputSchema: must be a JSON object, got boolean"},
		{
			&mcp.Tool{Name: "nan", InputSchema: map[string]any{"type": "object", "maximum": math.NaN()}}, "nan",
			"inputSchema: not valid JSON: json: unsupported value: NaN",
		},
		{
			rawTool("bad_json", `{"type":`), "bad_json",
			"inputSchema: not valid JSON: json: error calling MarshalJSON for type json.RawMessage: unexpected end of JSON input",
		},
		{
			rawTool("bad_property_type", `{"type":"object","properties":{"a":{"type":"strin"}}}`), "bad_property_type",
			`inputSchema: not a valid JSON Schema: at '/properties/a/type': value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'`,
		},
		{
			rawTool("bad_required", `{"type":"object","required":"a","properties":{"a":{"minLength":-1}}}`), "bad_required",
			`inputSchema: not a valid JSON Schema: at '/properties/a/minLength': minimum: got -1, want 0; at '/required': got string, want array`,
		},
		{
			rawTool("bad_regex", `{"type":"object","properties":{"a":{"type":"string","pattern":"("}}}`), "bad_regex",
			"inputSchema: not a valid JSON Schema: at '/properties/a/pattern': '(' is not valid regex: error parsing regexp: missing closing ): `(`",
		},
		{
			rawTool("draft7_invalid", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"strin"}}}`), "draft7_invalid",
			`inputSchema: not a valid JSON Schema: at '/properties/a/type': value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'`,
		},
		{
			rawTool("unknown_draft", `{"$schema":"http://example.com/my-schema","type":"object"}`), "unknown_draft",
			`inputSchema: unsupported $schema "http://example.com/my-schema" (supported: draft-04, draft-06, draft-07, 2019-09, 2020-12)`,
		},
		{
			rawTool("file_ref", `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`), "file_ref",
			`inputSchema: not a valid JSON Schema: failing loading "file:///etc/passwd": external references are not resolved by the gateway`,
		},
		{
			rawTool("dangling_ref", `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`), "dangling_ref",
			`inputSchema: not a valid JSON Schema: json-pointer in "#/$defs/missing" not found`,
		},
		{
			rawTool("header_on_object", `{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"X-A"}}}`), "header_on_object",
			`inputSchema: property "a": x-mcp-header can only be applied to primitive types (integer, string, boolean), got "object"`,
		},
		{
			rawTool("header_duplicate", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"X-A"},"b":{"type":"string","x-mcp-header":"x-a"}}}`), "header_duplicate",
			`inputSchema: property "b": duplicate x-mcp-header value "x-a" (case-insensitive)`,
		},
		{withOutput(tool("output_string"), "object"), "output_string", "outputSchema: must be a JSON object, got string"},
		{
			withOutput(tool("output_invalid"), json.RawMessage(`{"type":"object","required":"a"}`)), "output_invalid",
			`outputSchema: not a valid JSON Schema: at '/required': got string, want array`,
		},
		{tool("good_one"), "good_one", "duplicate name: the server lists it more than once"},
	}
	good := []*mcp.Tool{
		tool("good_one"),
		rawTool("good_raw", `{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}`),
		rawTool("good_draft7", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"s":{"type":"string"}},"properties":{"s":{"$ref":"#/definitions/s"}}}`),
		rawTool("good_2019", `{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object"}`),
		rawTool("good_defs", `{"type":"object","$defs":{"s":{"type":"string"}},"properties":{"s":{"$ref":"#/$defs/s"}},"additionalProperties":false}`),
		rawTool("good_header", `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"X-Region"}}}`),
		withOutput(tool("good_output"), map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}}),
	}
	// Interleave good and bad tools: validation must be per tool.
	var all []*mcp.Tool
	var want []Rejected
	for i, b := range bad {
		if i < len(good) {
			all = append(all, good[i])
		}
		all = append(all, b.tool)
		want = append(want, Rejected{Server: "demo", OriginalName: b.original, Reason: b.reason, Kind: KindTool})
	}
	c := New(nil)
	got := mustSet(t, c, Entry{Server: "demo", Tools: all})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rejected (-want +got):\n%s", diff)
	}
	snap := c.Snapshot()
	if diff := cmp.Diff(want, snap.Rejected("demo")); diff != "" {
		t.Errorf("Snapshot.Rejected (-want +got):\n%s", diff)
	}
	wantNames := []string{"demo.good_2019", "demo.good_defs", "demo.good_draft7", "demo.good_header", "demo.good_one", "demo.good_output", "demo.good_raw"}
	if diff := cmp.Diff(wantNames, toolNamesOf(snap.ServerTools("demo"))); diff != "" {
		t.Errorf("registered tools (-want +got):\n%s", diff)
	}
	// Schemas that arrived encoded are decoded like a client session would.
	raw, _ := snap.Tool("demo.good_raw")
	if _, ok := raw.Def.InputSchema.(map[string]any); !ok {
		t.Errorf("Def.InputSchema is %T, want map[string]any", raw.Def.InputSchema)
	}
}

func TestSchemaCacheIsKeyedByContent(t *testing.T) {
	c := New(nil)
	schema := `{"type":"object","properties":{"a":{"type":"strin"}}}`
	entry := Entry{Server: "demo", Tools: []*mcp.Tool{rawTool("one", schema), rawTool("two", schema), tool("ok")}}
	rej := mustSet(t, c, entry)
	if len(rej) != 2 || rej[0].Reason != rej[1].Reason {
		t.Fatalf("want the same reason twice, got %v", rej)
	}
	if len(c.schemas) != 2 {
		t.Errorf("schema cache holds %d entries, want 2 (one per distinct schema)", len(c.schemas))
	}
}

func TestOtherItemValidation(t *testing.T) {
	entry := Entry{
		Server: "demo",
		Tools:  tools("ok"),
		Resources: []*mcp.Resource{
			{URI: "file:///a.txt", Name: "a"},
			{URI: "", Name: "empty"},
			{URI: "file:///a.txt", Name: "again"},
			nil,
		},
		Templates: []*mcp.ResourceTemplate{
			{URITemplate: "file:///{path}", Name: "files"},
			{URITemplate: "file:///{path", Name: "broken"},
			{URITemplate: "", Name: "empty"},
			{URITemplate: "file:///{path}", Name: "again"},
		},
		Prompts: []*mcp.Prompt{
			{Name: "greet"},
			{Name: ""},
			{Name: "greet", Description: "again"},
			nil,
		},
	}
	c := New(nil)
	got := mustSet(t, c, entry)
	want := []Rejected{
		{"demo", "", "uri is empty", KindResource},
		{"demo", "file:///a.txt", "duplicate uri: the server lists it more than once", KindResource},
		{"demo", "", "definition is null", KindResource},
		{"demo", "file:///{path", `namespaced uriTemplate "demo+file:///{path" is not a valid URI template: incomplete expression: demo+file:///{path_`, KindTemplate},
		{"demo", "", "uriTemplate is empty", KindTemplate},
		{"demo", "file:///{path}", "duplicate uriTemplate: the server lists it more than once", KindTemplate},
		{"demo", "", "name is empty", KindPrompt},
		{"demo", "greet", "duplicate name: the server lists it more than once", KindPrompt},
		{"demo", "", "definition is null", KindPrompt},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rejected (-want +got):\n%s", diff)
	}
	snap := c.Snapshot()
	if r := snap.Resources(); len(r) != 1 || r[0].Def.Name != "demo.a" {
		t.Errorf("Resources() = %+v, want the first definition only", r)
	}
	if tm := snap.Templates(); len(tm) != 1 || tm[0].Def.Name != "demo.files" {
		t.Errorf("Templates() = %+v, want the first definition only", tm)
	}
	if p, ok := snap.Prompt("demo.greet"); !ok || p.Def.Description != "" {
		t.Errorf("Prompt(demo.greet) = %+v, %v; want the first definition", p, ok)
	}
}

// A prefix that cannot start a URI scheme ("_", leading digit) makes every
// absolute resource URI unservable: the SDK's Server.AddResource would panic
// on it, so the catalog rejects those resources, visibly.
func TestResourceURIsNeedASchemeSafePrefix(t *testing.T) {
	c := New(nil)
	got := mustSet(t, c, Entry{
		Server:    "my_srv",
		Tools:     tools("ok"),
		Resources: []*mcp.Resource{{URI: "file:///a.txt"}, {URI: "relative/path"}},
	})
	want := []Rejected{{
		"my_srv", "file:///a.txt",
		`namespaced uri "my_srv+file:///a.txt" is not a valid URI: first path segment in URL cannot contain colon`,
		KindResource,
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rejected (-want +got):\n%s", diff)
	}
	if _, ok := c.Snapshot().Tool("my_srv.ok"); !ok {
		t.Error("the server's tools must still register")
	}
	if server, original, ok := c.Snapshot().ResolveURI("my_srv+relative/path"); !ok || server != "my_srv" || original != "relative/path" {
		t.Errorf("ResolveURI(my_srv+relative/path) = %q, %q, %v", server, original, ok)
	}
}

func TestCheckInputSchema(t *testing.T) {
	c := New(nil)
	for _, tc := range []struct {
		raw  string
		want string // substring of the reason; "" = valid
	}{
		{`{"type":"object","properties":{"q":{"type":"string"}}}`, ""},
		{``, "missing"},
		{`{`, "not valid JSON"},
		{`{"type":"string"}`, `type must be "object"`},
		{`{"type":"object","properties":{"q":{"type":12}}}`, "q"},
	} {
		got := c.CheckInputSchema(json.RawMessage(tc.raw))
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("CheckInputSchema(%s) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}
