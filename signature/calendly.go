package signature

import "time"

// Calendly signs "<t>.<body>" with HMAC-SHA256 keyed with the webhook
// signing key as the string it is, in Calendly-Webhook-Signature:
// t=<unix>,v1=<hex>; its sample code refuses timestamps older than three
// minutes. The body's event is the event, e.g. invitee.created; there is
// no id
// (https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures).
func init() {
	registerPreset(Preset{
		Name: "calendly",
		Defaults: Config{
			SignatureHeader: "Calendly-Webhook-Signature",
			SignatureSyntax: "pairs",
			SignatureKey:    "v1",
			TimestampKey:    "t",
			SignedContent:   "{timestamp}.{body}",
			Tolerance:       3 * time.Minute,
			EventTypeField:  "event",
		},
	})
}
