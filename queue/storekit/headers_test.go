package storekit_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
)

func TestHeadersRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		hs   []queue.Header
	}{
		{"none", nil},
		{"one", []queue.Header{{Name: "Content-Type", Value: "application/json"}}},
		{"empty value", []queue.Header{{Name: "X-Empty", Value: ""}}},
		{"binary value, order kept", []queue.Header{
			{Name: "X-B", Value: "nul\x00and\xff"},
			{Name: "X-A", Value: string(make([]byte, 300))},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := storekit.DecodeHeaders(storekit.AppendHeaders(nil, tt.hs))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.hs) {
				t.Errorf("round trip = %q, want %q", got, tt.hs)
			}
		})
	}
}

func TestDecodeHeadersMalformed(t *testing.T) {
	good := storekit.AppendHeaders(nil, []queue.Header{{Name: "X-Name", Value: "value"}})
	tests := []struct {
		name string
		b    []byte
	}{
		{"name length past the end", []byte{0x7f, 'a'}},
		{"name without value", storekit.AppendHeaders(nil, []queue.Header{{Name: "X"}})[:2]},
		{"truncated value", good[:len(good)-1]},
		{"bad uvarint", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := storekit.DecodeHeaders(tt.b); !errors.Is(err, storekit.ErrBadHeaders) {
				t.Errorf("DecodeHeaders(%x) error = %v, want ErrBadHeaders", tt.b, err)
			}
		})
	}
}
