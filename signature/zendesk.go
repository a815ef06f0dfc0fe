package signature

// Zendesk signs the x-zendesk-webhook-signature-timestamp (RFC 3339)
// followed by the raw body with HMAC-SHA256 keyed with the webhook's
// signing secret as the string it is (it looks base64; it is not
// decoded), base64 in x-zendesk-webhook-signature. Test requests made
// before a webhook exists use the static secret
// dGhpc19zZWNyZXRfaXNfZm9yX3Rlc3Rpbmdfb25seQ==. The invocation id names
// the delivery; the body's type is the event of an event subscription
// (https://developer.zendesk.com/documentation/webhooks/verifying/,
// https://developer.zendesk.com/documentation/webhooks/anatomy-of-a-webhook-request/).
func init() {
	registerPreset(Preset{
		Name: "zendesk",
		Defaults: Config{
			SignatureHeader:  "X-Zendesk-Webhook-Signature",
			Encoding:         "base64",
			TimestampHeader:  "X-Zendesk-Webhook-Signature-Timestamp",
			TimestampFormat:  "rfc3339",
			SignedContent:    "{timestamp}{body}",
			DeliveryIDHeader: "X-Zendesk-Webhook-Invocation-Id",
			EventTypeField:   "type",
		},
		Sender: Sender{ID: SenderIDRandom},
	})
}
