package signature

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// handshakeCase is one request to a scheme's Handshake and what must come
// of it.
type handshakeCase struct {
	name       string
	req        Request
	wantOK     bool
	wantErr    error // a sentinel, when the handshake is refused
	wantStatus int
	wantType   string
	wantBody   string
	wantHeader http.Header // must be among the response headers
	wantIssued string
}

// runHandshakes sends each case to v's Handshake.
func runHandshakes(t *testing.T, v Verifier, cases []handshakeCase) {
	t.Helper()
	hs, ok := v.(Handshaker)
	if !ok {
		t.Fatalf("%T is not a Handshaker", v)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, ok, err := hs.Handshake(tc.req)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || ok {
					t.Fatalf("Handshake = ok %v, %v; want %v", ok, err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.wantOK {
				t.Fatalf("Handshake = ok %v, %v; want ok %v", ok, err, tc.wantOK)
			}
			if !ok {
				return
			}
			if resp.Status != tc.wantStatus || resp.ContentType != tc.wantType || string(resp.Body) != tc.wantBody {
				t.Errorf("answer = %d %q %q; want %d %q %q", resp.Status, resp.ContentType, resp.Body, tc.wantStatus, tc.wantType, tc.wantBody)
			}
			for k, want := range tc.wantHeader {
				if got := resp.Header.Get(k); got != want[0] {
					t.Errorf("header %s = %q, want %q", k, got, want[0])
				}
			}
			// Every answer that carries a body says nosniff: a browser must
			// never read an echoed challenge as HTML.
			if len(resp.Body) > 0 && resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("answer with a body lacks X-Content-Type-Options: nosniff (headers %v)", resp.Header)
			}
			if resp.IssuedSecret != tc.wantIssued {
				t.Errorf("IssuedSecret = %q, want %q", resp.IssuedSecret, tc.wantIssued)
			}
		})
	}
}

// vectorCase is a provider's vector and what Verify must make of it.
type vectorCase struct {
	name     string
	header   http.Header
	body     string
	wantErr  error
	wantID   string
	wantType string
}

func runVectors(t *testing.T, v Verifier, cases []vectorCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := v.Verify(Request{Method: http.MethodPost, Header: tc.header, Body: []byte(tc.body)})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Verify = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if tc.wantID != "" && res.DeliveryID != tc.wantID || res.EventType != tc.wantType {
				t.Errorf("id, type = %q, %q; want %q, %q", res.DeliveryID, res.EventType, tc.wantID, tc.wantType)
			}
		})
	}
}

// flip changes one byte of s.
func flip(s string) string {
	b := []byte(s)
	b[len(b)/2] ^= 1
	return string(b)
}

// roundTrip checks that Sign's headers verify for scheme.
func roundTrip(t *testing.T, v Verifier, scheme, secret, body string, now time.Time) {
	t.Helper()
	h, err := Sign(scheme, secret, []byte(body), SignOptions{Timestamp: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(reqOf(h, []byte(body))); err != nil {
		t.Errorf("Verify of Sign's request: %v", err)
	}
}

func TestCheckHeaders(t *testing.T) {
	twitch := setup(t, Config{Scheme: "twitch", Secrets: []string{"s"}})
	asana := setup(t, Config{Scheme: "asana", Secrets: []string{"s"}})
	notion := setup(t, Config{Scheme: "notion", Secrets: []string{"s"}})
	tests := []struct {
		name    string
		v       Verifier
		header  http.Header
		wantErr error
	}{
		{"signature header missing", twitch, hdr(), ErrMissingHeader},
		{"signature header malformed", twitch, hdr("Twitch-Eventsub-Message-Signature", "sha256=zz", headerTwitchID, "1", headerTwitchTimestamp, "t"), ErrMalformedHeader},
		{"id header missing", twitch, hdr("Twitch-Eventsub-Message-Signature", "sha256="+twitchSig[7:], headerTwitchTimestamp, "t"), ErrMissingHeader},
		{"headers present", twitch, hdr("Twitch-Eventsub-Message-Signature", "sha256="+twitchSig[7:], headerTwitchID, "1", headerTwitchTimestamp, "t"), nil},
		{"asana handshake passes unsigned", asana, hdr(headerAsanaSecret, "abc"), nil},
		{"asana event without signature", asana, hdr(), ErrMissingHeader},
		{"notion verification passes unsigned", notion, hdr(), nil},
		{"notion event with a malformed signature", notion, hdr("X-Notion-Signature", "md5=1"), ErrMalformedHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckHeaders(tt.v, Request{Method: http.MethodPost, Header: tt.header})
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("CheckHeaders = %v, want %v", err, tt.wantErr)
			}
		})
	}
}
