package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Placeholders written in place of data the audit log must not hold.
const (
	// Redacted replaces the value of every key a [Redactor] matches.
	Redacted = "[REDACTED]"
	// Unparseable stands for input that is not JSON: it is never copied
	// into the log, because it may be a secret that failed to decode.
	Unparseable = "[unparseable]"
)

// DefaultRedactPatterns are the key patterns used when [NewRedactor] gets
// nil. They are deliberately broad ("key" also matches "apiKey",
// "X-Api-Key" and "keyword"): a redacted harmless value costs less than a
// leaked credential.
var DefaultRedactPatterns = []string{`password|passwd|token|secret|key|credential|authorization|cookie`}

// DefaultSummaryRunes bounds [Redactor.Summary] when maxRunes <= 0; it matches the
// 500-character result_summary column of seed 000.
const DefaultSummaryRunes = 500

// maxDepth matches encoding/json's nesting limit, so every decoded value is
// redacted in full while a cyclic value built in code cannot overflow the
// stack.
const maxDepth = 10000

// Redactor replaces the values of sensitive keys so that arguments and
// results can be hashed and summarized without carrying secrets into the
// audit log. Keys are inspected, and strings that hold a JSON object or
// array (tool results often carry JSON as text) are redacted as JSON; free
// text is not scanned: matching "Bearer …" inside prose would be guesswork,
// and the log stores a hash of the arguments, not the arguments. JSON text
// (arguments, results, strings holding JSON) is redacted as text, without
// building a decoded value, and keys are matched against the patterns
// expanded once into words where that is possible (see keyMatcher). A
// Redactor is immutable and safe for concurrent use.
type Redactor struct {
	keys *keyMatcher
}

// NewRedactor compiles patterns as case-insensitive regular expressions
// matched anywhere in a key. nil means [DefaultRedactPatterns]; an empty,
// non-nil slice redacts nothing. An empty pattern is an error because it
// would match, and so redact, every key.
func NewRedactor(patterns []string) (*Redactor, error) {
	if patterns == nil {
		patterns = DefaultRedactPatterns
	}
	if len(patterns) == 0 {
		return &Redactor{keys: newKeyMatcher(nil)}, nil
	}
	var errs []error
	parts := make([]string, 0, len(patterns))
	for i, p := range patterns {
		if p == "" {
			errs = append(errs, fmt.Errorf("redact pattern %d: empty pattern would redact every key", i))
			continue
		}
		if _, err := regexp.Compile(p); err != nil {
			errs = append(errs, fmt.Errorf("redact pattern %d %q: %w", i, p, err))
			continue
		}
		parts = append(parts, "(?:"+p+")")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	re, err := regexp.Compile("(?i)" + strings.Join(parts, "|"))
	if err != nil {
		return nil, fmt.Errorf("combining redact patterns: %w", err)
	}
	return &Redactor{keys: newKeyMatcher(re)}, nil
}

// sensitive reports whether the value under key must be redacted.
func (r *Redactor) sensitive(key string) bool {
	return r.keys.match(key)
}

// Redact returns a deep copy of v, a decoded JSON value (map[string]any,
// []any, string, json.Number, float64, bool or nil), in which the value of
// every matching key, at any depth, is [Redacted]. A json.RawMessage is
// decoded first. Any other type (a struct, a typed map) is converted through
// its JSON encoding, so the result is always a plain decoded JSON value and
// no field escapes redaction; a value that cannot be encoded becomes
// [Unparseable].
func (r *Redactor) Redact(v any) any {
	return r.redact(v, 0)
}

func (r *Redactor) redact(v any, depth int) any {
	if depth > maxDepth {
		return Redacted
	}
	switch v := v.(type) {
	case string:
		return r.redactString(v, depth)
	case nil, bool, json.Number, float64, float32,
		int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if r.sensitive(k) {
				out[k] = Redacted
				continue
			}
			out[k] = r.redact(e, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = r.redact(e, depth+1)
		}
		return out
	case json.RawMessage:
		d, ok := decode(v)
		if !ok {
			return Unparseable
		}
		return r.redact(d, depth+1)
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			return Unparseable
		}
		d, ok := decode(raw)
		if !ok {
			return Unparseable
		}
		return r.redact(d, depth+1)
	}
}

// redactString redacts a string holding a JSON object or array, as tool
// results often carry JSON as text: a secret under a sensitive key inside it
// must not escape because it was serialized once more.
func (r *Redactor) redactString(s string, depth int) any {
	t := strings.TrimSpace(s)
	if len(t) < 2 || (t[0] != '{' && t[0] != '[') {
		return s
	}
	b, ok := r.canonical(nil, []byte(t), depth+1)
	if !ok {
		return s
	}
	return string(b)
}

// decode parses exactly one JSON value, keeping numbers exact. Empty input
// decodes to nil, as a nil json.RawMessage encodes to null.
func decode(raw []byte) (any, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, true
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	// Trailing data means raw was not one JSON value.
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

// encode writes v as compact JSON with sorted object keys (encoding/json
// sorts map keys) and without HTML escaping, which would only make
// summaries harder to read.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// RedactJSON decodes raw (numbers kept exact), redacts it and re-encodes it
// canonically: compact, object keys sorted. Equal values therefore give
// equal bytes whatever their key order. Empty input gives null; input that
// is not exactly one JSON value gives the JSON string [Unparseable].
func (r *Redactor) RedactJSON(raw json.RawMessage) json.RawMessage {
	out, ok := r.canonical(nil, raw, 0)
	if !ok {
		return unparseableJSON()
	}
	return out
}

func unparseableJSON() json.RawMessage {
	return json.RawMessage(`"` + Unparseable + `"`)
}

// ParamsHash is the hex SHA-256 of [Redactor.RedactJSON] of args. It lets
// the log tell identical calls apart from different ones without storing
// the arguments; because secrets are redacted first, it neither changes with
// nor reveals a secret value. Empty or null args hash as "{}", so a call
// without arguments and one with an empty object look the same.
func (r *Redactor) ParamsHash(args json.RawMessage) string {
	s := scratchPool.Get().(*scratch)
	defer s.release()
	buf := s.buf()
	canon, ok := r.canonicalWith(s, buf, args, 0)
	switch {
	case !ok:
		canon = append(canon, unparseableJSON()...)
	case string(canon) == "null":
		canon = append(canon[:0], "{}"...)
	}
	sum := sha256.Sum256(canon)
	s.free(canon)
	return hex.EncodeToString(sum[:])
}

// Summary is the canonical JSON of the redacted v cut to at most maxRunes
// runes (default [DefaultSummaryRunes] when maxRunes <= 0), the last of which is "…"
// when it was cut. The cut is on a rune boundary so the summary stays valid
// UTF-8. An untyped nil or empty json.RawMessage gives "", so a call without
// a result leaves result_summary empty rather than "null".
func (r *Redactor) Summary(v any, maxRunes int) string {
	if maxRunes <= 0 {
		maxRunes = DefaultSummaryRunes
	}
	if v == nil {
		return ""
	}
	if raw, ok := v.(json.RawMessage); ok {
		if len(bytes.TrimSpace(raw)) == 0 {
			return ""
		}
		// Redacted as text: decoding it into a value only to encode that
		// again was most of the audit's cost per call. The depth is the
		// one Redact gives a RawMessage's decoded value.
		s := scratchPool.Get().(*scratch)
		defer s.release()
		out, ok := r.canonicalWith(s, s.buf(), raw, 1)
		if !ok {
			out = append(out[:0], unparseableJSON()...)
		}
		sum := truncateRunes(out, maxRunes)
		s.free(out)
		return sum
	}
	out, err := encode(r.Redact(v))
	if err != nil {
		out = unparseableJSON()
	}
	return truncateRunes(out, maxRunes)
}

// truncateRunes is at most maxRunes runes of b, the last of which is "…"
// when it was cut.
func truncateRunes(b []byte, maxRunes int) string {
	if len(b) <= maxRunes { // no more runes than bytes
		return string(b)
	}
	// Find where rune maxRunes-1 starts, and whether there is more
	// than one rune from there on, without counting the whole of b.
	cut, n := -1, 0
	for i := 0; i < len(b); n++ {
		if n == maxRunes-1 {
			cut = i
		}
		if n == maxRunes {
			return string(b[:cut]) + "…"
		}
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return string(b)
}
