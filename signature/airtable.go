package signature

// Airtable signs each notification ping's raw body with HMAC-SHA256 keyed
// with the webhook's MAC secret, which it hands out in base64
// (macSecretBase64) and signs with decoded, hex after "hmac-sha256=" in
// X-Airtable-Content-MAC. Pings carry no id and no event type
// (https://airtable.com/developers/web/api/webhooks-overview).
func init() {
	registerPreset(Preset{
		Name: "airtable",
		Defaults: Config{
			SignatureHeader: "X-Airtable-Content-MAC",
			SignaturePrefix: "hmac-sha256=",
		},
		SecretBase64: true,
	})
}
