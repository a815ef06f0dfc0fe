package signature

import "time"

// HubSpot (signature v3) signs the method, the URL HubSpot called, the raw
// body and the X-HubSpot-Request-Timestamp (milliseconds), concatenated,
// with HMAC-SHA256 keyed with the app's client secret, base64 in
// X-HubSpot-Signature-v3, and asks receivers to refuse timestamps older
// than five minutes. Set PublicURL to the configured URL; HubSpot decodes
// some escapes of a query string before signing, so avoid one. Bodies are
// batches of events: there is no single id or type
// (https://developers.hubspot.com/docs/api/webhooks/validating-requests).
func init() {
	registerPreset(Preset{
		Name: "hubspot",
		Defaults: Config{
			SignatureHeader: "X-HubSpot-Signature-v3",
			Encoding:        "base64",
			SignedContent:   "{method}{url}{body}{timestamp}",
			TimestampHeader: "X-HubSpot-Request-Timestamp",
			TimestampFormat: "unix_ms",
			Tolerance:       5 * time.Minute,
		},
	})
}
