package signature

import (
	"testing"
)

// Vercel: HMAC-SHA1 of the body, bare hex in x-vercel-signature
// (https://vercel.com/docs/webhooks/webhooks-api); computed with
//
//	printf '%s' "$body" | openssl dgst -sha1 -hmac vercel_secret_123 -hex
const (
	vercelSecret = "vercel_secret_123"
	vercelBody   = `{"id":"uHm9rGxAp2rVAjlvKwGx","type":"deployment.created","createdAt":1700000000000,"payload":{}}`
	vercelSig    = "98905b4d18650adb70abfcb8fd7d6beae3538c5e"
)

func TestVercelPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "vercel/openssl vector",
			cfg:    Config{Scheme: "vercel", Secrets: []string{vercelSecret}},
			header: hdr("x-vercel-signature", vercelSig),
			body:   vercelBody,
			want:   Result{DeliveryID: "uHm9rGxAp2rVAjlvKwGx", EventType: "deployment.created"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}
