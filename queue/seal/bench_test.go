package seal_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

// The body sizes the benchmarks seal: the load test's 512 bytes, and a
// large event.
var benchSizes = []int{512, 16 << 10}

func sizeName(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkSeal seals a body into a reused buffer, as a store's writer
// would for each event.
func BenchmarkSeal(b *testing.B) {
	r := ring(b, "2026-12")
	a := ad("event", "github/0123456789abcdef0123456789abcdef")
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			plaintext := bytes.Repeat([]byte("x"), n)
			dst := make([]byte, 0, r.SealedLen(n))
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				dst = r.Seal(dst[:0], plaintext, a)
			}
		})
	}
}

// BenchmarkOpen opens into a reused buffer; InPlace decrypts within the
// value, as a claim would in the slice the row was scanned into.
func BenchmarkOpen(b *testing.B) {
	r := ring(b, "2026-12")
	a := ad("event", "github/0123456789abcdef0123456789abcdef")
	for _, n := range benchSizes {
		v := r.Seal(nil, bytes.Repeat([]byte("x"), n), a)
		b.Run(sizeName(n), func(b *testing.B) {
			dst := make([]byte, 0, n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = r.Open(dst[:0], v, a); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sizeName(n)+"/InPlace", func(b *testing.B) {
			buf := make([]byte, len(v))
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				copy(buf, v)
				if _, err := r.OpenInPlace(buf, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkText seals and opens an error text of MaxErrorLen in the text
// form, as a finish would after a failed attempt.
func BenchmarkText(b *testing.B) {
	r := ring(b, "2026-12")
	a := ad("error", "job 12345")
	text := string(bytes.Repeat([]byte("e"), 2048))
	s := r.SealString(text, a)
	b.Run("SealString", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = r.SealString(text, a)
		}
	})
	b.Run("OpenString", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.OpenString(s, a); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkHasherSum(b *testing.B) {
	h := hasher(b, 1)
	dst := make([]byte, 0, 32)
	b.ReportAllocs()
	for b.Loop() {
		dst = h.AppendSum(dst[:0], "shop", "cus_NffrFeUfNV2Hib")
	}
}

// BenchmarkAEAD compares the cipher with AES-256-GCM, each sealing with a
// fresh random nonce, for the record of why XChaCha20-Poly1305 was
// chosen (seal.go's package doc): on CPUs with AES instructions GCM is
// faster per byte, and its 96-bit random nonces cap what one key may
// seal.
func BenchmarkAEAD(b *testing.B) {
	key := make([]byte, 32)
	x, err := chacha20poly1305.NewX(key)
	if err != nil {
		b.Fatal(err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		b.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		b.Fatal(err)
	}
	a := ad("event", "github/0123456789abcdef0123456789abcdef")
	for _, n := range benchSizes {
		for _, c := range []struct {
			name string
			aead cipher.AEAD
		}{{"xchacha20poly1305", x}, {"aes256gcm", gcm}} {
			b.Run(c.name+"/"+sizeName(n), func(b *testing.B) {
				plaintext := bytes.Repeat([]byte("x"), n)
				nonce := make([]byte, c.aead.NonceSize())
				dst := make([]byte, 0, n+c.aead.Overhead())
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					_, _ = rand.Read(nonce)
					dst = c.aead.Seal(dst[:0], nonce, plaintext, a)
				}
			})
		}
	}
}
