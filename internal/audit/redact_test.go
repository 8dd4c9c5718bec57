package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func mustRedactor(t testing.TB, patterns []string) *Redactor {
	t.Helper()
	r, err := NewRedactor(patterns)
	if err != nil {
		t.Fatalf("NewRedactor(%q): %v", patterns, err)
	}
	return r
}

// decodeT decodes JSON the way the gateway does: numbers kept exact.
func decodeT(t *testing.T, s string) any {
	t.Helper()
	v, ok := decode([]byte(s))
	if !ok {
		t.Fatalf("decoding %s: invalid JSON", s)
	}
	return v
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "nested objects",
			in:   `{"a":{"b":{"password":"x","c":1}},"d":"e"}`,
			want: `{"a":{"b":{"password":"[REDACTED]","c":1}},"d":"e"}`,
		},
		{
			name: "arrays of objects",
			in:   `{"items":[{"token":"t1","n":1},{"name":"ok"},[{"secret":"s"}]]}`,
			want: `{"items":[{"token":"[REDACTED]","n":1},{"name":"ok"},[{"secret":"[REDACTED]"}]]}`,
		},
		{
			name: "token under a non-matching key",
			in:   `{"auth":{"api_token":"s3cr3t"}}`,
			want: `{"auth":{"api_token":"[REDACTED]"}}`,
		},
		{
			name: "key-like names in any case",
			in:   `{"apiKey":"k1","X-Api-Key":"k2","password_hash":"h","PASSWORD":"p","Authorization":"Bearer x","Set-Cookie":"c","passwd":"p2"}`,
			want: `{"apiKey":"[REDACTED]","X-Api-Key":"[REDACTED]","password_hash":"[REDACTED]","PASSWORD":"[REDACTED]","Authorization":"[REDACTED]","Set-Cookie":"[REDACTED]","passwd":"[REDACTED]"}`,
		},
		{
			name: "whole sensitive subtree replaced",
			in:   `{"credentials":{"user":"u","pw":"p"},"tokens":["a","b"]}`,
			want: `{"credentials":"[REDACTED]","tokens":"[REDACTED]"}`,
		},
		{
			name: "non-matching keys and sensitive-looking values kept",
			in:   `{"query":"select password from users","limit":10,"ok":true,"none":null}`,
			want: `{"query":"select password from users","limit":10,"ok":true,"none":null}`,
		},
		{
			name: "numbers kept exact",
			in:   `{"big":12345678901234567890,"f":1.10,"e":1e400,"neg":-0}`,
			want: `{"big":12345678901234567890,"f":1.10,"e":1e400,"neg":-0}`,
		},
		{
			name: "top-level array",
			in:   `[{"secret":1},2,"token"]`,
			want: `[{"secret":"[REDACTED]"},2,"token"]`,
		},
		{
			name: "scalar",
			in:   `"password"`,
			want: `"password"`,
		},
	}
	r := mustRedactor(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := decodeT(t, tt.in)
			got := r.Redact(in)
			if diff := cmp.Diff(decodeT(t, tt.want), got); diff != "" {
				t.Errorf("Redact(%s) mismatch (-want +got):\n%s", tt.in, diff)
			}
			// The input is untouched: Redact copies.
			if diff := cmp.Diff(decodeT(t, tt.in), in); diff != "" {
				t.Errorf("Redact modified its input (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRedactCopiesDeeply(t *testing.T) {
	r := mustRedactor(t, nil)
	in := map[string]any{"a": map[string]any{"b": []any{"c"}}}
	out := r.Redact(in).(map[string]any)
	out["a"].(map[string]any)["b"].([]any)[0] = "changed"
	if got := in["a"].(map[string]any)["b"].([]any)[0]; got != "c" {
		t.Errorf("changing Redact's result changed its input: got %v", got)
	}
}

func TestRedactOtherTypes(t *testing.T) {
	type creds struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	r := mustRedactor(t, nil)
	tests := []struct {
		name string
		in   any
		want any
	}{
		{
			name: "struct",
			in:   creds{User: "u", Password: "p"},
			want: map[string]any{"user": "u", "password": Redacted},
		},
		{
			name: "struct nested in a decoded value",
			in:   map[string]any{"c": &creds{User: "u", Password: "p"}},
			want: map[string]any{"c": map[string]any{"user": "u", "password": Redacted}},
		},
		{
			name: "typed map",
			in:   map[string]string{"token": "t", "x": "y"},
			want: map[string]any{"token": Redacted, "x": "y"},
		},
		{
			name: "raw message",
			in:   json.RawMessage(`{"secret":"s","n":1.50}`),
			want: map[string]any{"secret": Redacted, "n": json.Number("1.50")},
		},
		{
			name: "invalid raw message",
			in:   json.RawMessage(`{"secret":`),
			want: Unparseable,
		},
		{
			name: "unencodable",
			in:   map[string]any{"f": func() {}},
			want: map[string]any{"f": Unparseable},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, r.Redact(tt.in)); diff != "" {
				t.Errorf("Redact mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewRedactor(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		wantErr  bool
		in       string
		want     string
	}{
		{name: "custom patterns", patterns: []string{"^pin$", "ssn"}, in: `{"PIN":1,"pin_hint":2,"user_ssn":3,"password":4}`, want: `{"PIN":"[REDACTED]","password":4,"pin_hint":2,"user_ssn":"[REDACTED]"}`},
		{name: "pattern with its own flags", patterns: []string{"(?i)api[-_]?key"}, in: `{"API_KEY":1,"apikey":2,"token":3}`, want: `{"API_KEY":"[REDACTED]","apikey":"[REDACTED]","token":3}`},
		{name: "empty slice redacts nothing", patterns: []string{}, in: `{"password":"p"}`, want: `{"password":"p"}`},
		{name: "invalid pattern", patterns: []string{"ok", "("}, wantErr: true},
		{name: "empty pattern", patterns: []string{""}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRedactor(tt.patterns)
			if (err != nil) != tt.wantErr {
				t.Fatalf("NewRedactor(%q) error = %v, want error %v", tt.patterns, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got := string(r.RedactJSON(json.RawMessage(tt.in))); got != tt.want {
				t.Errorf("RedactJSON(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "sorted compact", in: "{ \"b\": 1,\n \"a\": [1, 2.0] }", want: `{"a":[1,2.0],"b":1}`},
		{name: "redacted", in: `{"token":"t","x":{"secret_key":[1]}}`, want: `{"token":"[REDACTED]","x":{"secret_key":"[REDACTED]"}}`},
		{name: "html kept readable", in: `{"q":"a<b && c>d"}`, want: `{"q":"a<b && c>d"}`},
		{name: "escaped key still matched", in: `{"pass\u0077ord":"p"}`, want: `{"password":"[REDACTED]"}`},
		{name: "empty", in: ``, want: `null`},
		{name: "whitespace", in: " \n", want: `null`},
		{name: "null", in: `null`, want: `null`},
		{name: "invalid", in: `{"password":"p"`, want: `"[unparseable]"`},
		{name: "trailing value", in: `{} {"password":"p"}`, want: `"[unparseable]"`},
		{name: "trailing garbage", in: `{}]`, want: `"[unparseable]"`},
	}
	r := mustRedactor(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(r.RedactJSON(json.RawMessage(tt.in))); got != tt.want {
				t.Errorf("RedactJSON(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestParamsHash(t *testing.T) {
	r := mustRedactor(t, nil)
	sum := sha256.Sum256([]byte("{}"))
	emptyHash := hex.EncodeToString(sum[:])
	tests := []struct {
		name  string
		a, b  string
		equal bool
	}{
		{name: "reordered keys", a: `{"a":1,"b":{"c":2,"d":3}}`, b: `{"b":{"d":3,"c":2},"a":1}`, equal: true},
		{name: "whitespace", a: `{"a":[1,2]}`, b: "{ \"a\" : [ 1 , 2 ] }", equal: true},
		{name: "different value", a: `{"a":1}`, b: `{"a":2}`, equal: false},
		{name: "different key", a: `{"a":1}`, b: `{"b":1}`, equal: false},
		{name: "only a secret differs", a: `{"q":"x","password":"hunter2"}`, b: `{"q":"x","password":"correct horse"}`, equal: true},
		{name: "nested secret differs", a: `{"auth":{"api_token":"a"}}`, b: `{"auth":{"api_token":"b"}}`, equal: true},
		{name: "empty and null", a: ``, b: `null`, equal: true},
		{name: "empty and empty object", a: ``, b: `{}`, equal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ha, hb := r.ParamsHash(json.RawMessage(tt.a)), r.ParamsHash(json.RawMessage(tt.b))
			if (ha == hb) != tt.equal {
				t.Errorf("ParamsHash(%s) = %s, ParamsHash(%s) = %s; want equal %v", tt.a, ha, tt.b, hb, tt.equal)
			}
			if len(ha) != 64 {
				t.Errorf("ParamsHash(%s) = %q, want 64 hex digits", tt.a, ha)
			}
		})
	}
	if got := r.ParamsHash(nil); got != emptyHash {
		t.Errorf("ParamsHash(nil) = %s, want sha256(\"{}\") = %s", got, emptyHash)
	}
}

func TestSummary(t *testing.T) {
	r := mustRedactor(t, nil)
	long := strings.Repeat("é", 600)
	tests := []struct {
		name string
		v    any
		max  int
		want string
	}{
		{name: "short", v: map[string]any{"b": 1, "a": "x"}, max: 100, want: `{"a":"x","b":1}`},
		{name: "exactly max", v: "abc", max: 5, want: `"abc"`},
		{name: "cut on rune boundary", v: map[string]any{"k": "héllo wörld"}, max: 9, want: `{"k":"hé…`},
		{name: "max one", v: "abc", max: 1, want: `…`},
		{name: "default max", v: long, max: 0, want: `"` + strings.Repeat("é", 498) + "…"},
		{name: "redacted", v: map[string]any{"session_token": "abc", "n": json.Number("1.0")}, max: 0, want: `{"n":1.0,"session_token":"[REDACTED]"}`},
		{name: "raw message", v: json.RawMessage(`{"z":1,"secret":"s"}`), max: 0, want: `{"secret":"[REDACTED]","z":1}`},
		{name: "nil", v: nil, max: 0, want: ``},
		{name: "empty raw message", v: json.RawMessage(nil), max: 0, want: ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.Summary(tt.v, tt.max)
			if got != tt.want {
				t.Errorf("Summary(%v, %d) = %q, want %q", tt.v, tt.max, got, tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("Summary(%v, %d) = %q is not valid UTF-8", tt.v, tt.max, got)
			}
		})
	}
}

// fuzzMarker is a password planted in every fuzz input; the output must
// never contain it.
const fuzzMarker = "Zq7-planted-Password-Value-x9K"

func FuzzRedactJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `[]`, `"x"`, `1.5e3`, ``, `{`, `{"password":"p"}`,
		`{"a":{"password":{"x":[1,2]}},"b":[{"PassWord":1}]}`,
		`{"pass\u0077ord":"p","password":"q"}`, `[{"token":"t"},{"password":null}]`,
		`{"password":"a","password":"b"}`, "{\"a\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	r := mustRedactor(f, nil)
	f.Fuzz(func(t *testing.T, raw []byte) {
		out := r.RedactJSON(raw)
		if !json.Valid(out) {
			t.Fatalf("RedactJSON(%q) = %q, not valid JSON", raw, out)
		}
		v, ok := decode(out)
		if !ok {
			t.Fatalf("RedactJSON(%q) = %q, does not decode", raw, out)
		}
		checkPasswordsRedacted(t, v)

		// Plant a password next to the input; its value must vanish.
		if strings.Contains(string(raw), fuzzMarker) || !json.Valid(raw) {
			return
		}
		planted := []byte(`{"password":"` + fuzzMarker + `","in":` + string(raw) + `}`)
		if out := r.RedactJSON(planted); strings.Contains(string(out), fuzzMarker) {
			t.Fatalf("RedactJSON(%q) = %q, leaks the password", planted, out)
		}
	})
}

// checkPasswordsRedacted fails if any key named password (in any case)
// holds anything but the placeholder.
func checkPasswordsRedacted(t *testing.T, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if strings.EqualFold(k, "password") && e != Redacted {
				t.Fatalf("key %q holds %v, want %q", k, e, Redacted)
			}
			checkPasswordsRedacted(t, e)
		}
	case []any:
		for _, e := range v {
			checkPasswordsRedacted(t, e)
		}
	}
}

func TestRedactJSONInsideStrings(t *testing.T) {
	r, err := NewRedactor(nil)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"content": []any{map[string]any{"type": "text", "text": `{"auth":{"api_token":"s3cr3t"},"n":1}`}}, "plain": "{not json"}
	out, _ := json.Marshal(r.Redact(in))
	if strings.Contains(string(out), "s3cr3t") {
		t.Errorf("secret inside a JSON string survived: %s", out)
	}
	if !strings.Contains(string(out), `{not json`) || !strings.Contains(string(out), `\"n\":1`) {
		t.Errorf("non-secret text changed: %s", out)
	}
}
