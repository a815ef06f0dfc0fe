package signature

import (
	"testing"
)

// Intercom: HMAC-SHA1 of the body, hex after sha1= in X-Hub-Signature
// (https://developers.intercom.com/docs/references/webhooks/webhook-models);
// computed with
//
//	printf '%s' "$body" | openssl dgst -sha1 -hmac intercom_client_secret -hex
const (
	intercomSecret = "intercom_client_secret"
	intercomBody   = `{"type":"notification_event","topic":"ping","id":"notif_1","data":{"item":{"type":"ping","message":"hi"}}}`
	intercomSig    = "1caf77f8f42342b7faa0486af1feaa478c66fb9d"
)

func TestIntercomPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "intercom/openssl vector",
			cfg:    Config{Scheme: "intercom", Secrets: []string{intercomSecret}},
			header: hdr("X-Hub-Signature", "sha1="+intercomSig),
			body:   intercomBody,
			want:   Result{DeliveryID: "notif_1", EventType: "ping"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}
