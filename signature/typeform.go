package signature

// Typeform signs the raw body with HMAC-SHA256 keyed with the webhook's
// secret, base64 after "sha256=" in Typeform-Signature; the body's
// event_id and event_type name the event
// (https://www.typeform.com/developers/webhooks/secure-your-webhooks/).
func init() {
	registerPreset(Preset{
		Name: "typeform",
		Defaults: Config{
			SignatureHeader: "Typeform-Signature",
			SignaturePrefix: "sha256=",
			Encoding:        "base64",
			DeliveryIDField: "event_id",
			EventTypeField:  "event_type",
		},
	})
}
