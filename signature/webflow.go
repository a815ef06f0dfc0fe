package signature

import "time"

// Webflow signs "<x-webflow-timestamp>:<body>" with HMAC-SHA256 keyed with
// the OAuth application's client secret, hex in x-webflow-signature, the
// timestamp in milliseconds, and asks receivers to refuse requests older
// than five minutes. Webhooks made in a site's dashboard or with a site
// API key are not signed. The body's triggerType is the event; there is
// no id
// (https://developers.webflow.com/data/v1.0.0/docs/verifying-webhook-signatures).
func init() {
	registerPreset(Preset{
		Name: "webflow",
		Defaults: Config{
			SignatureHeader: "X-Webflow-Signature",
			TimestampHeader: "X-Webflow-Timestamp",
			TimestampFormat: "unix_ms",
			SignedContent:   "{timestamp}:{body}",
			Tolerance:       5 * time.Minute,
			EventTypeField:  "triggerType",
		},
	})
}
