package signature

import (
	"net/http"
	"testing"
)

// Vector from the hapi-dropbox-webhooks tests, checked with openssl over the
// documented content, the body
// (https://www.dropbox.com/developers/reference/webhooks).
const (
	dropboxSecret = "the_secret"
	dropboxBody   = `{"delta": {"users": [12345]}}`
	dropboxSig    = "0a8c16b085420b960dc78664279fe09e936a2a01b1f91064869d9e77dfd64529"
)

func TestDropbox(t *testing.T) {
	v := setup(t, Config{Scheme: "dropbox", Secrets: []string{dropboxSecret}})
	runVectors(t, v, []vectorCase{
		{name: "vector accepted", header: hdr("X-Dropbox-Signature", dropboxSig), body: dropboxBody},
		{name: "changed body refused", header: hdr("X-Dropbox-Signature", dropboxSig), body: flip(dropboxBody), wantErr: ErrNoMatch},
	})
	roundTrip(t, v, "dropbox", dropboxSecret, dropboxBody, testNow)
	runHandshakes(t, v, []handshakeCase{
		{
			name: "challenge echoed", req: Request{Method: http.MethodGet, URL: "https://example.com/hook?challenge=abc123"},
			wantOK: true, wantStatus: 200, wantType: "text/plain; charset=utf-8", wantBody: "abc123",
			wantHeader: http.Header{"X-Content-Type-Options": {"nosniff"}},
		},
		{name: "control characters refused", req: Request{Method: http.MethodGet, URL: "https://example.com/hook?challenge=a%0Ab"}, wantErr: ErrMalformedHeader},
		{name: "GET without challenge is no handshake", req: Request{Method: http.MethodGet, URL: "https://example.com/hook"}},
	})
}
