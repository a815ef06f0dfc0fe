package seal

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"sync"
)

// HashSecretSize is the length of a Hasher's secret, in bytes.
const HashSecretSize = 32

// HashLen is the length of the text Sum returns, in bytes: 16 bytes of
// HMAC-SHA256 in unpadded base64url.
const HashLen = 22

// hashInfo is the HKDF info of a Hasher's HMAC key.
const hashInfo = "caddywebhook seal v1 hmac-sha256 keyed hash"

// Hasher computes keyed hashes of values a store compares but never shows,
// such as an ordering key (a customer id, say): equal inputs give equal
// sums, and without the secret a sum cannot be checked against a guess.
//
// The secret is not one of a Ring's keys. A sum must stay the same while
// keys rotate, or the jobs of one ordering key stored before and after a
// rotation would stop waiting for each other, and a sum made under a key
// that was then removed could never be made again. So a store generates
// the secret once (NewHashSecret), keeps it sealed under the ring like
// any value (a rekey re-seals it, the secret itself never changes), and
// opens it when it starts. Safe for concurrent use.
type Hasher struct {
	key   []byte
	state sync.Pool // of *hashState
}

type hashState struct {
	mac hash.Hash
	buf []byte // the message, then the sum
}

// NewHashSecret returns a new random secret for NewHasher.
func NewHashSecret() []byte {
	b := make([]byte, HashSecretSize)
	_, _ = rand.Read(b) // never fails (Go 1.24)
	return b
}

// NewHasher returns the Hasher of secret, HashSecretSize bytes.
func NewHasher(secret []byte) (*Hasher, error) {
	if len(secret) != HashSecretSize {
		return nil, fmt.Errorf("hash secret: %d bytes, want %d", len(secret), HashSecretSize)
	}
	key, err := derive(secret, hashInfo)
	if err != nil {
		return nil, fmt.Errorf("hash secret: derive: %w", err)
	}
	h := &Hasher{key: key}
	h.state.New = func() any { return &hashState{mac: hmac.New(sha256.New, h.key)} }
	return h, nil
}

// AppendSum appends to dst the keyed hash of value within scope, as
// HashLen bytes of text (base64url), and returns the extended slice. The
// scope, a source's name say, keeps equal values of two scopes apart, so
// that sums cannot be matched across them. It allocates nothing once warm
// when dst has room.
func (h *Hasher) AppendSum(dst []byte, scope, value string) []byte {
	st := h.state.Get().(*hashState)
	st.mac.Reset()
	b := binary.AppendUvarint(st.buf[:0], uint64(len(scope)))
	b = append(b, scope...)
	b = append(b, value...)
	st.mac.Write(b)
	b = st.mac.Sum(b[:0])
	// 128 bits: two distinct keys of one scope collide with a
	// probability of 2^-128 a pair, and a collision would only order
	// them together.
	dst = base64.RawURLEncoding.AppendEncode(dst, b[:16])
	st.buf = b
	h.state.Put(st)
	return dst
}

// Sum is AppendSum returning a string.
func (h *Hasher) Sum(scope, value string) string {
	var b [HashLen]byte
	return string(h.AppendSum(b[:0], scope, value))
}

// String names the Hasher: never its secret.
func (h *Hasher) String() string { return "keyed hash" }

// GoString is String, so %#v shows no secret either.
func (h *Hasher) GoString() string { return h.String() }
