package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testKey returns a distinct, recognisable 32-byte key.
func testKey(seed byte) []byte {
	b := make([]byte, KeySize)
	for i := range b {
		b[i] = seed + byte(i)*7
	}
	return b
}

var (
	keyA = testKey(1)
	keyB = testKey(100)
	// keyAStr is the known key string no error may contain.
	keyAStr = base64.StdEncoding.EncodeToString(keyA)
	keyBStr = base64.StdEncoding.EncodeToString(keyB)
)

func mustKeyring(t testing.TB, active []byte, old ...[]byte) *Keyring {
	t.Helper()
	k, err := NewKeyring(active, old...)
	if err != nil {
		t.Fatalf("NewKeyring: %v", err)
	}
	return k
}

// noKeyMaterial fails if err's text holds any spelling of the test keys.
func noKeyMaterial(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	for _, k := range [][]byte{keyA, keyB} {
		for _, s := range []string{
			base64.StdEncoding.EncodeToString(k),
			base64.RawURLEncoding.EncodeToString(k),
			hex.EncodeToString(k),
			string(k),
		} {
			if strings.Contains(msg, s) {
				t.Errorf("error %q holds key material", msg)
			}
		}
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	k := mustKeyring(t, keyA)
	for _, plain := range []string{"", "hunter2", "Bearer eyJhbGciOi.payload.sig", strings.Repeat("é", 1000), "line\nbreak\x00nul"} {
		t.Run(fmt.Sprintf("%.10q", plain), func(t *testing.T) {
			sealed, err := k.Seal(plain)
			if err != nil {
				t.Fatalf("Seal: %v", err)
			}
			if !IsSealed(sealed) {
				t.Errorf("IsSealed(%q) = false", sealed)
			}
			if plain != "" && strings.Contains(sealed, plain) {
				t.Errorf("sealed value %q holds the plaintext", sealed)
			}
			wantPrefix := "enc:v1:" + k.ActiveID() + ":"
			if !strings.HasPrefix(sealed, wantPrefix) {
				t.Errorf("sealed = %q, want prefix %q", sealed, wantPrefix)
			}
			got, wasSealed, err := k.Open(sealed)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if diff := cmp.Diff(plain, got); diff != "" || !wasSealed {
				t.Errorf("Open: sealed = %v, plaintext (-want +got):\n%s", wasSealed, diff)
			}
			// A random nonce: sealing twice differs.
			again, err := k.Seal(plain)
			if err != nil {
				t.Fatalf("Seal again: %v", err)
			}
			if again == sealed {
				t.Errorf("Seal twice gave the same value %q", sealed)
			}
		})
	}
}

func TestKeyID(t *testing.T) {
	// The id is the first 8 hex digits of SHA-256(key), fixed so stored
	// values stay readable across releases.
	k := mustKeyring(t, make([]byte, KeySize))
	if got, want := k.ActiveID(), "66687aad"; got != want {
		t.Errorf("ActiveID of the zero key = %q, want %q", got, want)
	}
	if got := (*Keyring)(nil).ActiveID(); got != "" {
		t.Errorf("nil ActiveID = %q, want empty", got)
	}
}

func TestOpenNotSealed(t *testing.T) {
	for _, k := range []*Keyring{mustKeyring(t, keyA), nil} {
		for _, v := range []string{"", "${API_TOKEN}", "plain old secret", "enc:v2:abc", "ENC:V1:x"} {
			got, sealed, err := k.Open(v)
			if err != nil || sealed || got != v {
				t.Errorf("%v.Open(%q) = %q, %v, %v; want it back unsealed", k, v, got, sealed, err)
			}
		}
	}
}

func TestOpenErrors(t *testing.T) {
	k := mustKeyring(t, keyA)
	good, err := k.Seal("hunter2")
	if err != nil {
		t.Fatal(err)
	}
	id, payload, _ := strings.Cut(strings.TrimPrefix(good, "enc:v1:"), ":")
	raw, _ := base64.StdEncoding.DecodeString(payload)
	flip := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return "enc:v1:" + id + ":" + base64.StdEncoding.EncodeToString(b)
	}
	otherID := mustKeyring(t, keyB).ActiveID()
	tests := []struct {
		name    string
		k       *Keyring
		value   string
		want    string // substring of the error
		isNoKey bool
	}{
		{name: "tampered ciphertext", k: k, value: flip(len(raw) - 20), want: "altered or the key is wrong"},
		{name: "tampered tag", k: k, value: flip(len(raw) - 1), want: "altered or the key is wrong"},
		{name: "tampered nonce", k: k, value: flip(0), want: "altered or the key is wrong"},
		{name: "wrong key", k: mustKeyring(t, keyB), value: good, want: "not configured"},
		{name: "wrong key, forged id", k: mustKeyring(t, keyB), value: "enc:v1:" + otherID + ":" + payload, want: "altered or the key is wrong"},
		{name: "truncated", k: k, value: good[:len(good)-10], want: "base64"},
		{name: "truncated to nonce", k: k, value: "enc:v1:" + id + ":" + base64.StdEncoding.EncodeToString(raw[:nonceSize]), want: "truncated"},
		{name: "empty payload", k: k, value: "enc:v1:" + id + ":", want: "truncated"},
		{name: "no payload", k: k, value: "enc:v1:" + id, want: "malformed"},
		{name: "bad id", k: k, value: "enc:v1:XYZ:" + payload, want: "malformed"},
		{name: "upper-case id", k: k, value: "enc:v1:" + strings.ToUpper(id) + "0:" + payload, want: "malformed"},
		{name: "nil keyring", k: nil, value: good, want: "no secret key configured", isNoKey: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, sealed, err := tt.k.Open(tt.value)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %q, %v; want an error containing %q", got, err, tt.want)
			}
			if !sealed || got != "" {
				t.Errorf("Open = %q, sealed %v; want \"\", true", got, sealed)
			}
			if errors.Is(err, ErrNoKey) != tt.isNoKey {
				t.Errorf("errors.Is(%v, ErrNoKey) = %v, want %v", err, !tt.isNoKey, tt.isNoKey)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), payload) {
				t.Errorf("error %q quotes the value", err)
			}
			noKeyMaterial(t, err)
		})
	}
}

func TestRotation(t *testing.T) {
	oldK := mustKeyring(t, keyA)
	oldSealed, err := oldK.Seal("token-1")
	if err != nil {
		t.Fatal(err)
	}
	// After rotation B is active and A is kept for reading.
	k := mustKeyring(t, keyB, keyA)
	if plain, _, err := k.Open(oldSealed); err != nil || plain != "token-1" {
		t.Fatalf("Open of a value sealed with the old key = %q, %v", plain, err)
	}
	newSealed, err := k.Seal("token-2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(newSealed, "enc:v1:"+mustKeyring(t, keyB).ActiveID()+":") {
		t.Errorf("Seal after rotation = %q, want the new key's id", newSealed)
	}
	if _, _, err := oldK.Open(newSealed); err == nil {
		t.Error("old keyring opened a value sealed with the new key")
	}

	tests := []struct {
		name        string
		value       string
		wantChanged bool
		wantPlain   string
	}{
		{name: "sealed with the old key", value: oldSealed, wantChanged: true, wantPlain: "token-1"},
		{name: "sealed with the active key", value: newSealed, wantChanged: false, wantPlain: "token-2"},
		{name: "reference", value: "${TOKEN}", wantChanged: false, wantPlain: "${TOKEN}"},
		{name: "plaintext", value: "literal", wantChanged: false, wantPlain: "literal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed, err := k.Rotate(tt.value)
			if err != nil {
				t.Fatalf("Rotate: %v", err)
			}
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if !changed && got != tt.value {
				t.Errorf("unchanged Rotate returned %q, want %q", got, tt.value)
			}
			if changed && !strings.HasPrefix(got, "enc:v1:"+k.ActiveID()+":") {
				t.Errorf("Rotate = %q, want sealed with the active key", got)
			}
			// The new keyring alone (old key retired) reads the result.
			plain, _, err := mustKeyring(t, keyB).Open(got)
			if err != nil || plain != tt.wantPlain {
				t.Errorf("Open(Rotate) with the new key alone = %q, %v; want %q", plain, err, tt.wantPlain)
			}
		})
	}

	if _, _, err := mustKeyring(t, keyB).Rotate(oldSealed); err == nil {
		t.Error("Rotate without the old key succeeded")
	}
	if _, _, err := (*Keyring)(nil).Rotate(oldSealed); !errors.Is(err, ErrNoKey) {
		t.Errorf("nil Rotate = %v, want ErrNoKey", err)
	}
}

func TestSealNoKey(t *testing.T) {
	var k *Keyring
	if _, err := k.Seal("x"); !errors.Is(err, ErrNoKey) {
		t.Errorf("nil Seal = %v, want ErrNoKey", err)
	}
	for _, want := range []string{"SWITCHBOARD_SECRET_KEY", "SWITCHBOARD_SECRET_KEY_FILE", "switchboard keys generate-secret"} {
		if !strings.Contains(ErrNoKey.Error(), want) {
			t.Errorf("ErrNoKey %q does not mention %q", ErrNoKey, want)
		}
	}
}

func TestNewKeyringErrors(t *testing.T) {
	tests := []struct {
		name   string
		active []byte
		old    [][]byte
		want   string
	}{
		{name: "short active", active: keyA[:16], want: "active secret key: key is 16 bytes, want 32"},
		{name: "long old", active: keyA, old: [][]byte{append(bytes.Clone(keyB), 0)}, want: "old secret key 1: key is 33 bytes, want 32"},
		{name: "nil active", active: nil, want: "active secret key: key is 0 bytes, want 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewKeyring(tt.active, tt.old...)
			if err == nil || err.Error() != tt.want {
				t.Errorf("NewKeyring = %v, want %q", err, tt.want)
			}
			noKeyMaterial(t, err)
		})
	}
	// The same key as active and old is fine.
	if _, err := NewKeyring(keyA, keyA); err != nil {
		t.Errorf("NewKeyring(A, A) = %v", err)
	}
}

func TestKeyringFormattingHidesKeys(t *testing.T) {
	k := mustKeyring(t, keyA, keyB)
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("loaded", "keyring", k)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%+v", k), fmt.Sprintf("%#v", k), fmt.Sprintf("%s", k), logs.String()} {
		noKeyMaterial(t, errors.New(s))
		if !strings.Contains(s, k.ActiveID()) {
			t.Errorf("formatted keyring %q does not name the active key id", s)
		}
	}
}

func TestGenerateKey(t *testing.T) {
	s1, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s2, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if s1 == s2 {
		t.Error("GenerateKey twice gave the same key")
	}
	k, err := Load(mapEnv(map[string]string{EnvKey: s1}))
	if err != nil || k == nil {
		t.Fatalf("Load of a generated key = %v, %v", k, err)
	}
}

func TestNeedsSealing(t *testing.T) {
	sealed, err := mustKeyring(t, keyA).Seal("x")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		value string
		want  bool
	}{
		{"", false},
		{"${API_TOKEN}", false},
		{"${a}${B_2}", false},
		{sealed, false},
		{"hunter2", true},
		{"Bearer ${TOKEN}", true},
		{"${TOKEN} ", true},
		{"${1BAD}", true},
		{"$TOKEN", true},
		{"${}", true},
		{"enc:v2:future", true},
	}
	got := map[string]bool{}
	want := map[string]bool{}
	for _, tt := range tests {
		got[tt.value] = NeedsSealing(tt.value)
		want[tt.value] = tt.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NeedsSealing (-want +got):\n%s", diff)
	}
}

func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeKeyFile(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad(t *testing.T) {
	sealedA, err := mustKeyring(t, keyA).Seal("a-secret")
	if err != nil {
		t.Fatal(err)
	}
	idA, idB := mustKeyring(t, keyA).ActiveID(), mustKeyring(t, keyB).ActiveID()
	good := writeKeyFile(t, "key", keyAStr+"\n", 0o600)
	readOnly := writeKeyFile(t, "key", keyAStr, 0o400)
	wide := writeKeyFile(t, "wide.key", keyAStr, 0o644)
	groupRead := writeKeyFile(t, "group.key", keyAStr, 0o640)
	oldFile := writeKeyFile(t, "old", keyAStr, 0o600)
	garbage := writeKeyFile(t, "garbage", "not base64 at all!", 0o600)
	short := writeKeyFile(t, "short", base64.StdEncoding.EncodeToString(keyA[:16]), 0o600)

	tests := []struct {
		name       string
		env        map[string]string
		wantActive string // "" means no keyring
		wantErr    string // substring
	}{
		{name: "nothing set", env: nil},
		{name: "std base64", env: map[string]string{EnvKey: keyAStr}, wantActive: idA},
		{name: "url base64", env: map[string]string{EnvKey: base64.URLEncoding.EncodeToString(keyA)}, wantActive: idA},
		{name: "raw url base64 with spaces", env: map[string]string{EnvKey: " " + base64.RawURLEncoding.EncodeToString(keyA) + "\n"}, wantActive: idA},
		{name: "file 0600", env: map[string]string{EnvKeyFile: good}, wantActive: idA},
		{name: "file 0400", env: map[string]string{EnvKeyFile: readOnly}, wantActive: idA},
		{name: "rotation: env active, file old", env: map[string]string{EnvKey: keyBStr, EnvOldKeyFile: oldFile}, wantActive: idB},
		{name: "rotation: both env", env: map[string]string{EnvKey: keyBStr, EnvOldKey: keyAStr}, wantActive: idB},
		{name: "file 0644", env: map[string]string{EnvKeyFile: wide}, wantErr: wide + " has mode 0644"},
		{name: "file 0640", env: map[string]string{EnvKeyFile: groupRead}, wantErr: groupRead + " has mode 0640"},
		{name: "old file 0644", env: map[string]string{EnvKey: keyBStr, EnvOldKeyFile: wide}, wantErr: "SWITCHBOARD_SECRET_KEY_OLD_FILE: " + wide + " has mode 0644"},
		{name: "missing file", env: map[string]string{EnvKeyFile: filepath.Join(t.TempDir(), "nope")}, wantErr: "SWITCHBOARD_SECRET_KEY_FILE: stat"},
		{name: "directory", env: map[string]string{EnvKeyFile: t.TempDir()}, wantErr: "not a regular file"},
		{name: "bad base64", env: map[string]string{EnvKey: "%%%" + keyAStr}, wantErr: "SWITCHBOARD_SECRET_KEY is not valid base64"},
		{name: "bad base64 in file", env: map[string]string{EnvKeyFile: garbage}, wantErr: "is not valid base64"},
		{name: "wrong length", env: map[string]string{EnvKey: base64.StdEncoding.EncodeToString(append(bytes.Clone(keyA), keyA...))}, wantErr: "SWITCHBOARD_SECRET_KEY decodes to 64 bytes, want 32"},
		{name: "wrong length in file", env: map[string]string{EnvKeyFile: short}, wantErr: "decodes to 16 bytes, want 32"},
		{name: "wrong length old", env: map[string]string{EnvKey: keyBStr, EnvOldKey: base64.StdEncoding.EncodeToString(keyA[:31])}, wantErr: "SWITCHBOARD_SECRET_KEY_OLD decodes to 31 bytes"},
		{name: "both active", env: map[string]string{EnvKey: keyAStr, EnvKeyFile: good}, wantErr: "set only one"},
		{name: "old without active", env: map[string]string{EnvOldKey: keyAStr}, wantErr: "set the active key too"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := Load(mapEnv(tt.env))
			noKeyMaterial(t, err)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load = %v, %v; want an error containing %q", k, err, tt.wantErr)
				}
				if k != nil {
					t.Errorf("Load returned a keyring with an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := k.ActiveID(); got != tt.wantActive {
				t.Fatalf("active key id = %q, want %q", got, tt.wantActive)
			}
			if k == nil {
				return
			}
			// Every loaded keyring holding key A reads A's values.
			if _, hasA := k.byID[idA]; hasA {
				if plain, _, err := k.Open(sealedA); err != nil || plain != "a-secret" {
					t.Errorf("Open = %q, %v", plain, err)
				}
			}
		})
	}
}

func FuzzOpen(f *testing.F) {
	k := mustKeyring(f, keyA, keyB)
	for _, p := range []string{"", "hunter2", strings.Repeat("x", 100)} {
		s, err := k.Seal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s)
		f.Add(s[:len(s)/2])
	}
	f.Add("enc:v1:")
	f.Add("enc:v1:::")
	f.Add("enc:v1:00000000:AAAA")
	f.Add("${TOKEN}")
	f.Fuzz(func(t *testing.T, value string) {
		plain, sealed, err := k.Open(value)
		if sealed != IsSealed(value) {
			t.Errorf("Open(%q) sealed = %v, IsSealed = %v", value, sealed, !sealed)
		}
		if !sealed && (err != nil || plain != value) {
			t.Errorf("Open(%q) of an unsealed value = %q, %v", value, plain, err)
		}
		if err != nil && plain != "" {
			t.Errorf("Open(%q) returned plaintext with error %v", value, err)
		}
		if _, _, err := k.Rotate(value); err == nil && sealed {
			// Rotating a value that opens must keep it readable.
			if _, _, err := k.Open(value); err != nil {
				t.Errorf("Rotate accepted %q that Open rejects: %v", value, err)
			}
		}
	})
}
