package signature

import (
	"net/http"
	"testing"
	"time"
)

// Vectors computed with openssl over the documented content,
// "v0:<timestamp>:<body>", and the validation's HMAC of the plain token
// (https://developers.zoom.us/docs/api/webhooks/):
//
//	printf '%s' "v0:$TS:$BODY" | openssl dgst -sha256 -hmac zoom_secret_token_abc
//	printf '%s' qgg8vlvZRS6UYooatFL8Aw | openssl dgst -sha256 -hmac zoom_secret_token_abc
const (
	zoomSecret = "zoom_secret_token_abc"
	zoomBody   = `{"event":"meeting.started","event_ts":1700000000123,"payload":{"account_id":"abc","object":{"id":"123"}}}`
	zoomSig    = "v0=c90cde58cfc7781b0605cb22371d42c34d99d5e66e62dbd9c4ab2a14b189413a"

	zoomValidationBody = `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`
	zoomValidationSig  = "v0=487bf720df52184ac9fa0342524f25cf32243477fda0122ba02fad79c064e462"
)

func TestZoom(t *testing.T) {
	v := setup(t, Config{Scheme: "zoom", Secrets: []string{zoomSecret}, Now: fixedClock})
	zh := func(ts, sig string) http.Header { return hdr("X-Zm-Request-Timestamp", ts, "X-Zm-Signature", sig) }
	runVectors(t, v, []vectorCase{
		{name: "vector accepted", header: zh(vectorTS, zoomSig), body: zoomBody, wantType: "meeting.started"},
		{name: "changed body refused", header: zh(vectorTS, zoomSig), body: flip(zoomBody), wantErr: ErrNoMatch},
		{name: "stale refused", header: zh("1654503849", zoomValidationSig), body: zoomValidationBody, wantErr: ErrTimestamp},
	})
	roundTrip(t, v, "zoom", zoomSecret, zoomBody, testNow)

	then := setup(t, Config{Scheme: "zoom", Secrets: []string{zoomSecret}, Now: func() time.Time { return time.Unix(1654503849, 0) }})
	post := func(h http.Header, body string) Request {
		return Request{Method: http.MethodPost, Header: h, Body: []byte(body)}
	}
	runHandshakes(t, then, []handshakeCase{
		{
			name: "validation answered", req: post(zh("1654503849", zoomValidationSig), zoomValidationBody),
			wantOK: true, wantStatus: 200, wantType: "application/json",
			wantBody: `{"encryptedToken":"80edd1714ed1e0ce28ac44937f9822300ea2bd1361dfcdf1ab38db12171cbd33","plainToken":"qgg8vlvZRS6UYooatFL8Aw"}`,
		},
		{name: "forged validation refused", req: post(zh("1654503849", zoomValidationSig), flip(zoomValidationBody)), wantErr: ErrNoMatch},
		{name: "unsigned validation refused", req: post(http.Header{}, zoomValidationBody), wantErr: ErrMissingHeader},
	})
	runHandshakes(t, v, []handshakeCase{
		{name: "stale validation refused", req: post(zh("1654503849", zoomValidationSig), zoomValidationBody), wantErr: ErrTimestamp},
		{name: "event is no handshake", req: post(zh(vectorTS, zoomSig), zoomBody)},
	})
	// A token with ':' could be an event's signed content: never signed.
	body := `{"event":"endpoint.url_validation","payload":{"plainToken":"v0:1700000000:{}"}}`
	h, err := Sign("zoom", zoomSecret, []byte(body), SignOptions{Timestamp: testNow})
	if err != nil {
		t.Fatal(err)
	}
	runHandshakes(t, v, []handshakeCase{{name: "token that could be signed content refused", req: post(h, body), wantErr: ErrMalformedHeader}})
}
