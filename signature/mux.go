package signature

import "time"

// Mux signs "<t>.<body>" with HMAC-SHA256 keyed with the endpoint's
// signing secret, in Mux-Signature: t=<unix>,v1=<hex>, and its SDKs allow
// five minutes; the body's id and type name the event, e.g.
// video.asset.ready (https://www.mux.com/docs/core/verify-webhook-signatures).
func init() {
	registerPreset(Preset{
		Name: "mux",
		Defaults: Config{
			SignatureHeader: "Mux-Signature",
			SignatureSyntax: "pairs",
			SignatureKey:    "v1",
			TimestampKey:    "t",
			SignedContent:   "{timestamp}.{body}",
			Tolerance:       5 * time.Minute,
			DeliveryIDField: "id",
			EventTypeField:  "type",
		},
	})
}
