package signature

// Intercom signs the raw body with HMAC-SHA1 keyed with the app's client
// secret, hex after "sha1=" in X-Hub-Signature; the body's id (notif_…)
// is the notification and its topic the event, e.g. ping
// (https://developers.intercom.com/docs/references/webhooks/webhook-models,
// "Signed notifications").
func init() {
	registerPreset(Preset{
		Name: "intercom",
		Defaults: Config{
			SignatureHeader: "X-Hub-Signature",
			SignaturePrefix: "sha1=",
			Algorithm:       "sha1",
			DeliveryIDField: "id",
			EventTypeField:  "topic",
		},
	})
}
