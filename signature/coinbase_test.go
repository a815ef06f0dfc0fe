package signature

import (
	"testing"
)

// Coinbase Commerce: HMAC-SHA256 of the body, bare hex in
// X-CC-Webhook-Signature
// (https://docs.cdp.coinbase.com/commerce/api-arcitecture/webhooks-security);
// computed with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac cc_shared_secret_123 -hex
const (
	coinbaseSecret = "cc_shared_secret_123"
	coinbaseBody   = `{"id":"f4e5d6","scheduled_for":"2023-11-14T22:13:20Z","attempt_number":1,"event":{"id":"24934862-d980-46cb-9402-43c81b0cdba6","type":"charge:confirmed","data":{}}}`
	coinbaseSig    = "320bb44a9db9ee87dc03ac5df29ca6b3fb60a794c14d5694ce230119699a0c8f"
)

func TestCoinbasePreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "coinbase/openssl vector, nested event id and type",
			cfg:    Config{Scheme: "coinbase", Secrets: []string{coinbaseSecret}},
			header: hdr("X-CC-Webhook-Signature", coinbaseSig),
			body:   coinbaseBody,
			want:   Result{DeliveryID: "24934862-d980-46cb-9402-43c81b0cdba6", EventType: "charge:confirmed"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}
