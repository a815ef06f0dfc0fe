package signature

import (
	"testing"
	"time"
)

// Webflow: HMAC-SHA256 of "<ms timestamp>:<body>", hex in
// x-webflow-signature
// (https://developers.webflow.com/data/v1.0.0/docs/verifying-webhook-signatures);
// computed with
//
//	printf '%s' "1700000000000:$body" | openssl dgst -sha256 -hmac webflow_client_secret_123 -hex
const (
	webflowSecret = "webflow_client_secret_123"
	webflowBody   = `{"triggerType":"form_submission","payload":{"name":"Contact"}}`
	webflowSig    = "54187f0ebb51c2c70cc0fede6eba213470471295f425a6c3789a937ab34a8a64"
)

func TestWebflowPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "webflow/openssl vector",
			cfg:    Config{Scheme: "webflow", Secrets: []string{webflowSecret}, Now: clockAt(t, vectorTS)},
			header: hdr("x-webflow-signature", webflowSig, "x-webflow-timestamp", "1700000000000"),
			body:   webflowBody,
			want:   Result{DeliveryID: bodyID([]byte(webflowBody)), EventType: "form_submission"},
			stale:  6 * time.Minute,
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}
