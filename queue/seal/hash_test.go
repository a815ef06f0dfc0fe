package seal_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"sync"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue/seal"
)

func hasher(t testing.TB, c byte) *seal.Hasher {
	t.Helper()
	h, err := seal.NewHasher(bytes.Repeat([]byte{c}, seal.HashSecretSize))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHasherSum(t *testing.T) {
	h := hasher(t, 1)
	base := h.Sum("shop", "cus_123")
	tests := []struct {
		name  string
		h     *seal.Hasher
		scope string
		value string
		same  bool // the same sum as base
	}{
		{"same scope and value", h, "shop", "cus_123", true},
		{"another value", h, "shop", "cus_124", false},
		{"another scope", h, "stripe", "cus_123", false},
		{"scope and value split elsewhere", h, "shopc", "us_123", false},
		{"another secret", hasher(t, 2), "shop", "cus_123", false},
		{"a hasher of the same secret", hasher(t, 1), "shop", "cus_123", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.h.Sum(tt.scope, tt.value)
			if (got == base) != tt.same {
				t.Errorf("Sum(%q, %q) = %q, base %q: same = %v, want %v", tt.scope, tt.value, got, base, got == base, tt.same)
			}
			if len(got) != seal.HashLen {
				t.Errorf("len = %d, want HashLen %d", len(got), seal.HashLen)
			}
			if _, err := base64.RawURLEncoding.DecodeString(got); err != nil {
				t.Errorf("sum %q is not base64url: %v", got, err)
			}
			if strings.Contains(got, tt.value) {
				t.Errorf("sum %q holds the value", got)
			}
		})
	}
}

// TestHasherGolden: a sum must stay the same across releases, or the jobs
// of one ordering key stored before and after an upgrade would stop
// waiting for each other.
func TestHasherGolden(t *testing.T) {
	const want = "k_TovsKFMVjYcA4iE8xbWw"
	if got := hasher(t, 1).Sum("shop", "cus_123"); got != want {
		t.Errorf("Sum = %q, want %q", got, want)
	}
}

func TestHasherConcurrent(t *testing.T) {
	h := hasher(t, 1)
	want := h.Sum("shop", "cus_123")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				if got := h.Sum("shop", "cus_123"); got != want {
					t.Errorf("concurrent Sum = %q, want %q", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestNewHasherLength(t *testing.T) {
	if _, err := seal.NewHasher(make([]byte, 16)); err == nil || err.Error() != "hash secret: 16 bytes, want 32" {
		t.Errorf("NewHasher of 16 bytes: error = %v", err)
	}
	if s := seal.NewHashSecret(); len(s) != seal.HashSecretSize || bytes.Equal(s, seal.NewHashSecret()) {
		t.Errorf("NewHashSecret: %d bytes, or the same twice", len(s))
	}
}

func TestHasherAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	h := hasher(t, 1)
	dst := make([]byte, 0, seal.HashLen)
	h.AppendSum(dst, "shop", "cus_123") // warm the pool
	if n := testing.AllocsPerRun(100, func() { h.AppendSum(dst[:0], "shop", "cus_123") }); n != 0 {
		t.Errorf("AppendSum: %v allocations, want 0", n)
	}
}
