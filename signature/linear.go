package signature

// Linear signs the raw body with HMAC-SHA256 keyed with the webhook's
// signing secret, hex in Linear-Signature; Linear-Delivery is the delivery
// id and Linear-Event the event type, e.g. Issue
// (https://linear.app/developers/webhooks). Linear's timestamp is the
// body's webhookTimestamp (milliseconds), which the engine does not read:
// replays within the dedupe window are caught by Linear-Delivery.
func init() {
	registerPreset(Preset{
		Name: "linear",
		Defaults: Config{
			SignatureHeader:  "Linear-Signature",
			DeliveryIDHeader: "Linear-Delivery",
			EventTypeHeader:  "Linear-Event",
		},
		Forward: []string{"Linear-Event"},
	})
}
