package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Pin is the part of a tool definition that decides what a model does with
// the tool: its name, description, input and output schemas and
// annotations, in a canonical JSON encoding, and that encoding's hash.
//
// [Tool.Hash] covers the whole definition clients see (namespaced name,
// title, icons, _meta), so it changes with the gateway's naming settings;
// a Pin depends only on what the upstream says of the tool, so it is stable
// across restarts, replicas and separator settings, and is what tool
// pinning compares.
type Pin struct {
	// Definition is the canonical JSON: keys in a fixed order, schemas with
	// their object keys sorted, annotations with every field present.
	Definition json.RawMessage
	// Hash is the hex SHA-256 of Definition.
	Hash string
}

// pinnedTool fixes the order and presence of the pinned fields.
type pinnedTool struct {
	Name         string            `json:"name"`
	Description  string            `json:"description"`
	InputSchema  json.RawMessage   `json:"inputSchema"`
	OutputSchema json.RawMessage   `json:"outputSchema,omitempty"`
	Annotations  pinnedAnnotations `json:"annotations"`
}

// pinnedAnnotations spells every hint out, so that the encoding does not
// depend on the SDK's omitempty choices (MCPGODEBUG=hintomitempty changes
// them), and an absent annotations object equals an empty one: both mean
// "every hint at its default".
type pinnedAnnotations struct {
	Title           string `json:"title"`
	ReadOnlyHint    bool   `json:"readOnlyHint"`
	DestructiveHint *bool  `json:"destructiveHint"`
	IdempotentHint  bool   `json:"idempotentHint"`
	OpenWorldHint   *bool  `json:"openWorldHint"`
}

// PinOf computes the pin of an upstream's tool definition, named by its
// original (upstream) name. It fails only when a schema does not encode as
// JSON, which the catalog rejects anyway.
func PinOf(t *mcp.Tool) (Pin, error) {
	if t == nil {
		return Pin{}, fmt.Errorf("pinning a tool: definition is null")
	}
	p := pinnedTool{Name: t.Name, Description: t.Description}
	var err error
	if p.InputSchema, err = canonicalJSON(t.InputSchema); err != nil {
		return Pin{}, fmt.Errorf("pinning tool %q: inputSchema: %w", t.Name, err)
	}
	if t.OutputSchema != nil {
		if p.OutputSchema, err = canonicalJSON(t.OutputSchema); err != nil {
			return Pin{}, fmt.Errorf("pinning tool %q: outputSchema: %w", t.Name, err)
		}
		if string(p.OutputSchema) == "null" {
			p.OutputSchema = nil
		}
	}
	if a := t.Annotations; a != nil {
		p.Annotations = pinnedAnnotations{Title: a.Title, ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint,
			IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
	}
	def, err := encode(p)
	if err != nil {
		return Pin{}, fmt.Errorf("pinning tool %q: %w", t.Name, err)
	}
	sum := sha256.Sum256(def)
	return Pin{Definition: def, Hash: hex.EncodeToString(sum[:])}, nil
}

// PinnedFields are the fields of a [Pin] definition, in order.
var PinnedFields = []string{"name", "description", "inputSchema", "outputSchema", "annotations"}

// ChangedFields lists the [PinnedFields] whose values differ between two
// pin definitions (all of them when one does not decode).
func ChangedFields(a, b json.RawMessage) []string {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return slices.Clone(PinnedFields)
	}
	out := []string{}
	for _, f := range PinnedFields {
		if !bytes.Equal(ma[f], mb[f]) {
			out = append(out, f)
		}
	}
	return out
}

// Pin is the pin of the tool's definition under its original name (see
// [PinOf]).
func (t Tool) Pin() (Pin, error) {
	if t.Def == nil {
		return Pin{}, fmt.Errorf("pinning tool %q: no definition", t.Name)
	}
	cp := *t.Def
	cp.Name = t.OriginalName
	return PinOf(&cp)
}

// canonicalJSON re-encodes v through a plain JSON value: object keys
// sorted, whatever Go type (struct, map, json.RawMessage) held it.
func canonicalJSON(v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var plain any
	if err := json.Unmarshal(raw, &plain); err != nil {
		return nil, err
	}
	return encode(plain)
}

// encode is json.Marshal without HTML escaping (the definitions are shown
// to operators as they are) and without the trailing newline.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
