package seal_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue/seal"
)

// secretOf returns KeySize bytes all of value c, and their base64: keys
// tests can tell apart at a glance.
func secretOf(c byte) ([]byte, string) {
	b := bytes.Repeat([]byte{c}, seal.KeySize)
	return b, base64.StdEncoding.EncodeToString(b)
}

func TestParseKey(t *testing.T) {
	_, good := secretOf(7)
	short := base64.StdEncoding.EncodeToString(make([]byte, 31))
	long := base64.StdEncoding.EncodeToString(make([]byte, 33))
	tests := []struct {
		name    string
		id      string
		encoded string
		wantErr string // substring; "" for success
	}{
		{"valid", "2026-12", good, ""},
		{"every id character", "Key_1.a-Z", good, ""},
		{"id of the maximum length", strings.Repeat("k", seal.MaxKeyIDLen), good, ""},
		{"trailing newline of a key file", "2026-12", good + "\n", ""},
		{"31 bytes", "2026-12", short, "key 2026-12: 31 bytes, want 32"},
		{"33 bytes", "2026-12", long, "key 2026-12: 33 bytes, want 32"},
		{"empty", "2026-12", "", "key 2026-12: 0 bytes, want 32"},
		{"not base64", "2026-12", "not a key at all, not at all!!!!!!!!!!!!!!!", "key 2026-12: not standard base64"},
		{"base64url", "2026-12", base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32)), "key 2026-12: not standard base64"},
		{"without padding", "2026-12", strings.TrimRight(good, "="), "key 2026-12: not standard base64"},
		{"hex, which decodes as base64 too", "2026-12", strings.Repeat("ab", 32), "key 2026-12: 48 bytes, want 32"},
		{"empty id", "", good, "key id is empty"},
		{"id too long", strings.Repeat("k", seal.MaxKeyIDLen+1), good, "key id is 65 bytes, more than 64"},
		{"id with a space", "2026 12", good, "at byte 4"},
		{"id with a slash", "a/b", good, "at byte 1"},
		{"secret given as the id", good, good, "at byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := seal.ParseKey(tt.id, tt.encoded)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseKey: %v", err)
				}
				if k.ID != tt.id {
					t.Errorf("ID = %q, want %q", k.ID, tt.id)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseKey succeeded, want an error with %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %q, want it to contain %q", err, tt.wantErr)
			}
			// Neither the value nor a piece of it: the secret "good" is
			// 44 characters of 'B'-ish base64, the others are longer
			// than any id the message may name.
			if enc := strings.TrimSpace(tt.encoded); len(enc) >= 8 && strings.Contains(err.Error(), enc[:8]) {
				t.Errorf("error %q quotes the encoded secret", err)
			}
		})
	}
}

func TestNewKeyLength(t *testing.T) {
	if _, err := seal.NewKey("k", make([]byte, seal.KeySize)); err != nil {
		t.Fatalf("NewKey of %d bytes: %v", seal.KeySize, err)
	}
	if _, err := seal.NewKey("k", make([]byte, 16)); err == nil || !strings.Contains(err.Error(), "key k: 16 bytes") {
		t.Errorf("NewKey of 16 bytes: error = %v, want one naming key k and the length", err)
	}
}

func TestNewRingRefuses(t *testing.T) {
	a, _ := secretOf(1)
	b, _ := secretOf(2)
	ka, _ := seal.NewKey("a", a)
	kb, _ := seal.NewKey("a", b)
	tests := []struct {
		name    string
		keys    []seal.Key
		wantErr string
	}{
		{"no key", nil, "key ring: no key"},
		{"duplicate id", []seal.Key{ka, kb}, "key a: listed twice"},
		{"zero Key", []seal.Key{{}}, "key id is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := seal.NewRing(tt.keys...)
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("NewRing error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestSecretsNeverPrinted formats keys, rings and hashers every way a log
// line or an error might, and looks for the secret's bytes and base64.
func TestSecretsNeverPrinted(t *testing.T) {
	secret, encoded := secretOf(0x5a) // 'Z' bytes, "WlpaWlpa…" in base64
	k, err := seal.ParseKey("prod", encoded)
	if err != nil {
		t.Fatal(err)
	}
	r, err := seal.NewRing(k)
	if err != nil {
		t.Fatal(err)
	}
	h, err := seal.NewHasher(secret)
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	outputs := []string{string(j)}
	for _, v := range []any{k, &k, []seal.Key{k}, r, *r, h} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			outputs = append(outputs, fmt.Sprintf(verb, v))
		}
	}
	for _, out := range outputs {
		if strings.Contains(out, "ZZZZ") || strings.Contains(out, encoded[:8]) || strings.Contains(out, "90 90 90") {
			t.Errorf("output shows the secret: %s", out)
		}
	}
	if got := fmt.Sprint(r); got != "key ring [prod]" {
		t.Errorf("ring prints as %q, want %q", got, "key ring [prod]")
	}
}
