package signature

// Lemon Squeezy signs the raw body with HMAC-SHA256 keyed with the signing
// secret chosen when the webhook was created, hex in X-Signature; the
// event name is in X-Event-Name (and meta.event_name). Deliveries carry no
// id, so the body hash is the delivery id
// (https://docs.lemonsqueezy.com/help/webhooks/signing-requests).
func init() {
	registerPreset(Preset{
		Name: "lemonsqueezy",
		Defaults: Config{
			SignatureHeader: "X-Signature",
			EventTypeHeader: "X-Event-Name",
		},
		Forward: []string{"X-Event-Name"},
	})
}
