package signature

// Vercel signs the raw body with HMAC-SHA1 keyed with the webhook's
// secret (an integration's client secret), bare hex in x-vercel-signature;
// the body's id is the delivery and its type the event, e.g.
// deployment.created (https://vercel.com/docs/webhooks/webhooks-api).
func init() {
	registerPreset(Preset{
		Name: "vercel",
		Defaults: Config{
			SignatureHeader: "X-Vercel-Signature",
			Algorithm:       "sha1",
			DeliveryIDField: "id",
			EventTypeField:  "type",
		},
	})
}
