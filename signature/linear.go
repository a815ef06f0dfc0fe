package signature

import "time"

// Linear signs the raw body with HMAC-SHA256 keyed with the webhook's
// signing secret, hex in Linear-Signature; Linear-Delivery is the delivery
// id and Linear-Event the event type, e.g. Issue. Its timestamp is the
// body's webhookTimestamp, in milliseconds, which Linear asks receivers to
// hold within a minute of their clock against replays, as its SDK does
// (https://linear.app/developers/webhooks).
func init() {
	registerPreset(Preset{
		Name: "linear",
		Defaults: Config{
			SignatureHeader:  "Linear-Signature",
			TimestampField:   "webhookTimestamp",
			TimestampFormat:  "unix_ms",
			Tolerance:        time.Minute,
			DeliveryIDHeader: "Linear-Delivery",
			EventTypeHeader:  "Linear-Event",
		},
		Forward: []string{"Linear-Event"},
		Sender:  Sender{ID: SenderIDUUID},
	})
}
