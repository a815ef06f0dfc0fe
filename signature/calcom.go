package signature

// Cal.com signs the raw body with HMAC-SHA256 keyed with the webhook's
// secret, bare hex in X-Cal-Signature-256; a webhook without a secret
// sends "no-secret-provided", which is malformed here. The body's
// triggerEvent is the event, e.g. BOOKING_CREATED; there is no id
// (https://cal.com/docs/developing/guides/automation/webhooks; the sender
// is sendPayload.ts in calcom/cal.com).
func init() {
	registerPreset(Preset{
		Name: "calcom",
		Defaults: Config{
			SignatureHeader: "X-Cal-Signature-256",
			EventTypeField:  "triggerEvent",
		},
	})
}
