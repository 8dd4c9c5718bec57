// Package secrets encrypts the secrets the gateway stores (upstream header
// values, env values, bearer tokens of servers registered through the API)
// with AES-256-GCM, so a dump of the database holds no plaintext (NFR-SEC1).
//
// A sealed value is "enc:v1:<keyid>:<base64(nonce|ciphertext)>". The key id
// lets [Keyring.Open] pick the right key after a rotation, and values that
// are not sealed (${VAR} references, rows written before encryption) read
// back unchanged.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
)

// Environment variables read by [Load].
const (
	EnvKey        = "SWITCHBOARD_SECRET_KEY"
	EnvKeyFile    = "SWITCHBOARD_SECRET_KEY_FILE"
	EnvOldKey     = "SWITCHBOARD_SECRET_KEY_OLD"
	EnvOldKeyFile = "SWITCHBOARD_SECRET_KEY_OLD_FILE"
)

// KeySize is the length of a decoded key: AES-256 takes 32 bytes.
const KeySize = 32

const (
	sealedPrefix   = "enc:v1:"
	keyIDLen       = 8 // hex digits of SHA-256(key)
	nonceSize      = 12
	gcmOverhead    = 16
	minPayloadSize = nonceSize + gcmOverhead
)

// ErrNoKey reports that a secret must be sealed or opened but no key is
// configured; its text tells the operator how to configure one.
var ErrNoKey = errors.New("no secret key configured: set SWITCHBOARD_SECRET_KEY (base64 of 32 random bytes, e.g. `switchboard keys generate-secret`) or SWITCHBOARD_SECRET_KEY_FILE")

// Keyring holds the active key and older ones (for reading values written
// before a rotation). A nil *Keyring is usable: it opens values that are not
// sealed and reports [ErrNoKey] for everything else. It is safe for
// concurrent use.
type Keyring struct {
	active *key
	byID   map[string]*key
}

type key struct {
	id   string
	sum  [sha256.Size]byte // tells a key id collision from the same key given twice
	aead cipher.AEAD
}

// String describes k without key material, so a keyring that reaches a log
// or an error by accident leaks nothing.
func (k *Keyring) String() string {
	if k == nil {
		return "secrets.Keyring(none)"
	}
	return fmt.Sprintf("secrets.Keyring(active %s, %d keys)", k.active.id, len(k.byID))
}

// GoString is [Keyring.String], so %#v leaks nothing either.
func (k *Keyring) GoString() string { return k.String() }

// LogValue is [Keyring.String], for slog.
func (k *Keyring) LogValue() slog.Value { return slog.StringValue(k.String()) }

// NewKeyring builds a keyring from 32-byte keys: active seals, and every key
// (active and old) opens. Errors never contain key material.
func NewKeyring(active []byte, old ...[]byte) (*Keyring, error) {
	a, err := newKey(active)
	if err != nil {
		return nil, fmt.Errorf("active secret key: %w", err)
	}
	k := &Keyring{active: a, byID: map[string]*key{a.id: a}}
	for i, raw := range old {
		o, err := newKey(raw)
		if err != nil {
			return nil, fmt.Errorf("old secret key %d: %w", i+1, err)
		}
		if prev, ok := k.byID[o.id]; ok {
			if prev.sum != o.sum {
				return nil, fmt.Errorf("old secret key %d: its key id %s collides with another key; generate a new key", i+1, o.id)
			}
			continue // the same key given twice
		}
		k.byID[o.id] = o
	}
	return k, nil
}

func newKey(raw []byte) (*key, error) {
	if len(raw) != KeySize {
		return nil, fmt.Errorf("key is %d bytes, want %d", len(raw), KeySize)
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, fmt.Errorf("creating cipher: %w", err)
	}
	aead, err := cipher.NewGCMWithNonceSize(block, nonceSize)
	if err != nil {
		return nil, fmt.Errorf("creating GCM: %w", err)
	}
	sum := sha256.Sum256(raw)
	return &key{
		id:   hex.EncodeToString(sum[:])[:keyIDLen],
		sum:  sum,
		aead: aead,
	}, nil
}

// ActiveID is the key id that [Keyring.Seal] writes, so operators can check
// which key is active and whether a rotation has finished. It is "" for a
// nil keyring.
func (k *Keyring) ActiveID() string {
	if k == nil {
		return ""
	}
	return k.active.id
}

// GenerateKey returns a new random key in the base64 form [Load] reads, for
// the CLI and the docs.
func GenerateKey() (string, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// Load reads keys from the environment: SWITCHBOARD_SECRET_KEY (base64, std
// or url, 32 bytes decoded) or SWITCHBOARD_SECRET_KEY_FILE (a file holding
// the base64 key; permissions wider than 0600 are an error naming the file
// and its mode), plus optional SWITCHBOARD_SECRET_KEY_OLD or
// SWITCHBOARD_SECRET_KEY_OLD_FILE (the previous key, for reading during a
// rotation). Neither active variable set returns (nil, nil): no keyring.
// Errors never contain key material.
func Load(getenv func(string) string) (*Keyring, error) {
	active, err := loadKey(getenv, EnvKey, EnvKeyFile)
	if err != nil {
		return nil, err
	}
	old, err := loadKey(getenv, EnvOldKey, EnvOldKeyFile)
	if err != nil {
		return nil, err
	}
	if active == nil {
		if old != nil {
			return nil, fmt.Errorf("%s or %s is set without %s or %s: set the active key too", EnvOldKey, EnvOldKeyFile, EnvKey, EnvKeyFile)
		}
		return nil, nil
	}
	var olds [][]byte
	if old != nil {
		olds = append(olds, old)
	}
	k, err := NewKeyring(active, olds...)
	if err != nil {
		return nil, fmt.Errorf("loading secret keys: %w", err)
	}
	return k, nil
}

// loadKey reads one key from the variable valueVar or the file named by
// fileVar; it returns nil, nil when neither is set.
func loadKey(getenv func(string) string, valueVar, fileVar string) ([]byte, error) {
	value, path := getenv(valueVar), getenv(fileVar)
	switch {
	case value != "" && path != "":
		return nil, fmt.Errorf("both %s and %s are set: set only one", valueVar, fileVar)
	case value != "":
		return decodeKey(value, valueVar)
	case path != "":
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fileVar, err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: %s is not a regular file", fileVar, path)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			return nil, fmt.Errorf("%s: %s has mode %#o, which lets others read the key: chmod 600 it", fileVar, path, perm)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fileVar, err)
		}
		return decodeKey(string(b), fmt.Sprintf("%s (%s)", fileVar, path))
	default:
		return nil, nil
	}
}

// decodeKey decodes base64 in any of its four common spellings. where names
// the source in errors, which never quote s.
func decodeKey(s, where string) ([]byte, error) {
	s = strings.TrimSpace(s)
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if raw, err = enc.DecodeString(s); err == nil {
			break
		}
	}
	if err != nil {
		// The decoder's error only holds an offset, but say nothing of s.
		return nil, fmt.Errorf("%s is not valid base64 (generate a key with `switchboard keys generate-secret`)", where)
	}
	if len(raw) != KeySize {
		return nil, fmt.Errorf("%s decodes to %d bytes, want %d", where, len(raw), KeySize)
	}
	return raw, nil
}

// IsSealed reports whether value was produced by [Keyring.Seal] (by its
// prefix; it does not check that the value opens).
func IsSealed(value string) bool {
	return strings.HasPrefix(value, sealedPrefix)
}

// refsOnlyRE matches a value made only of ${VAR} references, which holds no
// secret itself: the secret lives in the gateway's environment.
var refsOnlyRE = regexp.MustCompile(`^(?:\$\{[A-Za-z_][A-Za-z0-9_]*\})+$`)

// NeedsSealing reports whether a stored value is a literal secret (not
// empty, not only ${VAR} references, not already sealed): those must be
// sealed before storage.
func NeedsSealing(value string) bool {
	return value != "" && !IsSealed(value) && !refsOnlyRE.MatchString(value)
}

// Seal encrypts plaintext with the active key. Each call draws a random
// nonce, so sealing the same plaintext twice gives different values.
func (k *Keyring) Seal(plaintext string) (string, error) {
	if k == nil {
		return "", ErrNoKey
	}
	nonce := make([]byte, nonceSize, nonceSize+len(plaintext)+gcmOverhead)
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("sealing secret: reading nonce: %w", err)
	}
	sealed := k.active.aead.Seal(nonce, nonce, []byte(plaintext), additionalData(k.active.id))
	return sealedPrefix + k.active.id + ":" + base64.StdEncoding.EncodeToString(sealed), nil
}

// additionalData binds the ciphertext to its format version and key id.
func additionalData(id string) []byte {
	return []byte(sealedPrefix + id)
}

// Open decrypts a sealed value with whichever key matches its key id. A
// value that is not sealed is returned as is with sealed=false, so stored
// ${VAR} references and old plaintext rows read back. Errors never contain
// the value or a key.
func (k *Keyring) Open(value string) (plaintext string, sealed bool, err error) {
	if !IsSealed(value) {
		return value, false, nil
	}
	id, payload, err := parseSealed(value)
	if err != nil {
		return "", true, err
	}
	if k == nil {
		return "", true, fmt.Errorf("opening secret sealed with key %s: %w", id, ErrNoKey)
	}
	key, ok := k.byID[id]
	if !ok {
		return "", true, fmt.Errorf("opening secret: it was sealed with key %s, which is not configured (set the previous key in %s)", id, EnvOldKey)
	}
	out, err := key.aead.Open(nil, payload[:nonceSize], payload[nonceSize:], additionalData(id))
	if err != nil {
		return "", true, fmt.Errorf("opening secret sealed with key %s: it was altered or the key is wrong: %w", id, err)
	}
	return string(out), true, nil
}

// parseSealed splits a sealed value into its key id and nonce|ciphertext.
func parseSealed(value string) (id string, payload []byte, err error) {
	rest := strings.TrimPrefix(value, sealedPrefix)
	id, enc, ok := strings.Cut(rest, ":")
	if !ok || len(id) != keyIDLen || !isLowerHex(id) {
		return "", nil, errors.New("opening secret: malformed sealed value (want enc:v1:<keyid>:<base64>)")
	}
	payload, err = base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", nil, fmt.Errorf("opening secret sealed with key %s: ciphertext is not valid base64", id)
	}
	if len(payload) < minPayloadSize {
		return "", nil, fmt.Errorf("opening secret sealed with key %s: ciphertext is truncated", id)
	}
	return id, payload, nil
}

func isLowerHex(s string) bool {
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Rotate re-seals value with the active key if it was sealed with another,
// for `keys rotate-secret`. It returns value and changed=false when value is
// already sealed with the active key or is not sealed at all (use
// [NeedsSealing] and [Keyring.Seal] for plaintext rows). A sealed value that
// does not open is an error either way.
func (k *Keyring) Rotate(value string) (string, bool, error) {
	if !IsSealed(value) {
		return value, false, nil
	}
	if k == nil {
		return "", false, fmt.Errorf("rotating secret: %w", ErrNoKey)
	}
	// Open even values sealed with the active key, so a rotation run
	// also reports corrupt rows.
	plain, _, err := k.Open(value)
	if err != nil {
		return "", false, err
	}
	if strings.HasPrefix(value, sealedPrefix+k.active.id+":") {
		return value, false, nil
	}
	out, err := k.Seal(plain)
	if err != nil {
		return "", false, err
	}
	return out, true, nil
}
