// Package seal encrypts the values a queue store keeps (payloads, headers,
// error texts) so that the database file, its WAL, a backup or a dump
// holds none of them in plain text, and computes the keyed hashes a store
// keeps in place of values it must compare but never show (an ordering
// key). It knows nothing of Caddy, SQL or the queue's types: a Store seals
// and opens bytes, and says which row and column each belongs to through
// the associated data.
//
// # Keys
//
// A Ring holds named keys of KeySize random bytes. The first key seals
// everything; every key opens what was sealed under it, so keys rotate
// online: put a new key first, re-seal what is under the old one (a
// Store's rekey), then drop the old one. A value names its key's id, so
// KeyID tells, without the secret, which key a value needs: the count of
// values under each id says when an old key may go.
//
// # Cipher and format
//
// XChaCha20-Poly1305 with a random 24-byte nonce per value. Random nonces
// need no state shared between processes, reloads or the instances of a
// shared PostgreSQL queue, and at 192 bits they do not collide however
// many values one key seals; AES-GCM's 96-bit random nonces are bounded
// to 2^32 values a key (NIST SP 800-38D, 8.3), which a busy receiver
// reaches within months.
//
// A sealed value is, in bytes:
//
//	format  1 byte: FormatBinary, or FormatText for the text form
//	n       1 byte: the length of the key id, 1 to MaxKeyIDLen
//	id      n bytes: the key id, ASCII
//	body    the 24-byte nonce, then the ciphertext and its 16-byte tag;
//	        in the text form, this part in unpadded standard base64
//
// The header is the same in both forms and is printable ASCII but for its
// first two bytes, so SQL can read a value's key id without this package:
// CAST(substr(v, 3, unicode(substr(v, 2, 1))) AS TEXT) in SQLite, for a
// blob or a text; in PostgreSQL convert_from(substring(v from 3 for
// get_byte(v, 1)), 'SQL_ASCII') for a bytea and substr(v, 3, ascii(substr(v,
// 2, 1))) for a text. The text form is for
// text columns (PostgreSQL's text refuses NUL and invalid UTF-8): a
// FormatText byte, a control character, never begins a text that
// queue.SafeText made, so a store tells a sealed error text from a plain
// one by its first byte alone. Binary values hold anything, a sender's
// body included, so no byte tells a plain payload from a sealed one: a
// store marks which of its values are sealed itself (a column, say), and
// uses the format byte to check and to version.
//
// The AEAD key of each id is derived from the id's secret, the format
// version and the id (HKDF-SHA256), so the header is authenticated without
// being copied into the associated data: a value whose id or version was
// changed, or that was sealed under the same secret with another id, does
// not open.
//
// # Associated data
//
// The associated data binds a value to its place: a store passes the
// row's identity and the column, so a value copied onto another row or
// into another column does not open. It is not stored; the store rebuilds
// it from the row when it opens the value.
//
// # Cost
//
// Seal and Open append to a slice the caller passes and allocate nothing
// when it is large enough (SealedLen); each key's AEAD is built once, in
// NewRing. The text forms allocate their strings. docs/BENCHMARKS.md has
// the figures.
package seal

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"
)

// The format bytes: the first byte of every sealed value.
const (
	// FormatBinary begins a value in the binary form (Seal, Open).
	FormatBinary byte = 0x01
	// FormatText begins a value in the text form (SealString,
	// OpenString).
	FormatText byte = 0x02
)

// NonceSize is the length of the nonce each value carries, in bytes.
const NonceSize = chacha20poly1305.NonceSizeX

// TagSize is the length of the authentication tag each value carries, in
// bytes.
const TagSize = chacha20poly1305.Overhead

// aeadInfo is the HKDF info of the AEAD key of format version 1, before
// the key id: the version and the id are bound into the key.
const aeadInfo = "caddywebhook seal v1 xchacha20-poly1305\x00"

var (
	// ErrMalformed: the bytes are not a sealed value of this package's
	// format (another format byte, a header that does not parse, a body
	// shorter than a nonce and a tag, text that is not base64).
	ErrMalformed = errors.New("open sealed value: malformed")
	// ErrNotAuthentic: the value names a key of the ring but does not
	// open under it: it was changed, it was copied from another row or
	// column (the associated data differs), or the secret listed under
	// its id is not the one that sealed it.
	ErrNotAuthentic = errors.New("open sealed value: authentication failed")
)

// MissingKeyError is what Open, OpenInPlace and OpenString return for a
// value sealed under a key id the ring does not hold. The value is intact; it opens once the
// key is listed again.
type MissingKeyError struct {
	KeyID string // the id the value names
}

func (e *MissingKeyError) Error() string {
	return "open sealed value: key " + e.KeyID + " is not in the key ring"
}

// Ring is an ordered set of keys: the first seals, every one opens. A Ring
// is immutable and safe for concurrent use.
type Ring struct {
	keys []ringKey          // in the order given; keys[0] seals
	byID map[string]ringKey // every key, by id
}

type ringKey struct {
	id     string
	header []byte // FormatBinary, len(id), id: the start of every value it seals
	aead   cipher.AEAD
}

// NewRing returns the ring of keys, in order: keys[0] seals. It needs at
// least one key and refuses two keys with one id, naming the id. It fails
// in FIPS 140-only mode (GODEBUG=fips140=only), which does not allow
// XChaCha20-Poly1305.
func NewRing(keys ...Key) (*Ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("key ring: no key")
	}
	r := &Ring{byID: make(map[string]ringKey, len(keys))}
	for i := range keys {
		k := &keys[i]
		if err := CheckKeyID(k.ID); err != nil {
			return nil, err
		}
		if _, dup := r.byID[k.ID]; dup {
			return nil, fmt.Errorf("key %s: listed twice", k.ID)
		}
		aeadKey, err := derive(k.secret[:], aeadInfo+k.ID)
		if err != nil {
			return nil, fmt.Errorf("key %s: derive: %w", k.ID, err)
		}
		aead, err := chacha20poly1305.NewX(aeadKey)
		clear(aeadKey)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.ID, err)
		}
		rk := ringKey{id: k.ID, header: header(FormatBinary, k.ID), aead: aead}
		r.keys = append(r.keys, rk)
		r.byID[k.ID] = rk
	}
	return r, nil
}

func header(format byte, id string) []byte {
	return append([]byte{format, byte(len(id))}, id...)
}

// Current returns the id of the key that seals: the first.
func (r *Ring) Current() string { return r.keys[0].id }

// IDs returns the ids of the ring's keys, in order.
func (r *Ring) IDs() []string {
	ids := make([]string, len(r.keys))
	for i, k := range r.keys {
		ids[i] = k.id
	}
	return ids
}

// Has reports whether the ring holds a key with this id.
func (r *Ring) Has(id string) bool {
	_, ok := r.byID[id]
	return ok
}

// String lists the ids: never a secret.
func (r *Ring) String() string { return "key ring [" + strings.Join(r.IDs(), " ") + "]" }

// GoString is String, so %#v shows no secret either.
func (r *Ring) GoString() string { return r.String() }

// SealedLen returns the length of the value Seal makes of n bytes of
// plaintext, so a caller can size dst and Seal allocates nothing.
func (r *Ring) SealedLen(n int) int {
	return len(r.keys[0].header) + NonceSize + n + TagSize
}

// Seal appends to dst plaintext sealed under the ring's first key, with a
// fresh random nonce, bound to ad, and returns the extended slice. It
// allocates only when dst lacks room for SealedLen(len(plaintext)) more
// bytes. dst must not overlap plaintext.
func (r *Ring) Seal(dst, plaintext, ad []byte) []byte {
	k := &r.keys[0]
	// One growth for the whole value, so that the AEAD appends in place.
	dst = append(slices.Grow(dst, r.SealedLen(len(plaintext))), k.header...)
	n := len(dst)
	dst = dst[:n+NonceSize]
	nonce := dst[n:]
	// crypto/rand.Read never fails (Go 1.24): it crashes the program
	// rather than hand out a nonce that is not random.
	_, _ = rand.Read(nonce)
	return k.aead.Seal(dst, nonce, plaintext, ad)
}

// Open appends to dst the plaintext of v, a value Seal made under any of
// the ring's keys with the same ad, and returns the extended slice. v is
// left as it is. The error is ErrMalformed, a *MissingKeyError naming the
// value's key id, or ErrNotAuthentic; a value that does not open is never
// returned in part.
func (r *Ring) Open(dst, v, ad []byte) ([]byte, error) {
	k, body, err := r.parse(v, FormatBinary)
	if err != nil {
		return dst, err
	}
	out, err := k.aead.Open(dst, body[:NonceSize], body[NonceSize:], ad)
	if err != nil {
		return dst, ErrNotAuthentic
	}
	return out, nil
}

// OpenInPlace is Open that decrypts within v and returns the plaintext as
// a part of v, allocating nothing: for a value read into a buffer of its
// own, such as a row's column scanned into a fresh slice. v is
// overwritten, also when it does not open.
func (r *Ring) OpenInPlace(v, ad []byte) ([]byte, error) {
	k, body, err := r.parse(v, FormatBinary)
	if err != nil {
		return nil, err
	}
	ct := body[NonceSize:]
	out, err := k.aead.Open(ct[:0], body[:NonceSize], ct, ad)
	if err != nil {
		return nil, ErrNotAuthentic
	}
	return out, nil
}

// parse checks v's header against format and returns the key it names
// and its body: the nonce, the ciphertext and the tag.
func (r *Ring) parse(v []byte, format byte) (ringKey, []byte, error) {
	id, body, ok := split(v, format)
	if !ok || len(body) < NonceSize+TagSize {
		return ringKey{}, nil, ErrMalformed
	}
	k, ok := r.byID[string(id)]
	if !ok {
		return ringKey{}, nil, &MissingKeyError{KeyID: string(id)}
	}
	return k, body, nil
}

// split parses the header of v, a value in the given format, and returns
// the key id and the rest.
func split[V ~string | ~[]byte](v V, format byte) (id, body V, ok bool) {
	if len(v) < 2 || v[0] != format {
		return id, body, false
	}
	n := int(v[1])
	if n == 0 || n > MaxKeyIDLen || len(v) < 2+n {
		return id, body, false
	}
	id = v[2 : 2+n]
	for i := 0; i < n; i++ {
		if !idByte(id[i]) {
			return id, body, false
		}
	}
	return id, v[2+n:], true
}

// SealString is Seal for a text column: plaintext sealed under the first
// key in the text form, whose body is base64 and whose first byte,
// FormatText, a control character, never begins a text queue.SafeText
// made (and which PostgreSQL's text accepts).
func (r *Ring) SealString(plaintext string, ad []byte) string {
	sealed := r.Seal(nil, []byte(plaintext), ad)
	k := &r.keys[0]
	body := sealed[len(k.header):]
	out := make([]byte, 0, len(k.header)+base64.RawStdEncoding.EncodedLen(len(body)))
	out = append(out, FormatText)
	out = append(out, k.header[1:]...)
	out = base64.RawStdEncoding.AppendEncode(out, body)
	return string(out)
}

// OpenString opens a value SealString made, as Open does.
func (r *Ring) OpenString(s string, ad []byte) (string, error) {
	id, enc, ok := split(s, FormatText)
	if !ok {
		return "", ErrMalformed
	}
	k, ok := r.byID[id]
	if !ok {
		return "", &MissingKeyError{KeyID: id}
	}
	// The decoder skips line breaks; a value with one was not written by
	// SealString, and is refused rather than opened.
	if strings.ContainsAny(enc, "\r\n") {
		return "", ErrMalformed
	}
	body, err := base64.RawStdEncoding.Strict().DecodeString(enc)
	if err != nil || len(body) < NonceSize+TagSize {
		return "", ErrMalformed
	}
	ct := body[NonceSize:]
	out, err := k.aead.Open(ct[:0], body[:NonceSize], ct, ad)
	if err != nil {
		return "", ErrNotAuthentic
	}
	return string(out), nil
}

// KeyID returns the id of the key a sealed value names, in either form,
// without a key and without decrypting: for a rekey's progress and the
// count of values under each key. ok is false when v does not begin with
// a sealed value's header. It checks the header only: a value it accepts
// may still fail to open.
func KeyID[V ~string | ~[]byte](v V) (id string, ok bool) {
	if len(v) == 0 {
		return "", false
	}
	raw, _, ok := split(v, v[0])
	if !ok || (v[0] != FormatBinary && v[0] != FormatText) {
		return "", false
	}
	return string(raw), true
}
