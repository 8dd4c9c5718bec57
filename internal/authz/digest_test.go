package authz

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestArgsDigestCanonical(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"key order", `{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
		{"whitespace", `{"a":[1,2]}`, " {\n\t\"a\" : [ 1 , 2 ]\n} ", true},
		{"nested key order", `{"x":{"b":[{"d":1,"c":2}],"a":null}}`, `{"x":{"a":null,"b":[{"c":2,"d":1}]}}`, true},
		{"escapes", `{"s":"A\u00e9"}`, `{"s":"\u0041é"}`, true},
		{"integral float", `{"n":1}`, `{"n":1.0}`, true},
		{"exponent", `{"n":1000}`, `{"n":1e3}`, true},
		{"negative zero", `{"n":0}`, `{"n":-0.0}`, true},
		{"empty is {}", ``, `{}`, true},
		{"null is {}", `null`, `{}`, true},
		{"blank is {}", " \n", `{}`, true},
		{"different value", `{"a":1}`, `{"a":2}`, false},
		{"different key", `{"a":1}`, `{"b":1}`, false},
		{"string vs number", `{"a":1}`, `{"a":"1"}`, false},
		{"array order matters", `[1,2]`, `[2,1]`, false},
		{"fraction", `{"n":1.5}`, `{"n":1}`, false},
		{"big integers kept", `{"n":9007199254740993}`, `{"n":9007199254740992}`, false},
		{"empty object vs array", `{}`, `[]`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			da, err := ArgsDigest(json.RawMessage(tc.a))
			if err != nil {
				t.Fatalf("ArgsDigest(%s): %v", tc.a, err)
			}
			db, err := ArgsDigest(json.RawMessage(tc.b))
			if err != nil {
				t.Fatalf("ArgsDigest(%s): %v", tc.b, err)
			}
			if (da == db) != tc.same {
				t.Errorf("ArgsDigest(%s) == ArgsDigest(%s) is %v, want %v", tc.a, tc.b, da == db, tc.same)
			}
		})
	}
}

func TestArgsDigestValue(t *testing.T) {
	// The digest is the SHA-256 of the canonical text, so other tools can
	// compute it: {"a":1,"b":[true,null]}.
	got, err := ArgsDigest(json.RawMessage(`{ "b": [true, null], "a": 1 }`))
	if err != nil {
		t.Fatal(err)
	}
	if want := HashSecret(`{"a":1,"b":[true,null]}`); got != want {
		t.Errorf("ArgsDigest = %s, want %s", got, want)
	}
}

func TestArgsDigestInvalid(t *testing.T) {
	for _, in := range []string{`{`, `{"a":}`, `{} {}`, `{}x`, `nul`, `'a'`} {
		t.Run(in, func(t *testing.T) {
			if d, err := ArgsDigest(json.RawMessage(in)); !errors.Is(err, ErrInvalid) {
				t.Errorf("ArgsDigest(%q) = %q, %v; want ErrInvalid", in, d, err)
			}
		})
	}
}

func TestHashSecret(t *testing.T) {
	// SHA-256("abc"), FIPS 180-2 test vector.
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := HashSecret("abc"); got != want {
		t.Errorf("HashSecret(abc) = %s, want %s", got, want)
	}
}

func FuzzArgsDigest(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2.5,"x",null,true]}`, `[1e400]`, `"s"`, `{"a":{"b":{}}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		d, err := ArgsDigest(json.RawMessage(in))
		if err != nil {
			return
		}
		// The canonical form digests to itself: canonicalization is idempotent.
		var buf bytes.Buffer
		if err := canonicalJSON(&buf, json.RawMessage(in)); err != nil {
			t.Fatal(err)
		}
		d2, err := ArgsDigest(buf.Bytes())
		if err != nil {
			t.Fatalf("canonical form %q does not parse: %v", buf.String(), err)
		}
		if d != d2 {
			t.Errorf("digest of %q differs from digest of its canonical form %q", in, buf.String())
		}
	})
}
