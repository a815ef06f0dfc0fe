package signature

import (
	"testing"
)

// PagerDuty: HMAC-SHA256 of the body, hex, one v1=<hex> per active secret
// in X-PagerDuty-Signature
// (https://developer.pagerduty.com/docs/webhooks/webhook-signatures/);
// computed with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac pd_secret_new -hex
//	printf '%s' "$body" | openssl dgst -sha256 -hmac pd_secret_old -hex
const (
	pagerdutyBody   = `{"event":{"id":"01DEN1HNLBDCYMYCPDGBDZRI8S","event_type":"incident.triggered","resource_type":"incident","occurred_at":"2026-01-01T00:00:00.000Z"}}`
	pagerdutyHeader = "v1=181d705e0990c2db98beb8fe86f4072906c7f2df75c9234362625415a4a907df,v1=e2f48dff6f1e28d8db329eaa01e090556b49c6f7ab3ed996d7e21b713d78a67d"
)

func TestPagerdutyPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "pagerduty/openssl vector, new secret",
			cfg:    Config{Scheme: "pagerduty", Secrets: []string{"pd_secret_new"}},
			header: hdr("X-PagerDuty-Signature", pagerdutyHeader, "X-Webhook-Id", "w-1"),
			body:   pagerdutyBody,
			want:   Result{DeliveryID: "w-1", EventType: "incident.triggered"},
		},
		{
			name:   "pagerduty/openssl vector, old secret during rotation",
			cfg:    Config{Scheme: "pagerduty", Secrets: []string{"other", "pd_secret_old"}},
			header: hdr("X-PagerDuty-Signature", pagerdutyHeader, "X-Webhook-Id", "w-1"),
			body:   pagerdutyBody,
			want:   Result{SecretIndex: 1, DeliveryID: "w-1", EventType: "incident.triggered"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}
