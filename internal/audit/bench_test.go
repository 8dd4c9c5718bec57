package audit

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Realistic inputs of the audit path, shared by the benchmarks and the
// tests that compare the redactor with its former implementation.
var (
	// benchArgsEcho is the bench harness's tools/call arguments.
	benchArgsEcho = json.RawMessage(`{"text":"switchboard bench"}`)
	// benchArgsNested is a database tool's arguments with secrets at
	// several depths and key spellings.
	benchArgsNested = json.RawMessage(`{"query":"select id, name from users where org = $1","params":["acme"],"limit":50,` +
		`"connection":{"host":"db.internal","port":5432,"user":"app","password":"hunter2","sslmode":"require"},` +
		`"options":{"auth":{"api_key":"sk-live-123","Authorization":"Bearer abc.def"},` +
		`"headers":{"X-Api-Key":"k","Accept":"application/json","User-Agent":"agent/1.0"}},` +
		`"filters":[{"field":"name","op":"eq","value":"x"},{"field":"password_hash","op":"neq","value":"y"}],` +
		`"trace":{"span":"a1b2","sampled":true}}`)
	// benchResultEcho is the demo echo tool's result as the pipeline
	// marshals it.
	benchResultEcho = json.RawMessage(`{"content":[{"type":"text","text":"switchboard bench"}]}`)
)

// benchResultJSONText is a tool result carrying a JSON document as text
// (as many tools answer), with a secret in every item, plus the same data as
// structuredContent: about 4 KiB.
func benchResultJSONText() json.RawMessage {
	var items []string
	for i := range 20 {
		items = append(items, fmt.Sprintf(`{"id":%d,"name":"user %d","email":"u%d@example.com","session_token":"tok-%d","roles":["dev","ops"],"active":true}`, i, i, i, i))
	}
	doc := `{"items":[` + strings.Join(items, ",") + `],"next":"cursor-20"}`
	text, _ := json.Marshal(doc)
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(text) + `}],"structuredContent":` + doc + `}`)
}

// benchResultLarge is a 40 KiB result (a file read): prose, no JSON inside.
func benchResultLarge() json.RawMessage {
	text, _ := json.Marshal(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 900))
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(text) + `}]}`)
}

// benchKeys are object keys as tool arguments and results have them.
var benchKeys = []string{"text", "query", "limit", "password", "apiKey", "X-Api-Key", "Authorization",
	"user_id", "created_at", "description", "session_token", "Content-Type", "items", "nextCursor"}

func BenchmarkSensitive(b *testing.B) {
	r := mustRedactor(b, nil)
	b.ReportAllocs()
	for b.Loop() {
		for _, k := range benchKeys {
			r.sensitive(k)
		}
	}
}

func BenchmarkParamsHash(b *testing.B) {
	r := mustRedactor(b, nil)
	for _, bc := range []struct {
		name string
		args json.RawMessage
	}{
		{"echo", benchArgsEcho},
		{"nested-secrets", benchArgsNested},
		{"none", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.args)))
			for b.Loop() {
				r.ParamsHash(bc.args)
			}
		})
	}
}

func BenchmarkSummary(b *testing.B) {
	r := mustRedactor(b, nil)
	for _, bc := range []struct {
		name string
		v    json.RawMessage
	}{
		{"echo", benchResultEcho},
		{"nested-secrets", benchArgsNested},
		{"json-text-4k", benchResultJSONText()},
		{"prose-40k", benchResultLarge()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.v)))
			for b.Loop() {
				r.Summary(bc.v, DefaultSummaryRunes)
			}
		})
	}
}

// BenchmarkRedact is Redact of a decoded value (the form a REST caller's
// arguments may take): it must copy, never touch its input.
func BenchmarkRedact(b *testing.B) {
	r := mustRedactor(b, nil)
	v, ok := decode(benchArgsNested)
	if !ok {
		b.Fatal("bad fixture")
	}
	b.ReportAllocs()
	for b.Loop() {
		r.Redact(v)
	}
}
