package seal

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the length of a key's secret, in bytes: 32 random bytes,
// written in standard base64 (openssl rand -base64 32).
const KeySize = 32

// MaxKeyIDLen bounds a key id, in bytes. The id is stored in every value
// sealed under the key, so it is kept short.
const MaxKeyIDLen = 64

// Key is one named secret of a Ring. Its secret is unexported and a Key
// prints as its id alone (String, GoString), so a Key logged, formatted
// or marshalled by mistake shows no secret.
type Key struct {
	// ID names the key in every value sealed under it: 1 to MaxKeyIDLen
	// letters, digits, '-', '_' or '.', chosen by the operator
	// ("2026-12").
	ID     string
	secret [KeySize]byte
}

// NewKey returns the key id whose secret is secret, which must be
// KeySize bytes. Errors name the id (when it is a valid one), never the
// secret.
func NewKey(id string, secret []byte) (Key, error) {
	if err := CheckKeyID(id); err != nil {
		return Key{}, err
	}
	if len(secret) != KeySize {
		return Key{}, fmt.Errorf("key %s: %d bytes, want %d (openssl rand -base64 32 makes one)", id, len(secret), KeySize)
	}
	k := Key{ID: id}
	copy(k.secret[:], secret)
	return k, nil
}

// ParseKey returns the key id whose secret is encoded in standard base64
// (with its padding: 44 characters for 32 bytes). White space around it,
// such as the newline at the end of a key file, is ignored. Errors name
// the id, never the encoded secret or a part of it.
func ParseKey(id, encoded string) (Key, error) {
	if err := CheckKeyID(id); err != nil {
		return Key{}, err
	}
	// Decode's own error quotes an offset into the secret; it is
	// replaced rather than wrapped, so nothing of the value travels.
	secret, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return Key{}, fmt.Errorf("key %s: not standard base64 (openssl rand -base64 32 makes one)", id)
	}
	defer clear(secret)
	return NewKey(id, secret)
}

// CheckKeyID returns an error if id cannot name a key. The error never
// quotes an id that is not valid: a secret written where the id belongs
// would otherwise reach a log.
func CheckKeyID(id string) error {
	switch {
	case id == "":
		return errors.New("key id is empty")
	case len(id) > MaxKeyIDLen:
		return fmt.Errorf("key id is %d bytes, more than %d", len(id), MaxKeyIDLen)
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return fmt.Errorf("key id has a character other than letters, digits, '-', '_' and '.' at byte %d", i)
		}
	}
	return nil
}

// idByte reports whether c may appear in a key id.
func idByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
}

// String returns "key " and the id: never the secret.
func (k Key) String() string { return "key " + k.ID }

// GoString is String, so %#v shows no secret either.
func (k Key) GoString() string { return k.String() }

// derive returns the key of purpose info derived from secret. Every use
// of a secret gets a key of its own (the AEAD key of format version 1 for
// one id, a Hasher's HMAC key), so no two uses share key bytes and a value
// cannot be taken for another format's or another id's.
func derive(secret []byte, info string) ([]byte, error) {
	return hkdf.Key(sha256.New, secret, nil, info, KeySize)
}
