package signature

import (
	"testing"
	"time"
)

// Zendesk: HMAC-SHA256 of the RFC 3339 timestamp and the body, base64 in
// x-zendesk-webhook-signature, keyed with the documented test secret as a
// string (https://developer.zendesk.com/documentation/webhooks/verifying/);
// computed with
//
//	printf '%s%s' "$ts" "$body" | openssl dgst -sha256 -hmac "$key" -binary | base64
const (
	zendeskKey  = "dGhpc19zZWNyZXRfaXNfZm9yX3Rlc3Rpbmdfb25seQ=="
	zendeskTS   = "2021-03-25T05:09:27Z"
	zendeskBody = `{"event":"ticket.updated","id":123}`
	zendeskSig  = "S/RDdU2ERmj7LHDDoWJ2onPYH+t7/f2+LTM4dL7UiLM="
)

func TestZendeskPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "zendesk/openssl vector",
			cfg:    Config{Scheme: "zendesk", Secrets: []string{zendeskKey}, Now: clockAtRFC3339(t, zendeskTS)},
			header: hdr("x-zendesk-webhook-signature", zendeskSig, "x-zendesk-webhook-signature-timestamp", zendeskTS, "x-zendesk-webhook-invocation-id", "8350205582"),
			body:   zendeskBody,
			want:   Result{DeliveryID: "8350205582"},
			stale:  -6 * time.Minute,
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}
