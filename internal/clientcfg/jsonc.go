package clientcfg

import (
	"encoding/json"
	"fmt"
	"strings"
)

// kind is the JSON type of a node.
type kind int

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k kind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "a list", "an object"}[k]
}

// node is one parsed JSON value with its byte span in the source, so that
// errors can point at a line and column and connect can replace one value
// while leaving every other byte of the file as it was.
type node struct {
	kind       kind
	start, end int // [start, end) of the value in the source
	str        string
	boolean    bool
	raw        string // a number's text
	members    []member
	items      []*node
}

// member is one key of an object.
type member struct {
	key      string
	keyStart int
	value    *node
}

// get returns the value of key, or nil. Clients keep the last of duplicate
// keys, as encoding/json does.
func (n *node) get(key string) *node {
	if n == nil || n.kind != kindObject {
		return nil
	}
	var v *node
	for _, m := range n.members {
		if m.key == key {
			v = m.value
		}
	}
	return v
}

// memberOf returns the member holding key, or nil.
func (n *node) memberOf(key string) *member {
	if n == nil || n.kind != kindObject {
		return nil
	}
	var found *member
	for i := range n.members {
		if n.members[i].key == key {
			found = &n.members[i]
		}
	}
	return found
}

// value converts n to the value encoding/json would decode (numbers as float64).
func (n *node) value() any {
	switch n.kind {
	case kindBool:
		return n.boolean
	case kindNumber:
		var f float64
		_ = json.Unmarshal([]byte(n.raw), &f) // validated by the parser; an overflow stays 0 as it would fail decoding anyway
		return f
	case kindString:
		return n.str
	case kindArray:
		out := make([]any, len(n.items))
		for i, it := range n.items {
			out[i] = it.value()
		}
		return out
	case kindObject:
		out := make(map[string]any, len(n.members))
		for _, m := range n.members {
			out[m.key] = m.value.value()
		}
		return out
	}
	return nil
}

// syntaxError is a parse failure at a byte offset.
type syntaxError struct {
	offset int
	msg    string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("offset %d: %s", e.offset, e.msg) }

// maxDepth bounds nesting so a hostile file cannot exhaust the stack.
const maxDepth = 256

// parseJSONC parses JSON with the extensions VS Code's and Cursor's files
// allow ("JSON with comments"): // and /* */ comments and trailing commas.
// Strict JSON files parse the same way, so one reader serves every client.
func parseJSONC(src []byte) (*node, error) {
	p := &parser{src: src}
	p.skip()
	if p.err != nil {
		return nil, p.err
	}
	if p.pos >= len(src) {
		return nil, &syntaxError{p.pos, "empty file: want a JSON object"}
	}
	n := p.value(0)
	if p.err != nil {
		return nil, p.err
	}
	p.skip()
	if p.err == nil && p.pos < len(src) {
		p.fail("unexpected %s after the end of the top-level value", p.describe())
	}
	if p.err != nil {
		return nil, p.err
	}
	return n, nil
}

type parser struct {
	src []byte
	pos int
	err error
}

func (p *parser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = &syntaxError{p.pos, fmt.Sprintf(format, args...)}
	}
}

// describe names the byte at pos for error messages.
func (p *parser) describe() string {
	if p.pos >= len(p.src) {
		return "end of file"
	}
	c := p.src[p.pos]
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// skip passes white space and comments.
func (p *parser) skip() {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '/' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '/':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case c == '/' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '*':
			end := strings.Index(string(p.src[p.pos+2:]), "*/")
			if end < 0 {
				p.fail("unterminated /* comment")
				p.pos = len(p.src)
				return
			}
			p.pos += 2 + end + 2
		default:
			return
		}
	}
}

func (p *parser) value(depth int) *node {
	if depth > maxDepth {
		p.fail("nested more than %d levels deep", maxDepth)
		return nil
	}
	if p.pos >= len(p.src) {
		p.fail("unexpected end of file: want a value")
		return nil
	}
	start := p.pos
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, ok := p.string()
		if !ok {
			return nil
		}
		return &node{kind: kindString, start: start, end: p.pos, str: s}
	case c == '-' || (c >= '0' && c <= '9'):
		for p.pos < len(p.src) && strings.IndexByte("+-.eE0123456789", p.src[p.pos]) >= 0 {
			p.pos++
		}
		raw := string(p.src[start:p.pos])
		if !json.Valid([]byte(raw)) {
			p.pos = start
			p.fail("invalid number %q", raw)
			return nil
		}
		return &node{kind: kindNumber, start: start, end: p.pos, raw: raw}
	default:
		for _, lit := range []struct {
			text string
			n    node
		}{{"true", node{kind: kindBool, boolean: true}}, {"false", node{kind: kindBool}}, {"null", node{kind: kindNull}}} {
			if strings.HasPrefix(string(p.src[p.pos:min(len(p.src), p.pos+len(lit.text))]), lit.text) {
				p.pos += len(lit.text)
				n := lit.n
				n.start, n.end = start, p.pos
				return &n
			}
		}
		p.fail("unexpected %s: want a value", p.describe())
		return nil
	}
}

// string reads a string token at pos; encoding/json decodes its escapes,
// so both accept exactly the same strings.
func (p *parser) string() (string, bool) {
	start := p.pos
	i := p.pos + 1
	for ; i < len(p.src); i++ {
		c := p.src[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '"' {
			break
		}
		if c < 0x20 {
			p.pos = i
			p.fail("control character in a string (line breaks must be written \\n)")
			return "", false
		}
	}
	if i >= len(p.src) {
		p.fail("unterminated string")
		return "", false
	}
	var s string
	if err := json.Unmarshal(p.src[start:i+1], &s); err != nil {
		p.fail("invalid string: %v", err)
		return "", false
	}
	p.pos = i + 1
	return s, true
}

func (p *parser) object(depth int) *node {
	n := &node{kind: kindObject, start: p.pos}
	p.pos++ // {
	for {
		p.skip()
		if p.err != nil {
			return nil
		}
		if p.pos < len(p.src) && p.src[p.pos] == '}' {
			p.pos++
			n.end = p.pos
			return n
		}
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			p.fail("unexpected %s: want a quoted key or }", p.describe())
			return nil
		}
		keyStart := p.pos
		key, ok := p.string()
		if !ok {
			return nil
		}
		p.skip()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			p.fail("unexpected %s after key %q: want :", p.describe(), key)
			return nil
		}
		p.pos++
		p.skip()
		v := p.value(depth + 1)
		if p.err != nil {
			return nil
		}
		n.members = append(n.members, member{key: key, keyStart: keyStart, value: v})
		p.skip()
		if p.pos < len(p.src) && p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.src) && p.src[p.pos] == '}' {
			continue
		}
		p.fail("unexpected %s after the value of %q: want , or }", p.describe(), key)
		return nil
	}
}

func (p *parser) array(depth int) *node {
	n := &node{kind: kindArray, start: p.pos}
	p.pos++ // [
	for {
		p.skip()
		if p.err != nil {
			return nil
		}
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			p.pos++
			n.end = p.pos
			return n
		}
		v := p.value(depth + 1)
		if p.err != nil {
			return nil
		}
		n.items = append(n.items, v)
		p.skip()
		if p.pos < len(p.src) && p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			continue
		}
		p.fail("unexpected %s in a list: want , or ]", p.describe())
		return nil
	}
}

// lineCol converts a byte offset to a 1-based line and column (in bytes, as
// compilers and editors' "file:line:col" links count).
func lineCol(src []byte, off int) (int, int) {
	off = min(max(off, 0), len(src))
	line, col := 1, 1
	for _, c := range src[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}
