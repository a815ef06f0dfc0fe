package signature

// Paddle Billing signs "<ts>:<body>" with HMAC-SHA256 keyed with the
// endpoint secret's bytes, in Paddle-Signature: ts=<unix>;h1=<hex>, with
// one h1 per active secret while a secret rotates
// (https://developer.paddle.com/webhooks/signature-verification). The
// event id and type are the body's event_id and event_type.
func init() {
	registerPreset(Preset{
		Name: "paddle",
		Defaults: Config{
			SignatureHeader: "Paddle-Signature",
			SignatureSyntax: "pairs",
			SignatureKey:    "h1",
			TimestampKey:    "ts",
			SignedContent:   "{timestamp}:{body}",
			DeliveryIDField: "event_id",
			EventTypeField:  "event_type",
		},
		PairSeparator: ";",
	})
}
