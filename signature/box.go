package signature

import "time"

// Box signs the raw body followed by BOX-DELIVERY-TIMESTAMP (RFC 3339)
// with HMAC-SHA256, base64: with the primary signature key in
// BOX-SIGNATURE-PRIMARY and the secondary in BOX-SIGNATURE-SECONDARY, so
// either key verifies, and asks receivers to refuse deliveries older than
// ten minutes. BOX-DELIVERY-ID changes on each retry; the body's id names
// the event and its trigger the type, e.g. FILE.UPLOADED
// (https://developer.box.com/guides/webhooks/v2/signatures-v2/).
func init() {
	registerPreset(Preset{
		Name: "box",
		Defaults: Config{
			SignatureHeader: "Box-Signature-Primary",
			Encoding:        "base64",
			TimestampHeader: "Box-Delivery-Timestamp",
			TimestampFormat: "rfc3339",
			SignedContent:   "{body}{timestamp}",
			Tolerance:       10 * time.Minute,
			DeliveryIDField: "id",
			EventTypeField:  "trigger",
		},
		MoreSignatureHeaders: []string{"Box-Signature-Secondary"},
	})
}
