package signature

// Coinbase Commerce signs the raw body with HMAC-SHA256 keyed with the
// webhook's shared secret, bare hex in X-CC-Webhook-Signature. The body's
// event.id is the event, stable across retries (the top-level id and
// attempt_number change), and event.type its type, e.g. charge:confirmed
// (https://docs.cdp.coinbase.com/commerce/api-arcitecture/webhooks-security).
func init() {
	registerPreset(Preset{
		Name: "coinbase",
		Defaults: Config{
			SignatureHeader: "X-CC-Webhook-Signature",
			DeliveryIDField: "event.id",
			EventTypeField:  "event.type",
		},
	})
}
