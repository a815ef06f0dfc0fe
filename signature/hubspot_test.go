package signature

import (
	"errors"
	"testing"
	"time"
)

// HubSpot v3: HMAC-SHA256 of method, URL, body and timestamp (ms), base64
// in X-HubSpot-Signature-v3
// (https://developers.hubspot.com/docs/api/webhooks/validating-requests).
// Published: the vector of HubSpot's own Python SDK tests
// (test_get_signature__v3); re-checked with
//
//	printf '%s' "POST$url$body$ts" | openssl dgst -sha256 -hmac "$secret" -binary | base64
const (
	hubspotSecret = "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy"
	hubspotURL    = "https://www.example.com/webhook_uri"
	hubspotBody   = `{'example_field':'example_value'}`
	hubspotTS     = "1693657560000"
	hubspotSig    = "K36dawei4A+QBNolUOqo7s91KQDWQ5MXZ/QufNYuk/Y="
)

func TestHubspotPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "hubspot/published vector",
			cfg:    Config{Scheme: "hubspot", Secrets: []string{hubspotSecret}, Now: clockAt(t, "1693657560")},
			url:    hubspotURL,
			header: hdr("X-HubSpot-Signature-v3", hubspotSig, "X-HubSpot-Request-Timestamp", hubspotTS),
			body:   hubspotBody,
			want:   Result{DeliveryID: bodyID([]byte(hubspotBody))},
			stale:  6 * time.Minute,
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}

// TestHubSpotSignedParts: the method, URL and timestamp are signed.
func TestHubSpotSignedParts(t *testing.T) {
	v := setup(t, Config{Scheme: "hubspot", Secrets: []string{hubspotSecret}, Now: clockAt(t, "1693657560")})
	base := Request{Method: "POST", URL: hubspotURL, Header: hdr("X-HubSpot-Signature-v3", hubspotSig, "X-HubSpot-Request-Timestamp", hubspotTS), Body: []byte(hubspotBody)}
	for name, r := range map[string]Request{
		"method":    {Method: "PUT", URL: base.URL, Header: base.Header, Body: base.Body},
		"url":       {Method: "POST", URL: hubspotURL + "/", Header: base.Header, Body: base.Body},
		"timestamp": {Method: "POST", URL: base.URL, Header: hdr("X-HubSpot-Signature-v3", hubspotSig, "X-HubSpot-Request-Timestamp", "1693657560001"), Body: base.Body},
	} {
		if _, err := v.Verify(r); !errors.Is(err, ErrNoMatch) {
			t.Errorf("%s changed: err = %v, want ErrNoMatch", name, err)
		}
	}
}
