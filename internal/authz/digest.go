package authz

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// HashSecret is the hex SHA-256 of a token secret. Only this digest is stored,
// so a leaked database does not leak usable approvals; the secret is
// high-entropy, so an unsalted hash is enough.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// ArgsDigest is the hex SHA-256 of the canonical form of args, so a token
// bound to an argument object accepts that object however a client orders its
// keys or spaces its JSON. Canonical means: object keys sorted (byte-wise,
// recursively), no insignificant whitespace, strings re-escaped, and numbers
// normalized (1.0, 1e0 and 1 are the same number). Empty or null args digest
// as "{}", since a tool called without arguments receives an empty object.
// Invalid JSON is an error wrapping ErrInvalid.
func ArgsDigest(args json.RawMessage) (string, error) {
	var buf bytes.Buffer
	if err := canonicalJSON(&buf, args); err != nil {
		return "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:]), nil
}

func canonicalJSON(buf *bytes.Buffer, args json.RawMessage) error {
	if len(bytes.TrimSpace(args)) == 0 {
		buf.WriteString("{}")
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%w: arguments are not JSON: %v", ErrInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: arguments have data after the JSON value", ErrInvalid)
	}
	if v == nil {
		buf.WriteString("{}")
		return nil
	}
	writeCanonical(buf, v)
	return nil
}

func writeCanonical(buf *bytes.Buffer, v any) {
	switch v := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(v))
	case json.Number:
		buf.WriteString(canonicalNumber(v))
	case string:
		writeString(buf, v)
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeCanonical(buf, e)
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			writeCanonical(buf, v[k])
		}
		buf.WriteByte('}')
	default:
		// Unreachable: a json.Decoder with UseNumber yields only the types above.
		panic(fmt.Sprintf("authz: unexpected JSON value %T", v))
	}
}

func writeString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	buf.Write(b)
}

// canonicalNumber keeps integer literals as written (they may exceed float64
// precision) and writes every other number in its shortest float64 form, with
// integral values written as integers so 1.0 and 1 agree.
func canonicalNumber(n json.Number) string {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		if s == "-0" {
			return "0"
		}
		return s
	}
	f, err := n.Float64()
	if err != nil {
		return s // out of float64 range: the literal is the best we have
	}
	switch {
	case f == 0:
		return "0"
	case f == math.Trunc(f) && math.Abs(f) < 1e21:
		return strconv.FormatFloat(f, 'f', -1, 64)
	default:
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
}
