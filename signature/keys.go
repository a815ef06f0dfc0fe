package signature

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Public keys are configured like secrets: one string each, repeatable for
// rotation. Parse errors never quote the key.

// decodeKeyBytes reads hex (either case) or base64 (standard or URL
// alphabet, padded or not) after an optional prefix, and wants n bytes.
func decodeKeyBytes(s, prefix string, n int) ([]byte, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), prefix)
	if len(s) == 2*n {
		if b, err := hex.DecodeString(s); err == nil {
			return b, true
		}
	}
	s = strings.TrimRight(s, "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == n {
			return b, true
		}
	}
	return nil, false
}

// parseEd25519Public reads an ed25519 public key: 32 bytes in hex or
// base64, after an optional "whpk_" (Standard Webhooks).
func parseEd25519Public(s string) (ed25519.PublicKey, error) {
	b, ok := decodeKeyBytes(s, "whpk_", ed25519.PublicKeySize)
	if !ok {
		return nil, errors.New("not an ed25519 public key (32 bytes in hex or base64, optionally after whpk_)")
	}
	return ed25519.PublicKey(b), nil
}

// parseEd25519Private reads an ed25519 private key for Sign: the 32-byte
// seed or the 64-byte key, in hex or base64, after an optional "whsk_".
func parseEd25519Private(s string) (ed25519.PrivateKey, error) {
	if b, ok := decodeKeyBytes(s, "whsk_", ed25519.SeedSize); ok {
		return ed25519.NewKeyFromSeed(b), nil
	}
	if b, ok := decodeKeyBytes(s, "whsk_", ed25519.PrivateKeySize); ok {
		return ed25519.PrivateKey(b), nil
	}
	return nil, errors.New("not an ed25519 private key (32-byte seed or 64-byte key in hex or base64, optionally after whsk_)")
}

// parseEd25519Keys parses every public key of a Config.
func parseEd25519Keys(keys []string) ([]ed25519.PublicKey, error) {
	out := make([]ed25519.PublicKey, len(keys))
	for i, s := range keys {
		k, err := parseEd25519Public(s)
		if err != nil {
			return nil, fmt.Errorf("PublicKeys[%d]: %w", i, err)
		}
		out[i] = k
	}
	return out, nil
}

// derOrPEM returns the DER bytes of base64 DER or of a PEM block.
func derOrPEM(s string) ([]byte, bool) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-----BEGIN ") {
		block, _ := pem.Decode([]byte(s))
		if block == nil {
			return nil, false
		}
		return block.Bytes, true
	}
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, false
	}
	return der, true
}

// parseP256Public reads an ECDSA P-256 public key: base64 DER
// SubjectPublicKeyInfo, as SendGrid shows it, or PEM.
func parseP256Public(s string) (*ecdsa.PublicKey, error) {
	der, ok := derOrPEM(s)
	if !ok {
		return nil, errors.New("not base64 DER or PEM")
	}
	key, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errors.New("not a DER SubjectPublicKeyInfo")
	}
	pub, ok := key.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, errors.New("not an ECDSA P-256 public key")
	}
	return pub, nil
}

// parseP256Private reads an ECDSA P-256 private key for Sign: base64 DER or
// PEM, PKCS #8 or SEC 1.
func parseP256Private(s string) (*ecdsa.PrivateKey, error) {
	der, ok := derOrPEM(s)
	if !ok {
		return nil, errors.New("not base64 DER or PEM")
	}
	var key any
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		if key, err = x509.ParseECPrivateKey(der); err != nil {
			return nil, errors.New("not a PKCS #8 or SEC 1 private key")
		}
	}
	priv, ok := key.(*ecdsa.PrivateKey)
	if !ok || priv.Curve != elliptic.P256() {
		return nil, errors.New("not an ECDSA P-256 private key")
	}
	return priv, nil
}

// messages recycles the buffers ed25519 messages are assembled in: the
// algorithm hashes its whole message twice, so unlike a MAC it cannot be
// fed the parts one after the other.
var messages = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// verifyEd25519 returns the index of the first key under which one of sigs
// signs the concatenation of head and body.
func verifyEd25519(keys []ed25519.PublicKey, sigs [][ed25519.SignatureSize]byte, body []byte, head ...string) (int, bool) {
	if len(sigs) == 0 || len(keys) == 0 {
		return 0, false
	}
	bp := messages.Get().(*[]byte)
	msg := (*bp)[:0]
	for _, h := range head {
		msg = append(msg, h...)
	}
	msg = append(msg, body...)
	index, ok := 0, false
search:
	for i, k := range keys {
		for j := range sigs {
			if ed25519.Verify(k, msg, sigs[j][:]) {
				index, ok = i, true
				break search
			}
		}
	}
	if cap(msg) <= maxPooledMessage {
		*bp = msg[:0]
		messages.Put(bp)
	}
	return index, ok
}

// maxPooledMessage keeps a few large bodies from pinning memory.
const maxPooledMessage = 256 << 10
