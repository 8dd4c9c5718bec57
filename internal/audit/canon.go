package audit

import (
	"bytes"
	"slices"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// This file redacts JSON text in one pass, from bytes to bytes, with the
// output encoding/json gives for the same input decoded into an any (with
// UseNumber), redacted and encoded again with sorted keys and no HTML
// escaping: the form ParamsHash hashes and Summary cuts. Building the
// decoded value, copying it to redact it and encoding it was most of the
// audit's cost per call; this does the same work without the tree. The
// grammar, nesting limit, string unescaping and escaping follow
// encoding/json's scanner, decoder and encoder exactly, and the tests
// compare both on every input the fuzzer finds.

// maxNesting is encoding/json's limit of nested arrays and objects in
// one value; deeper input does not decode.
const maxNesting = 10000

// redactedJSON is [Redacted] encoded.
const redactedJSON = `"` + Redacted + `"`

// maxPooledBuf bounds the buffers kept for reuse, so that one large
// result does not pin its buffer for the life of the process.
const maxPooledBuf = 64 << 10

// scratch is the reusable memory of one canonicalization.
type scratch struct {
	members []member
	order   []int32  // of members, while sorting
	bufs    [][]byte // free buffers
}

// member is an object member already written to the output: its key
// (unescaped, for sorting) and the span of `"key":value`.
type member struct {
	key        []byte
	start, end int
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (s *scratch) buf() []byte {
	if n := len(s.bufs); n > 0 {
		b := s.bufs[n-1]
		s.bufs = s.bufs[:n-1]
		return b[:0]
	}
	return nil
}

func (s *scratch) free(b []byte) {
	if cap(b) > 0 && cap(b) <= maxPooledBuf {
		s.bufs = append(s.bufs, b)
	}
}

func (s *scratch) release() {
	s.members = s.members[:0]
	scratchPool.Put(s)
}

// canonical appends to dst the canonical JSON of src with sensitive values
// redacted, as decoding src, redact(v, depth) and encoding would produce.
// It reports false, leaving dst as it was, when src is not exactly one JSON
// value; input that is only white space is null.
func (r *Redactor) canonical(dst, src []byte, depth int) ([]byte, bool) {
	s := scratchPool.Get().(*scratch)
	defer s.release()
	return r.canonicalWith(s, dst, src, depth)
}

func (r *Redactor) canonicalWith(s *scratch, dst, src []byte, depth int) ([]byte, bool) {
	if len(bytes.TrimSpace(src)) == 0 {
		if depth > maxDepth {
			return append(dst, redactedJSON...), true
		}
		return append(dst, "null"...), true
	}
	p := parser{r: r, s: s, src: src}
	p.skipSpace()
	out, ok := p.value(dst, depth, true)
	if ok {
		p.skipSpace()
		ok = p.pos == len(p.src)
	}
	if !ok {
		return dst, false
	}
	return out, true
}

// parser reads one JSON text. It is a decoder of its own for every string
// holding JSON, as encoding/json is: the nesting limit counts per text.
type parser struct {
	r    *Redactor
	s    *scratch
	src  []byte
	pos  int
	nest int
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *parser) skipSpace() {
	for p.pos < len(p.src) && isSpace(p.src[p.pos]) {
		p.pos++
	}
}

// value reads one value at p.pos. With emit it appends its redacted
// canonical form at redaction depth depth; without, it only checks it.
func (p *parser) value(dst []byte, depth int, emit bool) ([]byte, bool) {
	if p.pos >= len(p.src) {
		return dst, false
	}
	if emit && depth > maxDepth {
		if _, ok := p.value(nil, depth, false); !ok {
			return dst, false
		}
		return append(dst, redactedJSON...), true
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(dst, depth, emit)
	case c == '[':
		return p.array(dst, depth, emit)
	case c == '"':
		return p.stringValue(dst, depth, emit)
	case c == '-' || '0' <= c && c <= '9':
		start := p.pos
		if !p.number() {
			return dst, false
		}
		if emit {
			dst = append(dst, p.src[start:p.pos]...)
		}
		return dst, true
	case c == 't':
		return p.literal(dst, "true", emit)
	case c == 'f':
		return p.literal(dst, "false", emit)
	case c == 'n':
		return p.literal(dst, "null", emit)
	}
	return dst, false
}

func (p *parser) literal(dst []byte, lit string, emit bool) ([]byte, bool) {
	if !bytes.HasPrefix(p.src[p.pos:], []byte(lit)) {
		return dst, false
	}
	p.pos += len(lit)
	if emit {
		dst = append(dst, lit...)
	}
	return dst, true
}

// number reads a number as encoding/json's scanner accepts it.
func (p *parser) number() bool {
	src, i := p.src, p.pos
	if i < len(src) && src[i] == '-' {
		i++
	}
	switch {
	case i < len(src) && src[i] == '0':
		i++
	case i < len(src) && '1' <= src[i] && src[i] <= '9':
		for i < len(src) && '0' <= src[i] && src[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(src) && src[i] == '.' {
		i++
		d := i
		for i < len(src) && '0' <= src[i] && src[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		d := i
		for i < len(src) && '0' <= src[i] && src[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	p.pos = i
	return true
}

func (p *parser) enter() bool {
	p.nest++
	return p.nest <= maxNesting
}

func (p *parser) array(dst []byte, depth int, emit bool) ([]byte, bool) {
	if !p.enter() {
		return dst, false
	}
	p.pos++ // [
	if emit {
		dst = append(dst, '[')
	}
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		p.nest--
		if emit {
			dst = append(dst, ']')
		}
		return dst, true
	}
	for n := 0; ; n++ {
		if emit && n > 0 {
			dst = append(dst, ',')
		}
		var ok bool
		if dst, ok = p.value(dst, depth+1, emit); !ok {
			return dst, false
		}
		p.skipSpace()
		if p.pos >= len(p.src) {
			return dst, false
		}
		switch p.src[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
			continue
		case ']':
			p.pos++
			p.nest--
			if emit {
				dst = append(dst, ']')
			}
			return dst, true
		}
		return dst, false
	}
}

func (p *parser) object(dst []byte, depth int, emit bool) ([]byte, bool) {
	if !p.enter() {
		return dst, false
	}
	p.pos++ // {
	if emit {
		dst = append(dst, '{')
	}
	body := len(dst)
	base := len(p.s.members)
	defer func() { p.s.members = p.s.members[:base] }()
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		p.nest--
		if emit {
			dst = append(dst, '}')
		}
		return dst, true
	}
	for {
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return dst, false
		}
		key, simple, ok := p.str()
		if !ok {
			return dst, false
		}
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return dst, false
		}
		p.pos++
		p.skipSpace()
		if emit {
			if len(p.s.members) > base {
				dst = append(dst, ',')
			}
			start := len(dst)
			if simple {
				dst = append(dst, '"')
				dst = append(dst, key...)
				dst = append(dst, '"')
			} else {
				dst = appendString(dst, key)
			}
			dst = append(dst, ':')
			if p.r.keys.matchBytes(key) {
				if _, ok = p.value(nil, depth+1, false); ok {
					dst = append(dst, redactedJSON...)
				}
			} else {
				dst, ok = p.value(dst, depth+1, true)
			}
			p.s.members = append(p.s.members, member{key: key, start: start, end: len(dst)})
		} else {
			_, ok = p.value(nil, depth+1, false)
		}
		if !ok {
			return dst, false
		}
		p.skipSpace()
		if p.pos >= len(p.src) {
			return dst, false
		}
		switch p.src[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
			continue
		case '}':
			p.pos++
			p.nest--
			if emit {
				dst = p.sortMembers(dst, body, p.s.members[base:])
				dst = append(dst, '}')
			}
			return dst, true
		}
		return dst, false
	}
}

// sortMembers rewrites the members written from body on in key order,
// keeping only the last of equal keys, as a decoded map encodes.
func (p *parser) sortMembers(dst []byte, body int, ms []member) []byte {
	sorted := true
	for i := 1; i < len(ms); i++ {
		if bytes.Compare(ms[i-1].key, ms[i].key) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return dst
	}
	tmp := append(p.s.buf(), dst[body:]...)
	// Sort indexes, not members: moving members (which hold a slice)
	// costs write barriers.
	order := p.s.order[:0]
	for i := range ms {
		order = append(order, int32(i))
	}
	slices.SortStableFunc(order, func(a, b int32) int { return bytes.Compare(ms[a].key, ms[b].key) })
	dst = dst[:body]
	n := 0
	for i, j := range order {
		m := ms[j]
		if i+1 < len(order) && bytes.Equal(m.key, ms[order[i+1]].key) {
			continue // a later member with the same key wins
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, tmp[m.start-body:m.end-body]...)
		n++
	}
	p.s.order = order
	p.s.free(tmp)
	return dst
}

// stringValue reads a string value. A string holding a JSON object or
// array is redacted as JSON of its own, one level deeper, and written as
// the string of its canonical form.
func (p *parser) stringValue(dst []byte, depth int, emit bool) ([]byte, bool) {
	start := p.pos
	s, simple, ok := p.str()
	if !ok || !emit {
		return dst, ok
	}
	if t := bytes.TrimSpace(s); len(t) >= 2 && (t[0] == '{' || t[0] == '[') {
		inner := p.s.buf()
		var ok bool
		if inner, ok = p.r.canonicalWith(p.s, inner, t, depth+1); ok {
			dst = appendString(dst, inner)
			p.s.free(inner)
			return dst, true
		}
		p.s.free(inner)
	}
	if simple {
		return append(dst, p.src[start:p.pos]...), true
	}
	return appendString(dst, s), true
}

// str reads a string at p.pos and returns it unescaped as encoding/json
// unquotes it (invalid UTF-8 and lone surrogates become U+FFFD). simple
// reports that its quoted form in the input is already the one the encoder
// writes, so it can be copied: no escapes, control bytes, invalid UTF-8
// or U+2028/U+2029. The result aliases the input when it is simple.
func (p *parser) str() (s []byte, simple bool, ok bool) {
	src := p.src
	i := p.pos + 1
	start := i
	simple = true
	for {
		for i < len(src) && plain[src[i]] {
			i++
		}
		if i >= len(src) {
			return nil, false, false
		}
		c := src[i]
		switch {
		case c == '"':
			p.pos = i + 1
			if simple {
				return src[start:i], true, true
			}
			return unquote(src[start:i]), false, true
		case c == '\\':
			simple = false
			i++
			if i >= len(src) {
				return nil, false, false
			}
			switch src[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if getu4(src[i-1:]) < 0 {
					return nil, false, false
				}
				i += 5
			default:
				return nil, false, false
			}
		case c < ' ':
			return nil, false, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(src[i:])
			if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
				simple = false
			}
			i += size
		}
	}
}

// plain marks the bytes a string copies as they are: ASCII other than
// control bytes, quote and backslash.
var plain = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// getu4 decodes \uXXXX at the start of s, or returns -1 (encoding/json's).
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// unquote unescapes the body of a string the parser has checked, as
// encoding/json's unquoteBytes does.
func unquote(s []byte) []byte {
	b := make([]byte, 0, len(s)+2*utf8.UTFMax)
	for r := 0; r < len(s); {
		switch c := s[r]; {
		case c == '\\':
			r++
			switch s[r] {
			case '"', '\\', '/', '\'':
				b = append(b, s[r])
				r++
			case 'b':
				b = append(b, '\b')
				r++
			case 'f':
				b = append(b, '\f')
				r++
			case 'n':
				b = append(b, '\n')
				r++
			case 'r':
				b = append(b, '\r')
				r++
			case 't':
				b = append(b, '\t')
				r++
			case 'u':
				r--
				rr := getu4(s[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					rr1 := getu4(s[r:])
					if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
						r += 6
						b = utf8.AppendRune(b, dec)
						break
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			r += size
			b = utf8.AppendRune(b, rr)
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does
// without HTML escaping.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if plain[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRune(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
