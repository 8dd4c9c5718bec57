package config

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// decoder reads a goccy/go-yaml AST into the typed structs (decode.go).
// goccy's own decoder, even with yaml.Strict, stops at the first problem,
// converts between kinds (1.5 into an int, 0x1F into the string "31") and
// reports unknown keys in map order; its path API (yaml.PathString and
// FilterFile) neither follows aliases and merge keys nor gives a key's
// position. So the AST is walked here: every problem is collected with its
// position, scalars keep their source text, and the position of each field
// is recorded as it is read.
type decoder struct {
	file    string
	errs    Errors
	anchors []anchorDef
	flat    map[*ast.MappingNode]*flatMapping
	seq     int // counts the spots made, to order them
	values  int // counts the values read by value
	open    map[ast.Node]bool
}

type anchorDef struct {
	name   string
	offset int
	node   ast.Node
}

// entry is one key of a mapping after merge keys (<<) are applied.
type entry struct {
	key   string
	pos   Pos // of the key
	value ast.Node
}

type flatMapping struct {
	entries  []entry
	busy     bool // being flattened: a merge that reaches it again is a cycle
	complete bool // false when a merge failed, so keys may be missing
}

// maxAliasChain bounds alias-to-alias-to-... resolution, which could otherwise loop
// on a document such as "a: &x *x".
const maxAliasChain = 32

// maxValues bounds the values of a free-form mapping (a health check's
// arguments) once aliases are expanded.
const maxValues = 100_000

// parseYAML parses data; on a syntax error it returns the error as an *Error with
// the position goccy reports.
func parseYAML(file string, data []byte) (f *ast.File, synErr *Error) {
	// A config reload must not take the gateway down, so a panic in the
	// third-party parser becomes an ordinary error.
	defer func() {
		if r := recover(); r != nil {
			f, synErr = nil, &Error{File: file, Line: 1, Column: 1, Msg: "invalid YAML: the parser failed on this input"}
		}
	}()
	// Duplicate keys are detected by the decoder, which names the field path.
	f, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err == nil {
		return f, nil
	}
	e := &Error{File: file, Msg: "invalid YAML"}
	// GetMessage, not Error: Error quotes the source line, which may hold a secret.
	var pe interface {
		GetMessage() string
		GetToken() *token.Token
	}
	if errors.As(err, &pe) {
		e.Msg = "invalid YAML: " + pe.GetMessage()
		if tk := pe.GetToken(); tk != nil && tk.Position != nil {
			e.Line, e.Column = tk.Position.Line, tk.Position.Column
		}
	}
	if e.Line == 0 {
		e.Line, e.Column = 1, 1
	}
	return nil, e
}

func newDecoder(file string, f *ast.File) *decoder {
	d := &decoder{file: file, flat: map[*ast.MappingNode]*flatMapping{}, open: map[ast.Node]bool{}}
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			ast.Walk(anchorCollector{d}, doc.Body)
		}
	}
	slices.SortStableFunc(d.anchors, func(a, b anchorDef) int { return a.offset - b.offset })
	return d
}

type anchorCollector struct{ d *decoder }

func (c anchorCollector) Visit(n ast.Node) ast.Visitor {
	if a, ok := n.(*ast.AnchorNode); ok && a.Start != nil && a.Start.Position != nil {
		if name, ok := scalarText(a.Name); ok {
			c.d.anchors = append(c.d.anchors, anchorDef{name: name, offset: a.Start.Position.Offset, node: a.Value})
		}
	}
	return c
}

// lookupAnchor returns the node of the last anchor called name defined before
// offset, as YAML requires.
func (d *decoder) lookupAnchor(name string, offset int) ast.Node {
	var found ast.Node
	for _, a := range d.anchors {
		if a.offset >= offset {
			break
		}
		if a.name == name {
			found = a.node
		}
	}
	return found
}

func (d *decoder) errorf(pos Pos, field, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: pos.Line, Column: pos.Column, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func posOf(n ast.Node) Pos {
	if n == nil {
		return Pos{}
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return Pos{}
	}
	return Pos{Line: tk.Position.Line, Column: tk.Position.Column}
}

// resolve follows anchors, aliases and standard tags to the node that carries the
// value. ok is false when a problem was reported and the value must be skipped.
func (d *decoder) resolve(n ast.Node, field string) (ast.Node, bool) {
	for range maxAliasChain {
		switch t := n.(type) {
		case *ast.AnchorNode:
			n = t.Value
		case *ast.AliasNode:
			name, _ := scalarText(t.Value)
			offset := 0
			if t.Start != nil && t.Start.Position != nil {
				offset = t.Start.Position.Offset
			}
			target := d.lookupAnchor(name, offset)
			if target == nil {
				d.errorf(posOf(t), field, "alias *%s refers to no anchor defined before it", name)
				return nil, false
			}
			n = target
		case *ast.TagNode:
			tag := ""
			if t.Start != nil {
				tag = t.Start.Value
			}
			switch tag {
			case "!!str", "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq":
				n = t.Value
			default:
				d.errorf(posOf(t), field, "unsupported YAML tag %q", tag)
				return nil, false
			}
		default:
			return n, true
		}
	}
	d.errorf(posOf(n), field, "too many nested aliases")
	return nil, false
}

func isNull(n ast.Node) bool {
	if n == nil {
		return true
	}
	_, ok := n.(*ast.NullNode)
	return ok
}

// scalarText returns the text of a scalar. Numbers and booleans keep their source
// spelling, so `args: [--port, 8080]` means the string "8080".
func scalarText(n ast.Node) (string, bool) {
	switch t := n.(type) {
	case *ast.StringNode:
		return t.Value, true
	case *ast.LiteralNode:
		if t.Value == nil {
			return "", true
		}
		return t.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		if tk := n.GetToken(); tk != nil {
			return tk.Value, true
		}
	}
	return "", false
}

// kindOf names a node's kind for type errors; never its value, which may be secret.
func kindOf(n ast.Node) string {
	switch n.(type) {
	case nil, *ast.NullNode:
		return "null"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	}
	return "an unsupported value"
}

// mapping returns the entries of the mapping at n (null = no entries). ok is false
// when n is not a mapping, or when a merge (<<) into it failed and keys may be
// missing; the problem has been reported, and the entries that could be read are
// still returned so their own problems are reported too.
func (d *decoder) mapping(n ast.Node, field string) ([]entry, bool) {
	n, ok := d.resolve(n, field)
	if !ok {
		return nil, false
	}
	if isNull(n) {
		return nil, true
	}
	switch m := n.(type) {
	case *ast.MappingNode:
		return d.flatten(m, field)
	case *ast.MappingValueNode:
		return d.flatten(&ast.MappingNode{BaseNode: m.BaseNode, Values: []*ast.MappingValueNode{m}}, field)
	}
	d.errorf(posOf(n), field, "must be a mapping, got %s", kindOf(n))
	return nil, false
}

// flatten lists the keys of m in source order, reporting duplicate and non-scalar
// keys, then adds keys merged with "<<" that m does not set itself. Results are
// memoized so an anchor reused many times is walked (and reported) once.
func (d *decoder) flatten(m *ast.MappingNode, field string) ([]entry, bool) {
	if f := d.flat[m]; f != nil {
		if f.busy {
			d.errorf(posOf(m), field, "merge key (<<) refers to the mapping that contains it")
			return nil, false
		}
		return f.entries, f.complete
	}
	f := &flatMapping{busy: true}
	d.flat[m] = f
	defer func() { f.busy = false }()

	complete := true
	seen := map[string]Pos{}
	var merges []ast.Node
	for _, mv := range m.Values {
		if mv == nil || mv.Key == nil {
			continue
		}
		if mv.Key.IsMergeKey() {
			merges = append(merges, mv.Value)
			continue
		}
		key, pos, ok := d.key(mv.Key, field)
		if !ok {
			continue
		}
		if first, dup := seen[key]; dup {
			d.errorf(pos, join(field, key), "duplicate key %q (first defined at line %d)", key, first.Line)
			continue
		}
		seen[key] = pos
		f.entries = append(f.entries, entry{key: key, pos: pos, value: mv.Value})
	}
	for _, mn := range merges {
		rn, ok := d.resolve(mn, field)
		if !ok {
			complete = false
			continue
		}
		sources := []ast.Node{rn}
		if seq, ok := rn.(*ast.SequenceNode); ok {
			sources = seq.Values
		}
		for _, src := range sources {
			r, ok := d.resolve(src, field)
			if !ok {
				complete = false
				continue
			}
			if _, isMap := r.(*ast.MappingNode); !isMap {
				d.errorf(posOf(src), field, "merge key (<<) needs a mapping or a list of mappings, got %s", kindOf(r))
				complete = false
				continue
			}
			merged, ok := d.mapping(r, field)
			if !ok {
				complete = false
			}
			for _, e := range merged {
				if _, dup := seen[e.key]; !dup {
					seen[e.key] = e.pos
					f.entries = append(f.entries, e)
				}
			}
		}
	}
	f.complete = complete
	return f.entries, complete
}

// key returns the text and position of a mapping key.
func (d *decoder) key(k ast.MapKeyNode, field string) (string, Pos, bool) {
	var n ast.Node = k
	pos := posOf(n)
	if mk, ok := k.(*ast.MappingKeyNode); ok { // "? key" syntax
		n = mk.Value
	}
	n, ok := d.resolve(n, field)
	if !ok {
		return "", pos, false
	}
	if isNull(n) {
		return "null", pos, true
	}
	s, ok := scalarText(n)
	if !ok {
		d.errorf(pos, field, "keys must be strings, got %s", kindOf(n))
		return "", pos, false
	}
	return s, pos, true
}

// sequence returns the items of the list at n (null = none).
func (d *decoder) sequence(n ast.Node, field string) ([]ast.Node, bool) {
	n, ok := d.resolve(n, field)
	if !ok {
		return nil, false
	}
	if isNull(n) {
		return nil, true
	}
	seq, isSeq := n.(*ast.SequenceNode)
	if !isSeq {
		d.errorf(posOf(n), field, "must be a list, got %s", kindOf(n))
		return nil, false
	}
	return seq.Values, true
}

// str decodes a string. set is false for null (the field is treated as absent).
func (d *decoder) str(n ast.Node, field string) (s string, set, ok bool) {
	n, ok = d.resolve(n, field)
	if !ok {
		return "", false, false
	}
	if isNull(n) {
		return "", false, true
	}
	s, ok = scalarText(n)
	if !ok {
		d.errorf(posOf(n), field, "must be a string, got %s", kindOf(n))
		return "", false, false
	}
	return s, true, true
}

// number decodes an integer or float. isInt reports whether it was written as an
// integer. set is false for null.
func (d *decoder) number(n ast.Node, field string) (v float64, i int64, isInt, set, ok bool) {
	n, ok = d.resolve(n, field)
	if !ok {
		return 0, 0, false, false, false
	}
	if isNull(n) {
		return 0, 0, false, false, true
	}
	switch t := n.(type) {
	case *ast.IntegerNode:
		switch x := t.Value.(type) {
		case int64:
			return float64(x), x, true, true, true
		case uint64:
			if x <= math.MaxInt64 {
				return float64(x), int64(x), true, true, true
			}
		}
		d.errorf(posOf(n), field, "number is too large")
		return 0, 0, false, false, false
	case *ast.FloatNode:
		return t.Value, 0, false, true, true
	case *ast.InfinityNode, *ast.NanNode:
		d.errorf(posOf(n), field, "must be a finite number")
		return 0, 0, false, false, false
	}
	d.errorf(posOf(n), field, "must be a number, got %s", kindOf(n))
	return 0, 0, false, false, false
}

// value decodes any YAML value into what encoding/json would produce from
// the equivalent JSON, except that integers stay int64: map[string]any,
// []any, string, int64, float64, bool or nil.
func (d *decoder) value(n ast.Node, field string) (any, bool) {
	alias := n
	n, ok := d.resolve(n, field)
	if !ok {
		return nil, false
	}
	if isNull(n) {
		return nil, true
	}
	// An alias can make a value contain itself, or expand a small file into
	// a huge value: both are errors rather than a hang.
	if d.values++; d.values > maxValues {
		if d.values == maxValues+1 {
			d.errorf(posOf(alias), field, "too large: aliases expand it to more than %d values", maxValues)
		}
		return nil, false
	}
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode, *ast.SequenceNode:
		if d.open[n] {
			d.errorf(posOf(alias), field, "contains itself through an alias")
			return nil, false
		}
		d.open[n] = true
		defer delete(d.open, n)
	}
	switch t := n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		entries, ok := d.mapping(n, field)
		m := make(map[string]any, len(entries))
		for _, e := range entries {
			v, itemOK := d.value(e.value, join(field, e.key))
			ok = ok && itemOK
			m[e.key] = v
		}
		return m, ok
	case *ast.SequenceNode:
		out := make([]any, 0, len(t.Values))
		for i, item := range t.Values {
			v, itemOK := d.value(item, fmt.Sprintf("%s[%d]", field, i))
			ok = ok && itemOK
			out = append(out, v)
		}
		return out, ok
	case *ast.BoolNode:
		return t.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		v, i, isInt, _, ok := d.number(n, field)
		if isInt {
			return i, ok
		}
		return v, ok
	}
	if s, ok := scalarText(n); ok {
		return s, true
	}
	d.errorf(posOf(n), field, "unsupported value: %s", kindOf(n))
	return nil, false
}

// join appends a key to a dotted field path.
func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// suggest returns ` (did you mean "x"?)` for a key one small typo away from a
// known key, because a misspelled optional key is otherwise silently ignored by
// most tools and costs operators time.
func suggest(key string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if dist := editDistance(key, k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
