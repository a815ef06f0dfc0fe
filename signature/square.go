package signature

// Square signs the notification URL of the subscription, exactly as
// configured, followed by the raw body, with HMAC-SHA256 keyed with the
// subscription's signature key, base64 in x-square-hmacsha256-signature.
// Set PublicURL to that URL when a proxy changes what the request shows.
// The body's event_id and type name the event
// (https://developer.squareup.com/docs/webhooks/step3validate).
func init() {
	registerPreset(Preset{
		Name: "square",
		Defaults: Config{
			SignatureHeader: "X-Square-Hmacsha256-Signature",
			Encoding:        "base64",
			SignedContent:   "{url}{body}",
			DeliveryIDField: "event_id",
			EventTypeField:  "type",
		},
	})
}
