package signature

import (
	"testing"
	"time"
)

// Calendly: HMAC-SHA256 of "<t>.<body>", t=<unix>,v1=<hex> in
// Calendly-Webhook-Signature
// (https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures);
// computed with
//
//	printf '%s' "1700000000.$body" | openssl dgst -sha256 -hmac "$key" -hex
const (
	calendlyKey  = "3fQ8s9D-K58VuwXyAZsHykp7zBGD45JhZaLqk5h6j1M"
	calendlyBody = `{"created_at":"2023-11-14T18:45:52.610226Z","event":"invitee.created","payload":{"uri":"https://api.calendly.com/x"}}`
	calendlySig  = "93937e379e19b23f6d5ec93498b6881381e3e31931616d9f91e7244ba58fc7c5"
)

func TestCalendlyPreset(t *testing.T) {
	for _, tc := range []presetVector{
		{
			name:   "calendly/openssl vector",
			cfg:    Config{Scheme: "calendly", Secrets: []string{calendlyKey}, Now: clockAt(t, vectorTS)},
			header: hdr("Calendly-Webhook-Signature", "t="+vectorTS+",v1="+calendlySig),
			body:   calendlyBody,
			want:   Result{DeliveryID: bodyID([]byte(calendlyBody)), EventType: "invitee.created"},
			stale:  4 * time.Minute,
		},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPreset(t, tc) })
	}
}
