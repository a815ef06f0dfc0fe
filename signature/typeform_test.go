package signature

import (
	"testing"
)

// Typeform: HMAC-SHA256 of the body, base64 after sha256= in
// Typeform-Signature
// (https://www.typeform.com/developers/webhooks/secure-your-webhooks/);
// computed with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac typeform_secret_abc -binary | base64
const (
	typeformSecret = "typeform_secret_abc"
	typeformBody   = `{"event_id":"01HXYZ","event_type":"form_response","form_response":{"form_id":"abc123","token":"tok"}}`
	typeformSig    = "M1hHRUuG/gQroUSR/jvLWbc/223NfRzdVDfYmmYyVXk="
)

func TestTypeformPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "typeform/openssl vector",
			cfg:    Config{Scheme: "typeform", Secrets: []string{typeformSecret}},
			header: hdr("Typeform-Signature", "sha256="+typeformSig),
			body:   typeformBody,
			want:   Result{DeliveryID: "01HXYZ", EventType: "form_response"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}
