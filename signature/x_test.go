package signature

import (
	"net/http"
	"testing"
)

// Published vector of X's own library (xdevplatform/autohook
// test/signature.js, consumer secret "test"), re-checked with openssl; the
// CRC computed with openssl (https://docs.x.com/x-api/webhooks/quickstart):
//
//	printf '%s' challenge_string | openssl dgst -sha256 -hmac x_consumer_secret_123 -binary | base64
const (
	xBody = `{"test_number":1,"test_string":"two"}`
	xSig  = "sha256=YWHphPn/JFq43jkF0y4/w8R/SelmLjvpunhVFY8JhlI="
)

func TestX(t *testing.T) {
	v := setup(t, Config{Scheme: "x", Secrets: []string{"test"}})
	runVectors(t, v, []vectorCase{
		{name: "vector accepted", header: hdr("X-Twitter-Webhooks-Signature", xSig), body: xBody},
		{name: "changed body refused", header: hdr("X-Twitter-Webhooks-Signature", xSig), body: flip(xBody), wantErr: ErrNoMatch},
		{
			// The published form vector verifies as a MAC but is no JSON
			// object, so it could be an answered CRC: refused.
			name: "body that is not a JSON object refused", body: "test=1&other_test=2",
			header: hdr("X-Twitter-Webhooks-Signature", "sha256=25Cu3iwbbiqBTwQRzcKJZwisjf736V2Q8UaTlkfLSoc="), wantErr: ErrNoMatch,
		},
	})
	roundTrip(t, v, "x", "test", xBody, testNow)
	crc := setup(t, Config{Scheme: "x", Secrets: []string{"x_consumer_secret_123", "old"}})
	get := func(query string) Request {
		return Request{Method: http.MethodGet, URL: "https://example.com/hook?" + query}
	}
	runHandshakes(t, crc, []handshakeCase{
		{
			name: "CRC answered with the first secret", req: get("crc_token=challenge_string"),
			wantOK: true, wantStatus: 200, wantType: "application/json",
			wantBody: `{"response_token":"sha256=bJojJah95mOf0Q4r3vDLPdIpnIOwqJKnOXoE8KFIdt8="}`,
		},
		{name: "a token that could be a body is refused", req: get("crc_token=%7B%22a%22%3A1%7D"), wantErr: ErrMalformedHeader},
		{name: "GET without crc_token is no handshake", req: get("x=1")},
	})
}
