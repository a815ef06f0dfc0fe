package signature

import (
	"testing"
)

// Razorpay: HMAC-SHA256 of the body, bare hex in X-Razorpay-Signature
// (https://razorpay.com/docs/webhooks/validate-test/); computed with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac rzp_webhook_secret_123 -hex
const (
	razorpaySecret = "rzp_webhook_secret_123"
	razorpayBody   = `{"entity":"event","account_id":"acc_BFQ7uQEaa7j2z7","event":"payment.captured","contains":["payment"],"payload":{},"created_at":1700000000}`
	razorpaySig    = "71e25cb301232673c4afbb69070253820a3477b98ec171d43bf9acafde9096b9"
)

func TestRazorpayPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "razorpay/openssl vector",
			cfg:    Config{Scheme: "razorpay", Secrets: []string{razorpaySecret}},
			header: hdr("X-Razorpay-Signature", razorpaySig, "X-Razorpay-Event-Id", "JXg1ZzFhXp0zRq"),
			body:   razorpayBody,
			want:   Result{DeliveryID: "JXg1ZzFhXp0zRq", EventType: "payment.captured"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}
