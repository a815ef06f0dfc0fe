package storekit

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/seal"
)

func testRing(t *testing.T, ids ...string) *seal.Ring {
	t.Helper()
	var keys []seal.Key
	for _, id := range ids {
		secret := sha256.Sum256([]byte(id))
		k, err := seal.NewKey(id, secret[:])
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	r, err := seal.NewRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testSealer(t *testing.T, keys queue.Keys) *Sealer {
	t.Helper()
	_, stored := NewSecret(keys)
	s, err := NewSealer(keys, stored)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealEvent(t *testing.T) {
	s := testSealer(t, queue.Keys{Ring: testRing(t, "k1")})
	tests := []struct {
		name    string
		headers []queue.Header
		payload []byte
	}{
		{"json body and two headers", []queue.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Event", Value: "a"}}, []byte(`{"a":1}`)},
		{"no headers", nil, []byte("body")},
		{"empty payload", []queue.Header{{Name: "X", Value: ""}}, nil},
		{"binary, long header", []queue.Header{{Name: "X-Long", Value: string(bytes.Repeat([]byte{0, 0xff}, 200))}}, []byte{0, 1, 2, 0xff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := s.AppendEvent(nil, "shop", "d1", tt.headers, tt.payload)
			if KeyOf(v) != "k1" {
				t.Fatalf("sealed under %q, want k1", KeyOf(v))
			}
			hs, p, err := s.DecodeEvent("shop", "d1", []byte("ignored"), []byte("ignored"), slices.Clone(v))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(hs, tt.headers) || !bytes.Equal(p, tt.payload) || p == nil {
				t.Errorf("DecodeEvent = %v, %q; want %v, %q (never nil)", hs, p, tt.headers, tt.payload)
			}
		})
	}
}

// TestSealEventBound checks that an event's value opens only on its own
// row: another source or delivery id, another key ring, or no ring.
func TestSealEventBound(t *testing.T) {
	keys := queue.Keys{Ring: testRing(t, "k1")}
	s := testSealer(t, keys)
	v := s.AppendEvent(nil, "shop", "d1", nil, []byte("secret body"))
	tests := []struct {
		name               string
		sealer             *Sealer
		source, deliveryID string
		want               error
		missing            string
	}{
		{"another delivery id", s, "shop", "d2", seal.ErrNotAuthentic, ""},
		{"another source", s, "shop2", "d1", seal.ErrNotAuthentic, ""},
		{"source and id run together", s, "shopd", "1", seal.ErrNotAuthentic, ""},
		{"a ring without its key", testSealer(t, queue.Keys{Ring: testRing(t, "k2")}), "shop", "d1", nil, "k1"},
		{"no ring", testSealer(t, queue.Keys{}), "shop", "d1", nil, "k1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, p, err := tt.sealer.DecodeEvent(tt.source, tt.deliveryID, nil, nil, slices.Clone(v))
			var mk *seal.MissingKeyError
			switch {
			case p != nil:
				t.Errorf("payload %q returned from a value that did not open", p)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Errorf("DecodeEvent = %v, want %v", err, tt.want)
			case tt.missing != "" && (!errors.As(err, &mk) || mk.KeyID != tt.missing):
				t.Errorf("DecodeEvent = %v, want the missing key %s named", err, tt.missing)
			}
		})
	}
}

func TestSealText(t *testing.T) {
	s := testSealer(t, queue.Keys{Ring: testRing(t, "k1")})
	v := s.SealText("HTTP 500: body", ColumnLastError, 7)
	if !SealedText(v) || KeyOf(v) != "k1" {
		t.Fatalf("SealText = %q, want a sealed text under k1", v)
	}
	if got := s.SealText("", ColumnLastError, 7); got != "" {
		t.Errorf("SealText(\"\") = %q, want it empty", got)
	}
	tests := []struct {
		name   string
		stored string
		column string
		job    int64
		want   string
		fails  bool
	}{
		{"its own job and column", v, ColumnLastError, 7, "HTTP 500: body", false},
		{"another job", v, ColumnLastError, 8, "", true},
		{"another column", v, ColumnAttemptError, 7, "", true},
		{"a plain text", "plain words", ColumnLastError, 7, "plain words", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.OpenText(tt.stored, tt.column, tt.job)
			if (err != nil) != tt.fails || got != tt.want {
				t.Errorf("OpenText = %q, %v; want %q (fails: %v)", got, err, tt.want, tt.fails)
			}
			shown := s.DecodeText(tt.stored, tt.column, tt.job)
			if tt.fails && (shown == "" || bytes.Contains([]byte(shown), []byte(tt.stored[3:12]))) {
				t.Errorf("DecodeText = %q, want a note of why, not the stored bytes", shown)
			}
		})
	}
	plain := testSealer(t, queue.Keys{Ring: testRing(t, "k1"), DecryptOnly: true})
	if got := plain.SealText("x", ColumnLastError, 1); got != "x" {
		t.Errorf("decrypt-only SealText = %q, want it plain", got)
	}
	if got, err := plain.OpenText(v, ColumnLastError, 7); err != nil || got != "HTTP 500: body" {
		t.Errorf("decrypt-only OpenText = %q, %v; want it opened", got, err)
	}
}

// TestSealSecret checks the ordering-key secret: sealed under the first
// key when the keys seal, plain otherwise, refused (naming the key) by
// keys without it, and giving the same hashes under every ring that
// opens it.
func TestSealSecret(t *testing.T) {
	k1 := queue.Keys{Ring: testRing(t, "k1")}
	secret, stored := NewSecret(k1)
	if SecretKey(stored) != "k1" || bytes.Contains(stored, secret) {
		t.Fatalf("stored secret under %q, holding it plain: %v", SecretKey(stored), bytes.Contains(stored, secret))
	}
	a, err := NewSealer(k1, stored)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSealer(queue.Keys{Ring: testRing(t, "k2", "k1")}, stored)
	if err != nil {
		t.Fatal(err)
	}
	if a.OrderingKey("shop", "customer-1") != b.OrderingKey("shop", "customer-1") {
		t.Error("the hash of a key changed with the ring")
	}
	if a.OrderingKey("shop", "customer-1") == a.OrderingKey("forge", "customer-1") {
		t.Error("one key hashes the same in two sources")
	}
	if got := a.OrderingKey("shop", ""); got != "" {
		t.Errorf("OrderingKey of no key = %q, want none", got)
	}
	for _, keys := range []queue.Keys{{Ring: testRing(t, "k2")}, {}} {
		_, err := NewSealer(keys, stored)
		var mk *seal.MissingKeyError
		if !errors.As(err, &mk) || mk.KeyID != "k1" {
			t.Errorf("NewSealer without k1 = %v, want the missing key k1 named", err)
		}
	}
	if _, plain := NewSecret(queue.Keys{}); len(plain) != seal.HashSecretSize || SecretKey(plain) != "" {
		t.Errorf("plain secret = %d bytes under %q", len(plain), SecretKey(plain))
	}
	if v := b.StoredSecret(false); SecretKey(v) != "k2" {
		t.Errorf("StoredSecret under %q, want k2", SecretKey(v))
	}
	if v := b.StoredSecret(true); !bytes.Equal(v, secret) {
		t.Error("StoredSecret(plain) is not the secret")
	}
}

// TestSealEventAllocs holds AppendEvent to its promise: nothing
// allocated once warm, when dst has room.
func TestSealEventAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates, and its sync.Pool drops entries")
	}
	s := testSealer(t, queue.Keys{Ring: testRing(t, "k1")})
	hs := []queue.Header{{Name: "Content-Type", Value: "application/json"}}
	payload := bytes.Repeat([]byte("x"), 512)
	dst := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { dst = s.AppendEvent(dst[:0], "shop", "d1", hs, payload) }); n != 0 {
		t.Errorf("AppendEvent allocates %v times, want 0", n)
	}
}
