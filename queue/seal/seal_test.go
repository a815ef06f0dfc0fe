package seal_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/seal"
)

// ring returns a ring of keys with these ids, in order, whose secrets are
// secretOf(1), secretOf(2), … .
func ring(t testing.TB, ids ...string) *seal.Ring {
	t.Helper()
	keys := make([]seal.Key, len(ids))
	for i, id := range ids {
		secret, _ := secretOf(byte(i + 1))
		k, err := seal.NewKey(id, secret)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	r, err := seal.NewRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ad is the associated data of a row's column, as a store might build it.
func ad(column, row string) []byte { return []byte(column + "\x00" + row) }

func TestRoundTrip(t *testing.T) {
	r := ring(t, "2026-12", "2026-06")
	tests := []struct {
		name      string
		plaintext []byte
	}{
		{"empty", nil},
		{"one byte", []byte{0}},
		{"json body", []byte(`{"email":"ada@example.com","order":1234}`)},
		{"binary", []byte("\x00\xff\x01\x02sealed\x00")},
		{"16 KiB", bytes.Repeat([]byte("0123456789abcdef"), 1024)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := ad("event", "github/d-1")
			v := r.Seal(nil, tt.plaintext, a)
			if len(v) != r.SealedLen(len(tt.plaintext)) {
				t.Errorf("len = %d, SealedLen = %d", len(v), r.SealedLen(len(tt.plaintext)))
			}
			if len(tt.plaintext) >= 4 && bytes.Contains(v, tt.plaintext) {
				t.Errorf("sealed value holds the plaintext")
			}
			if id, ok := seal.KeyID(v); !ok || id != "2026-12" {
				t.Errorf("KeyID = %q, %v; want the first key, 2026-12", id, ok)
			}
			got, err := r.Open([]byte("kept:"), v, a)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if want := append([]byte("kept:"), tt.plaintext...); !bytes.Equal(got, want) {
				t.Errorf("Open = %q, want %q", got, want)
			}
			got, err = r.OpenInPlace(bytes.Clone(v), a)
			if err != nil || !bytes.Equal(got, tt.plaintext) {
				t.Errorf("OpenInPlace = %q, %v; want %q", got, err, tt.plaintext)
			}

			s := r.SealString(string(tt.plaintext), a)
			if s[0] != seal.FormatText || !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
				t.Errorf("text form %q: want FormatText first, valid UTF-8, no NUL", s)
			}
			if id, ok := seal.KeyID(s); !ok || id != "2026-12" {
				t.Errorf("KeyID(text) = %q, %v; want 2026-12", id, ok)
			}
			gotS, err := r.OpenString(s, a)
			if err != nil || gotS != string(tt.plaintext) {
				t.Errorf("OpenString = %q, %v; want %q", gotS, err, tt.plaintext)
			}
		})
	}
}

// TestRotation: a value sealed under the old first key still opens once a
// new key is first, and no longer once the old key is gone; the new first
// key seals from then on.
func TestRotation(t *testing.T) {
	old := ring(t, "old")
	a := ad("event", "github/d-1")
	v := old.Seal(nil, []byte("payload"), a)
	s := old.SealString("error text", a)

	// ring assigns secrets by position: "old" must keep its secret, so
	// the rotated ring is built by hand.
	oldSecret, _ := secretOf(1)
	newSecret, _ := secretOf(9)
	kOld, _ := seal.NewKey("old", oldSecret)
	kNew, _ := seal.NewKey("new", newSecret)
	rotated, err := seal.NewRing(kNew, kOld)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotated.Open(nil, v, a); err != nil || string(got) != "payload" {
		t.Errorf("rotated Open = %q, %v; want payload", got, err)
	}
	if got, err := rotated.OpenString(s, a); err != nil || got != "error text" {
		t.Errorf("rotated OpenString = %q, %v; want error text", got, err)
	}
	if id, _ := seal.KeyID(rotated.Seal(nil, []byte("x"), a)); id != "new" {
		t.Errorf("rotated ring seals under %q, want new", id)
	}

	removed, err := seal.NewRing(kNew)
	if err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func() error{
		"binary": func() error { _, err := removed.Open(nil, v, a); return err },
		"text":   func() error { _, err := removed.OpenString(s, a); return err },
	} {
		err := open()
		var missing *seal.MissingKeyError
		if !errors.As(err, &missing) || missing.KeyID != "old" {
			t.Errorf("%s: Open after removal: error = %v, want a MissingKeyError for old", name, err)
		}
		if err == nil || !strings.Contains(err.Error(), "key old ") {
			t.Errorf("%s: error %q does not name the key id", name, err)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	r := ring(t, "k1", "k2")
	a := ad("event", "github/d-1")
	v := r.Seal(nil, []byte("the payload"), a)
	s := r.SealString("the error", a)

	// Same id, another secret: an operator's mistake in a key file.
	other, _ := secretOf(0x42)
	kOther, _ := seal.NewKey("k1", other)
	wrongSecret, _ := seal.NewRing(kOther)
	// Same secret as k1, another id.
	k1Secret, _ := secretOf(1)
	kRenamed, _ := seal.NewKey("renamed", k1Secret)
	renamedRing, _ := seal.NewRing(kRenamed)
	renamed := append([]byte{seal.FormatBinary, byte(len("renamed"))}, "renamed"...)
	renamed = append(renamed, v[2+len("k1"):]...)

	tests := []struct {
		name string
		r    *seal.Ring
		v    []byte
		ad   []byte
		want error
	}{
		{"another row", r, v, ad("event", "github/d-2"), seal.ErrNotAuthentic},
		{"another column", r, v, ad("headers", "github/d-1"), seal.ErrNotAuthentic},
		{"no associated data", r, v, nil, seal.ErrNotAuthentic},
		{"another secret under the id", wrongSecret, v, a, seal.ErrNotAuthentic},
		{"same secret, id changed", renamedRing, renamed, a, seal.ErrNotAuthentic},
		{"truncated", r, v[:len(v)-1], a, seal.ErrNotAuthentic},
		{"no tag", r, v[:2+2+seal.NonceSize+seal.TagSize-1], a, seal.ErrMalformed},
		{"header only", r, v[:4], a, seal.ErrMalformed},
		{"empty", r, nil, a, seal.ErrMalformed},
		{"plain text", r, []byte(`{"order":1}`), a, seal.ErrMalformed},
		{"text form given to Open", r, []byte(s), a, seal.ErrMalformed},
		{"format byte 0", r, append([]byte{0}, v[1:]...), a, seal.ErrMalformed},
		{"id length 0", r, append([]byte{seal.FormatBinary, 0}, v[2:]...), a, seal.ErrMalformed},
		{"id length past the end", r, []byte{seal.FormatBinary, 60, 'k'}, a, seal.ErrMalformed},
		{"id with a NUL", r, append([]byte{seal.FormatBinary, 2, 'k', 0}, v[4:]...), a, seal.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("dst")
			got, err := tt.r.Open(dst, tt.v, tt.ad)
			if !errors.Is(err, tt.want) {
				t.Errorf("Open error = %v, want %v", err, tt.want)
			}
			if string(got) != "dst" {
				t.Errorf("Open returned %q, want dst unchanged", got)
			}
			if _, err := tt.r.OpenInPlace(bytes.Clone(tt.v), tt.ad); !errors.Is(err, tt.want) {
				t.Errorf("OpenInPlace error = %v, want %v", err, tt.want)
			}
		})
	}

	textTests := []struct {
		name string
		s    string
		ad   []byte
		want error
	}{
		{"another row", s, ad("event", "github/d-2"), seal.ErrNotAuthentic},
		{"a line break inserted", s[:20] + "\n" + s[20:], a, seal.ErrMalformed},
		{"not base64", s[:len(s)-2] + "!!", a, seal.ErrMalformed},
		{"truncated", s[:len(s)-1], a, seal.ErrMalformed}, // 1 char past a whole byte
		{"binary form given to OpenString", string(v), a, seal.ErrMalformed},
		{"plain error text", "post to upstream: 502", a, seal.ErrMalformed},
		{"empty", "", a, seal.ErrMalformed},
	}
	for _, tt := range textTests {
		t.Run("text/"+tt.name, func(t *testing.T) {
			if _, err := r.OpenString(tt.s, tt.ad); !errors.Is(err, tt.want) {
				t.Errorf("OpenString error = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestTamperedNeverOpens flips every bit of a sealed value, one at a time,
// in both forms: none opens.
func TestTamperedNeverOpens(t *testing.T) {
	r := ring(t, "k1", "k2")
	a := ad("event", "github/d-1")
	v := r.Seal(nil, []byte("pay"), a)
	for i := range v {
		for bit := range 8 {
			w := bytes.Clone(v)
			w[i] ^= 1 << bit
			if got, err := r.Open(nil, w, a); err == nil {
				t.Fatalf("byte %d bit %d flipped: opened as %q", i, bit, got)
			}
		}
	}
	s := r.SealString("err", a)
	for i := range len(s) {
		for bit := range 8 {
			w := []byte(s)
			w[i] ^= 1 << bit
			if got, err := r.OpenString(string(w), a); err == nil {
				t.Fatalf("text byte %d bit %d flipped: opened as %q", i, bit, got)
			}
		}
	}
}

func TestFreshNonces(t *testing.T) {
	r := ring(t, "k")
	a := ad("event", "github/d-1")
	seen := map[string]bool{}
	for range 1000 {
		v := r.Seal(nil, []byte("same plaintext"), a)
		nonce := string(v[2+1 : 2+1+seal.NonceSize])
		if seen[nonce] {
			t.Fatalf("nonce %x used twice", nonce)
		}
		seen[nonce] = true
	}
}

func TestKeyID(t *testing.T) {
	r := ring(t, "2026-12")
	v := r.Seal(nil, []byte("x"), nil)
	tests := []struct {
		name   string
		v      []byte
		wantID string
		wantOK bool
	}{
		{"binary", v, "2026-12", true},
		{"text", []byte(r.SealString("x", nil)), "2026-12", true},
		{"header alone", v[:2+len("2026-12")], "2026-12", true},
		{"empty", nil, "", false},
		{"plain json", []byte(`{"a":1}`), "", false},
		{"plain error text", []byte("post to upstream: 502"), "", false},
		{"format byte 3", append([]byte{3}, v[1:]...), "", false},
		{"id length past the end", v[:5], "", false},
		{"id with a space", []byte{seal.FormatBinary, 3, 'a', ' ', 'b'}, "", false},
		{"id longer than the maximum", append([]byte{seal.FormatBinary, seal.MaxKeyIDLen + 1}, bytes.Repeat([]byte("k"), 80)...), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, ok := seal.KeyID(tt.v)
			if id != tt.wantID || ok != tt.wantOK {
				t.Errorf("KeyID = %q, %v; want %q, %v", id, ok, tt.wantID, tt.wantOK)
			}
			if sid, sok := seal.KeyID(string(tt.v)); sid != id || sok != ok {
				t.Errorf("KeyID(string) = %q, %v; KeyID([]byte) = %q, %v", sid, sok, id, ok)
			}
		})
	}
}

// TestSafeTextNeverLooksSealed holds the property a store relies on to
// tell a sealed error text from a plain one by its first byte: no text
// queue.SafeText makes begins with FormatText (or FormatBinary).
func TestSafeTextNeverLooksSealed(t *testing.T) {
	inputs := []string{
		"\x02k\x01" + "abc", "\x01\x02", " \x02x", "\t\x02", "\x00\x02", "\xff\x02", "\u2028\x02",
		string([]byte{seal.FormatText, 7}) + "2026-12" + "AAAA",
	}
	for _, in := range inputs {
		for _, limit := range []int{0, 8} {
			out := queue.SafeText(in, limit)
			if out != "" && (out[0] == seal.FormatText || out[0] == seal.FormatBinary) {
				t.Errorf("SafeText(%q, %d) = %q begins with a format byte", in, limit, out)
			}
			if _, ok := seal.KeyID(out); ok {
				t.Errorf("SafeText(%q, %d) = %q reads as sealed", in, limit, out)
			}
		}
	}
}

// The golden values below were sealed by this package when format version
// 1 was written. They must keep opening: every database holds values in
// this format, and a change to the key derivation, the header or the
// cipher that broke them would make stored events unreadable.
const (
	goldenBinary = "0107323032362d3132482f2cc163e084c22969cc0f2eb99500d9d3b47479bbaa40090e656d0eb00a" +
		"334257817f3eef5d49a8230e05da15876ac099fab4911a"
	goldenText = "\x02\x072026-12Zu4UyywzlSMRyoReB/uye1MFWV+VGPFc9yvVUbFSaUAKYCCt++UmU1gXqTtm45AvVNqAjQ"
)

func TestGolden(t *testing.T) {
	r := ring(t, "2026-12")
	a := ad("event", "github/d-1")
	v, err := hex.DecodeString(goldenBinary)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Open(nil, v, a); err != nil || string(got) != "golden payload" {
		t.Errorf("golden binary value: Open = %q, %v; want %q (printed for a new golden: %x)", got, err, "golden payload", r.Seal(nil, []byte("golden payload"), a))
	}
	if got, err := r.OpenString(goldenText, a); err != nil || got != "golden error" {
		t.Errorf("golden text value: OpenString = %q, %v; want %q (printed for a new golden: %q)", got, err, "golden error", r.SealString("golden error", a))
	}
}

func TestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	r := ring(t, "2026-12")
	a := ad("event", "github/d-1")
	plaintext := bytes.Repeat([]byte("x"), 512)
	dst := make([]byte, 0, r.SealedLen(len(plaintext)))
	var v []byte
	if n := testing.AllocsPerRun(100, func() { v = r.Seal(dst[:0], plaintext, a) }); n != 0 {
		t.Errorf("Seal into a large enough dst: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = r.Seal(nil, plaintext, a) }); n != 1 {
		t.Errorf("Seal into nil: %v allocations, want 1 (the output)", n)
	}
	out := make([]byte, 0, len(plaintext))
	if n := testing.AllocsPerRun(100, func() {
		if _, err := r.Open(out[:0], v, a); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Open into a large enough dst: %v allocations, want 0", n)
	}
	buf := make([]byte, len(v))
	if n := testing.AllocsPerRun(100, func() {
		copy(buf, v)
		if _, err := r.OpenInPlace(buf, a); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("OpenInPlace: %v allocations, want 0", n)
	}
}
