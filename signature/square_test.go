package signature

import (
	"errors"
	"testing"
)

// Square: HMAC-SHA256 of the notification URL and the body, base64 in
// x-square-hmacsha256-signature
// (https://developer.squareup.com/docs/webhooks/step3validate). Published:
// the vector of Square's own SDK tests (square-go-sdk, square.rb
// webhooks_helper); re-checked with
//
//	printf '%s' "$url$body" | openssl dgst -sha256 -hmac Ibxx_5AKakO-3qeNVR61Dw -binary | base64
const (
	squareKey  = "Ibxx_5AKakO-3qeNVR61Dw"
	squareURL  = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9"
	squareBody = `{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`
	squareSig  = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="
)

func TestSquarePreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "square/published vector, request URL",
			cfg:    Config{Scheme: "square", Secrets: []string{squareKey}},
			url:    squareURL,
			header: hdr("x-square-hmacsha256-signature", squareSig),
			body:   squareBody,
			want:   Result{DeliveryID: "ac3ac95b-f97d-458c-a6e6-18981597e05f", EventType: "webhooks.test_notification"},
		},
		{
			name:   "square/published vector, public URL behind a proxy",
			cfg:    Config{Scheme: "square", Secrets: []string{squareKey}, PublicURL: squareURL},
			url:    "http://127.0.0.1:8080/square",
			header: hdr("x-square-hmacsha256-signature", squareSig),
			body:   squareBody,
			want:   Result{DeliveryID: "ac3ac95b-f97d-458c-a6e6-18981597e05f", EventType: "webhooks.test_notification"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}

// TestSquareURL: the URL is signed, so another one does not verify.
func TestSquareURL(t *testing.T) {
	v := setup(t, Config{Scheme: "square", Secrets: []string{squareKey}})
	if !UsesURL(v) {
		t.Fatal("UsesURL = false")
	}
	req := Request{Method: "POST", URL: squareURL + "x", Header: hdr("x-square-hmacsha256-signature", squareSig), Body: []byte(squareBody)}
	if _, err := v.Verify(req); !errors.Is(err, ErrNoMatch) {
		t.Errorf("other URL: err = %v, want ErrNoMatch", err)
	}
}
