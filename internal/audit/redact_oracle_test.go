package audit

// This file keeps the Redactor as it was before issue 18 (a regular
// expression per key, a decoded copy of every value, encoding/json to
// encode it) as the oracle of the tests and fuzz targets that check the
// current one gives byte-identical output.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// oracleRedactor replaces the values of sensitive keys so that arguments and
// results can be hashed and summarized without carrying secrets into the
// audit log. Keys are inspected, and strings that hold a JSON object or
// array (tool results often carry JSON as text) are redacted as JSON; free
// text is not scanned: matching "Bearer …" inside prose would be guesswork,
// and the log stores a hash of the arguments, not the arguments. An
// oracleRedactor is immutable and safe for concurrent use.
type oracleRedactor struct {
	re *regexp.Regexp
}

// newOracleRedactor compiles patterns as case-insensitive regular expressions
// matched anywhere in a key. nil means [DefaultRedactPatterns]; an empty,
// non-nil slice redacts nothing. An empty pattern is an error because it
// would match, and so redact, every key.
func newOracleRedactor(patterns []string) (*oracleRedactor, error) {
	if patterns == nil {
		patterns = DefaultRedactPatterns
	}
	if len(patterns) == 0 {
		return &oracleRedactor{}, nil
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
	return &oracleRedactor{re: re}, nil
}

// sensitive reports whether the value under key must be redacted.
func (r *oracleRedactor) sensitive(key string) bool {
	return r.re != nil && r.re.MatchString(key)
}

// Redact returns a deep copy of v, a decoded JSON value (map[string]any,
// []any, string, json.Number, float64, bool or nil), in which the value of
// every matching key, at any depth, is [Redacted]. A json.RawMessage is
// decoded first. Any other type (a struct, a typed map) is converted through
// its JSON encoding, so the result is always a plain decoded JSON value and
// no field escapes redaction; a value that cannot be encoded becomes
// [Unparseable].
func (r *oracleRedactor) Redact(v any) any {
	return r.redact(v, 0)
}

func (r *oracleRedactor) redact(v any, depth int) any {
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
		d, ok := oracleDecode(v)
		if !ok {
			return Unparseable
		}
		return r.redact(d, depth+1)
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			return Unparseable
		}
		d, ok := oracleDecode(raw)
		if !ok {
			return Unparseable
		}
		return r.redact(d, depth+1)
	}
}

// decode parses exactly one JSON value, keeping numbers exact. Empty input
// decodes to nil, as a nil json.RawMessage encodes to null.
// redactString redacts a string holding a JSON object or array, as tool
// results often carry JSON as text: a secret under a sensitive key inside it
// must not escape because it was serialized once more.
func (r *oracleRedactor) redactString(s string, depth int) any {
	t := strings.TrimSpace(s)
	if len(t) < 2 || (t[0] != '{' && t[0] != '[') {
		return s
	}
	d, ok := oracleDecode([]byte(t))
	if !ok {
		return s
	}
	b, err := oracleEncode(r.redact(d, depth+1))
	if err != nil {
		return Unparseable
	}
	return string(b)
}

func oracleDecode(raw []byte) (any, bool) {
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
func oracleEncode(v any) ([]byte, error) {
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
func (r *oracleRedactor) RedactJSON(raw json.RawMessage) json.RawMessage {
	v, ok := oracleDecode(raw)
	if !ok {
		return oracleUnparseableJSON()
	}
	out, err := oracleEncode(r.redact(v, 0))
	if err != nil {
		return oracleUnparseableJSON()
	}
	return out
}

func oracleUnparseableJSON() json.RawMessage {
	return json.RawMessage(`"` + Unparseable + `"`)
}

// ParamsHash is the hex SHA-256 of [oracleRedactor.RedactJSON] of args. It lets
// the log tell identical calls apart from different ones without storing
// the arguments; because secrets are redacted first, it neither changes with
// nor reveals a secret value. Empty or null args hash as "{}", so a call
// without arguments and one with an empty object look the same.
func (r *oracleRedactor) ParamsHash(args json.RawMessage) string {
	canon := r.RedactJSON(args)
	if string(canon) == "null" {
		canon = json.RawMessage("{}")
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// Summary is the canonical JSON of the redacted v cut to at most maxRunes
// runes (default [DefaultSummaryRunes] when maxRunes <= 0), the last of which is "…"
// when it was cut. The cut is on a rune boundary so the summary stays valid
// UTF-8. An untyped nil or empty json.RawMessage gives "", so a call without
// a result leaves result_summary empty rather than "null".
func (r *oracleRedactor) Summary(v any, maxRunes int) string {
	if maxRunes <= 0 {
		maxRunes = DefaultSummaryRunes
	}
	if v == nil {
		return ""
	}
	if raw, ok := v.(json.RawMessage); ok && len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	out, err := oracleEncode(r.Redact(v))
	if err != nil {
		out = oracleUnparseableJSON()
	}
	return oracleTruncateRunes(string(out), maxRunes)
}

// truncateRunes cuts s to at most maxRunes runes, ending in "…" when cut.
func oracleTruncateRunes(s string, maxRunes int) string {
	if utf8.RuneCountInString(s) <= maxRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == maxRunes-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// oraclePatterns are redact patterns the comparisons run with: the
// default, patterns that expand into words, and patterns that keep their
// regexp (anchors, unbounded repetition, a case-sensitive part, runes
// outside ASCII).
var oraclePatterns = [][]string{
	nil,
	{},
	{`(?i)api[-_]?key`},
	{`pass(word|wd)?|sess[io]on_[a-z]`},
	{`x{2,3}|id$`},
	{`^token$`},
	{`secret|(?-i)Token`},
	{`auth.*`},
	{`[^a]`},
	{`k`},
	{"\u212a"},
	{`é|naïve`},
	{`a?`},
	{`\bkey\b`},
}

// oracleInputs are JSON texts (and near misses) the comparisons run on.
func oracleInputs() []string {
	// A string holding JSON holding a string holding JSON, with secrets.
	innermost := `{"token":"t3","ok":[1,{"Password":"p"}]}`
	mid, _ := json.Marshal(`{"z":1,"apiKey":"k","doc":` + mustQuote(innermost) + `}`)
	return []string{
		``, ` `, "\t\n", "\v", "\u00a0", `null`, `true`, `false`, `0`, `-0`, `1.10`, `1e400`, `-12.5E+3`,
		`01`, `1.`, `.5`, `-`, `1e`, `+1`, `tru`, `truex`, `nul`, `"x`, `{`, `[`, `]`, `{}}`, `[] []`, ` {} `,
		`{"a":1,}`, `[1,]`, `{"a" 1}`, `{1:2}`, `{"a":1 "b":2}`,
		`"plain"`, `"{not json"`, `" {\"password\":\"p\"} "`, `"[1, 2 ]"`, `"{}"`, `"[]"`, `"{"`,
		`{"password":"p","a":{"b":{"token":"t","c":1}},"d":"e"}`,
		`{"b":1,"a":2,"c":{"z":1,"y":2,"x":[{"k2":1,"k1":2}]}}`,
		`{"a":1,"a":2}`, `{"password":1,"password":2}`, `{"a":{"x":1},"b":0,"a":{"y":2}}`, `{"a":1,"b":2,"a":3,"b":4,"a":5}`,
		`{"esc\"aped":1,"t\u00e9":2,"\ud83d\ude00":3,"\ud800":4,"\udc00x":5,"a\/b":6,"\u0000":7,"\b\f\n\r\t":8}`,
		`{"s":"\u2028\u2029 \u007f <>& \u00e9 \ud83d\ude00 \ud83d \ude00\ud83d"}`,
		"{\"bad\xff\":\"\xfe\xff\",\"ok\":\"caf\xc3\xa9 \xe2\x80\xa8\"}",
		"{\"ctl\":\"a\x01b\"}", "{\"tab\":\"a\tb\"}",
		`{"text":"{\"auth\":{\"api_token\":\"s3cr3t\"},\"n\":1}"}`,
		`{"content":[{"type":"text","text":` + string(mid) + `}]}`,
		`{"text":"{\"a\":1} trailing"}`, `{"text":"\u0085{\"token\":1}\u00a0"}`, `{"text":"{\"token\":1}\u0085"}`,
		`{"KEY":1,"Kelvin\u212a":2,"ſecret":3,"naïve":4,"é":5,"xé":6}`,
		`[{"secret":1},2,"token",[],{},[[[{"cookie":{"x":[1,2,3]}}]]]]`,
		`{"n":12345678901234567890,"f":0.000001,"e":1E-7,"z":-0.0}`,
		string(benchArgsEcho), string(benchArgsNested), string(benchResultEcho), string(benchResultJSONText()),
	}
}

// deepInputs are texts at the nesting limits of decoding and redaction.
func deepInputs() []string {
	deep := func(n int, open, close, inner string) string {
		return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
	}
	return []string{
		deep(maxNesting, "[", "]", ""), deep(maxNesting+1, "[", "]", ""),
		deep(maxNesting-1, `{"a":`, "}", `{"password":1}`), deep(maxNesting, `{"a":`, "}", `{"password":1}`),
		deep(maxNesting-1, "[", "]", `"[[\"x\"]]"`), deep(maxNesting, "[", "]", `"[[\"x\"]]"`),
		deep(maxNesting-1, "[", "]", `{"password":[[1]]}`),
	}
}

func mustQuote(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// compareWithOracle fails when any output of r differs from o's for in.
func compareWithOracle(t *testing.T, r *Redactor, o *oracleRedactor, in []byte, maxRunes int) {
	t.Helper()
	if got, want := r.RedactJSON(in), o.RedactJSON(in); !bytes.Equal(got, want) {
		t.Fatalf("RedactJSON(%.200q)\n got %.300q\nwant %.300q", in, got, want)
	}
	if got, want := r.ParamsHash(in), o.ParamsHash(in); got != want {
		t.Fatalf("ParamsHash(%.200q) = %s, want %s", in, got, want)
	}
	if got, want := r.Summary(json.RawMessage(in), maxRunes), o.Summary(json.RawMessage(in), maxRunes); got != want {
		t.Fatalf("Summary(%.200q, %d)\n got %.300q\nwant %.300q", in, maxRunes, got, want)
	}
	// The decoded forms go through the tree walk, whose strings holding
	// JSON are redacted as text.
	v, ok := oracleDecode(in)
	if !ok {
		return
	}
	if got, want := r.Summary(v, maxRunes), o.Summary(v, maxRunes); got != want {
		t.Fatalf("Summary(decoded %.200q, %d)\n got %.300q\nwant %.300q", in, maxRunes, got, want)
	}
	if s, isString := v.(string); isString {
		if got, want := r.Summary(s, maxRunes), o.Summary(s, maxRunes); got != want {
			t.Fatalf("Summary(string %.200q)\n got %.300q\nwant %.300q", s, got, want)
		}
	}
}

// TestRedactorMatchesOracle checks that the redactor gives byte for byte
// what it gave before issue 18 (params hashes, summaries and redacted JSON
// of existing audit rows stay comparable) for every pattern and input of
// the tables.
func TestRedactorMatchesOracle(t *testing.T) {
	for _, patterns := range oraclePatterns {
		name := fmt.Sprintf("%q", patterns)
		if patterns == nil {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			r := mustRedactor(t, patterns)
			o, err := newOracleRedactor(patterns)
			if err != nil {
				t.Fatal(err)
			}
			inputs := oracleInputs()
			if len(patterns) == 0 || patterns[0] == `^token$` { // deep texts are slow: the default, none, and a regexp
				inputs = append(inputs, deepInputs()...)
			}
			for _, in := range inputs {
				compareWithOracle(t, r, o, []byte(in), 0)
				if len(in) < 1000 {
					for _, maxRunes := range []int{1, 2, 7, 40} {
						compareWithOracle(t, r, o, []byte(in), maxRunes)
					}
				}
			}
		})
	}
}

// TestRedactorMatchesOracleTypedValues covers values that are not decoded
// JSON: a struct, a typed map, a pointer, what cannot be encoded.
func TestRedactorMatchesOracleTypedValues(t *testing.T) {
	r := mustRedactor(t, nil)
	o, err := newOracleRedactor(nil)
	if err != nil {
		t.Fatal(err)
	}
	type creds struct {
		User     string            `json:"user"`
		Password string            `json:"password"`
		Extra    map[string]string `json:"extra"`
		Raw      json.RawMessage   `json:"raw"`
	}
	for _, v := range []any{
		creds{User: "u", Password: "p", Extra: map[string]string{"Token": "t", "b": `{"secret":1}`}, Raw: json.RawMessage(`{"cookie":1}`)},
		&creds{User: "u"},
		map[string]any{"r": json.RawMessage(`{"z":1,"apikey":2}`), "s": `["{\"token\":1}"]`, "n": 1.5, "i": 7},
		[]any{json.RawMessage(`nope`), "x"},
		map[string]int{"password": 1, "b": 2},
		func() {},
		math.Inf(1),
	} {
		if got, want := r.Summary(v, 300), o.Summary(v, 300); got != want {
			t.Errorf("Summary(%#v)\n got %q\nwant %q", v, got, want)
		}
		got, gerr := oracleEncode(r.Redact(v))
		want, werr := oracleEncode(o.Redact(v))
		if !bytes.Equal(got, want) || (gerr == nil) != (werr == nil) {
			t.Errorf("Redact(%#v) = %s (%v), want %s (%v)", v, got, gerr, want, werr)
		}
	}
}

// FuzzRedactorMatchesOracle looks for an input or pattern on which the
// redactor and its former implementation disagree.
func FuzzRedactorMatchesOracle(f *testing.F) {
	for _, in := range oracleInputs() {
		if len(in) < 1000 {
			f.Add("", []byte(in), uint16(500))
		}
	}
	for _, p := range oraclePatterns {
		if len(p) == 1 {
			f.Add(p[0], []byte(`{"KEY":1,"apiKey":2,"x":{"tokens":["a"]},"t":"{\"Token\":3}"}`), uint16(20))
		}
	}
	f.Fuzz(func(t *testing.T, pattern string, in []byte, maxRunes uint16) {
		var patterns []string // "" stands for the default patterns
		if pattern != "" {
			if _, err := regexp.Compile(pattern); err != nil {
				return
			}
			patterns = []string{pattern}
		}
		r, err := NewRedactor(patterns)
		o, oerr := newOracleRedactor(patterns)
		if (err == nil) != (oerr == nil) {
			t.Fatalf("NewRedactor(%q) error %v, was %v", patterns, err, oerr)
		}
		if err != nil {
			return // a pattern that compiles alone but not combined (`\Q`)
		}
		compareWithOracle(t, r, o, in, int(maxRunes))
	})
}

// FuzzKeyMatcher looks for a pattern and a key on which the word sets and
// the regexp disagree.
func FuzzKeyMatcher(f *testing.F) {
	for _, p := range append(DefaultRedactPatterns, `(?i)api[-_]?key`, `pass(word|wd)?`, `[a-c]x?`, "\u212a|s", `(?-i)Tok|x`, `a?`, `^k`) {
		for _, k := range []string{"", "apiKey", "API-KEY", "x-api_key", "Kelvin\u212a", "ſecret", "token", "TOKEN", "naïve", "passwd"} {
			f.Add(p, k)
		}
	}
	f.Fuzz(func(t *testing.T, pattern, key string) {
		re, err := regexp.Compile("(?i)(?:" + pattern + ")")
		if err != nil {
			return
		}
		m := newKeyMatcher(re)
		if got, want := m.match(key), re.MatchString(key); got != want {
			t.Fatalf("pattern %q key %q: match = %v, regexp says %v (words %v)", pattern, key, got, want, m.words)
		}
		if got, want := m.matchBytes([]byte(key)), re.MatchString(key); got != want {
			t.Fatalf("pattern %q key %q: matchBytes = %v, regexp says %v", pattern, key, got, want)
		}
	})
}

// TestKeyMatcherWords checks which patterns skip the regexp for ASCII keys:
// the speed of the audit path depends on the default being one of them.
func TestKeyMatcherWords(t *testing.T) {
	for _, tt := range []struct {
		pattern string
		words   bool
	}{
		{DefaultRedactPatterns[0], true},
		{`(?i)api[-_]?key`, true},
		{`pass(word|wd)?|sess[io]on_[a-z]`, true},
		{`x{2,3}`, true},
		{`a?`, true},
		{`^token$`, false},
		{`auth.*`, false},
		{`(?-i)Token`, false},
		{"\u212a", true}, // folds to k; keys holding the sign itself go to the regexp
		{`[a-z]+_id`, false},
	} {
		re := regexp.MustCompile("(?i)(?:" + tt.pattern + ")")
		if got := newKeyMatcher(re).words; got != tt.words {
			t.Errorf("pattern %q: words = %v, want %v", tt.pattern, got, tt.words)
		}
	}
}
