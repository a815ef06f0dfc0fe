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

func TestDecodeStored(t *testing.T) {
	hs := []queue.Header{{Name: "X-A", Value: "1"}}
	tests := []struct {
		name        string
		headers     []byte
		payload     []byte
		wantHeaders []queue.Header
		wantPayload []byte
		wantErr     bool
	}{
		{"nil payload reads as empty", storekit.AppendHeaders(nil, hs), nil, hs, []byte{}, false},
		{"payload kept", nil, []byte("{}"), nil, []byte("{}"), false},
		{"malformed headers", []byte{0x7f}, nil, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotH, gotP, err := storekit.DecodeStored(tt.headers, tt.payload)
			if (err != nil) != tt.wantErr {
				t.Fatalf("DecodeStored error = %v, want error %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(gotH, tt.wantHeaders) || !reflect.DeepEqual(gotP, tt.wantPayload) {
				t.Errorf("DecodeStored = %q, %q; want %q, %q", gotH, gotP, tt.wantHeaders, tt.wantPayload)
			}
		})
	}
}
