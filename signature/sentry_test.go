package signature

import (
	"testing"
)

// Sentry: HMAC-SHA256 of the body, bare hex in Sentry-Hook-Signature
// (https://docs.sentry.io/integrations/integration-platform/webhooks/);
// computed with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac sentry_client_secret_123 -hex
const (
	sentrySecret = "sentry_client_secret_123"
	sentryBody   = `{"action":"created","data":{"issue":{"id":"1"}},"installation":{"uuid":"abc"}}`
	sentrySig    = "9801eb7de826b04b00f361811c921ce2cddf5286018e1265d59ce2ab31a915d4"
)

func TestSentryPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "sentry/openssl vector",
			cfg:    Config{Scheme: "sentry", Secrets: []string{sentrySecret}},
			header: hdr("Sentry-Hook-Signature", sentrySig, "Request-ID", "0b4b6f3c9a4e4b7b8d5a2f1e3c6d7e8f", "Sentry-Hook-Resource", "issue", "Sentry-Hook-Timestamp", "1"),
			body:   sentryBody,
			want:   Result{DeliveryID: "0b4b6f3c9a4e4b7b8d5a2f1e3c6d7e8f", EventType: "issue"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}
